/**
 * Group commit (docs/performance.md#group-commit): concurrent calls that each need a small
 * transaction are gathered into one batch, run as ONE transaction with multi-row statements, and
 * each caller is answered when that transaction has committed. What a request used to pay alone
 * (a BEGIN, a COMMIT and its fsync, a round trip per statement) is paid once per batch.
 *
 * When a batch leaves:
 * - at once (on the next turn of the event loop, so calls that arrived together go together) when
 *   no batch is running: a lone call at low load waits for nothing;
 * - while a batch is running, calls gather until `maxItems` are waiting or the first of them has
 *   waited `maxWaitMs`, whichever comes first, and leave as soon as a slot is free (at most
 *   `maxInFlight` batches run at once).
 *
 * A batch whose transaction fails (a row violating a constraint, a deadlock, Postgres gone) is
 * retried item by item, each alone: the row at fault fails only its own caller, the others are
 * answered as if they had come alone. Items with the same `exclusiveKey` (e.g. one Idempotency-Key)
 * never share a batch: the later waits for the next one, where it sees the earlier committed.
 */

/** One item's result: its value, or the error its caller is answered with. */
export type BatchOutcome<Out> = { ok: true; value: Out } | { ok: false; error: unknown };

export interface GroupCommitOptions<In, Out> {
  /** Runs one batch in one transaction: one outcome per item, in the items' order. Throwing fails the whole batch. */
  run: (items: readonly In[]) => Promise<ReadonlyArray<BatchOutcome<Out>>>;
  /** Most items in one batch (default 64). */
  maxItems?: number;
  /** Longest the first waiting item waits for others while a batch is running (default 2 ms). */
  maxWaitMs?: number;
  /** Batches running at once (default 2): each holds one pooled connection. */
  maxInFlight?: number;
  /** Items whose keys are equal never share a batch. */
  exclusiveKey?: (item: In) => string | undefined;
  /** Told each batch's size, and whether it failed and was retried item by item (metrics). */
  onBatch?: (size: number, retriedAlone: boolean) => void;
}

interface Waiting<In, Out> {
  item: In;
  resolve: (value: Out) => void;
  reject: (error: unknown) => void;
}

export class GroupCommit<In, Out> {
  private readonly maxItems: number;
  private readonly maxWaitMs: number;
  private readonly maxInFlight: number;
  private readonly waiting: Array<Waiting<In, Out>> = [];
  private inFlight = 0;
  private timer: NodeJS.Timeout | undefined;
  private immediate: NodeJS.Immediate | undefined;

  constructor(private readonly options: GroupCommitOptions<In, Out>) {
    this.maxItems = options.maxItems ?? 64;
    this.maxWaitMs = options.maxWaitMs ?? 2;
    this.maxInFlight = options.maxInFlight ?? 2;
    if (!Number.isInteger(this.maxItems) || this.maxItems < 1) throw new Error(`group commit: maxItems must be a positive integer, not ${this.maxItems}`);
    if (!Number.isInteger(this.maxInFlight) || this.maxInFlight < 1) throw new Error(`group commit: maxInFlight must be a positive integer, not ${this.maxInFlight}`);
  }

  /** Runs `item` in the next batch; resolves after that batch's transaction committed. */
  submit(item: In): Promise<Out> {
    return new Promise<Out>((resolve, reject) => {
      this.waiting.push({ item, resolve, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.waiting.length === 0 || this.inFlight >= this.maxInFlight) return;
    if (this.waiting.length >= this.maxItems) {
      this.launch();
      return;
    }
    if (this.inFlight === 0) {
      // Idle: go on the next turn of the loop, with whatever arrived in this one.
      this.immediate ??= setImmediate(() => {
        this.immediate = undefined;
        this.launch();
      });
      return;
    }
    this.timer ??= setTimeout(() => {
      this.timer = undefined;
      this.launch();
    }, this.maxWaitMs);
  }

  private launch(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.immediate) clearImmediate(this.immediate);
    this.immediate = undefined;
    if (this.waiting.length === 0 || this.inFlight >= this.maxInFlight) return;
    const batch = this.take();
    this.inFlight += 1;
    void this.runBatch(batch).finally(() => {
      this.inFlight -= 1;
      this.schedule();
    });
    // Another slot free and enough waiting for a full batch: that one goes too.
    this.schedule();
  }

  /** The oldest waiting items, up to maxItems, skipping (for later) one whose exclusive key is taken. */
  private take(): Array<Waiting<In, Out>> {
    const batch: Array<Waiting<In, Out>> = [];
    const keys = new Set<string>();
    const left: Array<Waiting<In, Out>> = [];
    for (const entry of this.waiting) {
      const key = this.options.exclusiveKey?.(entry.item);
      if (batch.length >= this.maxItems || (key !== undefined && keys.has(key))) {
        left.push(entry);
        continue;
      }
      if (key !== undefined) keys.add(key);
      batch.push(entry);
    }
    this.waiting.splice(0, this.waiting.length, ...left);
    return batch;
  }

  private async runBatch(batch: Array<Waiting<In, Out>>): Promise<void> {
    let outcomes: ReadonlyArray<BatchOutcome<Out>>;
    try {
      outcomes = await this.runChecked(batch.map((entry) => entry.item));
    } catch (err) {
      if (batch.length === 1) {
        this.options.onBatch?.(1, false);
        batch[0]!.reject(err);
        return;
      }
      // One row may have failed them all: each is tried alone, in a transaction of its own.
      this.options.onBatch?.(batch.length, true);
      await Promise.all(
        batch.map(async (entry) => {
          try {
            settle(entry, (await this.runChecked([entry.item]))[0]!);
          } catch (alone) {
            entry.reject(alone);
          }
        }),
      );
      return;
    }
    this.options.onBatch?.(batch.length, false);
    batch.forEach((entry, i) => settle(entry, outcomes[i]!));
  }

  private async runChecked(items: readonly In[]): Promise<ReadonlyArray<BatchOutcome<Out>>> {
    const outcomes = await this.options.run(items);
    if (outcomes.length !== items.length) throw new Error(`group commit: a batch of ${items.length} answered ${outcomes.length} outcomes`);
    return outcomes;
  }
}

function settle<In, Out>(entry: Waiting<In, Out>, outcome: BatchOutcome<Out>): void {
  if (outcome.ok) entry.resolve(outcome.value);
  else entry.reject(outcome.error);
}
