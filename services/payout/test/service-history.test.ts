/**
 * ListPayouts: newest first by (createdAt, id), status filter, opaque keyset cursor that pages
 * through 250 payouts with no duplicates or gaps while new payouts are being created.
 */
import { timestampDate } from '@bufbuild/protobuf/wkt';
import { PayoutStatus, type Payout } from '@coinvoice/runtime/gen/coinvoice/payout/v1/payout_pb';
import { codeOf, mapLimit, payoutRequest, rejection, startPayoutHarness, type FakeProject, type Harness } from './support/harness';

let h: Harness;
let project: FakeProject;
let original: string[];

beforeAll(async () => {
  h = await startPayoutHarness();
  // Live: verified payouts stay Pending (sandbox ones complete at once).
  project = h.auth.addProject('live');
  await h.credit(project, 'USDT', '100000');
  original = await mapLimit(250, 10, async () => (await h.client.requestPayout(payoutRequest(project, { currency: 'USDT', amount: '1' }))).payout!.id);
}, 120_000);

afterAll(async () => {
  await h?.dispose();
});

const key = (p: Payout) => [timestampDate(p.createdAt!).getTime(), p.id] as const;

function expectNewestFirst(items: Payout[]): void {
  for (let i = 1; i < items.length; i++) {
    const [t0, id0] = key(items[i - 1]!);
    const [t1, id1] = key(items[i]!);
    expect(t0 > t1 || (t0 === t1 && id0 > id1)).toBe(true);
  }
}

test('pages through 250 payouts with no duplicates or gaps while new ones are being created', async () => {
  let creating = true;
  const created: string[] = [];
  const creator = (async () => {
    while (creating) {
      const { payout } = await h.client.requestPayout(payoutRequest(project, { currency: 'USDT', amount: '2' }));
      created.push(payout!.id);
    }
  })();

  const seen: Payout[] = [];
  let cursor = '';
  let pages = 0;
  do {
    const page = await h.client.listPayouts({ projectId: project.id, pageSize: 17, cursor });
    seen.push(...page.payouts);
    cursor = page.nextCursor;
    pages++;
    // Give the creator room to insert between pages.
    await new Promise((r) => setTimeout(r, 5));
  } while (cursor !== '');
  creating = false;
  await creator;

  expect(created.length).toBeGreaterThan(0);
  const ids = seen.map((p) => p.id);
  expect(new Set(ids).size).toBe(ids.length); // no duplicates
  const seenSet = new Set(ids);
  expect(original.filter((id) => !seenSet.has(id))).toEqual([]); // no gaps
  expectNewestFirst(seen);
  expect(pages).toBeGreaterThanOrEqual(Math.ceil(250 / 17));
  // Everything listed is this project's: the originals and (some of) the ones created meanwhile.
  const known = new Set([...original, ...created]);
  expect(ids.filter((id) => !known.has(id))).toEqual([]);
});

test('the status filter and page sizes (default 20, capped at 100)', async () => {
  const verified = original.slice(0, 12);
  for (const payoutId of verified) await h.client.verifyPayout({ projectId: project.id, payoutId, code: await codeOf(h, payoutId) });

  const pending: Payout[] = [];
  let cursor = '';
  do {
    const page = await h.client.listPayouts({ projectId: project.id, status: PayoutStatus.PENDING, pageSize: 5, cursor });
    pending.push(...page.payouts);
    cursor = page.nextCursor;
  } while (cursor);
  expect(pending.map((p) => p.id).sort()).toEqual([...verified].sort());
  expect(pending.every((p) => p.status === PayoutStatus.PENDING)).toBe(true);
  expectNewestFirst(pending);

  expect((await h.client.listPayouts({ projectId: project.id })).payouts).toHaveLength(20);
  const capped = await h.client.listPayouts({ projectId: project.id, pageSize: 1000 });
  expect(capped.payouts).toHaveLength(100);
  expect(capped.nextCursor).not.toBe('');

  // Exactly one page: no next cursor.
  const completedNone = await h.client.listPayouts({ projectId: project.id, status: PayoutStatus.COMPLETED });
  expect(completedNone).toMatchObject({ payouts: [], nextCursor: '' });
});

test("another project sees none of these payouts; bad cursors and statuses are refused", async () => {
  const other = h.auth.addProject('sandbox');
  expect((await h.client.listPayouts({ projectId: other.id })).payouts).toEqual([]);
  for (const cursor of ['not a cursor', Buffer.from('p1:abc:def').toString('base64url'), 'x'.repeat(300)]) {
    expect(await rejection(h.client.listPayouts({ projectId: project.id, cursor }))).toMatchObject({
      code: 'validation_failed',
      violations: [{ field: 'cursor', message: 'is not a valid cursor' }],
    });
  }
  expect(await rejection(h.client.listPayouts({ projectId: project.id, status: 99 as PayoutStatus }))).toMatchObject({
    code: 'validation_failed',
    violations: [{ field: 'status' }],
  });
  expect(await rejection(h.client.listPayouts({ projectId: project.id, pageSize: -1 }))).toMatchObject({ violations: [{ field: 'pageSize' }] });
});
