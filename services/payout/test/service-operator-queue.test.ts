/**
 * ListAllPayouts, the operators' queue: every project's payouts oldest first by (createdAt, id),
 * filtered by status and environment, paged with a cursor of its own that walks the queue with no
 * duplicates or gaps while new payouts arrive; bad filters and foreign cursors are refused.
 */
import { timestampDate } from '@bufbuild/protobuf/wkt';
import { Environment } from '@coinvoice/runtime/gen/coinvoice/common/v1/environment_pb';
import { PayoutStatus, type Payout } from '@coinvoice/runtime/gen/coinvoice/payout/v1/payout_pb';
import { Code } from '@connectrpc/connect';
import type { MessageInitShape } from '@bufbuild/protobuf';
import type { ListAllPayoutsRequestSchema } from '@coinvoice/runtime/gen/coinvoice/payout/v1/payout_pb';
import { codeOf, OPERATOR_TOKEN, payoutRequest, rejection, startPayoutHarness, type FakeProject, type Harness } from './support/harness';

let h: Harness;
let live: FakeProject;
let otherLive: FakeProject;
let sandbox: FakeProject;

beforeAll(async () => {
  h = await startPayoutHarness();
  [live, otherLive, sandbox] = [h.auth.addProject('live'), h.auth.addProject('live'), h.auth.addProject('sandbox')];
  for (const p of [live, otherLive, sandbox]) await h.credit(p, 'USDT', '1000');
}, 120_000);

afterAll(async () => {
  await h?.dispose();
});

async function pending(project: FakeProject): Promise<string> {
  const { payout } = await h.client.requestPayout(payoutRequest(project, { currency: 'USDT', amount: '1' }));
  await h.client.verifyPayout({ projectId: project.id, payoutId: payout!.id, code: await codeOf(h, payout!.id) });
  return payout!.id;
}

/** The queue as an operator asks for it: with the operator's session token. */
const queue = (req: MessageInitShape<typeof ListAllPayoutsRequestSchema>) => h.client.listAllPayouts({ operatorToken: OPERATOR_TOKEN, ...req });

const order = (p: Payout) => [timestampDate(p.createdAt!).getTime(), p.id] as const;

async function walk(pageSize: number, during?: () => Promise<void>): Promise<Payout[]> {
  const seen: Payout[] = [];
  let cursor = '';
  do {
    const page = await queue({ status: PayoutStatus.PENDING, environment: Environment.LIVE, pageSize, cursor });
    seen.push(...page.payouts);
    cursor = page.nextCursor;
    await during?.();
  } while (cursor !== '');
  return seen;
}

test('Pending live payouts of every project, oldest first, paged without duplicates or gaps while new ones arrive', async () => {
  const queued: string[] = [];
  for (let i = 0; i < 7; i++) queued.push(await pending(i % 2 === 0 ? live : otherLive));
  // Verified, a sandbox payout completes by itself (issue 12): never in the Pending queue.
  const sandboxPending = await pending(sandbox);
  const { payout: awaiting } = await h.client.requestPayout(payoutRequest(live, { currency: 'USDT', amount: '1' }));

  const arrived: string[] = [];
  const seen = await walk(3, async () => {
    arrived.push(await pending(live));
  });
  const ids = seen.map((p) => p.id);
  expect(new Set(ids).size).toBe(ids.length);
  // The queue's start is exactly what was waiting, in order; what arrived meanwhile comes after it.
  expect(ids.slice(0, queued.length)).toEqual(queued);
  expect(ids.slice(queued.length).every((id) => arrived.includes(id))).toBe(true);
  for (let i = 1; i < seen.length; i++) {
    const [t0, id0] = order(seen[i - 1]!);
    const [t1, id1] = order(seen[i]!);
    expect(t0 < t1 || (t0 === t1 && id0 < id1)).toBe(true);
  }
  expect(seen.every((p) => p.status === PayoutStatus.PENDING && p.environment === Environment.LIVE)).toBe(true);
  expect(ids).not.toContain(sandboxPending);
  expect(ids).not.toContain(awaiting!.id);
  expect(new Set(seen.map((p) => p.projectId))).toEqual(new Set([live.id, otherLive.id]));

  // Other filters, and none at all.
  const sandboxQueue = await queue({ status: PayoutStatus.PENDING, environment: Environment.SANDBOX });
  expect(sandboxQueue.payouts.map((p) => p.id)).toEqual([]);
  const sandboxDone = await queue({ status: PayoutStatus.COMPLETED, environment: Environment.SANDBOX });
  expect(sandboxDone.payouts.map((p) => p.id)).toEqual([sandboxPending]);
  const awaitingQueue = await queue({ status: PayoutStatus.AWAITING_VERIFICATION });
  expect(awaitingQueue.payouts.map((p) => p.id)).toEqual([awaiting!.id]);
  const everything = await queue({ pageSize: 100 });
  expect(everything.payouts).toHaveLength(queued.length + arrived.length + 2);
  // The default page (20) holds all of them; a smaller page says where the next one starts.
  expect(await queue({})).toMatchObject({ payouts: everything.payouts, nextCursor: '' });
  const small = await queue({ pageSize: 5 });
  expect(small.payouts).toEqual(everything.payouts.slice(0, 5));
  expect(small.nextCursor).not.toBe('');
});

test('bad statuses, environments, page sizes and cursors (a merchant history cursor among them) are refused', async () => {
  const history = await h.client.listPayouts({ projectId: live.id, pageSize: 1 });
  expect(history.nextCursor).not.toBe('');
  for (const cursor of ['not a cursor', history.nextCursor, 'x'.repeat(300)]) {
    expect(await rejection(queue({ cursor }))).toMatchObject({ code: 'validation_failed', violations: [{ field: 'cursor', message: 'is not a valid cursor' }] });
  }
  expect(await rejection(queue({ status: 99 as PayoutStatus }))).toMatchObject({ violations: [{ field: 'status' }] });
  expect(await rejection(queue({ environment: 7 as Environment }))).toMatchObject({ violations: [{ field: 'environment' }] });
  expect(await rejection(queue({ pageSize: -1 }))).toMatchObject({ violations: [{ field: 'pageSize' }] });
});

test("the queue (every merchant's payouts and addresses) needs a valid operator session token, checked with auth", async () => {
  await pending(live);
  for (const operatorToken of ['', 'a-merchant-token']) {
    expect(await rejection(h.client.listAllPayouts({ operatorToken }))).toMatchObject({ connectCode: Code.Unauthenticated, code: 'invalid_token' });
  }
  expect((await queue({ status: PayoutStatus.PENDING })).payouts.length).toBeGreaterThan(0);
});
