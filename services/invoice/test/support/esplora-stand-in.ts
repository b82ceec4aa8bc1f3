/**
 * A protocol-level stand-in for an Esplora server (electrs / mempool.space REST API), NOT a node:
 * no Bitcoin or Litecoin node installs on these machines. It serves REAL transactions — P2WPKH
 * spends built and signed with bitcoinjs-lib, their txids the real double-SHA256 of the signed
 * serialization — in Esplora's documented JSON shapes, and plays what a test needs: mining,
 * mempool drops, double-spends, reorgs and outages. Block hashes are sha256d of a fake header
 * (height, parent, txids): blocks carry no proof of work. Block times follow the wall clock.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import * as ecc from '@bitcoinerlab/secp256k1';
import * as bitcoin from 'bitcoinjs-lib';
import { ECPairFactory, type ECPairInterface } from 'ecpair';

bitcoin.initEccLib(ecc);
const ECPair = ECPairFactory(ecc);

export const LITECOIN: bitcoin.Network = {
  messagePrefix: '\x19Litecoin Signed Message:\n',
  bech32: 'ltc',
  bip32: { public: 0x019da462, private: 0x019d9cfe },
  pubKeyHash: 0x30,
  scriptHash: 0x32,
  wif: 0xb0,
};

export interface StandInTx {
  txid: string;
  hex: string;
  tx: bitcoin.Transaction;
  /** The prevouts spent (for Esplora's vin[].prevout). */
  prevouts: Array<{ txid: string; vout: number; script: Buffer; value: number }>;
}

interface StandInBlock {
  hash: string;
  height: number;
  parent: string;
  time: number;
  txs: StandInTx[];
}

const sha256d = (data: Buffer) => createHash('sha256').update(createHash('sha256').update(data).digest()).digest();

/** A wallet paying from P2WPKH outputs it owns (funded by an earlier transaction of the stand-in). */
export class Payer {
  readonly key: ECPairInterface = ECPair.makeRandom();
  readonly payment: bitcoin.Payment;
  /** Unspent outputs of this payer: txid, vout, value in satoshi. */
  readonly utxos: Array<{ txid: string; vout: number; value: number }> = [];

  constructor(readonly network: bitcoin.Network) {
    this.payment = bitcoin.payments.p2wpkh({ pubkey: Buffer.from(this.key.publicKey), network });
  }

  get script(): Buffer {
    return Buffer.from(this.payment.output!);
  }
}

export class EsploraStandIn {
  readonly blocks: StandInBlock[] = [];
  readonly mempool = new Map<string, StandInTx>();
  /** Every transaction ever built, by txid (for /tx/:txid of mined ones and spends). */
  private readonly known = new Map<string, StandInTx>();
  /** While set, every request answers 503 (the source is down). */
  down = false;
  requests = 0;
  /** The path of every request, in order (tests count what a watcher asks per block). */
  readonly paths: string[] = [];
  private clock = 0;
  private readonly sockets = new Set<Socket>();

  private constructor(
    readonly network: bitcoin.Network,
    private readonly server: Server,
    readonly url: string,
  ) {}

  static async start(network: bitcoin.Network = bitcoin.networks.bitcoin): Promise<EsploraStandIn> {
    let standIn: EsploraStandIn | undefined;
    const server = createServer((req, res) => standIn!.handle(req, res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    standIn = new EsploraStandIn(network, server, `http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    server.on('connection', (socket) => {
      standIn!.sockets.add(socket);
      socket.on('close', () => standIn!.sockets.delete(socket));
    });
    // A short history, so the chain has a tip and parents: ten minutes apart and in the past, so
    // blocks mined by a test carry the wall clock's time (a history mined "now" put the clock
    // seconds ahead, and a payment mined before a test's expiredAt got a block time after it).
    const now = Math.floor(Date.now() / 1000);
    for (let i = 3; i > 0; i--) standIn.appendBlock(standIn.tip?.hash ?? '0'.repeat(64), [], now - i * 600);
    return standIn;
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  get tip(): StandInBlock {
    return this.blocks[this.blocks.length - 1]!;
  }

  /** A payer holding `coins` outputs of `valueSat` each, funded by a mined transaction. */
  fundedPayer(valueSat: number, coins = 2): Payer {
    const payer = new Payer(this.network);
    const funder = new Payer(this.network);
    // The funder's own coin is an output of a transaction the chain never shows (like any coin
    // older than our history); what we serve is the signed spend of it, which pays the payer.
    const source = { txid: randomBytes(32).toString('hex'), vout: 0, value: valueSat * coins + 10_000 };
    const funding = this.sign(funder, [source], Array.from({ length: coins }, () => ({ script: payer.script, value: valueSat })));
    this.mine([funding]);
    funding.tx.outs.forEach((out, vout) => payer.utxos.push({ txid: funding.txid, vout, value: Number(out.value) }));
    return payer;
  }

  /**
   * A signed transaction from `payer` spending its first unspent output (or `spend`), paying each
   * of `to` (address, satoshi) and the change back to the payer. Not broadcast.
   */
  pay(payer: Payer, to: Array<{ address: string; value: number }>, spend?: { txid: string; vout: number; value: number }): StandInTx {
    const input = spend ?? payer.utxos.shift();
    if (!input) throw new Error('payer has no unspent output');
    const outputs: Array<{ script: Buffer; value: number }> = to.map((o) => ({ script: Buffer.from(bitcoin.address.toOutputScript(o.address, this.network)), value: o.value }));
    const change = input.value - outputs.reduce((sum, o) => sum + o.value, 0) - 1_000;
    if (change < 0) throw new Error('payer output too small');
    if (change > 0) outputs.push({ script: payer.script, value: change });
    return this.sign(payer, [input], outputs);
  }

  private sign(payer: Payer, inputs: Array<{ txid: string; vout: number; value: number }>, outputs: Array<{ script: Buffer; value: number }>): StandInTx {
    const psbt = new bitcoin.Psbt({ network: this.network });
    for (const input of inputs) {
      psbt.addInput({ hash: input.txid, index: input.vout, witnessUtxo: { script: payer.script, value: BigInt(input.value) } });
    }
    for (const output of outputs) psbt.addOutput({ script: output.script, value: BigInt(output.value) });
    psbt.signAllInputs(payer.key);
    psbt.finalizeAllInputs();
    const tx = psbt.extractTransaction();
    const built: StandInTx = {
      txid: tx.getId(),
      hex: tx.toHex(),
      tx,
      prevouts: inputs.map((i) => ({ txid: i.txid, vout: i.vout, script: payer.script, value: i.value })),
    };
    this.known.set(built.txid, built);
    return built;
  }

  broadcast(tx: StandInTx): void {
    this.mempool.set(tx.txid, tx);
  }

  /** Drops a transaction from the mempool (evicted, or replaced by `mine` of a double-spend). */
  drop(txid: string): void {
    this.mempool.delete(txid);
  }

  /** Mines a block on the tip with `txs` (and removes them, and their conflicts, from the mempool). */
  mine(txs: StandInTx[] = [...this.mempool.values()]): StandInBlock {
    return this.appendBlock(this.tip?.hash ?? '0'.repeat(64), txs);
  }

  /** Replaces the top `depth` blocks by `depth` new ones, the first holding `txs`. */
  reorg(depth: number, txs: StandInTx[]): void {
    const removed = this.blocks.splice(this.blocks.length - depth, depth);
    for (const block of removed) for (const tx of block.txs) this.mempool.set(tx.txid, tx);
    for (let i = 0; i < depth; i++) this.appendBlock(this.tip.hash, i === 0 ? txs : []);
  }

  private appendBlock(parent: string, txs: StandInTx[], time?: number): StandInBlock {
    const height = this.blocks.length;
    // Block times follow the wall clock (strictly increasing), unless a test set the clock ahead.
    this.clock = time ?? Math.max(Math.floor(Date.now() / 1000), this.clock + 1);
    const header = Buffer.concat([Buffer.from(String(height)), Buffer.from(parent, 'hex'), randomBytes(8), ...txs.map((t) => Buffer.from(t.txid, 'hex'))]);
    const block: StandInBlock = { hash: sha256d(header).reverse().toString('hex'), height, parent, time: this.clock, txs };
    this.blocks.push(block);
    const spent = new Set(txs.flatMap((t) => t.prevouts.map((p) => `${p.txid}:${p.vout}`)));
    for (const [txid, tx] of this.mempool) {
      if (txs.some((t) => t.txid === txid) || tx.prevouts.some((p) => spent.has(`${p.txid}:${p.vout}`))) this.mempool.delete(txid);
    }
    return block;
  }

  /** Sets the clock: the next block's time is at least this (then follows the wall clock). */
  setClock(unixSeconds: number): void {
    this.clock = unixSeconds;
  }

  private blockOf(txid: string): StandInBlock | undefined {
    return this.blocks.find((b) => b.txs.some((t) => t.txid === txid));
  }

  /** Esplora's transaction JSON. */
  private txJson(t: StandInTx) {
    const block = this.blockOf(t.txid);
    const addressOf = (script: Buffer) => {
      try {
        return bitcoin.address.fromOutputScript(script, this.network);
      } catch {
        return undefined;
      }
    };
    return {
      txid: t.txid,
      version: t.tx.version,
      locktime: t.tx.locktime,
      vin: t.tx.ins.map((input, i) => {
        const prev = t.prevouts[i]!;
        return {
          txid: prev.txid,
          vout: prev.vout,
          prevout: { scriptpubkey: prev.script.toString('hex'), scriptpubkey_type: 'v0_p2wpkh', scriptpubkey_address: addressOf(prev.script), value: prev.value },
          scriptsig: '',
          scriptsig_asm: '',
          witness: input.witness.map((w) => Buffer.from(w).toString('hex')),
          is_coinbase: false,
          sequence: input.sequence,
        };
      }),
      vout: t.tx.outs.map((out) => ({
        scriptpubkey: Buffer.from(out.script).toString('hex'),
        scriptpubkey_type: 'v0_p2wpkh',
        scriptpubkey_address: addressOf(Buffer.from(out.script)),
        value: Number(out.value),
      })),
      size: t.hex.length / 2,
      weight: t.tx.weight(),
      fee: 1000,
      status: block ? { confirmed: true, block_height: block.height, block_hash: block.hash, block_time: block.time } : { confirmed: false },
    };
  }

  private scripthash(script: Buffer): string {
    return createHash('sha256').update(script).digest().reverse().toString('hex');
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    this.requests += 1;
    if (this.down) return this.send(res, 503, 'text/plain', 'stand-in is down');
    const path = new URL(req.url ?? '/', 'http://stand-in').pathname;
    this.paths.push(path);
    const parts = path.split('/').filter(Boolean);
    const json = (body: unknown) => this.send(res, 200, 'application/json', JSON.stringify(body));
    const text = (body: string) => this.send(res, 200, 'text/plain', body);
    const notFound = () => this.send(res, 404, 'text/plain', 'Not Found');

    if (path === '/blocks/tip/height') return text(String(this.tip.height));
    if (path === '/blocks/tip/hash') return text(this.tip.hash);
    if (parts[0] === 'block-height' && parts.length === 2) {
      const block = this.blocks[Number(parts[1])];
      return block ? text(block.hash) : notFound();
    }
    if (parts[0] === 'block' && parts[1]) {
      const block = this.blocks.find((b) => b.hash === parts[1]);
      if (!block) return notFound();
      if (parts.length === 2) {
        return json({
          id: block.hash, height: block.height, version: 0x20000000, timestamp: block.time, tx_count: block.txs.length,
          size: 285, weight: 1140, merkle_root: '0'.repeat(64), previousblockhash: block.parent, mediantime: block.time - 300,
          nonce: 0, bits: 0x1d00ffff, difficulty: 1,
        });
      }
      if (parts[2] === 'txids') return json(block.txs.map((t) => t.txid));
      if (parts[2] === 'txs') {
        const start = Number(parts[3] ?? 0);
        if (start % 25 !== 0 || (start >= block.txs.length && block.txs.length > 0)) return notFound();
        return json(block.txs.slice(start, start + 25).map((t) => this.txJson(t)));
      }
    }
    if (parts[0] === 'tx' && parts[1]) {
      const t = this.known.get(parts[1]);
      const visible = t && (this.mempool.has(t.txid) || this.blockOf(t.txid));
      if (parts[2] === 'outspend') {
        const vout = Number(parts[3]);
        const spender = [...this.blocks.flatMap((b) => b.txs), ...this.mempool.values()].find((x) => x.prevouts.some((p) => p.txid === parts[1] && p.vout === vout));
        if (!spender) return json({ spent: false });
        const block = this.blockOf(spender.txid);
        return json({ spent: true, txid: spender.txid, vin: 0, status: block ? { confirmed: true, block_height: block.height, block_hash: block.hash } : { confirmed: false } });
      }
      if (!t || !visible) return notFound();
      if (parts[2] === 'status') return json(this.txJson(t).status);
      if (parts[2] === 'hex') return text(t.hex);
      return json(this.txJson(t));
    }
    if (parts[0] === 'scripthash' && parts[1]) {
      const matches = (t: StandInTx) => t.tx.outs.some((o) => this.scripthash(Buffer.from(o.script)) === parts[1]);
      if (parts[2] === 'txs' && parts[3] === 'mempool') return json([...this.mempool.values()].filter(matches).map((t) => this.txJson(t)));
      if (parts[2] === 'txs' && parts[3] === 'chain') {
        // Newest first, 25 per page, the next page after the last txid seen.
        const history = this.blocks.flatMap((b) => b.txs).filter(matches).reverse();
        const after = parts[4] ? history.findIndex((t) => t.txid === parts[4]) + 1 : 0;
        return json(history.slice(after, after + 25).map((t) => this.txJson(t)));
      }
      if (parts.length === 2) {
        let funded = 0;
        for (const t of this.blocks.flatMap((b) => b.txs)) {
          for (const o of t.tx.outs) if (this.scripthash(Buffer.from(o.script)) === parts[1]) funded += Number(o.value);
        }
        return json({ scripthash: parts[1], chain_stats: { funded_txo_count: 0, funded_txo_sum: funded, spent_txo_count: 0, spent_txo_sum: 0, tx_count: 0 }, mempool_stats: {} });
      }
    }
    if (path === '/mempool/txids') return json([...this.mempool.keys()]);
    return notFound();
  }

  private send(res: ServerResponse, status: number, type: string, body: string): void {
    res.writeHead(status, { 'content-type': type });
    res.end(body);
  }
}
