/**
 * One chain family behind one interface (the way BTCPay Server keeps each payment method behind
 * one handler): a family module holds its coins' registry entries, its address codec, its node
 * settings, its watcher adapter and its confirmation policy, so adding a chain of a known family is
 * one entry in that module, and adding a family is one module (utxo/, evm/, tron/) listed in
 * currencies.ts. The rest of the repository reaches chain knowledge only through these types.
 */
import type { ConfigOf, Settings } from '@coinvoice/runtime';
import type { Decimal, Parsed } from '@coinvoice/domain/money';
import type { Network } from '@coinvoice/domain/project-network';
import type { ChainAdapter } from './chain-adapter';
import type { Chain, CryptoCurrency } from './coin';
import type { PayoutChainCheck } from './payout-check';

/** How the watcher reads one chain: its adapter (null without a configured node) and its pace. */
export interface ChainSource {
  /** The variable that configures the node, for the "not configured" line. */
  readonly sourceVariable: string;
  /** Null when the chain's node is not configured (no watcher for it). */
  adapter(): ChainAdapter | null;
  readonly pollMs: number;
  /** Blocks written per database transaction while backfilling. */
  readonly batchBlocks: number;
  /** Confirmations a new live invoice on this chain needs (fixed on the invoice at creation). */
  readonly confirmations: number;
  /**
   * The networks whose invoices' addresses this chain's watcher watches: every network sharing the
   * chain's addresses (all EVM networks for an EVM chain: docs/networks.md#wrong-network), else the
   * chain alone (when absent).
   */
  readonly watchedNetworks?: readonly Chain[];
  /**
   * Checks, before the watcher runs, that the configured node is the network it claims to be (EVM:
   * `eth_chainId`, each token's `decimals()`); rejects with a ChainSourceRefusal otherwise. What
   * passes but deserves an operator's eye (a token without a contract on a development node) goes
   * to `warn`, one line each.
   */
  verify?(warn?: (line: string) => void): Promise<void>;
}

/** Why a watcher refuses to start: one line naming what differs and the setting that says so. */
export class ChainSourceRefusal extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ChainSourceRefusal';
  }
}

/**
 * What a payment URI names besides the address and amount: the token contract to pay (null for a
 * network's own coin, or a test chain without the issuer's contract) and the EIP-155 chain id of an
 * EVM network (undefined elsewhere). For a live invoice, the invoice service's configuration
 * (PayMethodCatalog: CHAIN_<N>_<TOKEN>_CONTRACT, CHAIN_<N>_CHAIN_ID, what the watcher watches); for a
 * sandbox invoice, the registry's test chain (currencies.ts registryPaymentTarget).
 */
export interface PaymentTarget {
  readonly contract: string | null;
  readonly chainId: number | undefined;
}

export interface ChainFamily<S extends Settings = Settings, P extends Settings = Settings> {
  readonly name: 'utxo' | 'evm' | 'tron';
  /** The family's chains and, per chain, the confirmations used when no node is configured. */
  readonly defaultConfirmations: Readonly<Partial<Record<Chain, number>>>;
  /** The registry entries of the family's coins. */
  readonly currencies: readonly CryptoCurrency[];
  /** Whether addresses hash the compressed (33-byte) public key; otherwise the uncompressed one. */
  readonly compressedKeys: boolean;
  /** The address of a secp256k1 public key for one of the family's coins. */
  encodeAddress(publicKey: Uint8Array, currency: CryptoCurrency, network: Network): string;
  /** An address that reached the service (a payout destination…): its canonical form, or a reason. */
  validateAddress(address: unknown, currency: CryptoCurrency, network: Network): Parsed<string>;
  /**
   * The wallet payment URI shown as a QR code on the checkout page. The token contract and chain id
   * come from the caller (`target`), never from the registry here: a live invoice's are the
   * deployment's configuration, which the watcher reads (docs/networks.md#configuration).
   */
  paymentUri(currency: CryptoCurrency, address: string, amount: Decimal, target: PaymentTarget): string;
  /** The environment variables of the family's nodes and watchers (invoice service). */
  readonly watcherSettings: S;
  /** Per chain of the family, how its watcher reads it under `config`. */
  sources(config: ConfigOf<S>): Partial<Record<Chain, ChainSource>>;
  /** The environment variables of the family's nodes as the payout service reads them. */
  readonly payoutSettings: P;
  /** Per chain of the family whose node `config` names, the on-chain check of a payout's Complete. */
  payoutChecks(config: ConfigOf<P>): Partial<Record<Chain, PayoutChainCheck>>;
}
