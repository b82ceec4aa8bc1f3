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

export type CpuSample = Map<string, number>;

/** CPU ticks of each named process, of all postgres processes and of nats-server. */
export function sampleCpu(named: Record<string, number>): CpuSample {
  const sample: CpuSample = new Map();
  for (const [name, pid] of Object.entries(named)) sample.set(name, ticksOf(pid));
  // Postgres backends come and go with pools; summing the live ones misses exited ones, which
  // the pools here keep open, so the sum is close.
  sample.set('postgres', pidsNamed('postgres').reduce((sum, pid) => sum + ticksOf(pid), 0));
  sample.set('nats-server', pidsNamed('nats-server').reduce((sum, pid) => sum + ticksOf(pid), 0));
  return sample;
}

/** "name 0.42 ms" per process, CPU per request between two samples, largest first, and the total. */
export function cpuPerRequest(before: CpuSample, after: CpuSample, requests: number): string {
  const rows = [...after].map(([name, ticks]) => [name, ((ticks - (before.get(name) ?? 0)) / TICKS_PER_SECOND) * 1000 / Math.max(requests, 1)] as const);
  rows.sort((a, b) => b[1] - a[1]);
  const total = rows.reduce((sum, [, ms]) => sum + ms, 0);
  return `${rows.map(([name, ms]) => `${name} ${ms.toFixed(2)}`).join(', ')} — total ${total.toFixed(2)} ms CPU per request`;
}
