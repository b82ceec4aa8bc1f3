/**
 * `npm run bench:derivation`: what an invoice address costs to derive (issue 11, Done when 5),
 * measured over 10,000 addresses per variant, as CPU time of this process and as wall time:
 * - @scure/bip32 on @noble/curves (pure JavaScript, what the service used before);
 * - tiny-secp256k1 (libsecp256k1 compiled to WASM) for the point addition;
 * - the `secp256k1` package's prebuilt libsecp256k1 addon (what AddressDeriver uses now);
 * - a pool of pre-derived addresses refilled in the background, over the old JavaScript
 *   derivation: the critical path only takes an address, the derivation runs in idle turns.
 * A prototype pool lives here only to be measured; bench/results.md says why it was not kept.
 */
import { hash } from 'node:crypto';
import { HDKey } from '@scure/bip32';
import * as tinySecp from 'tiny-secp256k1';
import { AddressDeriver, addressFromPublicKey, generateDevelopmentKeyPair, parseExtendedPublicKey } from '@coinvoice/chains/addresses';
import type { CryptoCode } from '@coinvoice/chains/coin';
import { secp256k1Points } from '@coinvoice/chains/secp256k1';

const ADDRESSES = Number(process.env.BENCH_ADDRESSES ?? 10_000);

interface Measurement {
  cpuMs: number;
  wallMs: number;
}

function measure(run: (index: number) => unknown, firstIndex = 1_000): Measurement {
  for (let i = 0; i < 200; i++) run(i); // warm up
  const cpu = process.cpuUsage();
  const wall = performance.now();
  for (let i = 0; i < ADDRESSES; i++) run(firstIndex + i);
  const used = process.cpuUsage(cpu);
  return { cpuMs: (used.user + used.system) / 1000 / ADDRESSES, wallMs: (performance.now() - wall) / ADDRESSES };
}

/** BIP32 CKDpub with tiny-secp256k1's WASM point addition (HMAC on node's crypto, as the kept one). */
function tinyDeriver(receive: HDKey, currency: CryptoCode): (index: number) => string {
  const chainCode = receive.chainCode!;
  const publicKey = receive.publicKey!;
  const inner = Buffer.alloc(128 + 37);
  const outer = Buffer.alloc(128 + 64);
  for (let i = 0; i < 128; i++) {
    inner[i] = (chainCode[i] ?? 0) ^ 0x36;
    outer[i] = (chainCode[i] ?? 0) ^ 0x5c;
  }
  inner.set(publicKey, 128);
  return (index) => {
    inner.writeUInt32BE(index, 161);
    outer.set(hash('sha512', inner, 'buffer'), 128);
    const child = tinySecp.pointAddScalar(publicKey, hash('sha512', outer, 'buffer').subarray(0, 32), true);
    if (!child) throw new Error('invalid child');
    return addressFromPublicKey(child, currency, 'mainnet');
  };
}

/**
 * A pre-derived address pool: `take()` hands out the next derived address; when fewer than
 * `lowWater` are left, a background refill derives `batch` more in slices of `slice`, yielding to
 * the event loop between slices (requests keep being served).
 */
class AddressPool {
  private readonly ready: string[] = [];
  private nextIndex = 0;
  private refilling = false;
  backgroundCpuMs = 0;
  derived = 0;

  constructor(
    private readonly derive: (index: number) => string,
    private readonly lowWater = 1_000,
    private readonly batch = 2_000,
    private readonly slice = 50,
  ) {}

  take(): string | undefined {
    const address = this.ready.shift();
    if (this.ready.length < this.lowWater) this.refill();
    return address;
  }

  size(): number {
    return this.ready.length;
  }

  refill(): void {
    if (this.refilling) return;
    this.refilling = true;
    let remaining = this.batch;
    const step = (): void => {
      const cpu = process.cpuUsage();
      for (let i = 0; i < this.slice && remaining > 0; i++, remaining--) this.ready.push(this.derive(this.nextIndex++));
      const used = process.cpuUsage(cpu);
      this.backgroundCpuMs += (used.user + used.system) / 1000;
      this.derived += this.slice;
      if (remaining > 0) setImmediate(step);
      else this.refilling = false;
    };
    setImmediate(step);
  }
}

async function measurePool(derive: (index: number) => string): Promise<{ take: Measurement; backgroundCpuMs: number; waits: number }> {
  const pool = new AddressPool(derive);
  pool.refill();
  while (pool.size() < 2_000) await new Promise((resolve) => setImmediate(resolve));
  let waits = 0;
  let takeCpu = 0;
  let takeWall = 0;
  // 10,000 invoice creations, each taking one address, yielding to the event loop in between
  // as a request handler does (the refill runs in those turns).
  for (let i = 0; i < ADDRESSES; i++) {
    for (;;) {
      const cpu = process.cpuUsage();
      const wall = performance.now();
      const address = pool.take();
      const used = process.cpuUsage(cpu);
      takeCpu += (used.user + used.system) / 1000;
      takeWall += performance.now() - wall;
      if (address) break;
      waits++;
      await new Promise((resolve) => setImmediate(resolve));
    }
    await new Promise((resolve) => setImmediate(resolve));
  }
  return {
    take: { cpuMs: takeCpu / ADDRESSES, wallMs: takeWall / ADDRESSES },
    backgroundCpuMs: pool.backgroundCpuMs / Math.max(pool.derived, 1),
    waits,
  };
}

async function main(): Promise<void> {
  const rows: string[] = [];
  const row = (variant: string, m: Measurement, note = ''): void => {
    rows.push(`| ${variant} | ${m.cpuMs.toFixed(4)} | ${m.wallMs.toFixed(4)} | ${note} |`);
  };
  for (const currency of ['BTC', 'ETH', 'TRX'] as const) {
    const pair = generateDevelopmentKeyPair(currency, 'mainnet');
    const account = parseExtendedPublicKey(pair.xpub);
    if (!account.ok) throw new Error(account.reason);
    const receive = account.value.deriveChild(0);
    const scure = (index: number): string => addressFromPublicKey(receive.deriveChild(index).publicKey!, currency, 'mainnet');
    const kept = new AddressDeriver(account.value, currency, 'mainnet');
    const tiny = tinyDeriver(receive, currency);
    for (const i of [0, 1, 77, 2 ** 31 - 1]) {
      if (tiny(i) !== kept.addressAt(i) || scure(i) !== kept.addressAt(i)) throw new Error(`variants disagree at ${currency} ${i}`);
    }
    row(`${currency}: @scure/bip32 on @noble/curves (before)`, measure(scure));
    row(`${currency}: tiny-secp256k1 (WASM)`, measure(tiny));
    row(`${currency}: libsecp256k1 addon (kept; backend ${secp256k1Points.backend})`, measure((i) => kept.addressAt(i)));
    if (currency === 'BTC') {
      const pool = await measurePool(scure);
      row(
        `${currency}: pool over @scure/bip32, take()`,
        pool.take,
        `critical path only; the background refill still spends ${pool.backgroundCpuMs.toFixed(4)} ms CPU per address; ${pool.waits} takes found it empty`,
      );
    }
  }
  console.log(`Address derivation, ${ADDRESSES} addresses per variant, ms per address (Node ${process.version})\n`);
  console.log('| variant | CPU ms | wall ms | note |\n| --- | ---: | ---: | --- |');
  for (const line of rows) console.log(line);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
