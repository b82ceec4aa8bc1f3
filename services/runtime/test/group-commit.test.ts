/**
 * GroupCommit (docs/performance.md#group-commit): calls gathered into batches, at most maxItems
 * each; a lone call at low load goes at once; a failed batch is retried call by call so only the
 * call at fault fails; calls with one exclusive key never share a batch.
 */
import { GroupCommit, type BatchOutcome } from '../src/group-commit';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function recorder<T>(options: { failWhen?: (items: readonly T[]) => boolean; delayMs?: number } = {}) {
  const batches: T[][] = [];
  const run = async (items: readonly T[]): Promise<Array<BatchOutcome<T>>> => {
    batches.push([...items]);
    await sleep(options.delayMs ?? 5);
    if (options.failWhen?.(items)) throw new Error(`batch of ${items.length} failed`);
    return items.map((value) => ({ ok: true, value }));
  };
  return { batches, run };
}

test('calls arriving while a batch runs are gathered, at most maxItems per batch', async () => {
  const { batches, run } = recorder<number>({ delayMs: 20 });
  const group = new GroupCommit({ run, maxItems: 8, maxInFlight: 1 });
  const first = group.submit(0);
  await sleep(1); // the first batch (one call) is running
  const rest = Array.from({ length: 20 }, (_, i) => group.submit(i + 1));
  expect(await Promise.all([first, ...rest])).toEqual(Array.from({ length: 21 }, (_, i) => i));
  expect(batches[0]).toEqual([0]);
  expect(batches.slice(1).map((b) => b.length)).toEqual([8, 8, 4]);
  expect(batches.flat()).toEqual(Array.from({ length: 21 }, (_, i) => i));
});

test('a lone call goes at once, not after maxWaitMs', async () => {
  const { batches, run } = recorder<string>({ delayMs: 0 });
  const group = new GroupCommit({ run, maxWaitMs: 1_000 });
  const started = performance.now();
  await group.submit('alone');
  expect(performance.now() - started).toBeLessThan(500);
  expect(batches).toEqual([['alone']]);
});

test('a failed batch is retried call by call: only the call at fault fails, with its own error', async () => {
  const { batches, run } = recorder<string>({ failWhen: (items) => items.includes('bad') });
  const sizes: Array<[number, boolean]> = [];
  const group = new GroupCommit({ run, maxInFlight: 1, onBatch: (size, retried) => sizes.push([size, retried]) });
  const blocker = group.submit('first');
  await sleep(1);
  const calls = ['a', 'b', 'bad', 'c'].map((item) => group.submit(item));
  const settled = await Promise.allSettled([blocker, ...calls]);
  expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled', 'rejected', 'fulfilled']);
  expect((settled[3] as PromiseRejectedResult).reason).toEqual(new Error('batch of 1 failed'));
  // The four went together, failed together, then each alone.
  expect(batches.slice(1, 2)).toEqual([['a', 'b', 'bad', 'c']]);
  expect(batches.slice(2).sort()).toEqual([['a'], ['b'], ['bad'], ['c']]);
  expect(sizes).toContainEqual([4, true]);
});

test('per-call outcomes: one call refused, the others answered, nothing retried', async () => {
  const batches: string[][] = [];
  const group = new GroupCommit<string, string>({
    run: async (items) => {
      batches.push([...items]);
      return items.map((item) => (item === 'refused' ? { ok: false, error: new Error('refused alone') } : { ok: true, value: item.toUpperCase() }));
    },
  });
  const settled = await Promise.allSettled(['x', 'refused', 'y'].map((item) => group.submit(item)));
  expect(settled).toEqual([
    { status: 'fulfilled', value: 'X' },
    { status: 'rejected', reason: new Error('refused alone') },
    { status: 'fulfilled', value: 'Y' },
  ]);
  expect(batches).toEqual([['x', 'refused', 'y']]);
});

test('calls with the same exclusive key never share a batch; order among them is kept', async () => {
  const { batches, run } = recorder<string>({ delayMs: 2 });
  const group = new GroupCommit({ run, exclusiveKey: (item) => item.split(':')[0] });
  await Promise.all(['k1:a', 'k1:b', 'k2:a', 'k1:c', 'k3:a'].map((item) => group.submit(item)));
  for (const batch of batches) expect(new Set(batch.map((item) => item.split(':')[0])).size).toBe(batch.length);
  const k1 = batches.flat().filter((item) => item.startsWith('k1:'));
  expect(k1).toEqual(['k1:a', 'k1:b', 'k1:c']);
});

test('a batch answering the wrong number of outcomes fails its calls instead of answering them wrongly', async () => {
  const group = new GroupCommit<number, number>({ run: async () => [] });
  await expect(group.submit(1)).rejects.toThrow('a batch of 1 answered 0 outcomes');
});
