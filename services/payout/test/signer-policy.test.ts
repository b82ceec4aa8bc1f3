/**
 * Issue 23, the signer (docs/treasury.md#signer-policy): the `sign` role in this process over
 * mutual TLS (certificates from a throwaway CA), as its restricted database role (role.sql), with
 * a real anvil and test ERC-20 tokens. What it signs pays exactly what the named payout says when
 * broadcast; what breaks a rule is refused with PermissionDenied naming the rule, counted, and
 * every signature and refusal is a row of the append-only signer.audit_log.
 */
import type { Client } from '@connectrpc/connect';
import { Code, createRpcClient, type RpcTls } from '@coinvoice/runtime';
import { SignerService, type SignEvmTransactionRequest } from '@coinvoice/runtime/gen/coinvoice/signer/v1/signer_pb';
import postgres from 'postgres';
import { encodeFunctionData, erc20Abi, getAddress, parseEther, parseEventLogs, type Address, type Hex } from 'viem';
import { compileTestContracts, deployTokens, sendEth, sendToken, startAnvil, type Anvil, type Tokens } from '../../../test/support/anvil';
import { rejection, waitFor } from '../../../test/support/async';
import { TestCertificateAuthority, type IssuedCertificate } from '../../../test/support/certificates';
import {
  depositAddressOf,
  freshAddress,
  gasTopUpRequest,
  insertPayout,
  payoutRequest,
  prepareSignerDatabase,
  startTestSigner,
  sweepRequest,
  TEST_ACCOUNT_XPUB,
  TEST_TREASURY,
  type SignerDatabase,
  type TestSigner,
} from './support/signer';

const CALLERS = ['payout-signer', 'payout-processor', 'payout'] as const;

let anvil: Anvil;
let tokens: Tokens;
let db: SignerDatabase;
let ca: TestCertificateAuthority;
let certs: Record<(typeof CALLERS)[number], IssuedCertificate>;
let signer: TestSigner;
let processor: Client<typeof SignerService>;

const tlsAs = (name: (typeof CALLERS)[number]): RpcTls => ({ ca: ca.ca, cert: certs[name].cert, key: certs[name].key });
const clientAs = (name: (typeof CALLERS)[number]) => createRpcClient(SignerService, signer.url, { tls: tlsAs(name), timeoutMs: 15_000 });

beforeAll(async () => {
  anvil = await startAnvil();
  tokens = await deployTokens(anvil);
  db = await prepareSignerDatabase();
  ca = new TestCertificateAuthority();
  certs = Object.fromEntries(CALLERS.map((name) => [name, ca.issue(name)])) as typeof certs;
  signer = await startTestSigner({
    databaseUrl: db.signerUrl,
    ownerDatabaseUrl: db.database.url,
    tls: { caFile: ca.caFile, certFile: certs['payout-signer'].certFile, keyFile: certs['payout-signer'].keyFile },
    env: {
      INVOICE_XPUB_USDT: TEST_ACCOUNT_XPUB,
      CHAIN_ETHEREUM_USDT_CONTRACT: tokens.usdt,
      CHAIN_ETHEREUM_USDC_CONTRACT: tokens.usdc,
      SIGNER_MAX_PAYOUT_ETH: '1',
      SIGNER_DAILY_LIMIT_ETH: '100',
      SIGNER_MAX_PAYOUT_USDT: '1000',
      SIGNER_DAILY_LIMIT_USDT: '100000',
      // Only the daily-limit test pays USDC.
      SIGNER_MAX_PAYOUT_USDC: '600',
      SIGNER_DAILY_LIMIT_USDC: '1000',
      SIGNER_MAX_GAS_TOP_UP_WEI: parseEther('0.01').toString(),
      PAYOUT_AUTO_MAX_ETH: '0.1',
    },
  });
  processor = clientAs('payout-processor');
  await sendEth(anvil, TEST_TREASURY, '10');
  await sendToken(anvil, tokens.usdt, TEST_TREASURY, '5000');
}, 120_000);

afterAll(async () => {
  await signer?.stop();
  await db?.dispose();
  await anvil?.stop();
  ca?.remove();
});

interface AuditRow {
  outcome: string;
  caller: string;
  purpose: string | null;
  payout_id: string | null;
  address_index: number | null;
  asset: string | null;
  from_address: string | null;
  to_address: string | null;
  recipient: string | null;
  amount: string | null;
  nonce: string | null;
  transaction_hash: string | null;
  rule: string | null;
}

const auditOf = (payoutId: string) => db.owner<AuditRow[]>`select * from signer.audit_log where payout_id = ${payoutId} order by id`;

async function nonceOf(address: Address): Promise<bigint> {
  return BigInt(await anvil.publicClient.getTransactionCount({ address, blockTag: 'pending' }));
}

async function broadcast(raw: string): Promise<Awaited<ReturnType<Anvil['publicClient']['waitForTransactionReceipt']>>> {
  const hash = await anvil.publicClient.sendRawTransaction({ serializedTransaction: raw as Hex });
  const receipt = await anvil.publicClient.waitForTransactionReceipt({ hash, pollingInterval: 50 });
  expect(receipt.status).toBe('success');
  return receipt;
}

const tokenBalance = (token: Address, holder: Address) => anvil.publicClient.readContract({ address: token, abi: erc20Abi, functionName: 'balanceOf', args: [holder] });
const transferData = (to: Address, amount: bigint) => encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [to, amount] });

async function refusalOf(request: SignEvmTransactionRequest, client = processor) {
  return rejection(client.signEvmTransaction(request));
}

async function metricValue(rule: string): Promise<number> {
  const text = await (await fetch(`${signer.adminUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`signer_refusals_total{rule="${rule}"}`));
  return line ? Number(line.split(' ')[1]) : 0;
}

test('GetTreasury answers the account/1/0 address', async () => {
  expect(await processor.getTreasury({ network: 'ethereum' })).toMatchObject({ network: 'ethereum', address: TEST_TREASURY });
});

test('ETH payout: the signed transaction, broadcast to anvil, pays the payout address exactly its amount; audited', async () => {
  const payout = await insertPayout(db.owner, { asset: 'ETH', amount: '0.25' });
  const nonce = await nonceOf(TEST_TREASURY);
  const signed = await processor.signEvmTransaction(payoutRequest(payout.id, { nonce, to: payout.address, value: parseEther('0.25') }));
  expect(signed.from).toBe(TEST_TREASURY);

  const receipt = await broadcast(signed.rawTransaction);
  expect(receipt.transactionHash).toBe(signed.transactionHash);
  expect(receipt.from.toLowerCase()).toBe(TEST_TREASURY.toLowerCase());
  expect(await anvil.publicClient.getBalance({ address: payout.address })).toBe(250_000_000_000_000_000n);

  expect(await auditOf(payout.id)).toEqual([
    expect.objectContaining({
      outcome: 'signed',
      caller: 'payout-processor',
      purpose: 'payout',
      asset: 'ETH',
      from_address: TEST_TREASURY,
      to_address: payout.address,
      recipient: payout.address,
      amount: '250000000000000000',
      nonce: nonce.toString(),
      transaction_hash: signed.transactionHash,
      rule: null,
    }),
  ]);
});

test('USDT payout: transfer(payout address, amount) to the configured contract; the Transfer log pays exactly, to the base unit', async () => {
  const payout = await insertPayout(db.owner, { asset: 'USDT', amount: '12.345678' });
  const signed = await processor.signEvmTransaction(
    payoutRequest(payout.id, { nonce: await nonceOf(TEST_TREASURY), to: tokens.usdt, data: transferData(payout.address, 12_345_678n) }),
  );
  const receipt = await broadcast(signed.rawTransaction);
  const transfers = parseEventLogs({ abi: compileTestContracts().TestToken.abi, logs: receipt.logs, eventName: 'Transfer' }) as unknown as { address: string; args: { from: string; to: string; value: bigint } }[];
  expect(transfers).toHaveLength(1);
  expect(transfers[0]!.address.toLowerCase()).toBe(tokens.usdt.toLowerCase());
  expect(transfers[0]!.args).toEqual({ from: TEST_TREASURY, to: payout.address, value: 12_345_678n });
  expect(await tokenBalance(tokens.usdt, payout.address)).toBe(12_345_678n);
  expect(await auditOf(payout.id)).toEqual([expect.objectContaining({ outcome: 'signed', asset: 'USDT', to_address: getAddress(tokens.usdt), recipient: payout.address, amount: '12345678' })]);
});

test('a payout is signed for one nonce: a fee replacement is signed and counted once, another nonce is refused (nonce_mismatch)', async () => {
  const payout = await insertPayout(db.owner, { asset: 'ETH', amount: '0.1' });
  const dailyEth = async () => (await db.owner<{ amount: string }[]>`select amount::text from signer.daily_totals where asset = 'ETH' and day = (now() at time zone 'utc')::date`)[0]?.amount ?? '0';
  const before = BigInt(await dailyEth());
  const nonce = await nonceOf(TEST_TREASURY);
  const fields = { nonce, to: payout.address, value: parseEther('0.1') };
  const first = await processor.signEvmTransaction(payoutRequest(payout.id, { ...fields, maxFeePerGas: 5_000_000_000n, maxPriorityFeePerGas: 1n }));
  const replacement = await processor.signEvmTransaction(payoutRequest(payout.id, { ...fields, maxFeePerGas: 9_000_000_000n, maxPriorityFeePerGas: 2_000_000_000n }));
  expect(replacement.transactionHash).not.toBe(first.transactionHash);
  expect(BigInt(await dailyEth()) - before).toBe(parseEther('0.1'));

  const second = await refusalOf(payoutRequest(payout.id, { ...fields, nonce: nonce + 1n }));
  expect(second).toMatchObject({ connectCode: Code.PermissionDenied, code: 'nonce_mismatch' });
  // The replacement is what gets mined: it pays once.
  await broadcast(replacement.rawTransaction);
  expect(await anvil.publicClient.getBalance({ address: payout.address })).toBe(parseEther('0.1'));
  expect((await auditOf(payout.id)).map((r) => [r.outcome, r.nonce, r.rule])).toEqual([
    ['signed', nonce.toString(), null],
    ['signed', nonce.toString(), null],
    ['refused', (nonce + 1n).toString(), 'nonce_mismatch'],
  ]);
});

test('an amount above SIGNER_MAX_PAYOUT_<ASSET> is refused (amount_above_limit), audited and counted', async () => {
  const payout = await insertPayout(db.owner, { asset: 'ETH', amount: '1.5' });
  const counted = await metricValue('amount_above_limit');
  const refused = await refusalOf(payoutRequest(payout.id, { to: payout.address, value: parseEther('1.5') }));
  expect(refused).toMatchObject({ connectCode: Code.PermissionDenied, code: 'amount_above_limit' });
  expect(await auditOf(payout.id)).toEqual([expect.objectContaining({ outcome: 'refused', rule: 'amount_above_limit', amount: parseEther('1.5').toString(), transaction_hash: null })]);
  expect(await metricValue('amount_above_limit')).toBe(counted + 1);
});

test("a destination, amount or call other than the named payout's is refused", async () => {
  const payout = await insertPayout(db.owner, { asset: 'ETH', amount: '0.2' });
  const elsewhere = freshAddress();
  expect(await refusalOf(payoutRequest(payout.id, { to: elsewhere, value: parseEther('0.2') }))).toMatchObject({ connectCode: Code.PermissionDenied, code: 'destination_mismatch' });
  expect(await refusalOf(payoutRequest(payout.id, { to: payout.address, value: parseEther('0.3') }))).toMatchObject({ code: 'amount_mismatch' });
  expect(await refusalOf(payoutRequest(payout.id, { to: payout.address, value: parseEther('0.2'), data: '0xdeadbeef' }))).toMatchObject({ code: 'call_data_mismatch' });

  const tokenPayout = await insertPayout(db.owner, { asset: 'USDT', amount: '10' });
  // The right amount to another recipient, through the right contract.
  expect(await refusalOf(payoutRequest(tokenPayout.id, { to: tokens.usdt, data: transferData(elsewhere, 10_000_000n) }))).toMatchObject({ code: 'destination_mismatch' });
  // Another contract (the USDC one) named as the USDT payout's.
  expect(await refusalOf(payoutRequest(tokenPayout.id, { to: tokens.usdc, data: transferData(tokenPayout.address, 10_000_000n) }))).toMatchObject({ code: 'destination_mismatch' });
  // ETH value riding on a token transfer.
  expect(await refusalOf(payoutRequest(tokenPayout.id, { to: tokens.usdt, value: 1n, data: transferData(tokenPayout.address, 10_000_000n) }))).toMatchObject({ code: 'amount_mismatch' });

  expect((await auditOf(payout.id)).map((r) => [r.outcome, r.rule, r.recipient])).toEqual([
    ['refused', 'destination_mismatch', elsewhere],
    ['refused', 'amount_mismatch', payout.address],
    ['refused', 'call_data_mismatch', null],
  ]);
  expect((await auditOf(tokenPayout.id)).map((r) => r.rule)).toEqual(['destination_mismatch', 'destination_mismatch', 'amount_mismatch']);
});

test('the daily limit: USDC payouts that fit singly do not all fit together, even asked at once (daily_limit_exceeded)', async () => {
  // A first payout today makes the day's row exist: the ones below must queue on its lock.
  const first = await insertPayout(db.owner, { asset: 'USDC', amount: '1' });
  const nonce = await nonceOf(TEST_TREASURY);
  await processor.signEvmTransaction(payoutRequest(first.id, { nonce, to: tokens.usdc, data: transferData(first.address, 1_000_000n) }));
  // Warm the signer's pool, so the requests below really run side by side on their own connections.
  await Promise.allSettled(Array.from({ length: 5 }, () => processor.signEvmTransaction(payoutRequest(first.id, { nonce: nonce + 9n, to: tokens.usdc, data: transferData(first.address, 1_000_000n) }))));

  // 1 + 4 × 300 > 1000 = SIGNER_DAILY_LIMIT_USDC, while 1 + 3 × 300 fits: exactly one is refused.
  const payouts = await Promise.all(Array.from({ length: 4 }, () => insertPayout(db.owner, { asset: 'USDC', amount: '300' })));
  const results = await Promise.allSettled(
    payouts.map((payout, i) => processor.signEvmTransaction(payoutRequest(payout.id, { nonce: nonce + 1n + BigInt(i), to: tokens.usdc, data: transferData(payout.address, 300_000_000n) }))),
  );
  expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(3);
  const refusedIndex = results.findIndex((r) => r.status === 'rejected');
  expect(await rejection(Promise.reject((results[refusedIndex] as PromiseRejectedResult).reason))).toMatchObject({
    connectCode: Code.PermissionDenied,
    code: 'daily_limit_exceeded',
  });
  expect(await auditOf(payouts[refusedIndex]!.id)).toEqual([expect.objectContaining({ outcome: 'refused', rule: 'daily_limit_exceeded', asset: 'USDC' })]);
  const [daily] = await db.owner<{ amount: string }[]>`select amount::text from signer.daily_totals where asset = 'USDC'`;
  expect(daily?.amount).toBe('901000000');
});

test('a payout above PAYOUT_AUTO_MAX_<ASSET> is signed only once an operator approved it, as the processors claim it (a processor that skipped the approval got it signed)', async () => {
  const unapproved = await insertPayout(db.owner, { amount: '0.25', approved: false });
  const refusal = await refusalOf(payoutRequest(unapproved.id, { to: unapproved.address, value: parseEther('0.25') }));
  expect(refusal).toMatchObject({ connectCode: Code.PermissionDenied, code: 'payout_not_signable' });
  expect(refusal.message).toContain('is not approved by an operator and above PAYOUT_AUTO_MAX_ETH (0.1)');
  expect(await auditOf(unapproved.id)).toEqual([expect.objectContaining({ outcome: 'refused', rule: 'payout_not_signable', asset: 'ETH' })]);
  // Within the automatic maximum: no Approve needed (the processor sends it by itself).
  const small = await insertPayout(db.owner, { amount: '0.1', approved: false });
  const nonce = await nonceOf(TEST_TREASURY);
  await processor.signEvmTransaction(payoutRequest(small.id, { nonce, to: small.address, value: parseEther('0.1') }));
  expect(await auditOf(small.id)).toEqual([expect.objectContaining({ outcome: 'signed' })]);
});

test('a payout that is not live, Pending and verified, or in an asset or on a network the signer does not move, is refused', async () => {
  const sandbox = await insertPayout(db.owner, { environment: 'sandbox' });
  const unverified = await insertPayout(db.owner, { status: 'AwaitingVerification', verified: false });
  for (const payout of [sandbox, unverified]) {
    expect(await refusalOf(payoutRequest(payout.id, { to: payout.address, value: parseEther(payout.amount) }))).toMatchObject({ code: 'payout_not_signable' });
    expect(await auditOf(payout.id)).toEqual([expect.objectContaining({ rule: 'payout_not_signable' })]);
  }
  const unknown = '00000000-0000-4000-8000-000000000000';
  expect(await refusalOf(payoutRequest(unknown, { to: freshAddress(), value: 1n }))).toMatchObject({ code: 'payout_not_signable' });
  const bitcoin = await insertPayout(db.owner, { asset: 'BTC', amount: '0.1', address: 'bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq' });
  expect(await refusalOf(payoutRequest(bitcoin.id, { to: freshAddress(), value: 1n }))).toMatchObject({ code: 'asset_not_supported' });
  // USDT on bsc is another balance and another chain: never paid from the Ethereum treasury.
  const onBsc = await insertPayout(db.owner, { asset: 'USDT', amount: '5', network: 'bsc' });
  expect(await refusalOf(payoutRequest(onBsc.id, { to: tokens.usdt, data: transferData(onBsc.address, 5_000_000n) }))).toMatchObject({ code: 'network_not_supported' });
  expect(await auditOf(onBsc.id)).toEqual([expect.objectContaining({ rule: 'network_not_supported' })]);
});

test('every request: the network, its chain id, the fee cap and the gas cap', async () => {
  const payout = await insertPayout(db.owner, { asset: 'ETH', amount: '0.01' });
  const fields = { to: payout.address, value: parseEther('0.01') };
  expect(await refusalOf({ ...payoutRequest(payout.id, fields), network: 'bitcoin' })).toMatchObject({ connectCode: Code.PermissionDenied, code: 'network_not_supported' });
  expect(await refusalOf(payoutRequest(payout.id, { ...fields, chainId: 1n }))).toMatchObject({ code: 'chain_id_mismatch' });
  expect(await refusalOf(payoutRequest(payout.id, { ...fields, maxFeePerGas: 200_000_000_001n }))).toMatchObject({ code: 'fee_above_cap' });
  expect(await refusalOf(payoutRequest(payout.id, { ...fields, gasLimit: 100_001n }))).toMatchObject({ code: 'gas_limit_above_cap' });
  expect(await refusalOf(payoutRequest(payout.id, { ...fields, to: 'not an address' }))).toMatchObject({ connectCode: Code.InvalidArgument, code: 'invalid_request' });
  expect((await auditOf(payout.id)).map((r) => r.rule)).toEqual(['network_not_supported', 'chain_id_mismatch', 'fee_above_cap', 'gas_limit_above_cap', 'invalid_request']);
});

test('a caller without the processor certificate is refused (caller_not_allowed), audited with its name', async () => {
  const payout = await insertPayout(db.owner, { asset: 'ETH', amount: '0.01' });
  const stranger = clientAs('payout');
  expect(await refusalOf(payoutRequest(payout.id, { to: payout.address, value: parseEther('0.01') }), stranger)).toMatchObject({
    connectCode: Code.PermissionDenied,
    code: 'caller_not_allowed',
  });
  expect(await rejection(stranger.getTreasury({ network: 'ethereum' }))).toMatchObject({ code: 'caller_not_allowed' });
  const rows = await waitFor('the refused callers audited', async () => {
    const found = await db.owner<AuditRow[]>`select * from signer.audit_log where rule = 'caller_not_allowed' and caller = 'payout' order by id`;
    return found.length === 2 && found;
  });
  expect(rows.map((r) => r.outcome)).toEqual(['refused', 'refused']);
  // Nothing was signed for the payout.
  expect(await auditOf(payout.id)).toEqual([]);
});

test('sweeps: a deposit key pays the treasury (ETH as value, a token by transfer), a gas top-up pays a deposit address up to the cap', async () => {
  // ETH sweep from receive index 3.
  const ethDeposit = depositAddressOf(3);
  await sendEth(anvil, ethDeposit, '1');
  const treasuryBefore = await anvil.publicClient.getBalance({ address: TEST_TREASURY });
  const ethSweep = await processor.signEvmTransaction(sweepRequest(3, 'ETH', { nonce: 0n, to: TEST_TREASURY, value: parseEther('0.5'), gasLimit: 21_000n }));
  expect(ethSweep.from).toBe(ethDeposit);
  await broadcast(ethSweep.rawTransaction);
  expect((await anvil.publicClient.getBalance({ address: TEST_TREASURY })) - treasuryBefore).toBe(parseEther('0.5'));
  expect(await refusalOf(sweepRequest(3, 'ETH', { nonce: 1n, to: freshAddress(), value: parseEther('0.1'), gasLimit: 21_000n }))).toMatchObject({ code: 'destination_mismatch' });

  // USDT sweep from receive index 4: the treasury tops up its gas first.
  const tokenDeposit = depositAddressOf(4);
  await sendToken(anvil, tokens.usdt, tokenDeposit, '42.5');
  expect(await refusalOf(gasTopUpRequest(4, { nonce: await nonceOf(TEST_TREASURY), to: tokenDeposit, value: parseEther('0.02'), gasLimit: 21_000n }))).toMatchObject({
    code: 'gas_top_up_above_cap',
  });
  expect(await refusalOf(gasTopUpRequest(4, { nonce: await nonceOf(TEST_TREASURY), to: depositAddressOf(5), value: parseEther('0.001'), gasLimit: 21_000n }))).toMatchObject({
    code: 'destination_mismatch',
  });
  const topUp = await processor.signEvmTransaction(gasTopUpRequest(4, { nonce: await nonceOf(TEST_TREASURY), to: tokenDeposit, value: parseEther('0.005'), gasLimit: 21_000n }));
  expect(topUp.from).toBe(TEST_TREASURY);
  await broadcast(topUp.rawTransaction);
  const treasuryTokens = await tokenBalance(tokens.usdt, TEST_TREASURY);
  const tokenSweep = await processor.signEvmTransaction(sweepRequest(4, 'USDT', { nonce: 0n, to: tokens.usdt, data: transferData(TEST_TREASURY, 42_500_000n), gasLimit: 80_000n }));
  await broadcast(tokenSweep.rawTransaction);
  expect((await tokenBalance(tokens.usdt, TEST_TREASURY)) - treasuryTokens).toBe(42_500_000n);
  expect(await refusalOf(sweepRequest(4, 'USDT', { nonce: 1n, to: tokens.usdt, data: transferData(freshAddress(), 1n), gasLimit: 80_000n }))).toMatchObject({ code: 'destination_mismatch' });

  const rows = await db.owner<AuditRow[]>`select * from signer.audit_log where address_index in (3, 4) order by id`;
  expect(rows.map((r) => [r.purpose, r.address_index, r.outcome, r.rule ?? r.asset])).toEqual([
    ['sweep', 3, 'signed', 'ETH'],
    ['sweep', 3, 'refused', 'destination_mismatch'],
    ['gas_top_up', 4, 'refused', 'gas_top_up_above_cap'],
    ['gas_top_up', 4, 'refused', 'destination_mismatch'],
    ['gas_top_up', 4, 'signed', 'ETH'],
    ['sweep', 4, 'signed', 'USDT'],
    ['sweep', 4, 'refused', 'destination_mismatch'],
  ]);
});

test("signer.audit_log is append-only: the signer's role has no UPDATE or DELETE, and a trigger refuses them to the owner too", async () => {
  const asSigner = postgres(db.signerUrl, { max: 1, onnotice: () => undefined });
  try {
    await expect(asSigner`update signer.audit_log set rule = 'x'`).rejects.toMatchObject({ code: '42501' });
    await expect(asSigner`delete from signer.audit_log`).rejects.toMatchObject({ code: '42501' });
    await expect(asSigner`truncate signer.audit_log`).rejects.toMatchObject({ code: '42501' });
    await expect(asSigner`select count(*) from payout.balances`).rejects.toMatchObject({ code: '42501' });
    await expect(asSigner`update payout.payouts set status = 'Pending'`).rejects.toMatchObject({ code: '42501' });
  } finally {
    await asSigner.end({ timeout: 5 });
  }
  await expect(db.owner`update signer.audit_log set rule = 'x'`).rejects.toThrow(/append-only/);
  await expect(db.owner`delete from signer.audit_log`).rejects.toThrow(/append-only/);
  const [audited] = await db.owner<{ count: string }[]>`select count(*)::text as count from signer.audit_log`;
  expect(Number(audited?.count)).toBeGreaterThan(0);
});
