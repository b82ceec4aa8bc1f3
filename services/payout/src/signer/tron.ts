/**
 * SignTronTransaction (docs/treasury.md#tron): the signer decodes the node-built raw_data itself
 * and signs only a payout's one transfer from the treasury — a TransferContract of exactly the
 * payout's sun to its address, or a TriggerSmartContract calling the configured USDT contract's
 * transfer(payout address, exact amount) with no TRX attached and fee_limit within its cap — whose
 * expiration lies within SIGNER_TRON_MAX_EXPIRATION. A payout signed before is signed again only
 * for the same transaction (same txid: a retry) or once the earlier one's expiration has passed
 * (the network refuses it for ever then), so at most one version of a payout can be mined. Every
 * answer is audited and counted like the EVM ones (service.ts).
 */
import { Decimal, toBaseUnits } from '@coinvoice/domain/money';
import { cryptoCurrency } from '@coinvoice/chains/currencies';
import type { TransactionSql, Sql } from '@coinvoice/runtime';
import type { SignTronTransactionRequest } from '@coinvoice/runtime/gen/coinvoice/signer/v1/signer_pb';
import type { TronSigningKeys } from '@coinvoice/chains/tron/signing-keys';
import { decodeRawTransaction, decodeTrc20Transfer, TronCodecError, tronTxid, type TronRawTransaction } from '@coinvoice/chains/tron/transaction';
import { validateTronAddress } from '@coinvoice/chains/tron/address';
import { Refusal } from './policy';
import type { AutoMaxima } from './settings';
import type { AssetLimits } from './settings';
import { addToDailyTotal, appendAudit, findSignablePayout, lockDailyTotal, type AuditEntry } from './store';

export const TRON_NETWORK = 'tron';
/** The assets a Tron payout may be in; USDT's limits are shared with Ethereum's (settings.ts). */
export const TRON_ASSETS = ['TRX', 'USDT'] as const;
export type TronAsset = (typeof TRON_ASSETS)[number];

function isTronAsset(value: string): value is TronAsset {
  return (TRON_ASSETS as readonly string[]).includes(value);
}

export interface TronPolicy {
  /** base58 USDT contract; empty: USDT is not paid on Tron. */
  usdtContract: string;
  maxFeeLimitSun: bigint;
  maxExpirationMs: number;
  assets: Record<TronAsset, AssetLimits>;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

interface TronSignatureRow {
  txid: string;
  expirationMs: bigint;
}

async function findTronSignature(tx: TransactionSql, payoutId: string): Promise<TronSignatureRow | undefined> {
  const [row] = await tx<{ txid: string; expirationMs: string }[]>`
    select txid, expiration_ms::text as "expirationMs" from tron_payout_signatures where payout_id = ${payoutId} for update`;
  return row && { txid: row.txid, expirationMs: BigInt(row.expirationMs) };
}

async function recordTronSignature(tx: TransactionSql, row: { payoutId: string; asset: TronAsset; amount: bigint; txid: string; expirationMs: bigint }): Promise<void> {
  await tx`
    insert into tron_payout_signatures (payout_id, asset, amount, txid, expiration_ms)
    values (${row.payoutId}, ${row.asset}, ${row.amount.toString()}::numeric, ${row.txid}, ${row.expirationMs.toString()})
    on conflict (payout_id) do update
      set txid = excluded.txid, expiration_ms = excluded.expiration_ms, signatures = tron_payout_signatures.signatures + 1, last_signed_at = now()`;
}

/** What the transaction moves, read from its one contract: who pays, to whom, how much of what. */
interface TronMovement {
  asset: TronAsset;
  owner: string;
  /** TransferContract's to_address, or the called contract. */
  to: string;
  recipient: string;
  amount: bigint;
}

function movementOf(raw: TronRawTransaction, asset: TronAsset, policy: TronPolicy): TronMovement {
  const contract = raw.contract;
  if (asset === 'TRX') {
    if (contract.type !== 'TransferContract') throw new Refusal('call_data_mismatch', 'a TRX payout is one TransferContract');
    return { asset, owner: contract.owner, to: contract.to, recipient: contract.to, amount: contract.amount };
  }
  if (contract.type !== 'TriggerSmartContract') throw new Refusal('call_data_mismatch', 'a USDT payout is one TriggerSmartContract');
  if (policy.usdtContract === '' || contract.contract !== policy.usdtContract) {
    throw new Refusal('destination_mismatch', `a USDT transfer calls the USDT contract ${policy.usdtContract || '(not configured)'}, not ${contract.contract}`);
  }
  if (contract.callValue !== 0n) throw new Refusal('amount_mismatch', 'a USDT transfer carries no TRX (call_value 0)');
  const transfer = decodeTrc20Transfer(contract.data);
  if (!transfer) throw new Refusal('call_data_mismatch', "a USDT transfer's data is exactly transfer(address, uint256)");
  return { asset, owner: contract.owner, to: contract.contract, ...transfer };
}

export class TronSigner {
  constructor(
    private readonly options: {
      sql: Sql;
      /** Undefined when INVOICE_XPUB_TRX is not configured: Tron is then not signed. */
      keys: TronSigningKeys | undefined;
      policy: TronPolicy;
      /** PAYOUT_AUTO_MAX_<ASSET>: above it, a payout is signed once approved. */
      autoMax: AutoMaxima;
      now?: () => number;
    },
  ) {}

  get treasuryAddress(): string | undefined {
    return this.options.keys?.treasuryAddress;
  }

  /**
   * Signs `request` or throws a Refusal; `audit` receives what is known of the request as it is
   * learnt (the caller audits a refusal with it).
   */
  async sign(request: SignTronTransactionRequest, audit: AuditEntry): Promise<{ txid: string; signature: string; from: string }> {
    const keys = this.options.keys;
    if (request.network !== TRON_NETWORK) throw new Refusal('network_not_supported', `network ${JSON.stringify(request.network.slice(0, 32))} is not signed by SignTronTransaction`);
    if (!keys) throw new Refusal('network_not_supported', 'tron is not signed here: INVOICE_XPUB_TRX is not configured');
    if (request.purpose.case !== 'payout') throw new Refusal('invalid_request', 'purpose is required (payout)');
    const payoutId = request.purpose.value.payoutId;
    if (!UUID.test(payoutId)) throw new Refusal('invalid_request', 'payout.payout_id must be a UUID');
    audit.payoutId = payoutId.toLowerCase();
    if (!/^([0-9a-fA-F]{2})+$/.test(request.rawDataHex)) throw new Refusal('invalid_request', 'raw_data_hex must be hex bytes');
    const rawBytes = Uint8Array.from(Buffer.from(request.rawDataHex, 'hex'));
    let raw: TronRawTransaction;
    try {
      raw = decodeRawTransaction(rawBytes);
    } catch (err) {
      if (err instanceof TronCodecError) throw new Refusal('invalid_request', `raw_data_hex: ${err.message}`);
      throw err;
    }
    const txid = tronTxid(rawBytes);
    const { sql, policy } = this.options;
    const now = BigInt((this.options.now ?? Date.now)());
    return sql.begin(async (db) => {
      const { found, check } = await findSignablePayout(db, payoutId, this.options.autoMax);
      if (found) audit.asset = found.currency;
      const payout = check();
      if (payout.network !== TRON_NETWORK) throw new Refusal('network_not_supported', `payout ${payoutId} is sent on ${payout.network}, not signed on ${TRON_NETWORK}`);
      if (!isTronAsset(payout.currency)) throw new Refusal('asset_not_supported', `payout ${payoutId} is in ${payout.currency}, not signed on ${TRON_NETWORK}`);
      const asset = payout.currency;
      const amount = toBaseUnits(new Decimal(payout.amount), cryptoCurrency(asset).baseUnitDecimals);
      const movement = movementOf(raw, asset, policy);
      Object.assign(audit, { fromAddress: movement.owner, toAddress: movement.to, recipient: movement.recipient, amount: movement.amount });
      if (movement.owner !== keys.treasuryAddress) throw new Refusal('source_mismatch', `a payout is paid from the treasury ${keys.treasuryAddress}, not ${movement.owner}`);
      if (!validateTronAddress(payout.address).ok || movement.recipient !== payout.address) {
        throw new Refusal('destination_mismatch', `the transfer pays ${movement.recipient}, not the payout's address ${payout.address}`);
      }
      if (movement.amount !== amount) throw new Refusal('amount_mismatch', `the transfer moves ${movement.amount} base units, not the payout's ${amount}`);
      if (raw.feeLimit > policy.maxFeeLimitSun) throw new Refusal('fee_limit_above_cap', `fee_limit ${raw.feeLimit} sun exceeds SIGNER_MAX_FEE_LIMIT_SUN (${policy.maxFeeLimitSun})`);
      if (raw.expiration <= now || raw.expiration > now + BigInt(policy.maxExpirationMs)) {
        throw new Refusal('expiration_out_of_window', `expiration ${raw.expiration} is not within SIGNER_TRON_MAX_EXPIRATION (${policy.maxExpirationMs} ms) from now (${now})`);
      }
      const limits = policy.assets[asset];
      if (amount > limits.maxPayout) throw new Refusal('amount_above_limit', `${amount} base units of ${asset} exceed SIGNER_MAX_PAYOUT_${asset} (${limits.maxPayout})`);
      // The asset's daily row first, as for EVM payouts: concurrent requests queue behind it.
      const daily = await lockDailyTotal(db, asset);
      const earlier = await findTronSignature(db, payoutId);
      const retry = earlier?.txid === txid;
      if (earlier && !retry && earlier.expirationMs >= now) {
        throw new Refusal('resign_before_expiration', `payout ${payoutId} was signed as ${earlier.txid}, which can be mined until ${earlier.expirationMs}: another transaction now could pay it twice`);
      }
      // Every new version counts (a retry of the same txid does not): the signer cannot see whether
      // an expired earlier version was mined, so a replacement is charged as a payout of its own.
      if (!retry && daily.amount + amount > limits.dailyLimit) {
        throw new Refusal('daily_limit_exceeded', `${asset} signed today (UTC) ${daily.amount} + this ${amount} base units exceed SIGNER_DAILY_LIMIT_${asset} (${limits.dailyLimit})`);
      }
      const signature = keys.signTxid(txid);
      if (!retry) await addToDailyTotal(db, asset, daily.day, amount);
      await recordTronSignature(db, { payoutId, asset, amount, txid, expirationMs: raw.expiration });
      await appendAudit(db, { ...audit, outcome: 'signed', transactionHash: txid });
      return { txid, signature, from: keys.treasuryAddress };
    });
  }
}
