/**
 * Adversarial review of issue 24 (networks) through the running invoice service: what the customer
 * is told to pay, and what the watcher reads.
 *
 * `CHAIN_<NETWORK>_<TOKEN>_CONTRACT` (docs/networks.md#configuration) chooses the contract the
 * watcher reads Transfer logs of, and `GET /api/currencies` (ListCurrencies, PayMethodCatalog)
 * lists that configured contract. The checkout page's token contract and its EIP-681 URI come from
 * the registry instead (proto.ts checkoutToProto → tokenContractOn / paymentUri): with a contract
 * configured other than the registry's, a customer who follows the QR code pays a contract that
 * nothing watches.
 */
import { createRequest, liveProject, startInvoiceHarness, type Harness } from './support/harness';

/** Not the issuer's USDC on Base (0x833589…2913): the contract this deployment watches instead. */
const CONFIGURED_BASE_USDC = '0x1111111111111111111111111111111111111111';

let h: Harness;

beforeAll(async () => {
  h = await startInvoiceHarness({ env: { CHAIN_BASE_USDC_CONTRACT: CONFIGURED_BASE_USDC } });
});

afterAll(async () => {
  await h?.dispose();
});

describe('review-networks: the contract a customer is told to pay', () => {
  it('with CHAIN_BASE_USDC_CONTRACT set, the checkout of a live Base USDC invoice names the registry contract (QR code and token contract) while ListCurrencies and the watcher use the configured one', async () => {
    const listed = (await h.client.listCurrencies({})).currencies.find((c) => c.currency === 'USDC' && c.network === 'base');
    expect(listed?.contract?.toLowerCase()).toBe(CONFIGURED_BASE_USDC);

    const invoice = (await h.client.createInvoice(createRequest(liveProject(), { priceAmount: '10.00', priceCurrency: 'USD', payCurrency: 'USDC', payNetwork: 'base' }))).invoice!;
    const { checkout } = await h.client.getCheckout({ invoiceId: invoice.id });
    expect({ tokenContract: checkout!.tokenContract?.toLowerCase(), paymentUri: checkout!.paymentUri.toLowerCase() }).toEqual({
      tokenContract: CONFIGURED_BASE_USDC,
      paymentUri: `ethereum:${CONFIGURED_BASE_USDC}@8453/transfer?address=${invoice.address.toLowerCase()}&uint256=10000000`,
    });
  });
});
