/**
 * The watcher on a 2-second-block network (issue 24: "the watcher keeps up at 10× a 2-second-block
 * chain with 1,000 open invoices"; docs/watcher.md#cost-per-block), part of `npm run bench:watcher`. A second anvil started as base
 * (`--chain-id 8453`, the registry's chain id, so CHAIN_BASE_CHAIN_ID is the real one) with a
 * USDC (the registry's decimals) compiled from test/support/contracts; its blocks are mined by hand, each
 * timestamped 2 s after the previous one (base's block time) and each carrying BENCH_FAST_TXS
 * transactions (ETH and USDC transfers to fresh addresses; every tenth block also pays one of the
 * open invoices). Measures, with BENCH_FAST_INVOICES open live invoices on base:
 *   1. backfill: blocks/s while the paused watcher catches up BENCH_FAST_BLOCKS such blocks;
 *   2. live: blocks mined at 10× the chain's rate (one every 200 ms wall time, 5 blocks/s) for
 *      BENCH_FAST_LIVE_BLOCKS blocks, the watcher polling at its default CHAIN_BASE_POLL_MS: how far
 *      its cursor falls behind the head, and how soon after the last block it is at the head.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import path from 'node:path';
import type postgres from 'postgres';
import { createPublicClient, createTestClient, createWalletClient, defineChain, encodeFunctionData, http as viemHttp, parseEther, type Abi, type Address, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { EVM_NETWORKS } from '@coinvoice/chains/evm/networks';
import { freePort, REPO_ROOT } from '@coinvoice/local';

export const FAST_CHAIN = 'base' as const;
const NETWORK = EVM_NETWORKS[FAST_CHAIN];
export const FAST_INVOICES = Number(process.env.BENCH_FAST_INVOICES ?? 1000);
export const FAST_BLOCKS = Number(process.env.BENCH_FAST_BLOCKS ?? 1000);
export const FAST_LIVE_BLOCKS = Number(process.env.BENCH_FAST_LIVE_BLOCKS ?? 300);
export const FAST_TXS = Number(process.env.BENCH_FAST_TXS ?? 4);
/** 10× the chain's block rate: base makes a block every 2 s, so 5 blocks per second. */
export const SPEEDUP = 10;
const TARGET_RATE = (SPEEDUP * 1000) / NETWORK.blockTimeMs;
const BLOCK_SECONDS = NETWORK.blockTimeMs / 1000;
const FUNDED_KEY = '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80' as const;
for (const [name, n] of Object.entries({ FAST_INVOICES, FAST_BLOCKS, FAST_LIVE_BLOCKS, FAST_TXS })) {
  if (!Number.isSafeInteger(n) || n < 1) throw new Error(`BENCH_${name}=${n}: expected a positive whole number`);
}

interface Compiled {
  abi: Abi;
  bytecode: Hex;
}

/** The tests' ERC-20 (decimals given at deployment) (test/support/contracts/TestTokens.sol), compiled with the solc npm package. */
function compileTestToken(): Compiled {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const solc = require('solc') as { compile(input: string): string };
  const source = readFileSync(path.join(REPO_ROOT, 'test/support/contracts/TestTokens.sol'), 'utf8');
  const output = JSON.parse(
    solc.compile(
      JSON.stringify({
        language: 'Solidity',
        sources: { 'TestTokens.sol': { content: source } },
        settings: { evmVersion: 'cancun', outputSelection: { '*': { TestToken: ['abi', 'evm.bytecode.object'] } } },
      }),
    ),
  ) as { contracts: Record<string, Record<string, { abi: Abi; evm: { bytecode: { object: string } } }>> };
  const c = output.contracts['TestTokens.sol']?.TestToken;
  if (!c) throw new Error('solc produced no TestToken');
  return { abi: c.abi, bytecode: `0x${c.evm.bytecode.object}` };
}

export interface FastChainNode {
  process: ChildProcess;
  rpcUrl: string;
  /** The settings the system is started with for this node. */
  env: Record<string, string>;
  token: { abi: Abi; address: Address };
  stop(): void;
}

function clientsOf(rpcUrl: string) {
  const chain = defineChain({
    id: NETWORK.chainId.mainnet,
    name: `anvil as ${NETWORK.label}`,
    nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } },
  });
  const transport = viemHttp(rpcUrl, { retryCount: 3 });
  const account = privateKeyToAccount(FUNDED_KEY);
  return {
    account,
    publicClient: createPublicClient({ chain, transport }),
    wallet: createWalletClient({ chain, transport, account }),
    testClient: createTestClient({ chain, mode: 'anvil', transport }),
  };
}

/** Waits (up to ~10 s) until a just-started anvil answers JSON-RPC. */
export async function untilNodeAnswers(client: { getBlockNumber(options: { cacheTime: number }): Promise<bigint> }): Promise<void> {
  for (let i = 0; ; i++) {
    try {
      await client.getBlockNumber({ cacheTime: 0 });
      return;
    } catch (err) {
      if (i > 200) throw err;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

/** Starts anvil as the network (its chain id) and deploys its USDC; the system is then started with `env`. */
export async function startFastChainNode(anvilBin: string): Promise<FastChainNode> {
  const port = await freePort();
  const child = spawn(anvilBin, ['--port', String(port), '--host', '127.0.0.1', '--silent', '--chain-id', String(NETWORK.chainId.mainnet)], { stdio: 'ignore' });
  const rpcUrl = `http://127.0.0.1:${port}`;
  const { account, publicClient, wallet } = clientsOf(rpcUrl);
  await untilNodeAnswers(publicClient);
  const { abi, bytecode } = compileTestToken();
  const deployHash = await wallet.deployContract({ abi, bytecode, args: ['USD Coin', 'USDC', NETWORK.tokens.USDC.decimals] });
  const address = (await publicClient.waitForTransactionReceipt({ hash: deployHash, pollingInterval: 20 })).contractAddress;
  if (!address) throw new Error('the USDC deployment made no contract');
  const mint = await wallet.writeContract({ address, abi, functionName: 'mint', args: [account.address, 10n ** 15n] });
  await publicClient.waitForTransactionReceipt({ hash: mint, pollingInterval: 20 });
  const prefix = `CHAIN_${FAST_CHAIN.toUpperCase()}_`;
  return {
    process: child,
    rpcUrl,
    env: {
      [`${prefix}RPC_URL`]: rpcUrl,
      // The node answers the network's real chain id: the watcher's start-up check passes as on base.
      [`${prefix}CHAIN_ID`]: String(NETWORK.chainId.mainnet),
      [`${prefix}USDC_CONTRACT`]: address,
    },
    token: { abi, address },
    stop: () => void child.kill('SIGTERM'),
  };
}

export interface FastChainResult {
  openInvoices: number;
  backfill: { blocks: number; blocksPerSecond: number; ms: number };
  live: {
    blocks: number;
    producedPerSecond: number;
    followedPerSecond: number;
    maxLag: number;
    maxLagFirstThird: number;
    maxLagLastThird: number;
    catchUpMs: number;
  };
  pollMs: number;
  txsPerBlock: number;
  payments: { sent: number; recorded: number };
  keepsUp: boolean;
  /** The machine's 1-minute load average before and after (other work on a shared machine shows here). */
  load: { before: number; after: number };
}

/**
 * Runs both measurements. `payable` are live ETH invoices on base made through the API (paid in
 * the blocks; the first one's copies fill the open invoices up to BENCH_FAST_INVOICES).
 */
export async function runFastChain(options: {
  node: FastChainNode;
  sql: postgres.Sql;
  watcherPid: () => number;
  pollMs: number;
  payable: Array<{ id: string; address: `0x${string}`; amountExpected: number }>;
}): Promise<FastChainResult> {
  const { node, sql } = options;
  const { account, publicClient, wallet, testClient } = clientsOf(node.rpcUrl);
  const loadBefore = loadavg()[0] ?? NaN;
  // The invoices made through the API (payNetwork base) are paid; the rest are copies of one of
  // them with addresses of their own (one statement, as the Ethereum rounds load theirs), created
  // now so that the watcher's incremental read takes them in.
  const ids = options.payable.map((p) => p.id);
  const missing = FAST_INVOICES - ids.length;
  if (missing > 0) {
    const columns = (
      await sql<{ column_name: string }[]>`
        select column_name from information_schema.columns where table_schema = 'invoice' and table_name = 'invoices' order by ordinal_position`
    ).map((c) => c.column_name);
    const values = columns.map((c) =>
      c === 'id' ? 'gen_random_uuid()' : c === 'address' ? 'a.address' : c === 'address_index' ? '(1400000000 + a.n)::int' : c === 'created_at' ? 'now()' : `i.${c}`,
    );
    const addresses = Array.from({ length: missing }, () => `0x${randomBytes(20).toString('hex')}`);
    await sql.unsafe(
      `insert into invoices (${columns.join(', ')}) select ${values.join(', ')} from invoices i, unnest($1::text[]) with ordinality as a(address, n) where i.id = $2`,
      [addresses, ids[0]!],
    );
  }
  const openInvoices = Number((await sql<{ n: string }[]>`select count(*) as n from invoices where environment = 'live' and status = 'Waiting' and pay_network = ${FAST_CHAIN}`)[0]!.n);

  const cursor = async () => Number((await sql<{ height: string }[]>`select height from chain_cursors where chain = ${FAST_CHAIN}`)[0]?.height ?? -1);
  const head = async () => Number(await publicClient.getBlockNumber({ cacheTime: 0 }));
  const recorded = async () => Number((await sql<{ n: string }[]>`select count(*) as n from payments where chain = ${FAST_CHAIN}`)[0]!.n);

  await testClient.setAutomine(false);
  let nonce = await publicClient.getTransactionCount({ address: account.address, blockTag: 'pending' });
  let timestamp = Number((await publicClient.getBlock({ blockTag: 'latest' })).timestamp);
  let toPay = 0;
  let sent = 0;
  const fees = { maxFeePerGas: parseEther('0.00000005'), maxPriorityFeePerGas: 1_000_000n };
  const chainId = NETWORK.chainId.mainnet;
  /**
   * One block of base, signed ahead (the bench's own RPC work while blocks are timed is only
   * sending the raw transactions and mining): FAST_TXS transfers (ETH and USDC to fresh
   * addresses), and every tenth block a payment of one of the open invoices.
   */
  const prepareBlock = async (index: number): Promise<Hex[]> => {
    const sign = (tx: { to: Address; value?: bigint; data?: Hex; gas: bigint }) =>
      account.signTransaction({ type: 'eip1559', chainId, nonce: nonce++, ...fees, value: 0n, ...tx });
    const raw: Hex[] = [];
    for (let t = 0; t < FAST_TXS; t++) {
      const to = `0x${randomBytes(20).toString('hex')}` as Address;
      raw.push(
        t % 2 === 0
          ? await sign({ to, value: 1_000_000_000n, gas: 21_000n })
          : await sign({ to: node.token.address, data: encodeFunctionData({ abi: node.token.abi, functionName: 'transfer', args: [to, 1_000_000n] }), gas: 80_000n }),
      );
    }
    if (index % 10 === 0 && toPay < options.payable.length) {
      const invoice = options.payable[toPay++]!;
      raw.push(await sign({ to: invoice.address, value: parseEther(String(invoice.amountExpected)), gas: 21_000n }));
      sent++;
    }
    return raw;
  };
  const mineBlock = async (raw: Hex[]) => {
    await Promise.all(raw.map((serializedTransaction) => wallet.sendRawTransaction({ serializedTransaction })));
    timestamp += BLOCK_SECONDS;
    await testClient.setNextBlockTimestamp({ timestamp: BigInt(timestamp) });
    await testClient.mine({ blocks: 1 });
  };
  const waitFor = async (until: () => Promise<boolean>, stepMs: number, timeoutMs: number, what: string) => {
    const deadline = Date.now() + timeoutMs;
    while (!(await until())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, stepMs));
    }
  };

  try {
    // The watcher at the head with the open invoices taken in (its next round after their creation).
    await mineBlock(await prepareBlock(1));
    const startHead = await head();
    await waitFor(async () => (await cursor()) >= startHead, 50, 120_000, 'the watcher to reach the head');

    // 1. Backfill: the watcher paused while FAST_BLOCKS blocks are made, then resumed.
    process.kill(options.watcherPid(), 'SIGSTOP');
    const from = await head();
    for (let i = 1; i <= FAST_BLOCKS; i++) await mineBlock(await prepareBlock(i));
    const to = await head();
    const t0 = performance.now();
    process.kill(options.watcherPid(), 'SIGCONT');
    await waitFor(async () => (await cursor()) >= to, 20, 600_000, 'the backfill');
    const backfillMs = performance.now() - t0;
    const backfill = { blocks: to - from, ms: backfillMs, blocksPerSecond: (to - from) / (backfillMs / 1000) };
    console.log(`${FAST_CHAIN} backfill: ${backfill.blocks} blocks (${FAST_TXS}+ transactions each) with ${openInvoices} open invoices: ${backfill.blocksPerSecond.toFixed(0)} blocks/s (${(backfillMs / 1000).toFixed(2)} s)`);

    // 2. Live at 10× the chain's rate: a block every 1000/TARGET_RATE ms of wall time.
    const lags: number[] = [];
    const liveBlocks: Hex[][] = [];
    for (let i = 1; i <= FAST_LIVE_BLOCKS; i++) liveBlocks.push(await prepareBlock(i));
    const liveFrom = await cursor();
    const intervalMs = 1000 / TARGET_RATE;
    const started = performance.now();
    for (let i = 1; i <= FAST_LIVE_BLOCKS; i++) {
      await mineBlock(liveBlocks[i - 1]!);
      lags.push((await head()) - (await cursor()));
      const next = started + i * intervalMs;
      const wait = next - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    }
    const producedMs = performance.now() - started;
    const lastHead = await head();
    const stopAt = performance.now();
    await waitFor(async () => (await cursor()) >= lastHead, 10, 120_000, 'the watcher to follow the live blocks');
    const catchUpMs = performance.now() - stopAt;
    const followedMs = performance.now() - started;
    const third = Math.max(1, Math.floor(lags.length / 3));
    const live = {
      blocks: FAST_LIVE_BLOCKS,
      producedPerSecond: FAST_LIVE_BLOCKS / (producedMs / 1000),
      followedPerSecond: (lastHead - liveFrom) / (followedMs / 1000),
      maxLag: Math.max(...lags),
      maxLagFirstThird: Math.max(...lags.slice(0, third)),
      maxLagLastThird: Math.max(...lags.slice(-third)),
      catchUpMs,
    };
    console.log(
      `${FAST_CHAIN} live: ${live.blocks} blocks at ${live.producedPerSecond.toFixed(2)} blocks/s; watcher followed at ${live.followedPerSecond.toFixed(2)} blocks/s, ` +
        `lag ≤ ${live.maxLag} blocks (first third ≤ ${live.maxLagFirstThird}, last third ≤ ${live.maxLagLastThird}), at the head ${catchUpMs.toFixed(0)} ms after the last block`,
    );
    await waitFor(async () => (await recorded()) >= sent, 50, 60_000, 'the payments to be recorded');
    const payments = { sent, recorded: await recorded() };
    // Keeping up: the production rate met (≥ 5 blocks/s), the lag not growing over the run (the
    // last third no worse than the first, give or take one poll's worth of blocks), and the cursor
    // at the head within one poll interval (and a second of work) of the last block.
    const pollBlocks = Math.ceil((options.pollMs / 1000) * TARGET_RATE);
    const keepsUp =
      live.producedPerSecond >= TARGET_RATE * 0.95 &&
      live.maxLagLastThird <= live.maxLagFirstThird + pollBlocks &&
      catchUpMs <= options.pollMs + 1000 &&
      payments.recorded === payments.sent;
    return { openInvoices, backfill, live, pollMs: options.pollMs, txsPerBlock: FAST_TXS, payments, keepsUp, load: { before: loadBefore, after: loadavg()[0] ?? NaN } };
  } finally {
    await testClient.setAutomine(true).catch(() => undefined);
    // Close base's invoices (expired a month ago, past every monitoring window): the Ethereum rounds
    // that follow count and watch their own.
    await sql`
      update invoices set created_at = now() - interval '31 days', expired_at = now() - interval '30 days',
        status = case when status = 'Paid' then status else 'Expired' end,
        paid_at = case when status = 'Paid' then now() - interval '30 days' end
      where pay_network = ${FAST_CHAIN}`;
  }
}

/** The section of bench/results.md for this scenario. */
export function fastChainSection(r: FastChainResult): string[] {
  return [
    `## A 2-second-block network: ${NETWORK.label} at ${SPEEDUP}× its block rate (\`npm run bench:watcher\`)`,
    '',
    `Written on ${new Date().toISOString()}. Machine: ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB RAM, Node ${process.version}; both anvils, Postgres, NATS, the system's processes and the bench on this one machine.`,
    ...(process.env.BENCH_MACHINE_NOTE ? [`**${process.env.BENCH_MACHINE_NOTE}**`] : []),
    '',
    `anvil started as ${FAST_CHAIN} (\`--chain-id ${NETWORK.chainId.mainnet}\`, CHAIN_${FAST_CHAIN.toUpperCase()}_CHAIN_ID=${NETWORK.chainId.mainnet}) with a USDC of ${NETWORK.tokens.USDC.decimals} decimals; blocks mined by the bench, each timestamped ${BLOCK_SECONDS} s after the previous (the chain's block time), each with ${r.txsPerBlock} transfers (ETH and USDC to fresh addresses) and every tenth paying one of the ${r.openInvoices.toLocaleString('en')} open live invoices on ${FAST_CHAIN}. The watcher as configured by default (CHAIN_${FAST_CHAIN.toUpperCase()}_POLL_MS=${r.pollMs}, ${NETWORK.confirmations} confirmations).`,
    '',
    '| measurement | result |',
    '| --- | ---: |',
    `| backfill: ${r.backfill.blocks} blocks behind, ${r.openInvoices.toLocaleString('en')} open invoices watched | ${r.backfill.blocksPerSecond.toFixed(0)} blocks/s (${(r.backfill.ms / 1000).toFixed(2)} s); ${(r.backfill.blocksPerSecond / (1000 / NETWORK.blockTimeMs)).toFixed(0)}× the chain's rate |`,
    `| live: ${r.live.blocks} blocks mined at ${SPEEDUP}× the chain's rate (target ${TARGET_RATE} blocks/s) | produced ${r.live.producedPerSecond.toFixed(2)} blocks/s, followed ${r.live.followedPerSecond.toFixed(2)} blocks/s |`,
    `| live: cursor behind the head, max (first third / last third of the run) | ${r.live.maxLag} blocks (${r.live.maxLagFirstThird} / ${r.live.maxLagLastThird}) |`,
    `| live: at the head after the last block | ${r.live.catchUpMs.toFixed(0)} ms |`,
    `| payments sent / recorded on ${FAST_CHAIN} | ${r.payments.sent} / ${r.payments.recorded} |`,
    '',
    `\`followed\` is the height the cursor gained from the first live block until it reached the last one, over that whole time (the catch-up after the last block included). The cursor trails by up to a poll interval's worth of blocks (${r.pollMs / 1000} s × ${TARGET_RATE} blocks/s = ${(r.pollMs / 1000) * TARGET_RATE}) plus the blocks made while a round runs.`,
    '',
    `Keeps up at ${SPEEDUP}× (≥ ${TARGET_RATE} blocks/s produced, lag not growing, at the head within one poll of the last block, every payment recorded): ${r.keepsUp ? '✔' : '✘'}. Machine load (1-minute average) ${r.load.before.toFixed(1)} before, ${r.load.after.toFixed(1)} after, on ${cpus().length} cores.`,
  ];
}
