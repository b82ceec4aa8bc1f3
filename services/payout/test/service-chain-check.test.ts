/**
 * Issue 27 (6): with an Ethereum node configured (CHAIN_ETHEREUM_RPC_URL, here a real anvil with
 * test ERC-20 contracts), Complete checks on chain that the transaction pays the payout's
 * destination exactly its amount — ETH as the value, USDT as a Transfer log — before it debits.
 */
import { randomBytes } from 'node:crypto';
import { Code } from '@coinvoice/runtime';
import { cryptoCurrency } from '@coinvoice/chains/currencies';
import { PayoutStatus } from '@coinvoice/runtime/gen/coinvoice/payout/v1/payout_pb';
import { deployTokens, sendEth, sendToken, sendTokenUnits, startAnvil, type Anvil, type Tokens } from '../../../test/support/anvil';
import { PayoutChainChecks } from '@coinvoice/chains/payout-check';
import { EthereumPayoutCheck } from '@coinvoice/chains/evm/payout-check';
import { addressFor, balanceOf, codeOf, payoutRequest, rejection, startPayoutHarness, OPERATOR_TOKEN, type Harness } from './support/harness';

let anvil: Anvil;
let tokens: Tokens;
/** A second node standing in for BNB Smart Chain (chain id 56): its own contracts, of 18 decimals as bsc's. */
let bsc: Anvil;
let bscTokens: Tokens;
let h: Harness;

beforeAll(async () => {
  [anvil, bsc] = await Promise.all([startAnvil(), startAnvil({ chainId: 56 })]);
  [tokens, bscTokens] = await Promise.all([deployTokens(anvil), deployTokens(bsc, { decimals: 18 })]);
  h = await startPayoutHarness({
    CHAIN_ETHEREUM_RPC_URL: anvil.url,
    CHAIN_ETHEREUM_USDT_CONTRACT: tokens.usdt,
    CHAIN_ETHEREUM_USDC_CONTRACT: tokens.usdc,
    CHAIN_BSC_RPC_URL: bsc.url,
    CHAIN_BSC_USDT_CONTRACT: bscTokens.usdt,
    CHAIN_BSC_USDC_CONTRACT: bscTokens.usdc,
  });
}, 60_000);

afterAll(async () => {
  await h?.dispose();
  await anvil?.stop();
  await bsc?.stop();
});

/** A claimed live payout of `amount` `currency` (on `network`, default its default network) to a fresh mainnet address. */
async function claimedPayout(currency: 'ETH' | 'USDT', amount: string, network?: string) {
  const project = h.auth.addProject('live');
  await h.credit(project, currency, '100', undefined, network);
  const request = payoutRequest(project, { currency, amount, ...(network ? { network } : {}) });
  const { payout } = await h.client.requestPayout(request);
  await h.client.verifyPayout({ projectId: project.id, payoutId: payout!.id, code: await codeOf(h, payout!.id) });
  await h.client.claimPayout({ payoutId: payout!.id, operatorToken: OPERATOR_TOKEN });
  return { project, payoutId: payout!.id, address: request.address };
}

const complete = (payoutId: string, transactionHash: string) => h.client.completePayout({ payoutId, transactionHash, operatorToken: OPERATOR_TOKEN });

test('ETH: a transaction unknown to the node, one paying less, one paying another address are refused; the right one completes', async () => {
  const { project, payoutId, address } = await claimedPayout('ETH', '0.25');
  expect(await rejection(complete(payoutId, `0x${randomBytes(32).toString('hex')}`))).toMatchObject({ connectCode: Code.FailedPrecondition, code: 'transaction_not_found' });
  const less = await sendEth(anvil, address, '0.2');
  expect(await rejection(complete(payoutId, less))).toMatchObject({
    connectCode: Code.FailedPrecondition,
    code: 'transaction_mismatch',
    violations: [{ field: 'transactionHash', message: expect.stringContaining('0.2 ETH') }],
  });
  const elsewhere = await sendEth(anvil, addressFor('ETH', 'live'), '0.25');
  expect(await rejection(complete(payoutId, elsewhere))).toMatchObject({ code: 'transaction_mismatch' });
  expect(await balanceOf(h, project, 'ETH')).toEqual({ available: '99.75', pending: '0.25', total: '100' });

  const right = await sendEth(anvil, address, '0.25');
  const { payout } = await complete(payoutId, right);
  expect(payout).toMatchObject({ status: PayoutStatus.COMPLETED, transactionHash: right });
  expect(await balanceOf(h, project, 'ETH')).toEqual({ available: '99.75', pending: '0', total: '99.75' });
});

test('USDT: the Transfer log must pay the destination exactly the amount from the configured contract', async () => {
  const { payoutId, address } = await claimedPayout('USDT', '12.5');
  expect(await rejection(complete(payoutId, await sendToken(anvil, tokens.usdt, address, '12')))).toMatchObject({ code: 'transaction_mismatch' });
  // The right amount of another token (USDC) is not USDT.
  expect(await rejection(complete(payoutId, await sendToken(anvil, tokens.usdc, address, '12.5')))).toMatchObject({ code: 'transaction_mismatch' });
  const right = await sendToken(anvil, tokens.usdt, address, '12.5');
  expect((await complete(payoutId, right)).payout!.status).toBe(PayoutStatus.COMPLETED);
});

test('USDT on bsc is checked on the bsc node, in 18-decimal base units; the Ethereum node and 6-decimal amounts do not complete it', async () => {
  const { project, payoutId, address } = await claimedPayout('USDT', '12.5', 'bsc');
  // The right amount on the Ethereum node: the bsc node knows no such transaction.
  const onEthereum = await sendToken(anvil, tokens.usdt, address, '12.5');
  expect(await rejection(complete(payoutId, onEthereum))).toMatchObject({
    code: 'transaction_not_found',
    violations: [{ field: 'transactionHash', message: expect.stringContaining('BNB Smart Chain node') }],
  });
  // 12.5 in 6-decimal units on bsc is 0.0000000000125 USDT there.
  expect(await rejection(complete(payoutId, await sendToken(bsc, bscTokens.usdt, address, '12.5')))).toMatchObject({ code: 'transaction_mismatch' });
  expect(await balanceOf(h, project, 'USDT', 'bsc')).toEqual({ available: '87.5', pending: '12.5', total: '100' });
  // One base unit short of 12.5 on an 18-decimal token is not the payout either.
  expect(await rejection(complete(payoutId, await sendTokenUnits(bsc, bscTokens.usdt, address, 12_499_999_999_999_999_999n)))).toMatchObject({ code: 'transaction_mismatch' });
  const right = await sendTokenUnits(bsc, bscTokens.usdt, address, 12_500_000_000_000_000_000n);
  expect((await complete(payoutId, right)).payout).toMatchObject({ status: PayoutStatus.COMPLETED, network: 'bsc', transactionHash: right });
  expect(await balanceOf(h, project, 'USDT', 'bsc')).toEqual({ available: '87.5', pending: '0', total: '87.5' });
});

test('a node that cannot be asked is chain_unavailable (503), never a completion', async () => {
  const check = new PayoutChainChecks({ ethereum: new EthereumPayoutCheck({ rpcUrl: 'http://127.0.0.1:1', timeoutMs: 2_000, contracts: {} }) });
  const result = await check.check({ transactionHash: `0x${'ab'.repeat(32)}`, coin: cryptoCurrency('ETH'), address: addressFor('ETH', 'live'), amount: '1' });
  expect(result).toMatchObject({ ok: false, code: 'chain_unavailable', connectCode: Code.Unavailable });
  // Payouts on chains without a node setting are not checked.
  expect(await check.check({ transactionHash: 'ab'.repeat(32), coin: cryptoCurrency('BTC'), address: addressFor('BTC', 'live'), amount: '1' })).toEqual({ ok: true });
});
