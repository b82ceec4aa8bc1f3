/**
 * CPU time per process from /proc (Linux): which process a request's CPU is spent in. Samples
 * utime + stime of each named process, of every `postgres` process (backends, WAL writer,
 * checkpointer) and of `nats-server`, before and after a load, so a scenario reads as
 * "ms of CPU per request" per process.
 */
import { readdirSync, readFileSync } from 'node:fs';

const TICKS_PER_SECOND = 100; // USER_HZ on Linux

function ticksOf(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command (which may hold spaces) start after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(fields[11]) + Number(fields[12]); // utime, stime (fields 14 and 15)
  } catch {
    return 0;
  }
}

function pidsNamed(command: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() === command) pids.push(Number(entry));
    } catch {
      /* gone */
    }
  }
  return pids;
}

/**
 * The whole host's CPU ticks from /proc/stat's first line: busy (user, nice, system, irq, softirq,
 * steal) and all (busy, idle, iowait). The processes' own ticks leave out the kernel's network work
 * done in softirq context (every loopback packet between the processes), so a scenario's host-wide
 * busy share says what the per-process figures cannot: whether the host was saturated (CPU-bound)
 * or left idle while requests waited on each other (latency-bound).
 */
function hostTicks(): { busy: number; all: number } {
  try {
    const [user, nice, system, idle, iowait, irq, softirq, steal] = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1, 9).map(Number);
    const busy = user! + nice! + system! + irq! + softirq! + steal!;
    return { busy, all: busy + idle! + iowait! };
  } catch {
    return { busy: 0, all: 0 };
  }
}

export interface CpuSample {
  processes: Map<string, number>;
  host: { busy: number; all: number };
}

/** CPU ticks of each named process, of all postgres processes and of nats-server, and of the host. */
export function sampleCpu(named: Record<string, number>): CpuSample {
  const host = hostTicks();
  const sample = new Map<string, number>();
  for (const [name, pid] of Object.entries(named)) sample.set(name, ticksOf(pid));
  // Postgres backends come and go with pools; summing the live ones misses exited ones, which
  // the pools here keep open, so the sum is close.
  sample.set('postgres', pidsNamed('postgres').reduce((sum, pid) => sum + ticksOf(pid), 0));
  sample.set('nats-server', pidsNamed('nats-server').reduce((sum, pid) => sum + ticksOf(pid), 0));
  return { processes: sample, host };
}

/**
 * "name 0.42 ms" per process, CPU per request between two samples, largest first, the total, and
 * how busy the whole host was in between.
 */
export function cpuPerRequest(before: CpuSample, after: CpuSample, requests: number): string {
  const rows = [...after.processes].map(([name, ticks]) => [name, ((ticks - (before.processes.get(name) ?? 0)) / TICKS_PER_SECOND) * 1000 / Math.max(requests, 1)] as const);
  rows.sort((a, b) => b[1] - a[1]);
  const total = rows.reduce((sum, [, ms]) => sum + ms, 0);
  const all = after.host.all - before.host.all;
  const busy = all > 0 ? `; host ${Math.round(((after.host.busy - before.host.busy) / all) * 100)}% busy` : '';
  return `${rows.map(([name, ms]) => `${name} ${ms.toFixed(2)}`).join(', ')} — total ${total.toFixed(2)} ms CPU per request${busy}`;
}
