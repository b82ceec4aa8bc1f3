/**
 * A real Ethereum node for tests: anvil from the npm package `@foundry-rs/anvil-linux-amd64`, on a
 * free port, with viem clients, and test contracts compiled from source (test/support/contracts)
 * with the `solc` npm package: an ERC-20 of 6 decimals, or 18 as on bsc (deployed twice, as "USDT" and
 * "USDC") and a contract that makes two transfers in one transaction. Each anvil runs the chain id
 * it is given (31337 by default, anvil's own), so several EVM networks can run side by side.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import {
  createPublicClient,
  createTestClient,
  createWalletClient,
  http,
  parseEther,
  type Abi,
  type Address,
  type Hash,
  type Hex,
} from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { foundry } from 'viem/chains';
import { defineChain } from 'viem';
import { freePortForTest } from './ports';

const ANVIL_BIN = path.join(path.dirname(require.resolve('@foundry-rs/anvil-linux-amd64/package.json')), 'bin', 'anvil');
/** anvil's first funded development account (the well-known "test test … junk" mnemonic). */
export const FUNDED_KEY: Hex = '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80';

interface Compiled {
  abi: Abi;
  bytecode: Hex;
}

let compiled: Record<'TestToken' | 'Batcher', Compiled> | undefined;

/** Compiles test/support/contracts/TestTokens.sol once per process. */
export function compileTestContracts(): Record<'TestToken' | 'Batcher', Compiled> {
  if (compiled) return compiled;
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const solc = require('solc') as { compile(input: string): string };
  const source = readFileSync(path.join(__dirname, 'contracts', 'TestTokens.sol'), 'utf8');
  const output = JSON.parse(
    solc.compile(
      JSON.stringify({
        language: 'Solidity',
        sources: { 'TestTokens.sol': { content: source } },
        settings: { evmVersion: 'cancun', outputSelection: { '*': { '*': ['abi', 'evm.bytecode.object'] } } },
      }),
    ),
  ) as { errors?: { severity: string; formattedMessage: string }[]; contracts: Record<string, Record<string, { abi: Abi; evm: { bytecode: { object: string } } }>> };
  const errors = (output.errors ?? []).filter((e) => e.severity === 'error');
  if (errors.length > 0) throw new Error(errors.map((e) => e.formattedMessage).join('\n'));
  const pick = (name: string): Compiled => {
    const c = output.contracts['TestTokens.sol']?.[name];
    if (!c) throw new Error(`solc produced no ${name}`);
    return { abi: c.abi, bytecode: `0x${c.evm.bytecode.object}` };
  };
  compiled = { TestToken: pick('TestToken'), Batcher: pick('Batcher') };
  return compiled;
}

export interface Anvil {
  url: string;
  port: number;
  /** The EIP-155 chain id it runs (`--chain-id`). */
  chainId: number;
  process: ChildProcess;
  publicClient: ReturnType<typeof makeClients>['publicClient'];
  wallet: ReturnType<typeof makeClients>['wallet'];
  testClient: ReturnType<typeof makeClients>['testClient'];
  account: Address;
  stop(): Promise<void>;
}

function makeClients(url: string, chainId: number) {
  const account = privateKeyToAccount(FUNDED_KEY);
  const transport = http(url, { retryCount: 0 });
  const chain = defineChain({ ...foundry, id: chainId, name: `anvil ${chainId}` });
  return {
    account,
    publicClient: createPublicClient({ chain, transport }),
    wallet: createWalletClient({ chain, transport, account }),
    testClient: createTestClient({ chain, mode: 'anvil', transport }),
  };
}

/** anvil's default chain id (what `CHAIN_ETHEREUM_CHAIN_ID` must say for a watcher of a default anvil). */
export const ANVIL_CHAIN_ID = 31337;

/**
 * Starts anvil on a free port (auto-mining: every transaction gets a block of its own), running
 * `chainId` (default anvil's 31337; 8453 for a "Base" node, 56 for "bsc"…).
 */
export async function startAnvil(options: number | { port?: number; chainId?: number } = {}): Promise<Anvil> {
  const { port, chainId = ANVIL_CHAIN_ID } = typeof options === 'number' ? { port: options } : options;
  const chosen = port ?? (await freePortForTest());
  const child = spawn(ANVIL_BIN, ['--port', String(chosen), '--host', '127.0.0.1', '--silent', '--chain-id', String(chainId)], { stdio: 'ignore' });
  const url = `http://127.0.0.1:${chosen}`;
  const clients = makeClients(url, chainId);
  const deadline = Date.now() + 15_000;
  for (;;) {
    try {
      await clients.publicClient.getBlockNumber();
      break;
    } catch (err) {
      if (Date.now() > deadline || child.exitCode !== null) throw new Error(`anvil did not start on ${url}: ${String(err)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  return {
    url,
    port: chosen,
    chainId,
    process: child,
    publicClient: clients.publicClient,
    wallet: clients.wallet,
    testClient: clients.testClient,
    account: clients.account.address,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

export interface Tokens {
  usdt: Address;
  usdc: Address;
  batcher: Address;
}

async function deploy(anvil: Anvil, contract: Compiled, args: unknown[]): Promise<Address> {
  const hash = await anvil.wallet.deployContract({ abi: contract.abi, bytecode: contract.bytecode, args });
  const receipt = await anvil.publicClient.waitForTransactionReceipt({ hash, pollingInterval: 50 });
  if (!receipt.contractAddress) throw new Error('deployment without a contract address');
  return receipt.contractAddress;
}

/**
 * Deploys "USDT", "USDC" (of `decimals`: 6 by default, 18 for bsc's) and the Batcher, and mints the
 * funded account 1,000,000 of each token.
 */
export async function deployTokens(anvil: Anvil, options: { decimals?: number } = {}): Promise<Tokens> {
  const decimals = options.decimals ?? 6;
  const { TestToken, Batcher } = compileTestContracts();
  const usdt = await deploy(anvil, TestToken, ['Tether USD', 'USDT', decimals]);
  const usdc = await deploy(anvil, TestToken, ['USD Coin', 'USDC', decimals]);
  const batcher = await deploy(anvil, Batcher, []);
  for (const token of [usdt, usdc]) {
    await mined(anvil, await anvil.wallet.writeContract({ address: token, abi: TestToken.abi, functionName: 'mint', args: [anvil.account, 1_000_000n * 10n ** BigInt(decimals)] }));
    await mined(anvil, await anvil.wallet.writeContract({ address: token, abi: TestToken.abi, functionName: 'approve', args: [batcher, 2n ** 255n] }));
  }
  return { usdt, usdc, batcher };
}

/** Waits for a transaction's receipt; returns its block number. */
export async function mined(anvil: Anvil, hash: Hash): Promise<bigint> {
  const receipt = await anvil.publicClient.waitForTransactionReceipt({ hash, pollingInterval: 50 });
  if (receipt.status !== 'success') throw new Error(`transaction ${hash} reverted`);
  return receipt.blockNumber;
}

/** A token amount (decimal string, 6 decimals) in base units. */
export const tokenUnits = (amount: string): bigint => {
  const [whole = '0', fraction = ''] = amount.split('.');
  return BigInt(whole) * 10n ** 6n + BigInt(fraction.padEnd(6, '0').slice(0, 6));
};

export async function sendEth(anvil: Anvil, to: string, ether: string): Promise<Hash> {
  const hash = await anvil.wallet.sendTransaction({ to: to as Address, value: parseEther(ether) });
  await mined(anvil, hash);
  return hash;
}

/** A token transfer of exactly `units` base units (18-decimal tokens, amounts off by one unit). */
export async function sendTokenUnits(anvil: Anvil, token: Address, to: string, units: bigint): Promise<Hash> {
  const hash = await anvil.wallet.writeContract({ address: token, abi: compileTestContracts().TestToken.abi, functionName: 'transfer', args: [to as Address, units] });
  await mined(anvil, hash);
  return hash;
}

export async function sendToken(anvil: Anvil, token: Address, to: string, amount: string): Promise<Hash> {
  const hash = await anvil.wallet.writeContract({ address: token, abi: compileTestContracts().TestToken.abi, functionName: 'transfer', args: [to as Address, tokenUnits(amount)] });
  await mined(anvil, hash);
  return hash;
}

/** Two token transfers in one transaction (the Batcher). */
export async function payTwo(anvil: Anvil, tokens: Tokens, token: Address, a: string, x: string, b: string, y: string): Promise<Hash> {
  const hash = await anvil.wallet.writeContract({
    address: tokens.batcher,
    abi: compileTestContracts().Batcher.abi,
    functionName: 'payTwo',
    args: [token, a as Address, tokenUnits(x), b as Address, tokenUnits(y)],
  });
  await mined(anvil, hash);
  return hash;
}

/** Mines `blocks` empty blocks. */
export async function mine(anvil: Anvil, blocks: number): Promise<void> {
  await anvil.testClient.mine({ blocks });
}

/** ETH to two addresses through the Batcher: internal transfers, invisible to a scan of transaction recipients. */
export async function forwardEthTwo(anvil: Anvil, tokens: Tokens, a: string, x: string, b: string, y: string): Promise<Hash> {
  const hash = await anvil.wallet.writeContract({
    address: tokens.batcher,
    abi: compileTestContracts().Batcher.abi,
    functionName: 'forwardTwo',
    args: [a as Address, parseEther(x), b as Address, parseEther(y)],
    value: parseEther(x) + parseEther(y),
  });
  await mined(anvil, hash);
  return hash;
}
