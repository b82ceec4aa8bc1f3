/**
 * SignerService (proto/coinvoice/signer/v1/signer.proto): signs what policy.ts allows, with the
 * keys of keys.ts, and writes every signature and every refusal to signer.audit_log. A signature's
 * checks, its counters (the payout's daily total; the day's fees and gas top-ups for every purpose)
 * and its audit row share one transaction (docs/treasury.md#signer-policy).
 */
import type { ServiceImpl } from '@connectrpc/connect';
import { Decimal, toBaseUnits } from '@coinvoice/domain/money';
import { Code, serviceError, type Logger, type Sql } from '@coinvoice/runtime';
import {
  SignerService,
  type GetTreasuryRequest,
  type SignEvmTransactionRequest,
  type SignTronTransactionRequest,
  type SignUtxoTransactionRequest,
} from '@coinvoice/runtime/gen/coinvoice/signer/v1/signer_pb';
import { checksumAddress, type EthereumSigningKeys, type HexString, type SigningAccount } from '@coinvoice/chains/evm/signing-keys';
import {
  checkCommon,
  checkFeeBudget,
  checkPayoutMovement,
  decodeTransaction,
  maxFeeOf,
  movementOf,
  Refusal,
  SIGNER_NETWORK,
  type CommonLimits,
  type DecodedTransaction,
  type Movement,
} from './policy';
import type { SignerMetrics } from './metrics';
import { TRON_NETWORK, TronSigner } from './tron';
import { isUtxoTreasuryNetwork, type UtxoSigner } from './utxo-signer';
import { assetDecimals, isSignerAsset, type AssetLimits, type AutoMaxima, type SignerAsset } from './settings';
import {
  addToDailyFees,
  addToDailyTotal,
  appendAudit,
  findPayoutSignature,
  findSignablePayout,
  lockDailyFees,
  lockDailyTotal,
  recordPayoutSignature,
  type AuditEntry,
} from './store';

export interface SignerPolicySettings extends CommonLimits {
  assets: Record<SignerAsset, AssetLimits>;
  contracts: Record<'USDT' | 'USDC', HexString>;
  maxGasTopUpWei: bigint;
  /** SIGNER_DAILY_FEE_LIMIT_WEI: Σ gas_limit × max_fee_per_gas of a UTC day's signatures. */
  dailyFeeLimitWei: bigint;
  /** SIGNER_DAILY_GAS_TOP_UP_LIMIT_WEI: Σ gas top-up values of a UTC day. */
  dailyGasTopUpLimitWei: bigint;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Receive indexes are non-hardened BIP32 indexes. */
const MAX_ADDRESS_INDEX = 2 ** 31 - 1;

/** What one request is known to be so far: the audit row's columns. */
class AuditDraft {
  entry: AuditEntry;
  constructor(caller: string, request: SignEvmTransactionRequest) {
    const purpose = request.purpose;
    const tx = request.transaction;
    this.entry = {
      outcome: 'refused',
      caller,
      network: request.network.slice(0, 32),
      purpose: purpose.case === 'payout' ? 'payout' : purpose.case === 'sweep' ? 'sweep' : purpose.case === 'gasTopUp' ? 'gas_top_up' : null,
      payoutId: purpose.case === 'payout' && UUID.test(purpose.value.payoutId) ? purpose.value.payoutId.toLowerCase() : null,
      addressIndex: purpose.case === 'sweep' || purpose.case === 'gasTopUp' ? purpose.value.addressIndex : null,
      asset: purpose.case === 'sweep' ? purpose.value.asset.slice(0, 16) : null,
      fromAddress: null,
      toAddress: (tx && checksumAddress(tx.to)) ?? null,
      recipient: null,
      amount: null,
      chainId: tx && tx.chainId <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(tx.chainId) : null,
      nonce: tx && tx.nonce <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(tx.nonce) : null,
      gasLimit: tx ? tx.gasLimit : null,
      maxFeePerGas: tx && /^\d{1,78}$/.test(tx.maxFeePerGas) ? BigInt(tx.maxFeePerGas) : null,
      transactionHash: null,
      rule: null,
      reason: null,
    };
  }
  moved(from: HexString, movement: Movement): void {
    this.entry = { ...this.entry, fromAddress: from, asset: movement.asset, recipient: movement.recipient, amount: movement.amount };
  }
}

/** A Tron request's audit row before tron.ts learns what it moves. */
function tronAuditEntry(caller: string, network: string): AuditEntry {
  return {
    outcome: 'refused', caller, network: network.slice(0, 32), purpose: 'payout', payoutId: null, addressIndex: null, asset: null,
    fromAddress: null, toAddress: null, recipient: null, amount: null, chainId: null, nonce: null, gasLimit: null, maxFeePerGas: null,
    transactionHash: null, rule: null, reason: null,
  };
}

export class SignerRpc implements ServiceImpl<typeof SignerService> {
  constructor(
    private readonly options: {
      sql: Sql;
      keys: EthereumSigningKeys;
      utxo: UtxoSigner;
      policy: SignerPolicySettings;
      tron: TronSigner;
      /** PAYOUT_AUTO_MAX_<ASSET>: above it, a payout is signed once approved. */
      autoMax: AutoMaxima;
      metrics: SignerMetrics;
      logger: Logger;
      /** The caller every call that reaches a handler carries: the allow-listed name, or 'plaintext'. */
      caller: string;
    },
  ) {}

  /** Bitcoin and Litecoin: utxo-signer.ts (docs/treasury.md#utxo-signer-policy). */
  async signUtxoTransaction(request: SignUtxoTransactionRequest) {
    return this.options.utxo.sign(request);
  }

  /** docs/treasury.md#tron: tron.ts decides; audited and counted here like every answer. */
  async signTronTransaction(request: SignTronTransactionRequest) {
    const audit = tronAuditEntry(this.options.caller, request.network);
    try {
      const signed = await this.options.tron.sign(request, audit);
      this.options.metrics.signatures.labels('payout').inc();
      return signed;
    } catch (err) {
      if (!(err instanceof Refusal)) throw err;
      await this.refuse(audit, err.rule, err.message);
      throw serviceError(err.connectCode, err.rule, err.message);
    }
  }

  async getTreasury(request: GetTreasuryRequest) {
    if (request.network === TRON_NETWORK) {
      const address = this.options.tron.treasuryAddress;
      if (!address) throw serviceError(Code.InvalidArgument, 'network_not_supported', 'tron is not signed here: INVOICE_XPUB_TRX is not configured');
      return { network: request.network, address };
    }
    if (isUtxoTreasuryNetwork(request.network)) return this.options.utxo.treasury(request.network);
    if (request.network !== SIGNER_NETWORK) throw serviceError(Code.InvalidArgument, 'network_not_supported', `only ${SIGNER_NETWORK} is signed here`);
    return { network: request.network, address: this.options.keys.treasuryAddress };
  }

  async signEvmTransaction(request: SignEvmTransactionRequest) {
    const audit = new AuditDraft(this.options.caller, request);
    try {
      const tx = decodeTransaction(request.transaction);
      checkCommon(request.network, tx, this.options.policy);
      const purpose = request.purpose;
      switch (purpose.case) {
        case 'payout':
          return await this.signPayout(purpose.value.payoutId, tx, audit);
        case 'sweep':
          return await this.signSweep(purpose.value.addressIndex, purpose.value.asset, tx, audit);
        case 'gasTopUp':
          return await this.signGasTopUp(purpose.value.addressIndex, tx, audit);
        default:
          throw new Refusal('invalid_request', 'purpose is required (payout, sweep or gas_top_up)');
      }
    } catch (err) {
      if (!(err instanceof Refusal)) throw err;
      await this.refuse(audit.entry, err.rule, err.message);
      throw serviceError(err.connectCode, err.rule, err.message);
    }
  }

  /** Audits and counts a refusal (also of a caller the allow-list turned away: role.ts). */
  async refuse(entry: AuditEntry, rule: string, reason: string): Promise<void> {
    this.options.metrics.refusals.labels(rule).inc();
    this.options.logger.warn({ rule, reason, purpose: entry.purpose, payoutId: entry.payoutId, caller: entry.caller }, 'signer refused a request');
    await appendAudit(this.options.sql, { ...entry, outcome: 'refused', rule, reason, transactionHash: null });
  }

  private async signPayout(payoutId: string, tx: DecodedTransaction, audit: AuditDraft) {
    if (!UUID.test(payoutId)) throw new Refusal('invalid_request', 'payout.payout_id must be a UUID');
    const { sql, keys, policy } = this.options;
    const treasury = keys.treasury();
    return sql.begin(async (db) => {
      const { found, check } = await findSignablePayout(db, payoutId, this.options.autoMax);
      if (found) audit.entry = { ...audit.entry, asset: found.currency };
      const payout = check();
      if (!isSignerAsset(payout.currency)) throw new Refusal('asset_not_supported', `payout ${payoutId} is in ${payout.currency}, not signed on ${SIGNER_NETWORK}`);
      // The same asset on another network (USDT on bsc) is another balance and another chain: never
      // paid from this network's treasury (docs/treasury.md).
      if (payout.network !== SIGNER_NETWORK) throw new Refusal('network_not_supported', `payout ${payoutId} is sent on ${payout.network}, not signed on ${SIGNER_NETWORK}`);
      const asset = payout.currency;
      const amount = toBaseUnits(new Decimal(payout.amount), assetDecimals(asset));
      const movement = movementOf(tx, asset, policy.contracts);
      audit.moved(treasury.address, movement);
      const payoutAddress = checksumAddress(payout.address);
      if (!payoutAddress) throw new Refusal('payout_not_signable', `payout ${payoutId} has no Ethereum address`);
      checkPayoutMovement(movement, payoutAddress, amount);
      const limits = policy.assets[asset];
      if (amount > limits.maxPayout) {
        throw new Refusal('amount_above_limit', `${amount} base units of ${asset} exceed SIGNER_MAX_PAYOUT_${asset} (${limits.maxPayout})`);
      }
      // The asset's daily row first: every payout signature of the asset queues behind it, so a
      // first request and its concurrent twin cannot both pass the checks below.
      const daily = await lockDailyTotal(db, asset);
      const earlier = await findPayoutSignature(db, payoutId);
      if (earlier) {
        if (earlier.nonce !== tx.nonce) {
          throw new Refusal('nonce_mismatch', `payout ${payoutId} was signed for nonce ${earlier.nonce}; another nonce would be a second transfer`);
        }
        if (earlier.chainId !== tx.chainId || earlier.to !== tx.to || earlier.value !== tx.value || earlier.data !== tx.data) {
          throw new Refusal('replacement_mismatch', `a fee replacement of payout ${payoutId} repeats its chain id, to, value and data`);
        }
      } else if (daily.amount + amount > limits.dailyLimit) {
        throw new Refusal(
          'daily_limit_exceeded',
          `${asset} signed today (UTC) ${daily.amount} + this ${amount} base units exceed SIGNER_DAILY_LIMIT_${asset} (${limits.dailyLimit})`,
        );
      }
      // Only one version of the nonce can be mined: a fee replacement is charged what it adds above
      // the highest version signed before, never less than nothing.
      const maxFee = maxFeeOf(tx);
      const feeCharge = earlier ? (maxFee > earlier.maxFeeWei ? maxFee - earlier.maxFeeWei : 0n) : maxFee;
      const fees = await lockDailyFees(db);
      checkFeeBudget(fees.feeWei, feeCharge, policy.dailyFeeLimitWei);
      const signed = await treasury.sign(tx);
      if (!earlier) await addToDailyTotal(db, asset, daily.day, amount);
      await addToDailyFees(db, fees.day, { feeWei: feeCharge, gasTopUpWei: 0n });
      await recordPayoutSignature(db, {
        payoutId,
        asset,
        amount,
        chainId: tx.chainId,
        nonce: tx.nonce,
        to: tx.to,
        value: tx.value,
        data: tx.data,
        maxFeeWei: maxFee,
        transactionHash: signed.transactionHash,
      });
      await appendAudit(db, { ...audit.entry, outcome: 'signed', transactionHash: signed.transactionHash });
      this.options.metrics.signatures.labels('payout').inc();
      return signed;
    });
  }

  private async signSweep(addressIndex: number, assetName: string, tx: DecodedTransaction, audit: AuditDraft) {
    if (addressIndex > MAX_ADDRESS_INDEX) throw new Refusal('invalid_request', 'sweep.address_index must be below 2^31');
    if (!isSignerAsset(assetName)) throw new Refusal('asset_not_supported', `sweep.asset must be one of ETH, USDT, USDC`);
    const deposit = this.options.keys.deposit(addressIndex);
    const movement = movementOf(tx, assetName, this.options.policy.contracts);
    audit.moved(deposit.address, movement);
    if (movement.recipient !== this.options.keys.treasuryAddress) {
      throw new Refusal('destination_mismatch', `a sweep pays the treasury ${this.options.keys.treasuryAddress}, not ${movement.recipient}`);
    }
    return this.signCounted(deposit, tx, audit, 'sweep', 0n);
  }

  private async signGasTopUp(addressIndex: number, tx: DecodedTransaction, audit: AuditDraft) {
    if (addressIndex > MAX_ADDRESS_INDEX) throw new Refusal('invalid_request', 'gas_top_up.address_index must be below 2^31');
    const treasury = this.options.keys.treasury();
    const movement = movementOf(tx, 'ETH', this.options.policy.contracts);
    audit.moved(treasury.address, movement);
    const depositAddress = this.options.keys.deposit(addressIndex).address;
    if (movement.recipient !== depositAddress) {
      throw new Refusal('destination_mismatch', `a gas top-up pays the deposit address ${depositAddress} of index ${addressIndex}, not ${movement.recipient}`);
    }
    if (movement.amount > this.options.policy.maxGasTopUpWei) {
      throw new Refusal('gas_top_up_above_cap', `a gas top-up of ${movement.amount} wei exceeds SIGNER_MAX_GAS_TOP_UP_WEI (${this.options.policy.maxGasTopUpWei})`);
    }
    return this.signCounted(treasury, tx, audit, 'gas_top_up', movement.amount);
  }

  /**
   * A sweep or gas top-up: the day's fee row locked, the fee budget (its full gas_limit ×
   * max_fee_per_gas, a same-nonce re-signature included: counting more than can be spent is the
   * safe side) and the top-up limit checked, signed, counted and audited in one transaction.
   */
  private async signCounted(account: SigningAccount, tx: DecodedTransaction, audit: AuditDraft, purpose: 'sweep' | 'gas_top_up', gasTopUpWei: bigint) {
    const { policy } = this.options;
    const signed = await this.options.sql.begin(async (db) => {
      const fees = await lockDailyFees(db);
      if (fees.gasTopUpWei + gasTopUpWei > policy.dailyGasTopUpLimitWei) {
        throw new Refusal(
          'daily_gas_top_up_limit_exceeded',
          `gas top-ups signed today (UTC) ${fees.gasTopUpWei} + this ${gasTopUpWei} wei exceed SIGNER_DAILY_GAS_TOP_UP_LIMIT_WEI (${policy.dailyGasTopUpLimitWei})`,
        );
      }
      const feeCharge = maxFeeOf(tx);
      checkFeeBudget(fees.feeWei, feeCharge, policy.dailyFeeLimitWei);
      const signed = await account.sign(tx);
      await addToDailyFees(db, fees.day, { feeWei: feeCharge, gasTopUpWei });
      await appendAudit(db, { ...audit.entry, outcome: 'signed', transactionHash: signed.transactionHash });
      return signed;
    });
    this.options.metrics.signatures.labels(purpose).inc();
    return signed;
  }
}
