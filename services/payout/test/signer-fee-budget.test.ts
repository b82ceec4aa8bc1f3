/**
 * Issue 23, the signer's fee and gas top-up limits (docs/treasury.md#signer-policy): what bounds a
 * compromised processor that moves no coin off the seed's keys yet burns their ETH in fees — gas
 * top-ups swept straight back, every transaction's priority fee at the fee cap (a colluding block
 * builder keeps it), tiny payouts at a high gas limit. Every signature of a UTC day, all purposes,
 * is charged gas_limit × max_fee_per_gas against SIGNER_DAILY_FEE_LIMIT_WEI; top-ups are summed
 * against SIGNER_DAILY_GAS_TOP_UP_LIMIT_WEI; every priority fee is capped by
 * SIGNER_MAX_PRIORITY_FEE_PER_GAS_WEI. The counters are one row per day, locked by each signature.
 * (Started as the security review's failing test review-signer-fee-drain.test.ts.)
 */
import { Code, createRpcClient } from '@coinvoice/runtime';
import { SignerService, type SignEvmTransactionRequest } from '@coinvoice/runtime/gen/coinvoice/signer/v1/signer_pb';
import { parseEther, parseGwei, type Hex } from 'viem';
import { sendEth, startAnvil, type Anvil } from '../../../test/support/anvil';
import { rejection } from '../../../test/support/async';
import {
  depositAddressOf,
  freshAddress,
  gasTopUpRequest,
  insertPayout,
  payoutRequest,
  prepareSignerDatabase,
  startTestSigner,
  sweepRequest,
  TEST_TREASURY,
  type SignerDatabase,
  type TestSigner,
} from './support/signer';

const FEE_BUDGET = parseEther('0.1');
const GAS_TOP_UP_LIMIT = parseEther('0.03');

let anvil: Anvil;
let db: SignerDatabase;
/** The review's signer: the fee budget alone stands between the loop and the treasury (priority cap opened to the fee cap). */
let drainSigner: TestSigner;
/** The documented priority cap (5 gwei), a 0.03 ETH top-up limit, the same fee budget. */
let signer: TestSigner;

beforeAll(async () => {
  anvil = await startAnvil();
  db = await prepareSignerDatabase();
  drainSigner = await startTestSigner({
    databaseUrl: db.signerUrl,
    ownerDatabaseUrl: db.database.url,
    env: {
      SIGNER_MAX_PAYOUT_ETH: '0.05',
      SIGNER_DAILY_LIMIT_ETH: '0.1',
      SIGNER_MAX_GAS_TOP_UP_WEI: parseEther('0.02').toString(),
      // The documented defaults, spelled out: 200 gwei, 100,000 gas.
      SIGNER_MAX_FEE_PER_GAS_WEI: parseGwei('200').toString(),
      SIGNER_MAX_GAS_LIMIT: '100000',
      SIGNER_MAX_PRIORITY_FEE_PER_GAS_WEI: parseGwei('200').toString(),
      SIGNER_DAILY_FEE_LIMIT_WEI: FEE_BUDGET.toString(),
      // Far above the loop's 30 × 0.02 ETH: the fee budget is what must stop it.
      SIGNER_DAILY_GAS_TOP_UP_LIMIT_WEI: parseEther('1').toString(),
    },
  });
  signer = await startTestSigner({
    databaseUrl: db.signerUrl,
    ownerDatabaseUrl: db.database.url,
    env: {
      SIGNER_DAILY_FEE_LIMIT_WEI: FEE_BUDGET.toString(),
      SIGNER_DAILY_GAS_TOP_UP_LIMIT_WEI: GAS_TOP_UP_LIMIT.toString(),
    },
  });
  await sendEth(anvil, TEST_TREASURY, '10');
}, 120_000);

afterAll(async () => {
  await drainSigner?.stop();
  await signer?.stop();
  await db?.dispose();
  await anvil?.stop();
});

// Each test starts a fresh UTC day: its fee row is the one the signer creates for today.
beforeEach(async () => {
  await db.owner`delete from signer.daily_fees`;
  const [last] = await db.owner<{ id: string }[]>`select coalesce(max(id), 0)::text as id from signer.audit_log`;
  dayStartsAfter = last!.id;
});

const today = async () => {
  const [row] = await db.owner<{ fee_wei: string; gas_top_up_wei: string }[]>`select fee_wei::text, gas_top_up_wei::text from signer.daily_fees`;
  return { feeWei: BigInt(row?.fee_wei ?? '0'), gasTopUpWei: BigInt(row?.gas_top_up_wei ?? '0') };
};

async function metricValue(of: TestSigner, rule: string): Promise<number> {
  const text = await (await fetch(`${of.adminUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`signer_refusals_total{rule="${rule}"}`));
  return line ? Number(line.split(' ')[1]) : 0;
}

/** The day's refusals of `rule` (a test's day starts with its fresh fee row, beforeEach). */
const refusedRows = (rule: string) =>
  db.owner<{ purpose: string; rule: string; max_fee_per_gas: string; gas_limit: string }[]>`
    select purpose, rule, max_fee_per_gas::text, gas_limit::text from signer.audit_log where rule = ${rule} and id > ${dayStartsAfter} order by id`;
let dayStartsAfter = '0';

test('30 gas top-ups swept straight back, at max fee = priority fee = 200 gwei, cost the keys no more than SIGNER_DAILY_FEE_LIMIT_WEI', async () => {
  const client = createRpcClient(SignerService, drainSigner.url, { timeoutMs: 15_000 });
  const cap = parseGwei('200');
  const fees = { maxFeePerGas: cap, maxPriorityFeePerGas: cap, gasLimit: 21_000n };
  const keysBalance = async (indexes: number[]) => {
    let total = await anvil.publicClient.getBalance({ address: TEST_TREASURY });
    for (const i of indexes) total += await anvil.publicClient.getBalance({ address: depositAddressOf(i) });
    return total;
  };
  const send = async (raw: string) => {
    const hash = await anvil.publicClient.request({ method: 'eth_sendRawTransaction', params: [raw as Hex] });
    await anvil.publicClient.waitForTransactionReceipt({ hash, pollingInterval: 50 });
  };
  const rounds = 30;
  const indexes = Array.from({ length: rounds }, (_, i) => 1_000 + i);
  const before = await keysBalance(indexes);
  const refusedBefore = await metricValue(drainSigner, 'daily_fee_budget_exceeded');
  let treasuryNonce = BigInt(await anvil.publicClient.getTransactionCount({ address: TEST_TREASURY }));
  let signed = 0;
  const requests = function* () {
    for (const index of indexes) {
      yield gasTopUpRequest(index, { nonce: treasuryNonce, to: depositAddressOf(index), value: parseEther('0.02'), ...fees });
      yield sweepRequest(index, 'ETH', { nonce: 0n, to: TEST_TREASURY, value: parseEther('0.02') - 21_000n * cap, ...fees });
    }
  };
  let refusal: Awaited<ReturnType<typeof rejection>> | undefined;
  for (const request of requests()) {
    let rawTransaction: string;
    try {
      ({ rawTransaction } = await client.signEvmTransaction(request));
    } catch (err) {
      refusal = await rejection(Promise.reject(err));
      break;
    }
    await send(rawTransaction);
    if (request.purpose.case === 'gasTopUp') treasuryNonce++;
    signed++;
  }
  const lost = before - (await keysBalance(indexes));
  console.log(`top-up/sweep round trips: ${signed} signatures, then refused; the seed's keys lost ${lost} wei in fees (SIGNER_DAILY_FEE_LIMIT_WEI ${FEE_BUDGET})`);
  // 21,000 × 200 gwei = 0.0042 ETH each: 23 fit in 0.1 ETH (0.0966), the 24th does not.
  expect(signed).toBe(23);
  expect(refusal).toMatchObject({ connectCode: Code.PermissionDenied, code: 'daily_fee_budget_exceeded' });
  expect(lost).toBeGreaterThan(0n);
  expect(lost).toBeLessThanOrEqual(FEE_BUDGET);
  expect((await today()).feeWei).toBe(23n * 21_000n * cap);
  expect(await refusedRows('daily_fee_budget_exceeded')).toEqual([expect.objectContaining({ purpose: 'sweep', gas_limit: '21000', max_fee_per_gas: cap.toString() })]);
  expect(await metricValue(drainSigner, 'daily_fee_budget_exceeded')).toBe(refusedBefore + 1);
}, 120_000);

test('the fee budget counts every purpose, even asked at once: tiny payouts at a high gas limit, sweeps and top-ups (daily_fee_budget_exceeded)', async () => {
  const client = createRpcClient(SignerService, signer.url, { timeoutMs: 15_000 });
  // 100,000 gas × 200 gwei = 0.02 ETH each: 5 fit in 0.1 ETH, the 6th does not, whichever it is.
  const costly = { gasLimit: 100_000n, maxFeePerGas: parseGwei('200'), maxPriorityFeePerGas: parseGwei('1') };
  // The day's row exists (a first cheap signature) and the pool is warm, so the requests below run
  // side by side on their own connections and queue on the row's lock.
  await client.signEvmTransaction(sweepRequest(2_000, 'ETH', { to: TEST_TREASURY, value: 1n, gasLimit: 21_000n, maxFeePerGas: 1n, maxPriorityFeePerGas: 1n }));
  await Promise.allSettled(Array.from({ length: 5 }, (_, i) => client.signEvmTransaction(sweepRequest(2_001 + i, 'ETH', { to: freshAddress(), value: 1n }))));
  const first = await today();
  expect(first.feeWei).toBe(21_000n);

  const payouts = await Promise.all(Array.from({ length: 2 }, () => insertPayout(db.owner, { asset: 'ETH', amount: '0.000000000000000001' })));
  const requests: SignEvmTransactionRequest[] = [
    ...payouts.map((payout, i) => payoutRequest(payout.id, { nonce: 100n + BigInt(i), to: payout.address, value: 1n, ...costly })),
    sweepRequest(2_010, 'ETH', { to: TEST_TREASURY, value: 1n, ...costly }),
    sweepRequest(2_011, 'ETH', { to: TEST_TREASURY, value: 1n, ...costly }),
    gasTopUpRequest(2_012, { nonce: 200n, to: depositAddressOf(2_012), value: 1n, ...costly }),
    gasTopUpRequest(2_013, { nonce: 201n, to: depositAddressOf(2_013), value: 1n, ...costly }),
  ];
  const counted = await metricValue(signer, 'daily_fee_budget_exceeded');
  const results = await Promise.allSettled(requests.map((request) => client.signEvmTransaction(request)));
  // 21,000 wei + 5 × 0.02 ETH > 0.1 ETH: the first signature's 21,000 wei leaves room for only 4.
  expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(4);
  const refused = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
  for (const r of refused) {
    expect(await rejection(Promise.reject(r.reason))).toMatchObject({ connectCode: Code.PermissionDenied, code: 'daily_fee_budget_exceeded' });
  }
  expect((await today()).feeWei).toBe(21_000n + 4n * parseEther('0.02'));
  expect(await refusedRows('daily_fee_budget_exceeded')).toHaveLength(2);
  expect(await metricValue(signer, 'daily_fee_budget_exceeded')).toBe(counted + 2);
}, 60_000);

test("a payout's fee replacement is charged only what it adds above the highest version signed before", async () => {
  const client = createRpcClient(SignerService, signer.url, { timeoutMs: 15_000 });
  const payout = await insertPayout(db.owner, { asset: 'ETH', amount: '0.01' });
  const fields = { nonce: 300n, to: payout.address, value: parseEther('0.01'), gasLimit: 21_000n };
  await client.signEvmTransaction(payoutRequest(payout.id, { ...fields, maxFeePerGas: parseGwei('10'), maxPriorityFeePerGas: parseGwei('1') }));
  expect((await today()).feeWei).toBe(21_000n * parseGwei('10'));
  await client.signEvmTransaction(payoutRequest(payout.id, { ...fields, maxFeePerGas: parseGwei('15'), maxPriorityFeePerGas: parseGwei('2') }));
  expect((await today()).feeWei).toBe(21_000n * parseGwei('15'));
  // A lower version adds nothing: only one of them can be mined.
  await client.signEvmTransaction(payoutRequest(payout.id, { ...fields, maxFeePerGas: parseGwei('12'), maxPriorityFeePerGas: parseGwei('2') }));
  expect((await today()).feeWei).toBe(21_000n * parseGwei('15'));
  // A raise that does not fit the rest of the budget is refused, and counts nothing.
  await db.owner`update signer.daily_fees set fee_wei = ${(FEE_BUDGET - 21_000n * parseGwei('1')).toString()}::numeric`;
  expect(await rejection(client.signEvmTransaction(payoutRequest(payout.id, { ...fields, maxFeePerGas: parseGwei('17'), maxPriorityFeePerGas: parseGwei('2') })))).toMatchObject({
    code: 'daily_fee_budget_exceeded',
  });
  await client.signEvmTransaction(payoutRequest(payout.id, { ...fields, maxFeePerGas: parseGwei('16'), maxPriorityFeePerGas: parseGwei('2') }));
  expect((await today()).feeWei).toBe(FEE_BUDGET);
  const [row] = await db.owner<{ max_fee_wei: string; signatures: number }[]>`select max_fee_wei::text, signatures from signer.payout_signatures where payout_id = ${payout.id}`;
  expect(row).toEqual({ max_fee_wei: (21_000n * parseGwei('16')).toString(), signatures: 4 });
});

test('gas top-ups are summed per day, even asked at once (daily_gas_top_up_limit_exceeded)', async () => {
  const client = createRpcClient(SignerService, signer.url, { timeoutMs: 15_000 });
  const cheap = { gasLimit: 21_000n, maxFeePerGas: parseGwei('2'), maxPriorityFeePerGas: parseGwei('1') };
  await client.signEvmTransaction(gasTopUpRequest(3_000, { nonce: 400n, to: depositAddressOf(3_000), value: parseEther('0.005'), ...cheap }));
  const counted = await metricValue(signer, 'daily_gas_top_up_limit_exceeded');
  // 0.005 + 4 × 0.007 = 0.033 > 0.03 ETH, while 0.005 + 3 × 0.007 fits: exactly one is refused.
  const results = await Promise.allSettled(
    [1, 2, 3, 4].map((i) => client.signEvmTransaction(gasTopUpRequest(3_000 + i, { nonce: 400n + BigInt(i), to: depositAddressOf(3_000 + i), value: parseEther('0.007'), ...cheap }))),
  );
  expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(3);
  const refused = results.find((r): r is PromiseRejectedResult => r.status === 'rejected')!;
  expect(await rejection(Promise.reject(refused.reason))).toMatchObject({ connectCode: Code.PermissionDenied, code: 'daily_gas_top_up_limit_exceeded' });
  expect(await today()).toEqual({ gasTopUpWei: parseEther('0.026'), feeWei: 4n * 21_000n * parseGwei('2') });
  // Sweeps move no top-up: they still sign.
  await client.signEvmTransaction(sweepRequest(3_001, 'ETH', { to: TEST_TREASURY, value: 1n, ...cheap }));
  expect(await refusedRows('daily_gas_top_up_limit_exceeded')).toEqual([expect.objectContaining({ purpose: 'gas_top_up' })]);
  expect(await metricValue(signer, 'daily_gas_top_up_limit_exceeded')).toBe(counted + 1);
});

test('every purpose: a priority fee above SIGNER_MAX_PRIORITY_FEE_PER_GAS_WEI (5 gwei by default) is refused (priority_fee_above_cap)', async () => {
  const client = createRpcClient(SignerService, signer.url, { timeoutMs: 15_000 });
  const payout = await insertPayout(db.owner, { asset: 'ETH', amount: '0.01' });
  const over = { gasLimit: 21_000n, maxFeePerGas: parseGwei('20'), maxPriorityFeePerGas: parseGwei('5') + 1n };
  const counted = await metricValue(signer, 'priority_fee_above_cap');
  for (const request of [
    payoutRequest(payout.id, { nonce: 500n, to: payout.address, value: parseEther('0.01'), ...over }),
    sweepRequest(4_000, 'ETH', { to: TEST_TREASURY, value: 1n, ...over }),
    gasTopUpRequest(4_000, { nonce: 501n, to: depositAddressOf(4_000), value: 1n, ...over }),
  ]) {
    expect(await rejection(client.signEvmTransaction(request))).toMatchObject({ connectCode: Code.PermissionDenied, code: 'priority_fee_above_cap' });
  }
  expect((await refusedRows('priority_fee_above_cap')).map((r) => r.purpose)).toEqual(['payout', 'sweep', 'gas_top_up']);
  expect(await metricValue(signer, 'priority_fee_above_cap')).toBe(counted + 3);
  expect((await today()).feeWei).toBe(0n);
  // At the cap it signs.
  const signed = await client.signEvmTransaction(payoutRequest(payout.id, { nonce: 500n, to: payout.address, value: parseEther('0.01'), ...over, maxPriorityFeePerGas: parseGwei('5') }));
  expect(signed.transactionHash).toMatch(/^0x[0-9a-f]{64}$/);
  expect((await today()).feeWei).toBe(21_000n * parseGwei('20'));
});
