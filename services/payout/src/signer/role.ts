/**
 * The payout service's `sign` role (docs/treasury.md): `node main.js sign` serves SignerService
 * with the runtime's gRPC server (grpc.health.v1, metrics, per-RPC caller allow-list over mutual
 * TLS) and admin port; `node main.js sign migrate` applies the `signer` schema's migrations.
 *
 * Unlike the other roles it neither publishes nor consumes events: no NATS connection, no event
 * key in its pod. Its only dependency is Postgres (its own schema, and payout.payouts to read).
 */
import { isIP } from 'node:net';
import path from 'node:path';
import {
  allowCallers,
  callerPolicy,
  createDb,
  createLogger,
  HealthMonitor,
  loadConfig,
  migrate,
  packageRoot,
  pingDb,
  rpcTlsOf,
  startAdminServer,
  startRpcServer,
  type CallerName,
  type CallerPolicy,
  type Env,
  type Logger,
  type Running,
} from '@coinvoice/runtime';
import { SignerService } from '@coinvoice/runtime/gen/coinvoice/signer/v1/signer_pb';
import { Registry, collectDefaultMetrics } from 'prom-client';
import { keyMaterialHash } from '@coinvoice/chains/account-key';
import { checksumAddress, EthereumSigningKeys, ETHEREUM_ACCOUNT_PATH, SeedFileError } from '@coinvoice/chains/evm/signing-keys';
import { createSignerMetrics } from './metrics';
import { SignerRpc } from './service';
import { TRON_ACCOUNT_PATH, TronSigningKeys } from '@coinvoice/chains/tron/signing-keys';
import { TRON_NETWORK, TronSigner } from './tron';
import { isUtxoTreasuryNetwork, UtxoSigner } from './utxo-signer';
import { utxoLimitsOf } from './utxo-settings';
import { UTXO_ACCOUNT_PATHS, UtxoSigningKeys, type UtxoTreasuryNetwork } from './utxo-signing-keys';
import { autoMaximaOf } from '../settings';
import { assetLimitsOf, SIGNER_XPUB_VARIABLES, signerSettings, type SignerConfig } from './settings';
import { requireMainChainIds } from '@coinvoice/chains/evm/family';

/** The signer's Postgres schema: its own, apart from the payout service's. */
export const SIGNER_SCHEMA = 'signer';

/** The signer's one caller; audit rows of the calls the allow-list lets through name it. */
const PROCESSOR: CallerName = 'payout-processor';

/** Who may call the signer: the processor only (docs/architecture.md#internal-calls). */
export const signerCallers = allowCallers(SignerService, {
  signEvmTransaction: [PROCESSOR],
  getTreasury: [PROCESSOR],
  signUtxoTransaction: [PROCESSOR],
  signTronTransaction: [PROCESSOR],
});

export function signerMigrationsDir(): string {
  return path.join(packageRoot(__dirname), 'src', 'signer', 'migrations');
}

/** A line-sized reason the signer cannot start; main.ts prints it and exits 1. */
export class SignerStartError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SignerStartError';
  }
}

function isLoopback(host: string): boolean {
  return host === '::1' || (isIP(host) === 4 && host.startsWith('127.'));
}

/**
 * Mutual TLS, or (development only, SIGNER_ALLOW_PLAINTEXT=true) plaintext on a loopback address:
 * without a client certificate there is no caller to check, so a signer reachable from a network
 * would sign for anyone who can reach it.
 */
function requireSafeTransport(config: SignerConfig): ReturnType<typeof rpcTlsOf> {
  const tls = rpcTlsOf(config);
  if (tls) return tls;
  if (config.APP_ENV === 'production') {
    throw new SignerStartError('the signer needs mutual TLS in production: set TLS_CA_FILE, TLS_CERT_FILE and TLS_KEY_FILE');
  }
  if (!config.SIGNER_ALLOW_PLAINTEXT) {
    throw new SignerStartError('the signer serves only over mutual TLS (TLS_CA_FILE, TLS_CERT_FILE, TLS_KEY_FILE); for development on this machine only, set SIGNER_ALLOW_PLAINTEXT=true');
  }
  if (!isLoopback(config.BIND_HOST)) {
    throw new SignerStartError(`SIGNER_ALLOW_PLAINTEXT serves on a loopback address only, not BIND_HOST=${config.BIND_HOST}`);
  }
  return undefined;
}

/** The seed's account key must be every configured INVOICE_XPUB_<COIN> (docs/treasury.md#keys). */
export function requireMatchingXpubs(config: SignerConfig, keys: EthereumSigningKeys): void {
  const configured = SIGNER_XPUB_VARIABLES.filter((variable) => config[variable] !== '');
  if (configured.length === 0) {
    throw new SignerStartError(`set ${SIGNER_XPUB_VARIABLES.join(', ')} (at least one): the signer checks its seed's ${ETHEREUM_ACCOUNT_PATH} key against the invoice service's`);
  }
  const differing = configured.filter((variable) => keyMaterialHash(config[variable]) !== keys.accountKeyMaterial);
  if (differing.length > 0) {
    throw new SignerStartError(
      `${differing.join(', ')} ${differing.length === 1 ? 'is' : 'are'} not the ${ETHEREUM_ACCOUNT_PATH} key of the mnemonic in SIGNER_SEED_FILE: ` +
        'the signer would hold other keys than the invoice service gives out addresses for',
    );
  }
}

/**
 * The Tron keys when INVOICE_XPUB_TRX is configured, and then only if the seed's m/44'/195'/0' is
 * that key (docs/treasury.md#tron); without it the signer signs no Tron transaction.
 */
export function tronSigningKeysOf(config: { SIGNER_SEED_FILE: string; INVOICE_XPUB_TRX: string }): TronSigningKeys | undefined {
  if (config.INVOICE_XPUB_TRX === '') return undefined;
  const keys = TronSigningKeys.fromSeedFile(config.SIGNER_SEED_FILE);
  if (keyMaterialHash(config.INVOICE_XPUB_TRX) !== keys.accountKeyMaterial) {
    throw new SignerStartError(
      `INVOICE_XPUB_TRX is not the ${TRON_ACCOUNT_PATH} key of the mnemonic in SIGNER_SEED_FILE: the signer would hold other keys than the invoice service gives out Tron addresses for`,
    );
  }
  return keys;
}

/**
 * The seed's BIP84 accounts must be the configured INVOICE_XPUB_BTC / INVOICE_XPUB_LTC (an unset
 * one is not compared: that coin's deposits are then not the invoice service's, docs/treasury.md#keys).
 */
export function requireMatchingUtxoXpubs(config: SignerConfig, keys: Readonly<Record<UtxoTreasuryNetwork, UtxoSigningKeys>>): void {
  const pairs = [
    ['INVOICE_XPUB_BTC', keys.bitcoin],
    ['INVOICE_XPUB_LTC', keys.litecoin],
  ] as const;
  const differing = pairs.filter(([variable, key]) => config[variable] !== '' && keyMaterialHash(config[variable]) !== key.accountKeyMaterial);
  if (differing.length > 0) {
    throw new SignerStartError(
      differing.map(([variable, key]) => `${variable} is not the ${UTXO_ACCOUNT_PATHS[key.network]} key of the mnemonic in SIGNER_SEED_FILE`).join('; ') +
        ': the signer would hold other keys than the invoice service gives out addresses for',
    );
  }
}

/**
 * `main.js sign xpub [ethereum|bitcoin|litecoin|tron]`: an account's extended public key, for
 * INVOICE_XPUB_ETH/_USDT/_USDC (ethereum, the default), INVOICE_XPUB_BTC, _LTC or _TRX (the invoice
 * service must give out addresses the signer can spend). Public: printing it reveals no key,
 * though it does reveal every address of the account.
 */
export function signerAccountXpub(env: Env = process.env, network?: string): string {
  const file = env.SIGNER_SEED_FILE ?? '';
  if (file === '') throw new SeedFileError('SIGNER_SEED_FILE is not set');
  if (network === undefined || network === 'ethereum') return EthereumSigningKeys.fromSeedFile(file).accountXpub;
  if (isUtxoTreasuryNetwork(network)) return UtxoSigningKeys.fromSeedFile(network, file).accountXpub;
  // m/44'/195'/0', for INVOICE_XPUB_TRX (docs/treasury.md#tron).
  if (network === TRON_NETWORK) return TronSigningKeys.fromSeedFile(file).accountXpub;
  throw new SignerStartError(`no account xpub for network ${network} (ethereum, bitcoin, litecoin, tron)`);
}

export async function migrateSigner(env: Env = process.env): Promise<void> {
  const config = loadConfig({ DATABASE_URL: signerSettings.DATABASE_URL, APP_ENV: signerSettings.APP_ENV, LOG_LEVEL: signerSettings.LOG_LEVEL }, env);
  const logger = createLogger({ service: 'payout-signer', level: config.LOG_LEVEL });
  const sql = createDb({ url: config.DATABASE_URL, schema: SIGNER_SCHEMA, max: 1 });
  try {
    await migrate(sql, { schema: SIGNER_SCHEMA, dir: signerMigrationsDir(), logger });
  } finally {
    await sql.end({ timeout: 5 });
  }
}

/** Starts the signer; resolves once it serves. */
export async function startSigner(env: Env = process.env): Promise<{ running: Running; logger: Logger; grpcPort: number; adminPort: number; grpcHealthPort?: number }> {
  const config = loadConfig(signerSettings, env);
  // It signs transactions for CHAIN_ETHEREUM_CHAIN_ID: in production, the main chain's only.
  requireMainChainIds(config);
  const tls = requireSafeTransport(config);
  const keys = EthereumSigningKeys.fromSeedFile(config.SIGNER_SEED_FILE);
  requireMatchingXpubs(config, keys);
  const tronKeys = tronSigningKeysOf(config);
  const utxoKeys = { bitcoin: UtxoSigningKeys.fromSeedFile('bitcoin', config.SIGNER_SEED_FILE), litecoin: UtxoSigningKeys.fromSeedFile('litecoin', config.SIGNER_SEED_FILE) };
  requireMatchingUtxoXpubs(config, utxoKeys);

  const logger = createLogger({ service: 'payout-signer', level: config.LOG_LEVEL });
  const metrics = new Registry();
  collectDefaultMetrics({ register: metrics });
  const signerMetrics = createSignerMetrics(metrics);
  const sql = createDb({ url: config.DATABASE_URL, schema: SIGNER_SCHEMA, max: config.DATABASE_POOL_MAX, applicationName: 'payout-signer', logger });

  const caller = tls ? PROCESSOR : 'plaintext';
  const autoMax = autoMaximaOf(config);
  const rpc = new SignerRpc({
    sql,
    keys,
    utxo: new UtxoSigner({ sql, keys: utxoKeys, limits: utxoLimitsOf(config), autoMax, metrics: signerMetrics, logger, caller }),
    metrics: signerMetrics,
    logger,
    caller,
    autoMax,
    tron: new TronSigner({
      sql,
      keys: tronKeys,
      autoMax,
      policy: {
        usdtContract: config.CHAIN_TRON_USDT_CONTRACT,
        maxFeeLimitSun: config.SIGNER_MAX_FEE_LIMIT_SUN,
        maxExpirationMs: config.SIGNER_TRON_MAX_EXPIRATION,
        assets: {
          TRX: { maxPayout: config.SIGNER_MAX_PAYOUT_TRX, dailyLimit: config.SIGNER_DAILY_LIMIT_TRX },
          USDT: { maxPayout: config.SIGNER_MAX_PAYOUT_USDT, dailyLimit: config.SIGNER_DAILY_LIMIT_USDT },
        },
      },
    }),
    policy: {
      chainId: config.CHAIN_ETHEREUM_CHAIN_ID,
      maxFeePerGas: config.SIGNER_MAX_FEE_PER_GAS_WEI,
      maxPriorityFeePerGas: config.SIGNER_MAX_PRIORITY_FEE_PER_GAS_WEI,
      maxGasLimit: config.SIGNER_MAX_GAS_LIMIT,
      maxGasTopUpWei: config.SIGNER_MAX_GAS_TOP_UP_WEI,
      dailyFeeLimitWei: config.SIGNER_DAILY_FEE_LIMIT_WEI,
      dailyGasTopUpLimitWei: config.SIGNER_DAILY_GAS_TOP_UP_LIMIT_WEI,
      assets: assetLimitsOf(config),
      // The contract settings accept 0x + 40 hex digits only: each has an EIP-55 form.
      contracts: { USDT: checksumAddress(config.CHAIN_ETHEREUM_USDT_CONTRACT)!, USDC: checksumAddress(config.CHAIN_ETHEREUM_USDC_CONTRACT)! },
    },
  });
  const allowed = callerPolicy(signerCallers);
  // A caller the allow-list turns away is a refusal like any other: audited and counted.
  const authorize: CallerPolicy = (procedure, caller) => {
    if (allowed(procedure, caller)) return true;
    const who = caller.names.length > 0 ? caller.names.join(',') : 'anonymous';
    rpc
      .refuse(refusedCallerEntry(who, procedure), 'caller_not_allowed', `caller ${who} may not call ${procedure}`)
      .catch((err: unknown) => logger.error({ err }, 'could not audit a refused caller'));
    return false;
  };

  const health = new HealthMonitor([SignerService.typeName], [{ name: 'postgres', check: () => pingDb(sql) }]);
  const server = await startRpcServer({
    host: config.BIND_HOST,
    port: config.GRPC_PORT,
    routes: (router) => router.service(SignerService, rpc),
    health,
    logger,
    metrics,
    tls,
    authorize: tls ? authorize : undefined,
    healthPort: tls && config.GRPC_HEALTH_PORT > 0 ? config.GRPC_HEALTH_PORT : undefined,
  });
  const admin = await startAdminServer({ host: config.BIND_HOST, port: config.ADMIN_PORT, metrics, readiness: () => health.report() });
  logger.info(
    { grpcPort: server.port, adminPort: admin.port, treasury: keys.treasuryAddress, tronTreasury: tronKeys?.treasuryAddress, mutualTls: tls !== undefined, chainId: config.CHAIN_ETHEREUM_CHAIN_ID },
    'payout signer serving',
  );
  return {
    logger,
    grpcPort: server.port,
    adminPort: admin.port,
    grpcHealthPort: server.healthPort,
    running: {
      async stop() {
        health.markShuttingDown();
        await server.close(config.SHUTDOWN_GRACE_MS);
        await admin.close();
        await sql.end({ timeout: 5 });
      },
    },
  };
}

function refusedCallerEntry(caller: string, procedure: string) {
  return {
    outcome: 'refused' as const,
    caller,
    network: null,
    purpose: null,
    payoutId: null,
    addressIndex: null,
    asset: null,
    fromAddress: null,
    toAddress: null,
    recipient: null,
    amount: null,
    chainId: null,
    nonce: null,
    gasLimit: null,
    maxFeePerGas: null,
    transactionHash: null,
    rule: 'caller_not_allowed',
    reason: procedure,
  };
}
