/**
 * The checkout names what the watcher watches (docs/networks.md#configuration): a live invoice's
 * token contract and payment URI carry the configured CHAIN_<NETWORK>_<TOKEN>_CONTRACT and
 * CHAIN_<NETWORK>_CHAIN_ID (PayMethodCatalog.paymentTarget), the same ListCurrencies lists; a
 * sandbox invoice's carry the registry's test chain, whatever the live configuration says.
 */
import { createRequest, liveProject, sandboxProject, startInvoiceHarness, type Harness } from './support/harness';

/** Valid TRC-20 addresses that are not the registry's: what this deployment is configured to watch. */
const CONFIGURED_TRON_USDT = 'TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH';
const CONFIGURED_TRON_USDC = 'TEkxiTehnzSmSe2XqrBj4w32RUN966rdz8';
const CONFIGURED_BASE_USDC = '0x2222222222222222222222222222222222222222';
/** A development chain (anvil's id) in place of Base and Ethereum mainnet. */
const DEV_CHAIN_ID = 31337;

let h: Harness;

beforeAll(async () => {
  h = await startInvoiceHarness({
    env: {
      CHAIN_TRON_USDT_CONTRACT: CONFIGURED_TRON_USDT,
      CHAIN_TRON_USDC_CONTRACT: CONFIGURED_TRON_USDC,
      CHAIN_BASE_USDC_CONTRACT: CONFIGURED_BASE_USDC,
      CHAIN_BASE_CHAIN_ID: String(DEV_CHAIN_ID),
      CHAIN_ETHEREUM_CHAIN_ID: String(DEV_CHAIN_ID),
    },
  });
});

afterAll(async () => {
  await h?.dispose();
});

async function checkoutOf(project: ReturnType<typeof liveProject>, payCurrency: string, payNetwork: string) {
  const { invoice } = await h.client.createInvoice(createRequest(project, { priceAmount: '10.00', priceCurrency: 'USD', payCurrency, payNetwork }));
  const { checkout } = await h.client.getCheckout({ invoiceId: invoice!.id });
  return { address: invoice!.address, checkout: checkout! };
}

describe('the checkout names the configured contract and chain id', () => {
  test('live Tron USDT and USDC: &token= and tokenContract are CHAIN_TRON_USDT_CONTRACT / CHAIN_TRON_USDC_CONTRACT, as ListCurrencies lists', async () => {
    const listed = (await h.client.listCurrencies({})).currencies.filter((c) => c.network === 'tron' && c.currency !== 'TRX');
    expect(listed.map((c) => [c.currency, c.contract])).toEqual([
      ['USDT', CONFIGURED_TRON_USDT],
      ['USDC', CONFIGURED_TRON_USDC],
    ]);
    for (const [code, contract] of [
      ['USDT', CONFIGURED_TRON_USDT],
      ['USDC', CONFIGURED_TRON_USDC],
    ] as const) {
      const { address, checkout } = await checkoutOf(liveProject(), code, 'tron');
      expect({ tokenContract: checkout.tokenContract, paymentUri: checkout.paymentUri }).toEqual({
        tokenContract: contract,
        paymentUri: `tron:${address}?amount=10&token=${contract}`,
      });
    }
  });

  test('live EVM invoices name CHAIN_<NETWORK>_CHAIN_ID (@31337), the chain the watcher checks its node against', async () => {
    const base = await checkoutOf(liveProject(), 'USDC', 'base');
    expect(base.checkout.paymentUri).toBe(`ethereum:${CONFIGURED_BASE_USDC}@${DEV_CHAIN_ID}/transfer?address=${base.address}&uint256=10000000`);
    const eth = await checkoutOf(liveProject(), 'ETH', 'ethereum');
    expect(eth.checkout.paymentUri).toMatch(new RegExp(`^ethereum:${eth.address}@${DEV_CHAIN_ID}\\?value=\\d+$`));
    const listed = (await h.client.listCurrencies({})).currencies.find((c) => c.currency === 'USDC' && c.network === 'base');
    expect(listed).toMatchObject({ contract: CONFIGURED_BASE_USDC, chainId: BigInt(DEV_CHAIN_ID) });
  });

  test("sandbox invoices keep the registry's test chain: Base Sepolia's USDC at @84532, Sepolia's ETH at @11155111", async () => {
    const base = await checkoutOf(sandboxProject(), 'USDC', 'base');
    expect({ tokenContract: base.checkout.tokenContract, paymentUri: base.checkout.paymentUri }).toEqual({
      tokenContract: '0x036CbD53842c5426634e7929541eC2318f3dCF7e',
      paymentUri: `ethereum:0x036CbD53842c5426634e7929541eC2318f3dCF7e@84532/transfer?address=${base.address}&uint256=10000000`,
    });
    const eth = await checkoutOf(sandboxProject(), 'ETH', 'ethereum');
    expect(eth.checkout.paymentUri).toMatch(new RegExp(`^ethereum:${eth.address}@11155111\\?value=\\d+$`));
  });
});
