/**
 * The on-chain check of BTC/LTC payouts (../payout-check.ts) over the Esplora REST API the watchers follow
 * (CHAIN_BITCOIN_ESPLORA_URL, CHAIN_LITECOIN_ESPLORA_URL): `GET /tx/:txid` must be a mined
 * (`status.confirmed`) transaction whose outputs to the payout's address add up to exactly the
 * payout's amount in satoshi. Several outputs to the same address count together (a wallet may
 * split a payment); an output to another address is not the payout's.
 */
import { baseUnitsOf, ChainUnavailable, fetchJson, formatUnits, isRecord, mismatch, notMined, payoutBaseUnits, type ChainCheckInput, type ChainCheckResult, type PayoutChainCheck } from '../payout-check';

export interface EsploraCheckSettings {
  chain: 'bitcoin' | 'litecoin';
  baseUrl: string;
  timeoutMs: number;
}

/** What the check reads of Esplora's transaction JSON. */
interface EsploraTransaction {
  confirmed: boolean;
  outputs: Array<{ address: string | undefined; value: bigint }>;
}

export class EsploraPayoutCheck implements PayoutChainCheck {
  private readonly base: string;
  private readonly chainName: string;

  constructor(private readonly settings: EsploraCheckSettings) {
    this.base = settings.baseUrl.replace(/\/+$/, '');
    this.chainName = settings.chain === 'bitcoin' ? 'Bitcoin' : 'Litecoin';
  }

  async check(input: ChainCheckInput): Promise<ChainCheckResult> {
    // The hash was checked to be 64 hex digits: safe in a path.
    const raw = await fetchJson(`${this.base}/tx/${input.transactionHash}`, { timeoutMs: this.settings.timeoutMs, notFoundAs: null });
    if (raw === null) return notMined(this.chainName);
    const tx = parseTransaction(raw, input.transactionHash);
    if (!tx.confirmed) return notMined(this.chainName);
    const paid = tx.outputs.filter((output) => output.address === input.address).reduce((sum, output) => sum + output.value, 0n);
    if (paid === payoutBaseUnits(input)) return { ok: true };
    return mismatch(`this transaction pays ${formatUnits(paid, input.coin)} ${input.coin.code} to ${input.address}, not ${input.amount} ${input.coin.code}`);
  }
}

/** Esplora's transaction JSON, refused unless it is the documented shape of the transaction asked for. */
function parseTransaction(raw: unknown, txid: string): EsploraTransaction {
  if (!isRecord(raw) || raw.txid !== txid || !Array.isArray(raw.vout) || !isRecord(raw.status) || typeof raw.status.confirmed !== 'boolean') {
    throw new ChainUnavailable(`esplora /tx/${txid} is not that transaction`);
  }
  const outputs = raw.vout.map((output) => {
    const value = isRecord(output) ? baseUnitsOf(output.value) : undefined;
    if (!isRecord(output) || value === undefined || value < 0n) throw new ChainUnavailable(`esplora /tx/${txid} has an output without an integer value`);
    return { address: typeof output.scriptpubkey_address === 'string' ? output.scriptpubkey_address : undefined, value };
  });
  return { confirmed: raw.status.confirmed, outputs };
}
