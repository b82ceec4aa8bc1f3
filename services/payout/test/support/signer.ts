/**
 * What the signer tests share: a fixed test mnemonic and what derives from it (the account xpub to
 * pass as INVOICE_XPUB_ETH, the treasury and deposit addresses, and every secret a leak check looks
 * for), a database with the payout and signer schemas migrated and the signer's restricted role
 * (services/payout/src/signer/role.sql, renamed per test), payout rows written as the payout service
 * stores them, and EIP-1559 request builders.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync, writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { HDKey } from '@scure/bip32';
import { entropyToMnemonic, mnemonicToSeedSync } from '@scure/bip39';
import { wordlist } from '@scure/bip39/wordlists/english';
import postgres from 'postgres';
import { getAddress, type Address, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { create } from '@bufbuild/protobuf';
import { migrateService } from '@coinvoice/runtime';
import { SignEvmTransactionRequestSchema, type SignEvmTransactionRequest } from '@coinvoice/runtime/gen/coinvoice/signer/v1/signer_pb';
import { createTestDatabase, testDatabaseServerUrl, uniqueName, type TestDatabase } from '../../../../test/support/infra';
import { payoutService } from '../../src/server';
import { migrateSigner, startSigner } from '../../src/signer/role';

/** A fixed 12-word mnemonic of its own (not anvil's), so the test knows every secret to look for. */
export const TEST_MNEMONIC = entropyToMnemonic(Buffer.from('d5a1c3e97f0b42886c1e93a5f7d20b4e', 'hex'), wordlist);

const account = HDKey.fromMasterSeed(mnemonicToSeedSync(TEST_MNEMONIC)).derive("m/44'/60'/0'");
const hex = (bytes: Uint8Array | null): Hex => `0x${Buffer.from(bytes!).toString('hex')}`;

export const TEST_ACCOUNT_XPUB = account.publicExtendedKey;
export const TEST_TREASURY_KEY = hex(account.deriveChild(1).deriveChild(0).privateKey);
export const TEST_TREASURY: Address = privateKeyToAccount(TEST_TREASURY_KEY).address;
/** The test seed's BIP84 account keys (m/84'/0'/0', m/84'/2'/0'): INVOICE_XPUB_BTC / _LTC of the signer tests. */
export const testUtxoAccount = (network: 'bitcoin' | 'litecoin'): HDKey =>
  HDKey.fromMasterSeed(mnemonicToSeedSync(TEST_MNEMONIC)).derive(network === 'bitcoin' ? "m/84'/0'/0'" : "m/84'/2'/0'");
export const TEST_BTC_XPUB = testUtxoAccount('bitcoin').publicExtendedKey;
export const TEST_LTC_XPUB = testUtxoAccount('litecoin').publicExtendedKey;
export const depositKeyOf = (index: number): Hex => hex(account.deriveChild(0).deriveChild(index).privateKey);
export const depositAddressOf = (index: number): Address => privateKeyToAccount(depositKeyOf(index)).address;

/** Every secret that must never leave the signer: the phrase, its words, the seed, the private keys. */
export function secretsOfTestSeed(depositIndexes: readonly number[]): string[] {
  const seedHex = Buffer.from(mnemonicToSeedSync(TEST_MNEMONIC)).toString('hex');
  const keys = [TEST_TREASURY_KEY, ...depositIndexes.map(depositKeyOf), hex(account.privateKey)].map((k) => k.slice(2));
  return [TEST_MNEMONIC, ...TEST_MNEMONIC.split(' '), seedHex, account.privateExtendedKey, ...keys];
}

/** A seed file holding the test mnemonic (as an operator writes it: a trailing newline). */
export function writeSeedFile(mnemonic = TEST_MNEMONIC): { file: string; remove(): void } {
  const dir = mkdtempSync(path.join(tmpdir(), 'coinvoice-seed-'));
  const file = path.join(dir, 'mnemonic');
  writeFileSync(file, `${mnemonic}\n`, { mode: 0o600 });
  return { file, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

export interface SignerDatabase {
  database: TestDatabase;
  /** The database as its owner (payout and signer schemas). */
  owner: postgres.Sql;
  /** DATABASE_URL of the signer's restricted role. */
  signerUrl: string;
  role: string;
  dispose(): Promise<void>;
}

/** A fresh database: payout and signer migrations applied as the owner, and the signer's role per role.sql. */
export async function prepareSignerDatabase(): Promise<SignerDatabase> {
  const database = await createTestDatabase('cvsigner');
  const env = { APP_ENV: 'development', DATABASE_URL: database.url, LOG_LEVEL: 'silent' };
  await migrateService(payoutService, env);
  await migrateSigner(env);
  const role = uniqueName('signer_role');
  const grants = readFileSync(path.join(__dirname, '../../src/signer/role.sql'), 'utf8').replaceAll('coinvoice_signer', role);
  const owner = postgres(database.url, { max: 2, onnotice: () => undefined });
  await owner.unsafe(grants);
  const url = new URL(database.url);
  url.username = role;
  url.password = '';
  return {
    database,
    owner,
    signerUrl: url.toString(),
    role,
    async dispose() {
      await owner.end({ timeout: 5 });
      await database.drop().catch(() => undefined);
      const admin = postgres(testDatabaseServerUrl(), { max: 1, onnotice: () => undefined });
      await admin.unsafe(`drop role if exists "${role}"`).catch(() => undefined);
      await admin.end({ timeout: 5 });
    },
  };
}

export interface PayoutRowInput {
  asset?: 'ETH' | 'USDT' | 'USDC' | 'BTC' | 'LTC' | 'TRX';
  amount?: string;
  address?: string;
  environment?: 'live' | 'sandbox';
  status?: 'AwaitingVerification' | 'Pending' | 'Completed' | 'Rejected' | 'Cancelled';
  verified?: boolean;
  /** An operator's Approve (payouts.approved_at); default true. */
  approved?: boolean;
  /** Default ethereum. */
  network?: string;
}

/** Writes a payout as the payout service stores a verified live one (by default), and returns it. */
export async function insertPayout(owner: postgres.Sql, input: PayoutRowInput = {}) {
  const payout = {
    id: randomUUID(),
    asset: input.asset ?? 'ETH',
    amount: input.amount ?? '0.25',
    network: input.network ?? 'ethereum',
    // EIP-55, as the payout service stores an Ethereum destination (a BTC one is returned as given).
    address: (input.address ?? freshAddress()) as Address,
    environment: input.environment ?? 'live',
    status: input.status ?? 'Pending',
    verified: input.verified ?? true,
    approved: input.approved ?? true,
  };
  const awaiting = payout.status === 'AwaitingVerification';
  await owner`
    insert into payout.payouts (id, project_id, environment, amount, currency, network, address, status, code_hash, code_salt,
                                code_expires_at, code_attempts_left, created_at, updated_at, verified_at, claimed_at, claimed_by, approved_at, approved_by)
    values (${payout.id}, ${randomUUID()}, ${payout.environment}, ${payout.amount}::numeric, ${payout.asset}, ${payout.network}, ${payout.address},
            ${payout.status}, ${awaiting ? Buffer.alloc(32, 1) : null}, ${awaiting ? Buffer.alloc(16, 2) : null},
            now() + interval '15 minutes', 5, now(), now(), ${payout.verified ? new Date() : null},
            ${payout.status === 'Pending' && payout.verified ? new Date() : null}, ${payout.status === 'Pending' && payout.verified ? 'processor:ethereum' : null},
            ${payout.approved ? new Date() : null}, ${payout.approved ? 'test-operator' : null})`;
  return payout;
}

/** A new EIP-55 address nobody holds a key of (as a merchant's payout destination). */
export function freshAddress(): Address {
  return getAddress(`0x${randomUUID().replaceAll('-', '')}${randomUUID().replaceAll('-', '').slice(0, 8)}`);
}

export interface TransactionFields {
  chainId?: bigint;
  nonce?: bigint;
  to: string;
  value?: bigint;
  data?: Hex;
  gasLimit?: bigint;
  maxFeePerGas?: bigint;
  maxPriorityFeePerGas?: bigint;
}

function transactionOf(fields: TransactionFields) {
  return {
    chainId: fields.chainId ?? 31337n,
    nonce: fields.nonce ?? 0n,
    to: fields.to,
    value: (fields.value ?? 0n).toString(),
    data: fields.data ?? '0x',
    gasLimit: fields.gasLimit ?? 90_000n,
    maxFeePerGas: (fields.maxFeePerGas ?? 20_000_000_000n).toString(),
    maxPriorityFeePerGas: (fields.maxPriorityFeePerGas ?? 1_000_000_000n).toString(),
  };
}

export function payoutRequest(payoutId: string, fields: TransactionFields): SignEvmTransactionRequest {
  return create(SignEvmTransactionRequestSchema, { network: 'ethereum', purpose: { case: 'payout', value: { payoutId } }, transaction: transactionOf(fields) });
}

export function sweepRequest(addressIndex: number, asset: string, fields: TransactionFields): SignEvmTransactionRequest {
  return create(SignEvmTransactionRequestSchema, { network: 'ethereum', purpose: { case: 'sweep', value: { addressIndex, asset } }, transaction: transactionOf(fields) });
}

export function gasTopUpRequest(addressIndex: number, fields: TransactionFields): SignEvmTransactionRequest {
  return create(SignEvmTransactionRequestSchema, { network: 'ethereum', purpose: { case: 'gasTopUp', value: { addressIndex } }, transaction: transactionOf(fields) });
}

export interface TestSigner {
  /** gRPC base URL: https:// with mutual TLS, http:// in plaintext. */
  url: string;
  adminUrl: string;
  /** The treasury address of the seed (account/1/0). */
  treasury: Address;
  stop(): Promise<void>;
}

/**
 * The signer in this process on `databaseUrl` (which must hold the payout schema: it reads
 * payout.payouts), with the test seed, its signer schema migrated; for other roles' tests (the
 * processor's). Mutual TLS when `tls` names its server certificate and CA, else plaintext on
 * loopback (SIGNER_ALLOW_PLAINTEXT). `env` adds or overrides settings (CHAIN_ETHEREUM_CHAIN_ID,
 * the contracts, limits).
 */
export async function startTestSigner(options: {
  databaseUrl: string;
  /** Who applies the signer migrations (the schema's owner), when the signer runs as a restricted role. Default databaseUrl. */
  ownerDatabaseUrl?: string;
  tls?: { caFile: string; certFile: string; keyFile: string };
  env?: NodeJS.ProcessEnv;
  /** Another test mnemonic than TEST_MNEMONIC (INVOICE_XPUB_ETH follows it). */
  mnemonic?: string;
}): Promise<TestSigner> {
  const mnemonic = options.mnemonic ?? TEST_MNEMONIC;
  const accountKey = HDKey.fromMasterSeed(mnemonicToSeedSync(mnemonic)).derive("m/44'/60'/0'");
  const seedFile = writeSeedFile(mnemonic);
  const env: NodeJS.ProcessEnv = {
    APP_ENV: 'development',
    DATABASE_URL: options.databaseUrl,
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    GRPC_PORT: '0',
    ADMIN_PORT: '0',
    SIGNER_SEED_FILE: seedFile.file,
    INVOICE_XPUB_ETH: accountKey.publicExtendedKey,
    INVOICE_XPUB_BTC: HDKey.fromMasterSeed(mnemonicToSeedSync(mnemonic)).derive("m/84'/0'/0'").publicExtendedKey,
    CHAIN_ETHEREUM_CHAIN_ID: '31337',
    ...(options.tls
      ? { TLS_CA_FILE: options.tls.caFile, TLS_CERT_FILE: options.tls.certFile, TLS_KEY_FILE: options.tls.keyFile }
      : { SIGNER_ALLOW_PLAINTEXT: 'true' }),
    ...options.env,
  };
  await migrateSigner({ ...env, DATABASE_URL: options.ownerDatabaseUrl ?? options.databaseUrl });
  const started = await startSigner(env).catch((err: unknown) => {
    seedFile.remove();
    throw err;
  });
  return {
    url: `${options.tls ? 'https' : 'http'}://127.0.0.1:${started.grpcPort}`,
    adminUrl: `http://127.0.0.1:${started.adminPort}`,
    treasury: privateKeyToAccount(hex(accountKey.deriveChild(1).deriveChild(0).privateKey)).address,
    async stop() {
      await started.running.stop();
      seedFile.remove();
    },
  };
}
