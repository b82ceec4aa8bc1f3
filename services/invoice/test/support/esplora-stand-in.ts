/**
 * A protocol-level stand-in for an Esplora server (electrs / mempool.space REST API), NOT a node:
 * no Bitcoin or Litecoin node installs on these machines. It serves REAL transactions — P2WPKH
 * spends built and signed with bitcoinjs-lib, their txids the real double-SHA256 of the signed
 * serialization — in Esplora's documented JSON shapes, and plays what a test needs: mining,
 * mempool drops, double-spends, reorgs and outages. Block hashes are sha256d of a fake header
 * (height, parent, txids): blocks carry no proof of work. Block times follow the wall clock.
 *
 * It judges what it is sent (`POST /tx`) as a node's mempool would, against its own UTXO set (the
 * outputs of the transactions it serves): every input must spend a known output not spent in the
 * chain, and carry a P2WPKH witness whose signature verifies (BIP143) against that output's script
 * and value; the fee must be positive; an input spent by a mempool transaction is accepted only as
 * a BIP125 replacement (the replaced one signals it, the new fee pays for both at 1 sat/vB more).
 * Refusals answer 400 with bitcoind's words. `GET /fee-estimates` serves rates a test sets.
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

/** One `POST /tx` the stand-in received, and its verdict. */
export interface BroadcastAttempt {
  hex: string;
  txid: string | undefined;
  accepted: boolean;
  /** The refusal, in bitcoind's words (undefined when accepted). */
  reason: string | undefined;
}

/** Esplora's confirmation targets (blocks) of `/fee-estimates`. */
const FEE_TARGETS = [...Array.from({ length: 25 }, (_, i) => i + 1), 144, 504, 1008];
/** BIP125's incremental relay fee: a replacement pays at least this much more per vbyte of its own. */
const INCREMENTAL_RELAY_SAT_PER_VB = 1;

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
  /** Every `POST /tx`, in order, with the verdict. */
  readonly broadcasts: BroadcastAttempt[] = [];
  /** What `GET /fee-estimates` answers, sat/vB per confirmation target. */
  private feeEstimates: Record<string, number> = EsploraStandIn.feeCurve(20, 2);
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
      fee: this.feeOf(t),
      status: block ? { confirmed: true, block_height: block.height, block_hash: block.hash, block_time: block.time } : { confirmed: false },
    };
  }

  /**
   * A fee curve as Esplora's: `fast` sat/vB for the next block, falling linearly to `slow` at
   * 25 blocks and after.
   */
  static feeCurve(fast: number, slow: number): Record<string, number> {
    const curve: Record<string, number> = {};
    for (const target of FEE_TARGETS) {
      const t = Math.min(target, 25);
      curve[String(target)] = Math.round((fast - ((fast - slow) * (t - 1)) / 24) * 1000) / 1000;
    }
    return curve;
  }

  /** Sets what `GET /fee-estimates` answers (sat/vB per target), e.g. `EsploraStandIn.feeCurve(300, 150)` for a spike. */
  setFeeEstimates(estimates: Record<string, number>): void {
    this.feeEstimates = { ...estimates };
  }

  /** Any transaction the stand-in was ever sent or built, served now or not (a replaced version, say): for a test to mine it. */
  everSeen(txid: string): StandInTx | undefined {
    return this.known.get(txid);
  }

  /** The output `txid:vout` of a transaction the stand-in serves (chain or mempool), if any. */
  private outputOf(txid: string, vout: number): { script: Buffer; value: number } | undefined {
    const t = this.known.get(txid);
    if (!t || !(this.mempool.has(txid) || this.blockOf(txid))) return undefined;
    const out = t.tx.outs[vout];
    return out ? { script: Buffer.from(out.script), value: Number(out.value) } : undefined;
  }

  /** The transaction of the chain, or of the mempool, spending `txid:vout`. */
  private spenderOf(txid: string, vout: number, where: 'chain' | 'mempool'): StandInTx | undefined {
    const txs = where === 'chain' ? this.blocks.flatMap((b) => b.txs) : [...this.mempool.values()];
    return txs.find((x) => x.prevouts.some((p) => p.txid === txid && p.vout === vout));
  }

  /** Unspent outputs paying `address` (chain and mempool, spends in either counted): what it could spend. */
  unspentOf(address: string): Array<{ txid: string; vout: number; value: number; confirmed: boolean }> {
    const script = Buffer.from(bitcoin.address.toOutputScript(address, this.network));
    const found: Array<{ txid: string; vout: number; value: number; confirmed: boolean }> = [];
    for (const t of [...this.blocks.flatMap((b) => b.txs), ...this.mempool.values()]) {
      t.tx.outs.forEach((out, vout) => {
        if (!Buffer.from(out.script).equals(script)) return;
        if (this.spenderOf(t.txid, vout, 'chain') || this.spenderOf(t.txid, vout, 'mempool')) return;
        found.push({ txid: t.txid, vout, value: Number(out.value), confirmed: this.blockOf(t.txid) !== undefined });
      });
    }
    return found;
  }

  /** The fee of a transaction the stand-in holds: its inputs' values less its outputs'. */
  feeOf(t: StandInTx): number {
    return t.prevouts.reduce((sum, p) => sum + p.value, 0) - t.tx.outs.reduce((sum, o) => sum + Number(o.value), 0);
  }

  /**
   * Judges a raw transaction as a node's mempool would (see the header): accepted, it joins the
   * mempool (replacing what it conflicts with); refused, the reason in bitcoind's words.
   */
  submit(hex: string): BroadcastAttempt {
    const attempt = this.judge(hex);
    this.broadcasts.push(attempt);
    return attempt;
  }

  private judge(hex: string): BroadcastAttempt {
    const refuse = (txid: string | undefined, code: number, message: string): BroadcastAttempt => ({
      hex, txid, accepted: false, reason: `sendrawtransaction RPC error: {"code":${code},"message":"${message}"}`,
    });
    let tx: bitcoin.Transaction;
    try {
      tx = bitcoin.Transaction.fromHex(hex.trim());
    } catch {
      return refuse(undefined, -22, 'TX decode failed');
    }
    const txid = tx.getId();
    if (this.mempool.has(txid) || this.blockOf(txid)) return refuse(txid, -27, 'Transaction already in block chain or mempool');
    if (tx.ins.length === 0 || tx.outs.length === 0) return refuse(txid, -26, 'bad-txns-vin-empty');
    const prevouts: StandInTx['prevouts'] = [];
    const seen = new Set<string>();
    const conflicts = new Map<string, StandInTx>();
    for (const [index, input] of tx.ins.entries()) {
      const prevTxid = Buffer.from(input.hash).reverse().toString('hex');
      const key = `${prevTxid}:${input.index}`;
      if (seen.has(key)) return refuse(txid, -26, 'bad-txns-inputs-duplicate');
      seen.add(key);
      const prev = this.outputOf(prevTxid, input.index);
      if (!prev || this.spenderOf(prevTxid, input.index, 'chain')) return refuse(txid, -25, 'bad-txns-inputs-missingorspent');
      const verdict = this.verifyP2wpkhInput(tx, index, prev);
      if (verdict) return refuse(txid, -26, `mandatory-script-verify-flag-failed (${verdict})`);
      const inMempool = this.spenderOf(prevTxid, input.index, 'mempool');
      if (inMempool) conflicts.set(inMempool.txid, inMempool);
      prevouts.push({ txid: prevTxid, vout: input.index, script: prev.script, value: prev.value });
    }
    const candidate: StandInTx = { txid, hex: tx.toHex(), tx, prevouts };
    const fee = this.feeOf(candidate);
    if (fee <= 0) return refuse(txid, -26, 'bad-txns-in-belowout');
    if (conflicts.size > 0) {
      const signals = [...conflicts.values()].every((c) => c.tx.ins.some((i) => i.sequence < 0xfffffffe));
      if (!signals) return refuse(txid, -26, 'txn-mempool-conflict');
      const replacedFees = [...conflicts.values()].reduce((sum, c) => sum + this.feeOf(c), 0);
      if (fee < replacedFees + INCREMENTAL_RELAY_SAT_PER_VB * tx.virtualSize()) {
        return refuse(txid, -26, `insufficient fee, rejecting replacement ${txid}; new feerate too low (fee ${fee} < ${replacedFees} + ${tx.virtualSize()})`);
      }
      for (const replaced of conflicts.keys()) this.dropWithDescendants(replaced);
    }
    this.known.set(txid, candidate);
    this.mempool.set(txid, candidate);
    return { hex, txid, accepted: true, reason: undefined };
  }

  /** Removes a mempool transaction and every mempool transaction spending its outputs. */
  private dropWithDescendants(txid: string): void {
    this.mempool.delete(txid);
    for (const child of [...this.mempool.values()]) {
      if (child.prevouts.some((p) => p.txid === txid)) this.dropWithDescendants(child.txid);
    }
  }

  /**
   * BIP143 verification of a P2WPKH input: witness [signature, public key], the key's hash160 the
   * spent script's program, the signature valid over the input's sighash. Undefined when valid,
   * else why not.
   */
  private verifyP2wpkhInput(tx: bitcoin.Transaction, index: number, prev: { script: Buffer; value: number }): string | undefined {
    const program = prev.script.length === 22 && prev.script[0] === 0x00 && prev.script[1] === 0x14 ? prev.script.subarray(2) : undefined;
    if (!program) return 'spent output is not P2WPKH';
    const witness = tx.ins[index]!.witness;
    if (witness.length !== 2) return 'Witness program hash mismatch';
    const [encodedSignature, publicKey] = [Buffer.from(witness[0]!), Buffer.from(witness[1]!)];
    if (!Buffer.from(bitcoin.crypto.hash160(publicKey)).equals(program)) return 'Witness program hash mismatch';
    let decoded: { signature: Uint8Array; hashType: number };
    try {
      decoded = bitcoin.script.signature.decode(encodedSignature);
    } catch {
      return 'Non-canonical DER signature';
    }
    const scriptCode = bitcoin.payments.p2pkh({ hash: program }).output!;
    const sighash = tx.hashForWitnessV0(index, scriptCode, BigInt(prev.value), decoded.hashType);
    return ecc.verify(sighash, publicKey, decoded.signature, true) ? undefined : 'Signature must be zero for failed CHECK(MULTI)SIG operation';
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

    if (req.method === 'POST' && path === '/tx') {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        try {
          const attempt = this.submit(Buffer.concat(chunks).toString('utf8'));
          if (attempt.accepted) text(attempt.txid!);
          else this.send(res, 400, 'text/plain', attempt.reason!);
        } catch (err) {
          // A bug of the stand-in's own must fail the test loudly, not hang it.
          this.send(res, 500, 'text/plain', `stand-in error: ${String(err)}`);
        }
      });
      return;
    }
    if (path === '/fee-estimates') return json(this.feeEstimates);
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
