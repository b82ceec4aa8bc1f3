/**
 * Which (asset, network) pairs this deployment takes (docs/networks.md): the registry's pairs
 * (chains/currencies.ts PAY_METHODS) whose coin is in INVOICE_COINS, whose network is in
 * INVOICE_NETWORKS, and whose token has a contract configured (USDC on Tron has none by default).
 * One catalog answers both `GET /api/currencies` and the check of a new invoice's payNetwork.
 */
import type { Chain, CryptoCode, CryptoCurrency } from '@coinvoice/chains/coin';
import { DEFAULT_NETWORK, isPayNetwork, minimumAmount, networksCarrying, PAY_METHODS, payMethod, registryPaymentTarget } from '@coinvoice/chains/currencies';
import type { PaymentTarget } from '@coinvoice/chains/family';
import type { Network } from '@coinvoice/domain/project-network';
import { ok, refused, type Decimal, type Parsed } from '@coinvoice/domain/money';

export interface PayMethodPolicy {
  enabledCoins: readonly CryptoCode[];
  enabledNetworks: readonly Chain[];
  /** The token contract configured for a token entry, or '' where the operator left it empty. */
  configuredContract: (method: CryptoCurrency) => string;
  /** Confirmations a new live invoice on `chain` needs. */
  confirmationsFor: (chain: Chain) => number;
  /** Whether a live node is configured for `chain` (its watcher can run). */
  watched: (chain: Chain) => boolean;
  /** The network's name as customers know it ("BNB Smart Chain"); the network id where none is set. */
  label: (chain: Chain) => string;
  /** The EIP-155 chain id of an EVM network (undefined elsewhere). */
  chainId: (chain: Chain) => number | undefined;
}

export interface PayMethodListing {
  method: CryptoCurrency;
  networkLabel: string;
  confirmations: number;
  minimumAmount: Decimal;
  /** The configured token contract; undefined for a network's own coin. */
  contract: string | undefined;
  chainId: number | undefined;
  watched: boolean;
}

export class PayMethodCatalog {
  private readonly enabled: readonly CryptoCurrency[];

  constructor(private readonly policy: PayMethodPolicy) {
    this.enabled = PAY_METHODS.filter(
      (method) =>
        policy.enabledCoins.includes(method.code) && policy.enabledNetworks.includes(method.chain) && (!method.token || policy.configuredContract(method) !== ''),
    );
  }

  /**
   * The entry a new invoice is paid in: `network` absent means the coin's default network. The
   * reason of a refusal names the networks that carry the coin here.
   */
  resolve(code: CryptoCode, network: string | undefined): Parsed<CryptoCurrency> {
    const chain = network ?? DEFAULT_NETWORK[code];
    const method = isPayNetwork(chain) ? payMethod(code, chain) : undefined;
    if (method && this.enabled.includes(method)) return ok(method);
    // A refusal only (not the create path's every call): what is taken instead.
    const carrying = this.networksFor(code);
    const listed = carrying.length > 0 ? `${code} is taken on: ${carrying.join(', ')}` : `${code} is not taken on any network here`;
    if (!isPayNetwork(chain)) return refused(`is not a network; ${listed}`);
    if (!method) return refused(`${chain} does not carry ${code}; ${listed}`);
    return refused(`${code} on ${chain} is not enabled here; ${listed}`);
  }

  /** The coins whose account keys the enabled entries' addresses come from (keyCurrency: TRX for Tron's tokens). */
  keyCurrencies(): CryptoCode[] {
    return [...new Set(this.enabled.map((method) => method.keyCurrency))];
  }

  /** The enabled networks of `code`, in registry order. */
  networksFor(code: CryptoCode): Chain[] {
    const registry = networksCarrying(code);
    return registry.filter((chain) => this.enabled.some((m) => m.code === code && m.chain === chain));
  }

  /**
   * The contract and chain id an invoice of `method` is paid to, for its checkout (token contract and
   * payment URI) and ListCurrencies alike: on mainnet the configured ones, which the watcher reads
   * (CHAIN_<NETWORK>_<TOKEN>_CONTRACT, CHAIN_<NETWORK>_CHAIN_ID; docs/networks.md#configuration); on
   * a sandbox invoice's test chain the registry's. A live token whose contract was emptied after
   * the invoice was made names none rather than one nothing watches.
   */
  paymentTarget(method: CryptoCurrency, network: Network): PaymentTarget {
    if (network !== 'mainnet') return registryPaymentTarget(method, network);
    const contract = method.token ? this.policy.configuredContract(method) : '';
    return { contract: contract === '' ? null : contract, chainId: this.policy.chainId(method.chain) };
  }

  /** Every enabled pair, assets in registry order, each asset's networks in registry order. */
  list(): PayMethodListing[] {
    const order = (m: CryptoCurrency) => PAY_METHODS.indexOf(m);
    const byAsset = [...this.enabled].sort((a, b) => this.codeOrder(a.code) - this.codeOrder(b.code) || order(a) - order(b));
    return byAsset.map((method) => {
      const target = this.paymentTarget(method, 'mainnet');
      return {
        method,
        networkLabel: this.policy.label(method.chain),
        confirmations: this.policy.confirmationsFor(method.chain),
        minimumAmount: minimumAmount(method),
        contract: target.contract ?? undefined,
        chainId: target.chainId,
        watched: this.policy.watched(method.chain),
      };
    });
  }

  private codeOrder(code: CryptoCode): number {
    return this.policy.enabledCoins.indexOf(code);
  }
}
