/**
 * The sweep intake (docs/treasury.md#sweep-tasks), end to end on a real node (anvil): every live
 * deposit that becomes accounted gives exactly one sweep task, with the deposit address, its
 * receive index and the amount in base units; a deposit still unconfirmed gives none yet; a paid
 * sandbox invoice gives none, ever (the contract: sandbox invoices "create no sweep tasks").
 */
import { parseEther } from 'viem';
import { createDb, createLogger, createRpcClient, type Sql } from '@coinvoice/runtime';
import { InvoiceService } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/invoice_pb';
import { takeInAccountedDeposits } from '../../services/payout/src/processor/sweep-intake';
import { markEmailVerified } from '../support/accounts';
import { apiKeyHeader, createProjectWithKey, GatewayClient, registerMerchant, type ProjectFixture } from '../support/http';
import { mine, sendEth, startAnvil, type Anvil } from '../support/anvil';
import { bootSystem, type BootedSystem } from '../support/system';
import { LiveShop } from './live-ethereum.support';
import { deleteStreams } from './webhooks.support';

const CONFIRMATIONS = 2;

let anvil: Anvil;
let system: BootedSystem;
let api: GatewayClient;
let live: ProjectFixture;
let sandbox: ProjectFixture;
let shop: LiveShop;
let payoutSql: Sql;

beforeAll(async () => {
  anvil = await startAnvil();
  system = await bootSystem({
    env: {
      CHAIN_ETHEREUM_RPC_URL: anvil.url,
      CHAIN_ETHEREUM_CONFIRMATIONS: String(CONFIRMATIONS),
      CHAIN_ETHEREUM_POLL_MS: '100',
      PASSWORD_HASH_MEMORY_KIB: '1024',
    },
  });
  api = new GatewayClient(system.gatewayUrl);
  const merchant = await registerMerchant(api);
  await markEmailVerified(system, merchant.merchantId);
  live = await createProjectWithKey(api, merchant, 'live');
  sandbox = await createProjectWithKey(api, merchant, 'sandbox');
  shop = new LiveShop(api, live);
  payoutSql = createDb({ url: system.database.url, schema: 'payout', max: 2 });
}, 120_000);

afterAll(async () => {
  await payoutSql?.end();
  await system?.stop();
  if (system) await deleteStreams(system.namespace);
  await anvil?.stop();
});

interface TaskRow {
  payment_id: string;
  invoice_id: string;
  project_id: string;
  network: string;
  asset: string;
  deposit_address: string;
  address_index: number;
  amount: string;
  status: string;
}

const intake = () =>
  takeInAccountedDeposits({
    sql: payoutSql,
    listDeposits: (request) => createRpcClient(InvoiceService, system.processes.invoice.grpcUrl!).listAccountedDeposits(request),
    network: 'ethereum',
    chain: 'ethereum',
    assets: new Set(['ETH', 'USDT', 'USDC']),
    logger: createLogger({ service: 'test', level: 'silent' }),
  });

const tasks = () => payoutSql<TaskRow[]>`
  select payment_id, invoice_id::text, project_id::text, network, asset, deposit_address, address_index, amount::text, status
  from sweep_tasks order by id`;

test('each accounted live deposit gives one sweep task, exact to the wei; unconfirmed and sandbox deposits give none', async () => {
  // A live ETH invoice paid in two transfers: two deposits at one address.
  const invoice = await shop.createInvoice('ETH', '20.00');
  const first = '0.004000000000000001';
  const second = (parseEther(invoice.amountExpectedDecimal) - parseEther(first)).toString();
  const firstHash = await sendEth(anvil, invoice.address, first);
  // Seen, not confirmed: not accounted, so nothing to sweep yet.
  await shop.invoiceReaches(invoice.id, (i) => (i.payments ?? []).length === 1, 'sees the first payment');
  expect(await intake()).toBe(0);
  expect(await tasks()).toEqual([]);

  const secondHash = await sendEth(anvil, invoice.address, formatWei(BigInt(second)));
  await mine(anvil, CONFIRMATIONS);
  await shop.invoiceReaches(invoice.id, (i) => i.status === 'Paid', 'is Paid');

  // A sandbox invoice paid by simulation: never a sweep task.
  const sandboxInvoice = await api.post(
    '/api/invoice',
    { priceAmount: '20.00', priceCurrency: 'USD', payCurrency: 'ETH', orderId: 'sbx-1', successUrl: 'https://shop.example/ok', cancelUrl: 'https://shop.example/no' },
    { headers: apiKeyHeader(sandbox.key) },
  );
  expect(sandboxInvoice.status).toBe(201);
  const paid = await api.post(`/api/invoice/${sandboxInvoice.body.id}/sandbox/pay`, {}, { headers: apiKeyHeader(sandbox.key) });
  expect(paid.status).toBeLessThan(300);

  expect(await intake()).toBe(2);
  const rows = await tasks();
  expect(rows).toHaveLength(2);
  expect(rows.map((r) => r.payment_id).sort()).toEqual([`ethereum:${firstHash}:-1`, `ethereum:${secondHash}:-1`].sort());
  for (const row of rows) {
    expect(row).toMatchObject({ invoice_id: invoice.id, project_id: live.id, network: 'ethereum', asset: 'ETH', deposit_address: invoice.address, status: 'pending' });
    expect(Number.isInteger(row.address_index)).toBe(true);
  }
  const amounts = Object.fromEntries(rows.map((r) => [r.payment_id, r.amount]));
  expect(amounts[`ethereum:${firstHash}:-1`]).toBe(parseEther(first).toString());
  expect(amounts[`ethereum:${secondHash}:-1`]).toBe(second);
  expect(rows.some((r) => r.invoice_id === sandboxInvoice.body.id)).toBe(false);

  // Re-reading (the overlap, a second replica, a restart) creates nothing twice.
  expect(await intake()).toBe(0);
  await payoutSql`delete from sweep_intake_cursors`;
  expect(await intake()).toBe(0);
  expect(await tasks()).toHaveLength(2);
}, 120_000);

function formatWei(wei: bigint): string {
  const whole = wei / 10n ** 18n;
  const fraction = (wei % 10n ** 18n).toString().padStart(18, '0').replace(/0+$/, '');
  return fraction === '' ? whole.toString() : `${whole}.${fraction}`;
}
