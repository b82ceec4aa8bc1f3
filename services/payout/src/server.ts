import { requireMainChainIds } from '@coinvoice/chains/evm/family';
import { allowCallers, createRpcClient, PostgresRateLimitStore, rateLimitCleaner, streamSettingsOf, type ServiceDefinition } from '@coinvoice/runtime';
import { AuthService } from '@coinvoice/runtime/gen/coinvoice/auth/v1/auth_pb';
import { InvoiceService } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/invoice_pb';
import { NotifierService } from '@coinvoice/runtime/gen/coinvoice/notifier/v1/notifier_pb';
import { PayoutService } from '@coinvoice/runtime/gen/coinvoice/payout/v1/payout_pb';
import { payoutChainCheck } from '@coinvoice/chains/payout-verification';
import { ledgerConsumer } from './events/ledger-consumer';
import { PayoutHandlers } from './handlers';
import { LedgerInvariantWorker, type LedgerCheckDeps } from './invariants/ledger-check';
import { createPayoutMetrics } from './metrics';
import { autoMaximaOf, payoutSettings } from './settings';
import { CodeExpirySweeper } from './sweeper';
import { EthereumTreasuryBalances, TronTreasuryBalances, UtxoTreasuryBalances } from './treasury';
import { payoutSchema } from './schema';
import { houseAddressLookup } from './house-addresses';
import { AutoSweepDestinationCheck } from './auto-sweep';

export { payoutSettings } from './settings';

/** The payout service process: what it serves and the background work it runs. */
export const payoutService: ServiceDefinition<typeof payoutSettings> = {
  ...payoutSchema,
  rpcServices: [PayoutService.typeName],
  // Only the gateway; operator actions also carry the operator's token, verified again here.
  callers: [
    allowCallers(PayoutService, {
      getBalance: ['gateway'],
      requestPayout: ['gateway'],
      verifyPayout: ['gateway'],
      listPayouts: ['gateway'],
      cancelPayout: ['gateway'],
      claimPayout: ['gateway'],
      completePayout: ['gateway'],
      rejectPayout: ['gateway'],
      // The operators' queue (the gateway's admin route checks the operator's token).
      listAllPayouts: ['gateway'],
      // Operators' "check the ledger now" (the gateway's admin route checks the operator's token).
      checkLedgerInvariants: ['gateway'],
      creditMissing: ['gateway'],
      getPayout: ['gateway'],
      getAutoSweep: ['gateway'],
      setAutoSweep: ['gateway'],
      verifyAutoSweep: ['gateway'],
      // The treasury's operator routes (docs/treasury.md); each carries the operator's token.
      approvePayout: ['gateway'],
      listSweepTasks: ['gateway'],
      getTreasury: ['gateway'],
      setTreasuryPaused: ['gateway'],
    }),
  ],
  settings: payoutSettings,
  // The manual Complete is checked on each network's node: in production, its main chain only.
  checkConfig: requireMainChainIds,
  // The ledger credits invoice.paid / invoice.late_payment only when the invoice service signed them.
  consumesEventsOf: ['invoice'],
  build({ config, sql, logger, metrics: registry, rpcTls, eventVerifier }) {
    const metrics = createPayoutMetrics(registry);
    // A short deadline: RequestPayout waits for it before answering.
    const auth = createRpcClient(AuthService, config.AUTH_URL, { timeoutMs: 3_000, tls: rpcTls });
    // The email is sent inside RequestPayout's transaction: SMTP may take a few seconds.
    const notifier = createRpcClient(NotifierService, config.NOTIFIER_URL, { timeoutMs: 15_000, tls: rpcTls });
    // A page of invoices' credits at a time: a slow answer only delays the hourly check.
    const invoices = createRpcClient(InvoiceService, config.INVOICE_URL, { timeoutMs: 30_000, tls: rpcTls });
    // Asked by RequestPayout before it answers: a short deadline, as for auth.
    const invoicesNow = createRpcClient(InvoiceService, config.INVOICE_URL, { timeoutMs: 3_000, tls: rpcTls });
    const houseAddress = houseAddressLookup(sql, invoicesNow);
    const ledgerCheck: LedgerCheckDeps = {
      sql,
      reportedCredits: (afterInvoiceId) => invoices.listLedgerCredits({ afterInvoiceId }),
      graceMs: config.LEDGER_CHECK_GRACE_MS,
      logger: logger.child({ component: 'ledger-invariants' }),
      onViolation: (kind) => metrics.ledgerInvariantViolations.inc({ kind }),
    };
    const handlers = new PayoutHandlers({
      sql,
      auth,
      notifier,
      logger,
      codeTtlMs: config.PAYOUT_CODE_TTL_MS,
      maxOpenUnverified: config.PAYOUT_MAX_OPEN_UNVERIFIED,
      rateLimits: {
        store: new PostgresRateLimitStore(sql),
        verifyPerProject: config.RATE_LIMIT_PAYOUT_VERIFY_PER_PROJECT,
        requestPerProject: config.RATE_LIMIT_PAYOUT_REQUEST_PER_PROJECT,
        autoSweepVerifyPerProject: config.RATE_LIMIT_AUTO_SWEEP_VERIFY_PER_PROJECT,
        autoSweepCodePerProject: config.RATE_LIMIT_AUTO_SWEEP_CODE_PER_PROJECT,
      },
      metrics,
      ledgerCheck,
      chainCheck: payoutChainCheck(config),
      treasury: {
        autoMax: autoMaximaOf(config),
        balances: {
          ethereum:
            config.CHAIN_ETHEREUM_RPC_URL === ''
              ? undefined
              : new EthereumTreasuryBalances({
                  rpcUrl: config.CHAIN_ETHEREUM_RPC_URL,
                  timeoutMs: config.CHAIN_ETHEREUM_RPC_TIMEOUT_MS,
                  contracts: { USDT: config.CHAIN_ETHEREUM_USDT_CONTRACT, USDC: config.CHAIN_ETHEREUM_USDC_CONTRACT },
                }),
          tron:
            config.CHAIN_TRON_API_URL === ''
              ? undefined
              : new TronTreasuryBalances({
                  apiUrl: config.CHAIN_TRON_API_URL,
                  timeoutMs: config.CHAIN_SOURCE_TIMEOUT_MS,
                  contracts: { USDT: config.CHAIN_TRON_USDT_CONTRACT, USDC: config.CHAIN_TRON_USDC_CONTRACT },
                }),
          // The UTXO treasuries' balances are their processors' coins, in Postgres: no node to ask.
          bitcoin: new UtxoTreasuryBalances(sql, 'bitcoin'),
          litecoin: new UtxoTreasuryBalances(sql, 'litecoin'),
        },
        unconfiguredReason: (network) => `${network === 'tron' ? 'CHAIN_TRON_API_URL' : `CHAIN_${network.toUpperCase()}_RPC_URL`} is not set: the balance is not read`,
      },
      onAutoSwept: (payout) => metrics.autoSweeps.inc({ currency: payout.currency }),
      houseAddress,
      liveMinimums: {
        BTC: config.PAYOUT_MIN_BTC,
        LTC: config.PAYOUT_MIN_LTC,
        ETH: config.PAYOUT_MIN_ETH,
        USDT: config.PAYOUT_MIN_USDT,
        USDC: config.PAYOUT_MIN_USDC,
        TRX: config.PAYOUT_MIN_TRX,
        POL: config.PAYOUT_MIN_POL,
        BNB: config.PAYOUT_MIN_BNB,
      },
    });
    const sweeper = new CodeExpirySweeper({
      sql,
      logger,
      intervalMs: config.PAYOUT_SWEEP_INTERVAL_MS,
      batchSize: config.PAYOUT_SWEEP_BATCH_SIZE,
      metrics,
    });
    const destinationCheck = new AutoSweepDestinationCheck({
      sql,
      logger,
      houseAddress,
      intervalMs: config.PAYOUT_SWEEP_INTERVAL_MS,
      batchSize: config.PAYOUT_SWEEP_BATCH_SIZE,
      onSwept: (payout) => metrics.autoSweeps.inc({ currency: payout.currency }),
    });
    return {
      routes(router) {
        router.service(PayoutService, handlers);
      },
      // The ledger's consumer, once NATS answers (docs/architecture.md#starting-while-nats-is-down).
      eventWorkers: (nats) => [
        ledgerConsumer({
          sql,
          nats,
          namespace: config.EVENT_NAMESPACE,
          stream: streamSettingsOf(config),
          verifier: eventVerifier,
          logger,
          onCredited: (credit) => metrics.credited.inc({ currency: credit.currency, environment: credit.environment }),
          onAutoSwept: (payout) => metrics.autoSweeps.inc({ currency: payout.currency }),
        }),
      ],
      workers: [sweeper, destinationCheck, rateLimitCleaner(sql, logger), new LedgerInvariantWorker({ ...ledgerCheck, intervalMs: config.LEDGER_CHECK_INTERVAL_MS })],
    };
  },
};

