/**
 * What the UTXO processor asks of the Esplora REST API (the node the watchers follow,
 * CHAIN_<NETWORK>_ESPLORA_URL): fee estimates, the tip, a transaction's status, an output's spender,
 * and `POST /tx`. Every answer is checked before use; an unreachable or malformed source throws
 * EsploraUnavailable (the round is retried), a node's refusal of a broadcast is an answer.
 */
import { feeRateOfEstimate, type FeeRate } from '../../domain/fee-rate';

export class EsploraUnavailable extends Error {
  constructor(message: string) {
    super(`esplora: ${message}`);
    this.name = 'EsploraUnavailable';
  }
}

export type TxStatus = { known: false } | { known: true; confirmed: false } | { known: true; confirmed: true; height: number; blockHash: string };
export type Outspend = { spent: false } | { spent: true; txid: string; confirmed: boolean; height?: number };
export type BroadcastResult = { accepted: true; txid: string } | { accepted: false; reason: string };

const HASH = /^[0-9a-f]{64}$/;

export class EsploraClient {
  private readonly base: string;

  constructor(private readonly options: { baseUrl: string; timeoutMs: number }) {
    this.base = options.baseUrl.replace(/\/+$/, '');
  }

  private async request(path: string, init: RequestInit = {}): Promise<{ status: number; body: string }> {
    let response: Response;
    try {
      response = await fetch(`${this.base}${path}`, { ...init, signal: AbortSignal.timeout(this.options.timeoutMs) });
    } catch (err) {
      throw new EsploraUnavailable(`${path}: ${err instanceof Error ? err.message : String(err)}`);
    }
    const body = await response.text();
    if (response.status >= 500) throw new EsploraUnavailable(`${path}: HTTP ${response.status}`);
    return { status: response.status, body };
  }

  private async json(path: string): Promise<unknown | undefined> {
    const { status, body } = await this.request(path);
    if (status === 404) return undefined;
    if (status !== 200) throw new EsploraUnavailable(`${path}: HTTP ${status}`);
    try {
      return JSON.parse(body) as unknown;
    } catch {
      throw new EsploraUnavailable(`${path}: the answer is not JSON`);
    }
  }

  /** `GET /fee-estimates`: confirmation target (blocks) → rate, each rounded up to the msat/vB. */
  async feeEstimates(): Promise<Map<number, FeeRate>> {
    const body = await this.json('/fee-estimates');
    if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new EsploraUnavailable('/fee-estimates: not an object');
    const estimates = new Map<number, FeeRate>();
    for (const [target, value] of Object.entries(body)) {
      const blocks = Number(target);
      const rate = typeof value === 'number' ? feeRateOfEstimate(value) : undefined;
      if (!Number.isSafeInteger(blocks) || blocks < 1 || rate === undefined) throw new EsploraUnavailable(`/fee-estimates: malformed entry ${JSON.stringify(target)}`);
      estimates.set(blocks, rate);
    }
    return estimates;
  }

  async tipHeight(): Promise<number> {
    const { status, body } = await this.request('/blocks/tip/height');
    const height = Number(body.trim());
    if (status !== 200 || !Number.isSafeInteger(height) || height < 0) throw new EsploraUnavailable('/blocks/tip/height: not a height');
    return height;
  }

  /** `GET /blocks/tip/hash`: the tip changes with every block and every reorg. */
  async tipHash(): Promise<string> {
    const { status, body } = await this.request('/blocks/tip/hash');
    const hash = body.trim();
    if (status !== 200 || !HASH.test(hash)) throw new EsploraUnavailable('/blocks/tip/hash: not a block hash');
    return hash;
  }

  /** `GET /tx/:txid/status`; unknown (404) when neither mined nor in the node's mempool. */
  async txStatus(txid: string): Promise<TxStatus> {
    const body = await this.json(`/tx/${txid}/status`);
    if (body === undefined) return { known: false };
    if (typeof body !== 'object' || body === null || typeof (body as { confirmed?: unknown }).confirmed !== 'boolean') throw new EsploraUnavailable(`/tx/${txid}/status: malformed`);
    const status = body as { confirmed: boolean; block_height?: unknown; block_hash?: unknown };
    if (!status.confirmed) return { known: true, confirmed: false };
    if (!Number.isSafeInteger(status.block_height) || typeof status.block_hash !== 'string' || !HASH.test(status.block_hash)) throw new EsploraUnavailable(`/tx/${txid}/status: confirmed without a block`);
    return { known: true, confirmed: true, height: status.block_height as number, blockHash: status.block_hash };
  }

  /** `GET /tx/:txid/outspend/:vout`: whether (and by which transaction) an output is spent. */
  async outspend(txid: string, vout: number): Promise<Outspend> {
    const body = await this.json(`/tx/${txid}/outspend/${vout}`);
    if (typeof body !== 'object' || body === null || typeof (body as { spent?: unknown }).spent !== 'boolean') throw new EsploraUnavailable(`/tx/${txid}/outspend/${vout}: malformed`);
    const answer = body as { spent: boolean; txid?: unknown; status?: { confirmed?: unknown; block_height?: unknown } };
    if (!answer.spent) return { spent: false };
    if (typeof answer.txid !== 'string' || !HASH.test(answer.txid)) throw new EsploraUnavailable(`/tx/${txid}/outspend/${vout}: spent without a txid`);
    const confirmed = answer.status?.confirmed === true;
    const height = Number.isSafeInteger(answer.status?.block_height) ? (answer.status!.block_height as number) : undefined;
    return { spent: true, txid: answer.txid, confirmed, ...(height === undefined ? {} : { height }) };
  }

  /** `POST /tx` with the raw hex: the txid on acceptance, the node's reason on a refusal (4xx). */
  async broadcast(rawHex: string): Promise<BroadcastResult> {
    const { status, body } = await this.request('/tx', { method: 'POST', headers: { 'content-type': 'text/plain' }, body: rawHex });
    if (status === 200) {
      const txid = body.trim();
      if (!HASH.test(txid)) throw new EsploraUnavailable('POST /tx: accepted without a txid');
      return { accepted: true, txid };
    }
    return { accepted: false, reason: body.trim().slice(0, 300) || `HTTP ${status}` };
  }
}
