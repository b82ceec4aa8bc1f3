/**
 * RequestPayout over gRPC against real Postgres and NATS: every field checked and named, the amount
 * held at once, never an overdraft under concurrency, the code issued hashed with both events in
 * the outbox, and Idempotency-Key replays.
 */
import { Code } from '@coinvoice/runtime';
import { Environment } from '@coinvoice/runtime/gen/coinvoice/common/v1/environment_pb';
import { PayoutStatus } from '@coinvoice/runtime/gen/coinvoice/payout/v1/payout_pb';
import { timestampDate } from '@bufbuild/protobuf/wkt';
import {
  addressFor,
  balanceOf,
  breakChecksum,
  codeOf,
  ledgerSums,
  payoutRequest,
  rejection,
  startPayoutHarness,
  type Harness,
} from './support/harness';
import { waitFor } from '../../../test/support/async';

let h: Harness;

beforeAll(async () => {
  h = await startPayoutHarness();
});

afterAll(async () => {
  await h?.dispose();
});

test('a request holds the amount, answers AwaitingVerification, writes payout.requested and has the notifier email the code (never an event)', async () => {
  const project = h.auth.addProject('sandbox');
  await h.credit(project, 'BTC', '0.05');
  const address = addressFor('BTC', 'sandbox');
  const { payout, idempotentReplay } = await h.client.requestPayout(
    payoutRequest(project, { amount: '0.0125', address: address.toUpperCase(), note: 'Weekly\nsettlement' }),
  );
  expect(idempotentReplay).toBe(false);
  expect(payout).toMatchObject({
    projectId: project.id,
    amount: '0.0125',
    currency: 'BTC',
    network: 'bitcoin',
    address, // canonical (bech32 lower case)
    note: 'Weekly\nsettlement',
    status: PayoutStatus.AWAITING_VERIFICATION,
    environment: Environment.SANDBOX,
  });
  expect(payout!.transactionHash).toBeUndefined();
  expect(payout!.adminNote).toBeUndefined();
  expect(await balanceOf(h, project, 'BTC')).toEqual({ available: '0.0375', pending: '0.0125', total: '0.05' });
  expect(await ledgerSums(h, project.id, 'BTC')).toEqual({ available: '0.0375', pending: '0.0125' });

  const events = await h.sql<{ event_type: string; payload: Record<string, unknown> }[]>`
    select event_type, payload from outbox where event_key = ${payout!.id} order by seq`;
  expect(events.map((e) => e.event_type)).toEqual(['payout.requested']);
  expect(events[0]!.payload).toEqual({
    payoutId: payout!.id,
    projectId: project.id,
    environment: 'sandbox',
    amount: '0.0125',
    currency: 'BTC',
    network: 'bitcoin',
    status: 'AwaitingVerification',
    address,
    note: 'Weekly\nsettlement',
    createdAt: expect.any(String),
  });
  expect(new Date(events[0]!.payload.createdAt as string).getTime()).toBe(timestampDate(payout!.createdAt!).getTime());
  const issued = h.notifier.payoutEmails.find((e) => e.payoutId === payout!.id);
  expect(issued).toMatchObject({ payoutId: payout!.id, environment: 'sandbox', amount: '0.0125', currency: 'BTC', email: project.email });
  expect(issued!.code).toMatch(/^\d{6}$/);
  // Valid 15 minutes (the default) from creation.
  const expiresAt = timestampDate(issued!.expiresAt!).getTime();
  expect(expiresAt - timestampDate(payout!.createdAt!).getTime()).toBe(15 * 60_000);
  // Not in any row of the schema (the outbox included).
  const everything = await h.sql<{ t: string }[]>`
    select string_agg(t, ' ') as t from (
      select row_to_json(p)::text as t from payouts p union all select row_to_json(o)::text from outbox o
      union all select row_to_json(l)::text from ledger_entries l) rows`;
  expect(everything[0]!.t).not.toMatch(new RegExp(`(?<![0-9A-Za-z])${issued!.code}(?![0-9A-Za-z])`));

  // Stored hashed with a salt of its own: the plain code is nowhere in the payouts table.
  const [stored] = await h.sql`select row_to_json(p)::text as text, length(code_hash) as hash_len, length(code_salt) as salt_len, code_attempts_left from payouts p where id = ${payout!.id}`;
  expect(stored).toMatchObject({ hash_len: 32, salt_len: 32, code_attempts_left: 5 });
  expect(stored!.text).not.toContain(issued!.code);
});

test('the notifier down: no payout, nothing held, unavailable', async () => {
  const project = h.auth.addProject('sandbox');
  await h.credit(project, 'BTC', '0.05');
  h.notifier.down = true;
  try {
    expect(await rejection(h.client.requestPayout(payoutRequest(project, { amount: '0.01' })))).toMatchObject({ connectCode: Code.Unavailable, code: 'service_unavailable' });
  } finally {
    h.notifier.down = false;
  }
  expect(await balanceOf(h, project, 'BTC')).toEqual({ available: '0.05', pending: '0', total: '0.05' });
  const rows = await h.sql`select 1 from payouts where project_id = ${project.id}`;
  expect(rows).toHaveLength(0);
});

describe('a slow verification email (docs/accounting.md#payout-requests)', () => {
  /** Payout emails wait until the returned function is called. */
  function slowEmails(): () => void {
    let answer = () => undefined as void;
    h.notifier.payoutEmailsWaitFor = new Promise<void>((resolve) => (answer = resolve));
    return () => {
      h.notifier.payoutEmailsWaitFor = undefined;
      answer();
    };
  }

  test('holds no credit of the balance: one arriving while the email is on its way is applied at once', async () => {
    const project = h.auth.addProject('sandbox');
    await h.credit(project, 'BTC', '0.05');
    const calls = h.notifier.payoutEmailCalls;
    const answerEmails = slowEmails();
    try {
      const request = h.client.requestPayout(payoutRequest(project, { amount: '0.01' }));
      await waitFor('the email call', async () => h.notifier.payoutEmailCalls > calls);
      // The ledger's consumer credits this very balance while the request waits on its email.
      let timer: NodeJS.Timeout | undefined;
      const credited = await Promise.race([h.credit(project, 'BTC', '0.02').then(() => true), new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), 4_000)))]);
      clearTimeout(timer);
      expect(credited).toBe(true);
      expect(await balanceOf(h, project, 'BTC')).toEqual({ available: '0.07', pending: '0', total: '0.07' });
      answerEmails();
      expect((await request).payout?.status).toBe(PayoutStatus.AWAITING_VERIFICATION);
      expect(await balanceOf(h, project, 'BTC')).toEqual({ available: '0.06', pending: '0.01', total: '0.07' });
    } finally {
      answerEmails();
    }
  });

  test('when the balance was taken meanwhile the hold still refuses: 409 insufficient_balance, no payout, nothing held', async () => {
    const project = h.auth.addProject('sandbox');
    await h.credit(project, 'BTC', '0.05');
    const calls = h.notifier.payoutEmailCalls;
    const answerEmails = slowEmails();
    try {
      const request = rejection(h.client.requestPayout(payoutRequest(project, { amount: '0.04' })));
      await waitFor('the email call', async () => h.notifier.payoutEmailCalls > calls);
      // What a live auto-sweep's hold does to the row (a sandbox project has none): available → pending.
      await h.sql`update balances set available = available - 0.02, pending = pending + 0.02 where project_id = ${project.id} and currency = 'BTC'`;
      answerEmails();
      expect(await request).toMatchObject({ connectCode: Code.FailedPrecondition, code: 'insufficient_balance' });
      expect(await h.sql`select 1 from payouts where project_id = ${project.id}`).toHaveLength(0);
      expect(await balanceOf(h, project, 'BTC')).toEqual({ available: '0.03', pending: '0.02', total: '0.05' });
    } finally {
      answerEmails();
      await h.sql`update balances set available = available + pending, pending = 0 where project_id = ${project.id} and currency = 'BTC'`;
    }
  });
});

test('a live payout is at least PAYOUT_MIN_<COIN> (the treasury pays its network fee), on every network of the coin; a sandbox one is not', async () => {
  const live = h.auth.addProject('live');
  await h.credit(live, 'ETH', '1');
  await h.credit(live, 'USDT', '100', undefined, 'tron');
  // An outside review paid out 0.00000001 ETH: 2,100 times its value in gas.
  expect(await rejection(h.client.requestPayout(payoutRequest(live, { currency: 'ETH', amount: '0.00000001', address: addressFor('ETH', 'live') })))).toMatchObject({
    code: 'validation_failed',
    violations: [{ field: 'amount', message: "must be at least 0.001 ETH for a live payout (PAYOUT_MIN_ETH: the treasury pays each payout's network fee)" }],
  });
  expect(await rejection(h.client.requestPayout(payoutRequest(live, { currency: 'USDT', network: 'tron', amount: '0.99', address: addressFor('TRX', 'live') })))).toMatchObject({
    violations: [{ field: 'amount', message: expect.stringContaining('must be at least 1 USDT for a live payout') }],
  });
  expect(await balanceOf(h, live, 'ETH')).toEqual({ available: '1', pending: '0', total: '1' });
  expect((await h.client.requestPayout(payoutRequest(live, { currency: 'ETH', amount: '0.001', address: addressFor('ETH', 'live') }))).payout).toMatchObject({ amount: '0.001' });
  const sandbox = h.auth.addProject('sandbox');
  await h.credit(sandbox, 'ETH', '1');
  expect((await h.client.requestPayout(payoutRequest(sandbox, { currency: 'ETH', amount: '0.00000001', address: addressFor('ETH', 'sandbox') }))).payout).toMatchObject({ amount: '0.00000001' });
});

describe('a destination coinvoice holds itself is refused (docs/treasury.md#house-addresses)', () => {
  test('an invoice deposit address (asked of the invoice service, in any letter case): 400 on address, nothing held, no payout', async () => {
    const project = h.auth.addProject('live');
    await h.credit(project, 'ETH', '1');
    const deposit = addressFor('ETH', 'live');
    h.invoice.houseAddresses.set(deposit.toLowerCase(), 'deposit');
    expect(await rejection(h.client.requestPayout(payoutRequest(project, { currency: 'ETH', amount: '0.008', address: deposit })))).toMatchObject({
      code: 'validation_failed',
      violations: [{ field: 'address', message: expect.stringContaining('is a coinvoice invoice’s deposit address') }],
    });
    expect(h.invoice.asked).toContain(deposit);
    expect(await balanceOf(h, project, 'ETH')).toEqual({ available: '1', pending: '0', total: '1' });
    expect(await h.sql`select 1 from payouts where project_id = ${project.id}`).toHaveLength(0);
    // validate_only (the gateway's early check) does not ask: the rule is the request's.
    const asked = h.invoice.asked.length;
    await h.client.requestPayout({ ...payoutRequest(project, { currency: 'ETH', amount: '0.008', address: deposit }), validateOnly: true });
    expect(h.invoice.asked).toHaveLength(asked);
  });

  test('a treasury address this service recorded (any network, any case), and a UTXO treasury change address, confirmed or of a batch still open: 400 on address', async () => {
    const project = h.auth.addProject('live');
    await h.credit(project, 'ETH', '1');
    await h.credit(project, 'BTC', '1');
    const treasury = addressFor('ETH', 'live');
    await h.sql`insert into treasury_networks (network, address) values ('polygon', ${treasury.toLowerCase()}) on conflict (network) do update set address = excluded.address`;
    expect(await rejection(h.client.requestPayout(payoutRequest(project, { currency: 'ETH', amount: '0.01', address: treasury })))).toMatchObject({
      violations: [{ field: 'address', message: expect.stringContaining('is a coinvoice treasury address') }],
    });
    const change = addressFor('BTC', 'live');
    await h.sql`
      insert into utxo_coins (network, txid, vout, amount, address, branch, address_index, change_of_batch)
      values ('bitcoin', ${'cd'.repeat(32)}, 1, 5000, ${change}, 1, 7, null)`;
    expect(await rejection(h.client.requestPayout(payoutRequest(project, { currency: 'BTC', amount: '0.001', address: change })))).toMatchObject({
      violations: [{ field: 'address', message: expect.stringContaining('is a coinvoice treasury address') }],
    });
    // The change address of a batch still open (built or broadcast, its change not yet a coin), in another letter case.
    const openChange = addressFor('LTC', 'live');
    await h.credit(project, 'LTC', '1');
    await h.sql`insert into utxo_batches (network, change_index, change_address) values ('litecoin', 3, ${openChange})`;
    expect(await rejection(h.client.requestPayout(payoutRequest(project, { currency: 'LTC', amount: '0.01', address: openChange.toUpperCase() })))).toMatchObject({
      violations: [{ field: 'address', message: expect.stringContaining('is a coinvoice treasury address') }],
    });
    expect(await balanceOf(h, project, 'ETH')).toEqual({ available: '1', pending: '0', total: '1' });
    expect(await balanceOf(h, project, 'LTC')).toEqual({ available: '1', pending: '0', total: '1' });
    // Any other address is paid out as before.
    expect((await h.client.requestPayout(payoutRequest(project, { currency: 'ETH', amount: '0.01', address: addressFor('ETH', 'live') }))).payout).toBeDefined();
  });

  test('the invoice service down: unavailable, nothing held', async () => {
    const project = h.auth.addProject('sandbox');
    await h.credit(project, 'BTC', '0.05');
    h.invoice.down = true;
    try {
      expect(await rejection(h.client.requestPayout(payoutRequest(project, { amount: '0.01' })))).toMatchObject({ connectCode: Code.Unavailable, code: 'service_unavailable' });
    } finally {
      h.invoice.down = false;
    }
    expect(await balanceOf(h, project, 'BTC')).toEqual({ available: '0.05', pending: '0', total: '0.05' });
  });
});

test('a live payout needs a verified merchant email; a sandbox one does not', async () => {
  const live = h.auth.addProject('live');
  live.emailVerified = false;
  await h.credit(live, 'BTC', '1');
  expect(await rejection(h.client.requestPayout(payoutRequest(live, { amount: '0.1' })))).toMatchObject({ connectCode: Code.PermissionDenied, code: 'email_not_verified' });
  const sandbox = h.auth.addProject('sandbox');
  sandbox.emailVerified = false;
  await h.credit(sandbox, 'BTC', '1');
  expect((await h.client.requestPayout(payoutRequest(sandbox, { amount: '0.1' }))).payout?.status).toBe(PayoutStatus.AWAITING_VERIFICATION);
  live.emailVerified = true;
  expect((await h.client.requestPayout(payoutRequest(live, { amount: '0.1' }))).payout?.status).toBe(PayoutStatus.AWAITING_VERIFICATION);
});

test('codes are 6 random digits, different per payout', async () => {
  const project = h.auth.addProject('sandbox');
  await h.credit(project, 'ETH', '1');
  const codes = new Set<string>();
  for (let i = 0; i < 8; i++) {
    const { payout } = await h.client.requestPayout(payoutRequest(project, { currency: 'ETH', amount: '0.01' }));
    codes.add(await codeOf(h, payout!.id));
  }
  for (const code of codes) expect(code).toMatch(/^\d{6}$/);
  expect(codes.size).toBeGreaterThan(5); // 8 draws from 10^6 values: repeats are (almost) impossible
});

test('20 concurrent requests against a balance that covers 5: exactly 5 succeed, the rest insufficient_balance', async () => {
  const project = h.auth.addProject('sandbox');
  await h.credit(project, 'BTC', '0.05');
  const outcomes = await Promise.allSettled(
    Array.from({ length: 20 }, () => h.client.requestPayout(payoutRequest(project, { amount: '0.01' }))),
  );
  const ok = outcomes.filter((o) => o.status === 'fulfilled');
  const refused = await Promise.all(outcomes.flatMap((o) => (o.status === 'rejected' ? [rejection(Promise.reject(o.reason))] : [])));
  expect(ok).toHaveLength(5);
  expect(refused).toHaveLength(15);
  for (const err of refused) expect(err).toMatchObject({ connectCode: Code.FailedPrecondition, code: 'insufficient_balance' });
  expect(await balanceOf(h, project, 'BTC')).toEqual({ available: '0', pending: '0.05', total: '0.05' });
  expect(await ledgerSums(h, project.id, 'BTC')).toEqual({ available: '0', pending: '0.05' });
  const [count] = await h.sql<{ n: number }[]>`select count(*)::int as n from payouts where project_id = ${project.id}`;
  expect(count!.n).toBe(5);
  const [events] = await h.sql<{ n: number }[]>`select count(*)::int as n from outbox where event_type = 'payout.requested' and payload->>'projectId' = ${project.id}`;
  expect(events!.n).toBe(5);
});

test('a project without a balance in the coin is refused with insufficient_balance, and nothing is written', async () => {
  const project = h.auth.addProject('sandbox');
  await h.credit(project, 'BTC', '1');
  const err = await rejection(h.client.requestPayout(payoutRequest(project, { currency: 'LTC', amount: '0.5' })));
  expect(err).toMatchObject({ connectCode: Code.FailedPrecondition, code: 'insufficient_balance' });
  expect(err.message).toContain('LTC');
  const over = await rejection(h.client.requestPayout(payoutRequest(project, { amount: '1.00000001' })));
  expect(over).toMatchObject({ code: 'insufficient_balance', message: expect.stringContaining('(1)') });
  const rows = await h.sql`select 1 from payouts where project_id = ${project.id}`;
  expect(rows).toHaveLength(0);
  // The whole balance is fine.
  await h.client.requestPayout(payoutRequest(project, { amount: '1' }));
  expect(await balanceOf(h, project, 'BTC')).toEqual({ available: '0', pending: '1', total: '1' });
});

describe('validation: violations name the public fields', () => {
  const sandbox = () => h.auth.addProject('sandbox');
  const cases: Array<[string, (p: ReturnType<typeof sandbox>) => Record<string, unknown>, string, string | RegExp]> = [
    ['9 decimals', (p) => payoutRequest(p, { amount: '0.123456789' }), 'amount', 'must have at most 8 decimal places'],
    ['zero', (p) => payoutRequest(p, { amount: '0' }), 'amount', 'must be greater than 0'],
    ['negative', (p) => payoutRequest(p, { amount: '-1' }), 'amount', 'must be greater than 0'],
    ['an exponent', (p) => payoutRequest(p, { amount: '1e-3' }), 'amount', /plain decimal/],
    ['13 integer digits', (p) => payoutRequest(p, { amount: '1000000000000' }), 'amount', 'must have at most 12 digits before the decimal point'],
    ['a huge number converted at the edge', (p) => payoutRequest(p, { amount: '1'.padEnd(300, '0') }), 'amount', 'must have at most 12 digits before the decimal point'],
    ['7 decimals of USDT', (p) => payoutRequest(p, { currency: 'USDT', amount: '1.1234567' }), 'amount', 'must have at most 6 decimal places for USDT'],
    ['BTC below its dust limit (293 sat)', (p) => payoutRequest(p, { amount: '0.00000293' }), 'amount', "must be at least 0.00000294 BTC (the chain's dust limit: a smaller output cannot be sent)"],
    ['LTC below its dust limit (2,939 litoshi)', (p) => payoutRequest(p, { currency: 'LTC', amount: '0.00002939' }), 'amount', "must be at least 0.0000294 LTC (the chain's dust limit: a smaller output cannot be sent)"],
    ['no amount', (p) => ({ ...payoutRequest(p), amount: '' }), 'amount', 'is required'],
    ['an unsupported currency', (p) => ({ ...payoutRequest(p), currency: 'DOGE' }), 'currency', /unsupported currency "DOGE"; supported: BTC, LTC, ETH, USDT, USDC, TRX/],
    ['a BTC address with a bad checksum', (p) => payoutRequest(p, { address: breakChecksum(addressFor('BTC')) }), 'address', /checksum/],
    ['an ETH address with a bad checksum', (p) => payoutRequest(p, { currency: 'ETH', address: breakChecksum(addressFor('ETH')) }), 'address', /invalid EIP-55 checksum/],
    ['an all-lower-case ETH address', (p) => payoutRequest(p, { currency: 'USDC', address: addressFor('USDC').toLowerCase() }), 'address', /must carry its EIP-55 checksum/],
    ['a TRX address with a bad checksum', (p) => payoutRequest(p, { currency: 'TRX', address: breakChecksum(addressFor('TRX')) }), 'address', /checksum/],
    ['a mainnet BTC address for a sandbox project', (p) => payoutRequest(p, { address: addressFor('BTC', 'live') }), 'address', 'is not a valid BTC testnet address: it must start with "tb1" on this network'],
    ['a BTC address for LTC', (p) => payoutRequest(p, { currency: 'LTC', address: addressFor('BTC') }), 'address', /tltc1/],
    ['no address', (p) => ({ ...payoutRequest(p), address: '' }), 'address', 'is required'],
    // Well-formed, but nobody holds the key: the reviewers' zero-address payout was accepted.
    ['the EVM zero address', (p) => payoutRequest(p, { currency: 'USDT', amount: '1', address: '0x0000000000000000000000000000000000000000' }), 'address', /zero address, which nobody holds the key of/],
    ['the Tron zero address', (p) => payoutRequest(p, { currency: 'TRX', amount: '1', address: 'T9yD14Nj9j7xAB4dbGeiX9h8unkKHxuWwb' }), 'address', /zero address/],
    ['the USDC contract itself', (p) => payoutRequest(p, { currency: 'USDC', amount: '1', address: '0x1c7D4B196Cb0C7B01d743Fbc6116a902379C7238' }), 'address', 'is not a destination coins can be sent to: it is the USDC contract itself (tokens sent to it are stuck there)'],
    ['a note of 501 characters', (p) => payoutRequest(p, { note: 'n'.repeat(501) }), 'note', 'must be at most 500 characters'],
    ['a note with a control character', (p) => payoutRequest(p, { note: 'bell\u0007' }), 'note', 'must not contain control characters'],
    ['a note with a bidi override', (p) => payoutRequest(p, { note: 'to \u202Eevil' }), 'note', 'must not contain bidirectional control characters (U+202A–U+202E, U+2066–U+2069)'],
    ['a malformed project id', (p) => ({ ...payoutRequest(p), projectId: 'project-1' }), 'projectId', 'must be a UUID'],
    ['no environment', (p) => ({ ...payoutRequest(p), environment: Environment.UNSPECIFIED }), 'environment', 'must be live or sandbox'],
    ['an Idempotency-Key of 256 characters', (p) => payoutRequest(p, { idempotencyKey: 'k'.repeat(256) }), 'idempotencyKey', 'must be at most 255 characters'],
  ];

  test.each(cases)('%s', async (_what, build, field, message) => {
    const project = sandbox();
    await h.credit(project, 'BTC', '1');
    const err = await rejection(h.client.requestPayout(build(project) as never));
    expect(err).toMatchObject({ connectCode: Code.InvalidArgument, code: 'validation_failed' });
    expect(err.violations).toContainEqual({ field, message: typeof message === 'string' ? message : expect.stringMatching(message) });
    expect(await balanceOf(h, project, 'BTC')).toEqual({ available: '1', pending: '0', total: '1' });
  });

  test('validate_only checks the rules and holds nothing, emails no code', async () => {
    const project = sandbox();
    await h.credit(project, 'BTC', '1');
    const err = await rejection(h.client.requestPayout({ ...payoutRequest(project, { amount: '0' }), address: 'tb1qnotanaddress', validateOnly: true }));
    expect(err).toMatchObject({ connectCode: Code.InvalidArgument, code: 'validation_failed' });
    expect(err.violations.map((v) => v.field).sort()).toEqual(['address', 'amount']);
    const valid = await h.client.requestPayout({ ...payoutRequest(project, { amount: '0.5' }), validateOnly: true });
    expect(valid.payout).toBeUndefined();
    expect(await balanceOf(h, project, 'BTC')).toEqual({ available: '1', pending: '0', total: '1' });
    expect((await h.client.listPayouts({ projectId: project.id })).payouts).toEqual([]);
  });

  test('a note of exactly 500 characters (emoji count once) and 6 decimals of USDT are fine', async () => {
    const project = sandbox();
    await h.credit(project, 'USDT', '10');
    const note = '💸'.repeat(500);
    const { payout } = await h.client.requestPayout(payoutRequest(project, { currency: 'USDT', amount: '1.123456', note }));
    expect(payout).toMatchObject({ amount: '1.123456', note });
  });

  test('a currency code in any letter case is taken and normalised', async () => {
    const project = sandbox();
    await h.credit(project, 'BTC', '1');
    const { payout } = await h.client.requestPayout({ ...payoutRequest(project, { amount: '0.1' }), currency: 'btc' });
    expect(payout).toMatchObject({ amount: '0.1', currency: 'BTC' });
    expect(await balanceOf(h, project, 'BTC')).toMatchObject({ available: '0.9' });
  });

  test('payouts at the dust limit (BTC 294 sat, LTC 2,940 litoshi) and of one amount unit of ETH are fine', async () => {
    const project = sandbox();
    for (const currency of ['BTC', 'LTC', 'ETH'] as const) await h.credit(project, currency, '1');
    for (const [currency, amount] of [['BTC', '0.00000294'], ['LTC', '0.0000294'], ['ETH', '0.00000001']] as const) {
      const { payout } = await h.client.requestPayout(payoutRequest(project, { currency, amount }));
      expect(payout).toMatchObject({ amount, currency });
    }
  });

  test('several bad fields are reported together', async () => {
    const err = await rejection(
      h.client.requestPayout({ projectId: 'x', environment: Environment.SANDBOX, amount: '0', currency: 'XYZ', address: '', note: 'n'.repeat(501) }),
    );
    expect(err.violations.map((v) => v.field).sort()).toEqual(['address', 'amount', 'currency', 'note', 'projectId']);
  });
});

test('auth decides the project: unknown → not_found; another environment → refused; auth down → unavailable', async () => {
  const unknown = { id: '0b0b0b0b-0000-4000-8000-000000000000', environment: 'sandbox' as const, email: 'x@example.com', emailVerified: true };
  expect(await rejection(h.client.requestPayout(payoutRequest(unknown)))).toMatchObject({ connectCode: Code.NotFound, code: 'not_found' });

  const live = h.auth.addProject('live');
  await h.credit(live, 'BTC', '1');
  const asSandbox = { ...payoutRequest(live), environment: Environment.SANDBOX, address: addressFor('BTC', 'sandbox') };
  expect(await rejection(h.client.requestPayout(asSandbox))).toMatchObject({ code: 'validation_failed', violations: [{ field: 'environment' }] });

  h.auth.down = true;
  try {
    expect(await rejection(h.client.requestPayout(payoutRequest(live)))).toMatchObject({ connectCode: Code.Unavailable, code: 'service_unavailable' });
  } finally {
    h.auth.down = false;
  }
  expect(await balanceOf(h, live, 'BTC')).toEqual({ available: '1', pending: '0', total: '1' });
  // A live project pays out to mainnet addresses from its live balance.
  const { payout } = await h.client.requestPayout(payoutRequest(live, { amount: '0.4' }));
  expect(payout).toMatchObject({ environment: Environment.LIVE, amount: '0.4' });
  expect(payout!.address.startsWith('bc1')).toBe(true);
});

describe('Idempotency-Key', () => {
  test('the same key and body replay the first payout; nothing is held twice and no second code is sent', async () => {
    const project = h.auth.addProject('sandbox');
    await h.credit(project, 'BTC', '1');
    const request = payoutRequest(project, { amount: '0.3', idempotencyKey: 'payout-2024-06-01', note: 'June' });
    const first = await h.client.requestPayout(request);
    const second = await h.client.requestPayout(request);
    expect(second).toMatchObject({ idempotentReplay: true });
    expect(second.payout).toEqual(first.payout);
    expect(await balanceOf(h, project, 'BTC')).toEqual({ available: '0.7', pending: '0.3', total: '1' });
    expect(h.notifier.payoutEmails.filter((e) => e.payoutId === first.payout!.id)).toHaveLength(1);
  });

  test('the same key with another body answers idempotency_key_reused', async () => {
    const project = h.auth.addProject('sandbox');
    await h.credit(project, 'BTC', '1');
    const request = payoutRequest(project, { amount: '0.3', idempotencyKey: 'k-1' });
    await h.client.requestPayout(request);
    for (const changed of [{ amount: '0.31' }, { note: 'other' }, { address: addressFor('BTC') }]) {
      expect(await rejection(h.client.requestPayout({ ...request, ...changed }))).toMatchObject({
        connectCode: Code.FailedPrecondition,
        code: 'idempotency_key_reused',
      });
    }
    // Keys are per project: another project may use the same one.
    const other = h.auth.addProject('sandbox');
    await h.credit(other, 'BTC', '1');
    expect((await h.client.requestPayout(payoutRequest(other, { amount: '0.3', idempotencyKey: 'k-1' }))).idempotentReplay).toBe(false);
  });

  test('10 concurrent requests with one key create one payout', async () => {
    const project = h.auth.addProject('sandbox');
    await h.credit(project, 'BTC', '1');
    const request = payoutRequest(project, { amount: '0.1', idempotencyKey: 'race' });
    const results = await Promise.all(Array.from({ length: 10 }, () => h.client.requestPayout(request)));
    expect(new Set(results.map((r) => r.payout!.id)).size).toBe(1);
    expect(results.filter((r) => !r.idempotentReplay)).toHaveLength(1);
    expect(await balanceOf(h, project, 'BTC')).toEqual({ available: '0.9', pending: '0.1', total: '1' });
  });

  test('a request refused for its balance does not use up its key', async () => {
    const project = h.auth.addProject('sandbox');
    await h.credit(project, 'BTC', '0.1');
    const request = payoutRequest(project, { amount: '0.2', idempotencyKey: 'retry-me' });
    expect(await rejection(h.client.requestPayout(request))).toMatchObject({ code: 'insufficient_balance' });
    await h.credit(project, 'BTC', '0.1');
    expect(await h.client.requestPayout(request)).toMatchObject({ idempotentReplay: false, payout: { amount: '0.2' } });
  });
});
