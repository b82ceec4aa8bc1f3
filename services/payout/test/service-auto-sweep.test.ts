/**
 * Auto-sweep (issue 23; services/payout/README.md#auto-sweep): the merchant's
 * rules per currency, a new destination confirmed by an emailed code like a payout (wrong code,
 * attempts, expiry), removals and threshold changes at once; and the trigger: a live balance
 * reaching its threshold creates exactly one verified auto_sweep payout of the whole balance, also
 * when many credits cross it at once; sandbox projects keep their rules and are never swept.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { create, toJson } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { createDb, createLogger, eventTransaction, Code } from '@coinvoice/runtime';
import { InvoicePaidSchema } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/events_pb';
import { PayoutStatus } from '@coinvoice/runtime/gen/coinvoice/payout/v1/payout_pb';
import { ledgerGroupHandler } from '../src/events/ledger-consumer';
import {
  addressFor,
  balanceOf,
  environmentOf,
  ledgerSums,
  rejection,
  startPayoutHarness,
  sleep,
  waitFor,
  wrongCode,
  type FakeProject,
  type Harness,
} from './support/harness';

let h: Harness;

beforeAll(async () => {
  h = await startPayoutHarness();
}, 120_000);

afterAll(async () => {
  await h?.dispose();
});

type Entry = { currency: string; address: string; threshold: string; network?: string };

const setRules = (project: FakeProject, entries: Entry[]) => h.client.setAutoSweep({ projectId: project.id, environment: environmentOf(project), entries });
const getRules = async (project: FakeProject) => (await h.client.getAutoSweep({ projectId: project.id, environment: environmentOf(project) })).config!;
const codeFor = (project: FakeProject) => {
  const code = h.notifier.autoSweepCode(project.id);
  if (!code) throw new Error(`no auto-sweep email for project ${project.id}`);
  return code;
};

/** Sets the rules and confirms them with the emailed code. */
async function activate(project: FakeProject, entries: Entry[]): Promise<void> {
  const { config } = await setRules(project, entries);
  expect(config!.pendingChange).toBeDefined();
  await h.client.verifyAutoSweep({ projectId: project.id, code: codeFor(project) });
}

async function sweepPayouts(project: FakeProject) {
  return h.sql<{ id: string; amount: string; currency: string; address: string; status: string; origin: string; verified_at: Date | null }[]>`
    select id, amount::text as amount, currency, address, status, origin, verified_at from payouts where project_id = ${project.id} and origin = 'auto_sweep' order by created_at`;
}

test('a new destination waits for the emailed code: a wrong code costs an attempt, the right one activates it', async () => {
  const project = h.auth.addProject('live');
  expect(await getRules(project)).toMatchObject({ projectId: project.id, entries: [] });
  expect((await getRules(project)).pendingChange).toBeUndefined();

  const address = addressFor('USDT', 'live');
  const { config } = await setRules(project, [{ currency: 'usdt', address, threshold: '250.50' }]);
  // Nothing active yet; the change names the coin's code and the plain threshold.
  expect(config).toMatchObject({ entries: [], pendingChange: { entries: [{ currency: 'USDT', address, threshold: '250.5' }], attemptsLeft: 5 } });
  const email = h.notifier.autoSweepEmails.at(-1)!;
  expect(email).toMatchObject({ projectId: project.id, environment: 'live', email: project.email, destinations: [{ currency: 'USDT', address, threshold: '250.5' }] });
  expect(email.code).toMatch(/^\d{6}$/);

  expect(await rejection(h.client.verifyAutoSweep({ projectId: project.id, code: wrongCode(email.code) }))).toMatchObject({
    connectCode: Code.InvalidArgument,
    code: 'invalid_verification_code',
    violations: [{ field: 'code', message: 'is wrong; 4 attempts left' }],
  });
  expect(await rejection(h.client.verifyAutoSweep({ projectId: project.id, code: '12ab' }))).toMatchObject({ code: 'validation_failed', violations: [{ field: 'code' }] });
  expect((await getRules(project)).pendingChange).toMatchObject({ attemptsLeft: 4 });

  const { config: active } = await h.client.verifyAutoSweep({ projectId: project.id, code: email.code });
  expect(active).toMatchObject({ entries: [{ currency: 'USDT', address, threshold: '250.5' }] });
  expect(active!.pendingChange).toBeUndefined();
  // The code was used up with the change.
  expect(await rejection(h.client.verifyAutoSweep({ projectId: project.id, code: email.code }))).toMatchObject({
    connectCode: Code.FailedPrecondition,
    code: 'auto_sweep_change_not_pending',
  });
});

test('an expired code discards the change; 5 wrong codes discard it too', async () => {
  const project = h.auth.addProject('live');
  await setRules(project, [{ currency: 'ETH', address: addressFor('ETH', 'live'), threshold: '1' }]);
  const code = codeFor(project);
  await h.sql`update auto_sweep_changes set code_expires_at = now() - interval '1 second' where project_id = ${project.id}`;
  expect((await getRules(project)).pendingChange).toBeUndefined();
  expect(await rejection(h.client.verifyAutoSweep({ projectId: project.id, code }))).toMatchObject({ connectCode: Code.FailedPrecondition, code: 'verification_code_expired' });
  expect(await h.sql`select 1 from auto_sweep_changes where project_id = ${project.id}`).toHaveLength(0);
  expect((await getRules(project)).entries).toEqual([]);

  await setRules(project, [{ currency: 'ETH', address: addressFor('ETH', 'live'), threshold: '1' }]);
  const second = codeFor(project);
  for (let left = 4; left >= 1; left--) {
    expect(await rejection(h.client.verifyAutoSweep({ projectId: project.id, code: wrongCode(second) }))).toMatchObject({ violations: [{ message: `is wrong; ${left === 1 ? '1 attempt' : `${left} attempts`} left` }] });
  }
  expect(await rejection(h.client.verifyAutoSweep({ projectId: project.id, code: wrongCode(second) }))).toMatchObject({
    code: 'invalid_verification_code',
    violations: [{ message: 'is wrong; no attempts left, the change was discarded' }],
  });
  expect(await rejection(h.client.verifyAutoSweep({ projectId: project.id, code: second }))).toMatchObject({ code: 'auto_sweep_change_not_pending' });
  expect((await getRules(project)).entries).toEqual([]);
});

test('removing a rule and changing only a threshold apply at once without a code; a new PUT replaces a pending change', async () => {
  const project = h.auth.addProject('live');
  const usdt = addressFor('USDT', 'live');
  const btc = addressFor('BTC', 'live');
  await activate(project, [
    { currency: 'USDT', address: usdt, threshold: '100' },
    { currency: 'BTC', address: btc, threshold: '0.5' },
  ]);
  const emails = h.notifier.autoSweepEmails.length;
  const { config } = await setRules(project, [{ currency: 'USDT', address: usdt, threshold: '40' }]);
  expect(config).toMatchObject({ entries: [{ currency: 'USDT', address: usdt, threshold: '40' }] });
  expect(config!.pendingChange).toBeUndefined();
  expect(h.notifier.autoSweepEmails).toHaveLength(emails);

  // A changed destination waits; the threshold of the unchanged one applies now; the next PUT replaces the change.
  const other = addressFor('USDT', 'live');
  const waiting = await setRules(project, [{ currency: 'USDT', address: other, threshold: '40' }]);
  expect(waiting.config).toMatchObject({ entries: [{ address: usdt }], pendingChange: { entries: [{ address: other }] } });
  const stale = codeFor(project);
  const replaced = await setRules(project, [{ currency: 'USDT', address: usdt, threshold: '30' }]);
  expect(replaced.config).toMatchObject({ entries: [{ address: usdt, threshold: '30' }] });
  expect(replaced.config!.pendingChange).toBeUndefined();
  expect(await rejection(h.client.verifyAutoSweep({ projectId: project.id, code: stale }))).toMatchObject({ code: 'auto_sweep_change_not_pending' });

  expect((await setRules(project, [])).config).toMatchObject({ entries: [] });
});

test('destinations are checked like payout addresses for the project network; thresholds like payout amounts', async () => {
  const live = h.auth.addProject('live');
  const sandbox = h.auth.addProject('sandbox');
  const error = await rejection(
    setRules(live, [
      { currency: 'BTC', address: addressFor('BTC', 'sandbox'), threshold: '1' },
      { currency: 'USDT', address: addressFor('USDT', 'live'), threshold: '0' },
      { currency: 'USDC', address: addressFor('USDC', 'live'), threshold: '1.1234567' },
      { currency: 'DOGE', address: 'x', threshold: '1' },
      { currency: 'BTC', address: addressFor('BTC', 'live'), threshold: '1' },
    ]),
  );
  expect(error).toMatchObject({ connectCode: Code.InvalidArgument, code: 'validation_failed' });
  expect(error.violations.map((v: { field: string }) => v.field)).toEqual([
    'entries[0].address',
    'entries[1].threshold',
    'entries[2].threshold',
    'entries[3].currency',
    'entries[4].currency',
  ]);
  // A sandbox project sets testnet destinations.
  await activate(sandbox, [{ currency: 'BTC', address: addressFor('BTC', 'sandbox'), threshold: '0.001' }]);
  expect((await getRules(sandbox)).entries).toHaveLength(1);
  expect(h.notifier.autoSweepEmails.at(-1)).toMatchObject({ environment: 'sandbox' });
});


test('a live rule\'s threshold is at least the smallest live payout (PAYOUT_MIN_<COIN>); a sandbox rule\'s is not', async () => {
  const live = h.auth.addProject('live');
  const error = await rejection(setRules(live, [{ currency: 'ETH', address: addressFor('ETH', 'live'), threshold: '0.0005' }]));
  expect(error).toMatchObject({ code: 'validation_failed', violations: [{ field: 'entries[0].threshold', message: expect.stringContaining('must be at least 0.001 ETH for a live payout') }] });
  const sandbox = h.auth.addProject('sandbox');
  await activate(sandbox, [{ currency: 'ETH', address: addressFor('ETH', 'sandbox'), threshold: '0.0005' }]);
  expect((await getRules(sandbox)).entries).toHaveLength(1);
});

test('a destination coinvoice holds itself (an invoice deposit address) is refused, named by its entry; no change awaits a code (docs/treasury.md#house-addresses)', async () => {
  const live = h.auth.addProject('live');
  const deposit = addressFor('ETH', 'live');
  h.invoice.houseAddresses.set(deposit.toLowerCase(), 'deposit');
  const emails = h.notifier.autoSweepEmails.length;
  const error = await rejection(
    setRules(live, [
      { currency: 'BTC', address: addressFor('BTC', 'live'), threshold: '1' },
      { currency: 'ETH', address: deposit, threshold: '1' },
    ]),
  );
  expect(error).toMatchObject({ code: 'validation_failed', violations: [{ field: 'entries[1].address', message: expect.stringContaining('deposit address') }] });
  expect(await getRules(live)).toMatchObject({ entries: [] });
  expect((await getRules(live)).pendingChange).toBeUndefined();
  expect(h.notifier.autoSweepEmails).toHaveLength(emails);
});
test('rules stored before destinations were checked sweep nothing until checked: one pointing at a house address is removed, the others are checked and swept at once (docs/treasury.md#house-addresses)', async () => {
  const project = h.auth.addProject('live');
  const deposit = addressFor('ETH', 'live');
  const foreign = addressFor('USDT', 'live');
  h.invoice.houseAddresses.set(deposit.toLowerCase(), 'deposit');
  h.invoice.down = true; // the check cannot run yet: the rules stay unchecked
  try {
    // As migration 0820 leaves rules stored before it: house_checked_at null.
    await h.sql`
      insert into auto_sweep_settings (project_id, environment, currency, network, address, threshold)
      values (${project.id}, 'live', 'ETH', 'ethereum', ${deposit}, 0.5), (${project.id}, 'live', 'USDT', 'ethereum', ${foreign}, 10)`;
    await h.credit(project, 'ETH', '0.75');
    await h.credit(project, 'USDT', '12');
    // A new threshold for the same destination does not count as a check.
    await setRules(project, [
      { currency: 'ETH', address: deposit, threshold: '0.5' },
      { currency: 'USDT', address: foreign, threshold: '11' },
    ]);
    expect(await h.sql`select currency from auto_sweep_settings where project_id = ${project.id} and house_checked_at is null order by currency`).toEqual([{ currency: 'ETH' }, { currency: 'USDT' }]);
    await sleep(500); // several rounds of the worker, each failing on the invoice service
    expect(await sweepPayouts(project)).toEqual([]);
  } finally {
    h.invoice.down = false;
  }
  await waitFor('the unchecked rules checked', async () => (await h.sql`select 1 from auto_sweep_settings where project_id = ${project.id} and house_checked_at is null`).length === 0);
  expect((await getRules(project)).entries).toEqual([expect.objectContaining({ currency: 'USDT', address: foreign, threshold: '11' })]);
  const [sweep, ...more] = await sweepPayouts(project);
  expect(more).toEqual([]);
  expect(sweep).toMatchObject({ currency: 'USDT', amount: '12', address: foreign, status: 'Pending', origin: 'auto_sweep' });
  expect(await balanceOf(h, project, 'ETH')).toEqual({ available: '0.75', pending: '0', total: '0.75' });
  // The next credit of ETH sweeps nothing: its rule is gone.
  await h.credit(project, 'ETH', '0.5');
  expect(await sweepPayouts(project)).toHaveLength(1);
});

test('a live balance reaching its threshold is swept once: a verified auto_sweep payout of the whole balance, held', async () => {
  const project = h.auth.addProject('live');
  const address = addressFor('USDT', 'live');
  await activate(project, [{ currency: 'USDT', address, threshold: '20' }]);
  await h.credit(project, 'USDT', '7');
  await h.credit(project, 'USDT', '8');
  expect(await sweepPayouts(project)).toEqual([]);
  await h.credit(project, 'USDT', '6.5');
  const [sweep, ...more] = await sweepPayouts(project);
  expect(more).toEqual([]);
  expect(sweep).toMatchObject({ amount: '21.5', currency: 'USDT', address, status: 'Pending', origin: 'auto_sweep' });
  expect(sweep!.verified_at).not.toBeNull();
  expect(await balanceOf(h, project, 'USDT')).toEqual({ available: '0', pending: '21.5', total: '21.5' });

  const { payout } = await h.client.getPayout({ projectId: project.id, payoutId: sweep!.id });
  expect(payout).toMatchObject({ status: PayoutStatus.PENDING, origin: 'auto_sweep', amount: '21.5', note: 'auto-sweep' });
  // Its event is payout.verified, in the credit's transaction (the outbox relay publishes it).
  const events = await h.sql<{ event_type: string; origin: string }[]>`select event_type, payload->>'origin' as origin from outbox where event_key = ${sweep!.id}`;
  expect(events).toEqual([{ event_type: 'payout.verified', origin: 'auto_sweep' }]);

  // Below the threshold again: nothing more until it is reached again.
  await h.credit(project, 'USDT', '19');
  expect(await sweepPayouts(project)).toHaveLength(1);
});

test('a rule is per (currency, network): USDT on bsc sweeps the bsc balance only, to a bsc payout; the ethereum balance is left alone', async () => {
  const project = h.auth.addProject('live');
  const address = addressFor('USDT', 'live');
  await activate(project, [{ currency: 'USDT', network: 'bsc', address, threshold: '10' }]);
  expect((await getRules(project)).entries).toEqual([expect.objectContaining({ currency: 'USDT', network: 'bsc', address, threshold: '10' })]);
  await h.credit(project, 'USDT', '50', randomUUID(), 'ethereum');
  expect(await sweepPayouts(project)).toEqual([]);
  await h.credit(project, 'USDT', '12.000000000000000001', randomUUID(), 'bsc');
  const sweeps = await h.sql<{ amount: string; network: string }[]>`select amount::text as amount, network from payouts where project_id = ${project.id} and origin = 'auto_sweep'`;
  // Cut to the payout decimals (6): the 18th decimal stays available on bsc.
  expect(sweeps).toEqual([{ amount: '12', network: 'bsc' }]);
  expect(await balanceOf(h, project, 'USDT', 'bsc')).toEqual({ available: '0.000000000000000001', pending: '12', total: '12.000000000000000001' });
  expect(await balanceOf(h, project, 'USDT', 'ethereum')).toEqual({ available: '50', pending: '0', total: '50' });
  // An entry without a network is the currency's default network; a network that does not carry it is refused.
  const error = await rejection(setRules(project, [{ currency: 'USDT', network: 'base', address, threshold: '1' }]));
  expect(error.violations).toEqual([{ field: 'entries[0].network', message: 'does not carry USDT: USDT is paid out on ethereum, arbitrum, optimism, polygon, bsc, tron' }]);
  const both = await setRules(project, [
    { currency: 'USDT', network: 'bsc', address, threshold: '10' },
    { currency: 'USDT', address, threshold: '100' },
  ]);
  expect(both.config!.entries.map((e) => e.network)).toEqual(['bsc']);
  expect(both.config!.pendingChange!.entries).toEqual([expect.objectContaining({ currency: 'USDT', network: 'ethereum', threshold: '100' })]);
});

test('20 concurrent invoice.paid events crossing the threshold create exactly one sweep; the balance is exact', async () => {
  const project = h.auth.addProject('live');
  await activate(project, [{ currency: 'USDC', address: addressFor('USDC', 'live'), threshold: '20' }]);
  const ids = await Promise.all(
    Array.from({ length: 20 }, () => h.publishInvoicePaid({ projectId: project.id, environment: 'live', currency: 'USDC', amount: '1' })),
  );
  await Promise.all(ids.map((id) => h.processed(id)));
  const sweeps = await sweepPayouts(project);
  expect(sweeps.map((s) => s.amount)).toEqual(['20']);
  expect(await balanceOf(h, project, 'USDC')).toEqual({ available: '0', pending: '20', total: '20' });
  expect(await ledgerSums(h, project.id, 'USDC')).toEqual({ available: '0', pending: '20' });
});

test('20 credits in concurrent transactions (the ledger handler on 20 connections): one sweep per threshold reached, never more', async () => {
  const project = h.auth.addProject('live');
  await activate(project, [{ currency: 'USDT', address: addressFor('USDT', 'live'), threshold: '10' }]);
  const pool = createDb({ url: h.svc.database.url, schema: 'payout', max: 20 });
  const handle = ledgerGroupHandler({ logger: createLogger({ service: 'test', level: 'silent' }) });
  try {
    await Promise.all(
      Array.from({ length: 20 }, (_, i) => {
        const invoiceId = randomUUID();
        const payload = toJson(
          InvoicePaidSchema,
          create(InvoicePaidSchema, {
            invoiceId,
            projectId: project.id,
            orderId: `order-${i}`,
            status: 'Paid',
            amount: '1',
            currency: 'USDT',
            environment: 'live',
            transactionHash: 'cd'.repeat(32),
            paidAt: timestampFromDate(new Date()),
          }),
        );
        return eventTransaction(pool, (tx) => handle(tx, [{ id: randomUUID(), type: 'invoice.paid', subject: 'test.invoice.paid', payload, deliveryCount: 1 } as never]));
      }),
    );
  } finally {
    await pool.end({ timeout: 5 });
  }
  // Credits are serialised by the balance row: the sweep happens at 10 and at 20, each exactly 10.
  expect((await sweepPayouts(project)).map((s) => s.amount)).toEqual(['10', '10']);
  expect(await balanceOf(h, project, 'USDT')).toEqual({ available: '0', pending: '20', total: '20' });
  expect(await ledgerSums(h, project.id, 'USDT')).toEqual({ available: '0', pending: '20' });
});

test('ETH: the sweep pays the balance cut to 8 decimals; the wei beyond stay available', async () => {
  const project = h.auth.addProject('live');
  await activate(project, [{ currency: 'ETH', address: addressFor('ETH', 'live'), threshold: '1' }]);
  await h.credit(project, 'ETH', '1.000000012345678901');
  expect((await sweepPayouts(project)).map((s) => s.amount)).toEqual(['1.00000001']);
  expect(await balanceOf(h, project, 'ETH')).toEqual({ available: '0.000000002345678901', pending: '1.00000001', total: '1.000000012345678901' });
});

test('a balance already above a new threshold is swept when the rule is confirmed, or when a threshold is lowered', async () => {
  const project = h.auth.addProject('live');
  const address = addressFor('TRX', 'live');
  await h.credit(project, 'TRX', '500');
  await activate(project, [{ currency: 'TRX', address, threshold: '100' }]);
  expect((await sweepPayouts(project)).map((s) => s.amount)).toEqual(['500']);
  await h.credit(project, 'TRX', '60');
  expect(await sweepPayouts(project)).toHaveLength(1);
  await setRules(project, [{ currency: 'TRX', address, threshold: '50' }]);
  expect((await sweepPayouts(project)).map((s) => s.amount)).toEqual(['500', '60']);
});

test('sandbox projects accept the configuration and ignore it: no sweep whatever the balance', async () => {
  const project = h.auth.addProject('sandbox');
  await activate(project, [{ currency: 'USDT', address: addressFor('USDT', 'sandbox'), threshold: '5' }]);
  await h.credit(project, 'USDT', '50');
  await setRules(project, [{ currency: 'USDT', address: (await getRules(project)).entries[0]!.address, threshold: '1' }]);
  expect(await sweepPayouts(project)).toEqual([]);
  expect(await balanceOf(h, project, 'USDT')).toEqual({ available: '50', pending: '0', total: '50' });
});

test('setting a destination needs the merchant email verified for live projects; the notifier down changes nothing', async () => {
  const project = h.auth.addProject('live');
  h.notifier.down = true;
  try {
    expect(await rejection(setRules(project, [{ currency: 'LTC', address: addressFor('LTC', 'live'), threshold: '1' }]))).toMatchObject({
      connectCode: Code.Unavailable,
      code: 'service_unavailable',
    });
  } finally {
    h.notifier.down = false;
  }
  expect(await getRules(project)).toMatchObject({ entries: [] });
  expect((await getRules(project)).pendingChange).toBeUndefined();
  const unverified = h.auth.addProject('live');
  unverified.emailVerified = false;
  expect(await rejection(setRules(unverified, [{ currency: 'LTC', address: addressFor('LTC', 'live'), threshold: '1' }]))).toMatchObject({ code: 'email_not_verified' });
});

test('migration 0850: rules on Bitcoin and Litecoin checked before every UTXO spelling was compared are checked again (one pointing at a house address is removed); others keep their check', async () => {
  const project = h.auth.addProject('live');
  const btc = addressFor('BTC', 'live');
  const eth = addressFor('ETH', 'live');
  // As an earlier version left them: both checked (the BTC one against fewer spellings).
  await h.sql`
    insert into auto_sweep_settings (project_id, environment, currency, network, address, threshold, house_checked_at)
    values (${project.id}, 'live', 'BTC', 'bitcoin', ${btc}, 0.5, now() - interval '1 day'), (${project.id}, 'live', 'ETH', 'ethereum', ${eth}, 1, now() - interval '1 day')`;
  const [ethBefore] = await h.sql<{ house_checked_at: Date }[]>`select house_checked_at from auto_sweep_settings where project_id = ${project.id} and currency = 'ETH'`;
  // The address the invoice service now knows as a deposit in another spelling.
  h.invoice.houseAddresses.set(btc.toLowerCase(), 'deposit');
  await h.sql.unsafe(readFileSync(path.join(__dirname, '../src/store/migrations/0850_auto_sweep_utxo_recheck.sql'), 'utf8'));
  await waitFor('the BTC rule checked again', async () => (await h.sql`select 1 from auto_sweep_settings where project_id = ${project.id} and house_checked_at is null`).length === 0);
  expect((await getRules(project)).entries).toEqual([expect.objectContaining({ currency: 'ETH', address: eth })]);
  const [ethAfter] = await h.sql<{ house_checked_at: Date }[]>`select house_checked_at from auto_sweep_settings where project_id = ${project.id} and currency = 'ETH'`;
  expect(ethAfter!.house_checked_at).toEqual(ethBefore!.house_checked_at);
});
