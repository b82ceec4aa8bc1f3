/**
 * The seed and the keys derived from it (docs/treasury.md#keys): the BIP39 mnemonic read from
 * SIGNER_SEED_FILE, the Ethereum account m/44'/60'/0', its deposit keys account/0/i and the
 * treasury key account/1/0. The mnemonic, the seed and every private key stay inside this module:
 * nothing here is logged, stored or put in an error message, and the objects keep them in private
 * fields (#), which neither JSON.stringify nor pino's serializers see.
 */
import { readFileSync } from 'node:fs';
import { HDKey } from '@scure/bip32';
import { mnemonicToSeedSync, validateMnemonic } from '@scure/bip39';
import { wordlist } from '@scure/bip39/wordlists/english';
import type { Hex, LocalAccount } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { keyMaterialOf } from '@coinvoice/chains/account-key';

/** The BIP44 account of Ether and the ERC-20 tokens (the invoice service's INVOICE_XPUB_ETH/_USDT/_USDC). */
export const ETHEREUM_ACCOUNT_PATH = "m/44'/60'/0'";

/** Why a seed file cannot be used; never carries the file's content. */
export class SeedFileError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SeedFileError';
  }
}

function hexOf(bytes: Uint8Array): Hex {
  return `0x${Buffer.from(bytes).toString('hex')}`;
}

/** The signing keys of one account: deposit keys (receive branch) and the treasury key. */
export class EthereumKeys {
  readonly #receiveBranch: HDKey;
  readonly #treasury: LocalAccount;
  /** Identity of the account key (chain code + public key), as INVOICE_XPUB_<COIN> must have it. */
  readonly accountKeyMaterial: string;
  readonly treasuryAddress: Hex;

  private constructor(account: HDKey) {
    this.accountKeyMaterial = keyMaterialOf(account);
    this.#receiveBranch = account.deriveChild(0);
    const treasuryKey = account.deriveChild(1).deriveChild(0);
    this.#treasury = accountOf(treasuryKey);
    treasuryKey.wipePrivateData();
    this.treasuryAddress = this.#treasury.address;
  }

  /** Reads and checks the mnemonic in `file` (English BIP39 words, valid checksum; no passphrase). */
  static fromSeedFile(file: string): EthereumKeys {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? 'unreadable';
      throw new SeedFileError(`SIGNER_SEED_FILE ${file} cannot be read (${code})`);
    }
    return EthereumKeys.fromMnemonic(text, `SIGNER_SEED_FILE ${file}`);
  }

  static fromMnemonic(text: string, source = 'the mnemonic'): EthereumKeys {
    const mnemonic = text.normalize('NFKD').trim().split(/\s+/).join(' ');
    if (!validateMnemonic(mnemonic, wordlist)) {
      throw new SeedFileError(`${source} does not hold a valid BIP39 mnemonic (English words, 12–24 of them, with a correct checksum)`);
    }
    const seed = mnemonicToSeedSync(mnemonic);
    const master = HDKey.fromMasterSeed(seed);
    seed.fill(0);
    const account = master.derive(ETHEREUM_ACCOUNT_PATH);
    master.wipePrivateData();
    const keys = new EthereumKeys(account);
    account.wipePrivateData();
    return keys;
  }

  /** The treasury (hot) account: account/1/0, never given to a customer. */
  treasury(): LocalAccount {
    return this.#treasury;
  }

  /** The deposit account of receive index `index` (account/0/index), the invoice service's address. */
  deposit(index: number): LocalAccount {
    const child = this.#receiveBranch.deriveChild(index);
    try {
      return accountOf(child);
    } finally {
      child.wipePrivateData();
    }
  }

  /** The deposit address of `index`, without keeping its key. */
  depositAddress(index: number): Hex {
    return this.deposit(index).address;
  }

  /** Not the keys: what a log line or an inspector would show of this object. */
  toJSON(): { treasuryAddress: string } {
    return { treasuryAddress: this.treasuryAddress };
  }

  [Symbol.for('nodejs.util.inspect.custom')](): string {
    return `EthereumKeys(treasury ${this.treasuryAddress})`;
  }
}

function accountOf(key: HDKey): LocalAccount {
  if (!key.privateKey) throw new Error('a derived key has no private key');
  return privateKeyToAccount(hexOf(key.privateKey));
}
