/**
 * Live payments end to end on the whole system (`npm start`'s launcher runs `invoice watch bitcoin`,
 * `watch litecoin` and `watch tron` because their sources are set), against STAND-INS of Esplora
 * (real transactions signed with bitcoinjs-lib) and of the Tron HTTP API, not nodes: a BTC invoice
 * is Paid at 2 confirmations, an LTC one at 6, a TRX one at 20 and a USDT-on-Tron one (a TRC-20
 * Transfer event in the stand-in's TransactionInfos) at 20, each with exactly one invoice.paid
 * reaching the ledger: the project's balance is credited once with the amount, and stays so as
 * more blocks come.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { EsploraStandIn, LITECOIN } from '../../services/invoice/test/support/esplora-stand-in';
import { TronStandIn } from '../../services/invoice/test/support/tron-stand-in';
import { sleep, waitFor } from '../support/async';
import { markEmailVerified } from '../support/accounts';
import { apiKeyHeader, createProjectWithKey, GatewayClient, registerMerchant, type ProjectFixture } from '../support/http';
import { bootSystem, type BootedSystem } from '../support/system';

let system: BootedSystem;
let api: GatewayClient;
let bitcoin: EsploraStandIn;
let litecoin: EsploraStandIn;
let tron: TronStandIn;
let project: ProjectFixture;
/** Tether's USD₮ contract on Tron (CHAIN_TRON_USDT_CONTRACT's default). */
const USDT_ON_TRON = 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t';

beforeAll(async () => {
  [bitcoin, litecoin, tron] = await Promise.all([EsploraStandIn.start(), EsploraStandIn.start(LITECOIN), TronStandIn.start()]);
  system = await bootSystem({
    env: {
      CHAIN_BITCOIN_ESPLORA_URL: bitcoin.url,
      CHAIN_LITECOIN_ESPLORA_URL: litecoin.url,
      CHAIN_TRON_API_URL: tron.url,
      CHAIN_BITCOIN_POLL_MS: '200',
      CHAIN_LITECOIN_POLL_MS: '200',
      CHAIN_TRON_POLL_MS: '200',
    },
  });
  api = new GatewayClient(system.gatewayUrl);
  const merchant = await registerMerchant(api);
  // Live keys need a verified email (issue 12); the emailed-code flow has its own tests.
  await markEmailVerified(system, merchant.merchantId);
  project = await createProjectWithKey(api, merchant, 'live');
}, 120_000);

afterAll(async () => {
  await system?.stop();
  await Promise.all([bitcoin?.close(), litecoin?.close(), tron?.close()]);
});

/**
 * Runs `step`; when it fails, the failure carries the end of these watchers' logs (the system's
 * data folder, logs included, is gone once the suite stops). Once, under the full suite on CI, the
 * mempool step timed out; alone it never has.
 */
async function withWatcherLogs(names: readonly string[], step: () => Promise<unknown>): Promise<void> {
  try {
    await step();
  } catch (err) {
    const tails = names.map((name) => {
      const file = path.join(system.dataDir, 'logs', `${name}.log`);
      const lines = existsSync(file) ? readFileSync(file, 'utf8').trimEnd().split('\n').slice(-40) : ['(no log)'];
      return `--- ${name}.log (last ${lines.length} lines) ---\n${lines.join('\n')}`;
    });
    throw new Error(`${err instanceof Error ? err.message : String(err)}\n${tails.join('\n')}`);
  }
}

async function createInvoice(payCurrency: string, priceAmount: string, payNetwork?: string) {
  const res = await api.post(
    '/api/invoice',
    { priceAmount, priceCurrency: 'USD', payCurrency, ...(payNetwork ? { payNetwork } : {}), successUrl: 'https://shop.example/ok', cancelUrl: 'https://shop.example/no' },
    { headers: apiKeyHeader(project.key) },
  );
  expect(res.status).toBe(201);
  return res.body as { id: string; address: string; amountExpected: number; confirmationsRequired: number };
}

async function invoiceNow(id: string) {
  const res = await api.get(`/api/invoice/${id}`, { headers: apiKeyHeader(project.key) });
  expect(res.status).toBe(200);
  return res.body as { status: string; amountReceived: number; payments: Array<{ confirmations: number; status: string }> };
}

async function credited(currency: string): Promise<number | undefined> {
  const res = await api.get('/api/payout/balance', { headers: apiKeyHeader(project.key) });
  expect(res.status).toBe(200);
  return (res.body.balances as Array<{ currency: string; total: number }>).find((b) => b.currency === currency)?.total;
}

test('BTC Paid at 2, LTC at 6, TRX and USDT on Tron at 20 confirmations; each credited to the ledger exactly once', async () => {
  const btc = await createInvoice('BTC', '100.00');
  const ltc = await createInvoice('LTC', '88.00');
  const trx = await createInvoice('TRX', '27.00');
  const usdt = await createInvoice('USDT', '42.50', 'tron');
  expect([btc.confirmationsRequired, ltc.confirmationsRequired, trx.confirmationsRequired, usdt.confirmationsRequired]).toEqual([2, 6, 20, 20]);
  expect(usdt.address).toMatch(/^T[1-9A-HJ-NP-Za-km-z]{33}$/);

  const btcPayer = bitcoin.fundedPayer(10_000_000, 1);
  const ltcPayer = litecoin.fundedPayer(300_000_000, 1);
  bitcoin.broadcast(bitcoin.pay(btcPayer, [{ address: btc.address, value: Math.round(btc.amountExpected * 1e8) }]));
  litecoin.broadcast(litecoin.pay(ltcPayer, [{ address: ltc.address, value: Math.round(ltc.amountExpected * 1e8) }]));
  await withWatcherLogs(['watch-bitcoin', 'watch-litecoin'], () =>
    waitFor('BTC and LTC Confirming from the mempool', async () =>
      (await invoiceNow(btc.id)).status === 'Confirming' && (await invoiceNow(ltc.id)).status === 'Confirming'));

  bitcoin.mine();
  litecoin.mine();
  tron.mine([tron.transfer(trx.address, Math.round(trx.amountExpected * 1e6)), tron.trc20Transfer(USDT_ON_TRON, usdt.address, 42_500_000)]);
  bitcoin.mine([]);
  for (let i = 0; i < 5; i++) litecoin.mine([]);
  for (let i = 0; i < 19; i++) tron.mine([]);

  for (const [invoice, currency] of [[btc, 'BTC'], [ltc, 'LTC'], [trx, 'TRX'], [usdt, 'USDT']] as const) {
    await waitFor(`${currency} Paid`, async () => (await invoiceNow(invoice.id)).status === 'Paid');
    await waitFor(`${currency} credited`, async () => (await credited(currency)) === invoice.amountExpected);
  }
  // More blocks: no second credit.
  bitcoin.mine([]);
  litecoin.mine([]);
  tron.mine([]);
  await sleep(1_500);
  expect(await credited('BTC')).toBe(btc.amountExpected);
  expect(await credited('LTC')).toBe(ltc.amountExpected);
  expect(await credited('TRX')).toBe(trx.amountExpected);
  expect(await credited('USDT')).toBe(42.5);
  expect((await invoiceNow(btc.id)).payments).toEqual([expect.objectContaining({ status: 'confirmed', confirmations: 3 })]);
});
