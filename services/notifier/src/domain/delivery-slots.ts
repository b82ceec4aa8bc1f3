/**
 * Fair shares of the delivery slots (docs/webhook-delivery.md): attempts in flight are counted per
 * project and per destination host, the host taken from the URL an attempt actually calls (the
 * project's URL of the moment), never from the URL saved when the delivery was created.
 */

/** In-use counts per key (a project id, a host). */
export class Slots {
  readonly counts = new Map<string, number>();
  count(key: string): number {
    return this.counts.get(key) ?? 0;
  }
  take(key: string): void {
    this.counts.set(key, this.count(key) + 1);
  }
  give(key: string): void {
    const left = this.count(key) - 1;
    if (left <= 0) this.counts.delete(key);
    else this.counts.set(key, left);
  }
}

/** The host a webhook URL sends to, as the per-host limit counts it; undefined for a URL that does not parse. */
export function destinationHost(url: string): string | undefined {
  try {
    return new URL(url).hostname.toLowerCase().replace(/\.$/, '');
  } catch {
    return undefined;
  }
}
