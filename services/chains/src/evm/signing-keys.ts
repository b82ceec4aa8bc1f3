/**
 * The payout signer's keys (docs/treasury.md#keys): the BIP39 mnemonic read from a file, the
 * Ethereum account m/44'/60'/0', its deposit keys account/0/i and the treasury key account/1/0,
 * and EIP-1559 signing with them. The mnemonic, the seed and every private key stay inside this
 * module: nothing here is logged, stored or put in an error message, and the objects keep them in
 * private fields (#), which neither JSON.stringify nor pino's serializers see.
 *
 * viem loads with this module: only the `payout sign` role imports it (payout main.ts loads the
 * role lazily), so the other processes never carry it.
 */
import { readFileSync } from 'node:fs';
import { HDKey } from '@scure/bip32';
import { mnemonicToSeedSync, validateMnemonic } from '@scure/bip39';
import { wordlist } from '@scure/bip39/wordlists/english';
import { encodeFunctionData, erc20Abi, keccak256, type LocalAccount } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { keyMaterialOf } from '../account-key';
import { toEip55 } from './address';
import { TREASURY_BRANCH, TREASURY_INDEX } from './treasury';

/** The BIP44 account of Ether and the ERC-20 tokens (the invoice service's INVOICE_XPUB_ETH/_USDT/_USDC). */
export const ETHEREUM_ACCOUNT_PATH = "m/44'/60'/0'";

export type HexString = `0x${string}`;

/** An unsigned EIP-1559 (type 2) transaction. */
export interface Eip1559Transaction {
  chainId: number;
  nonce: number;
  /** EIP-55. */
  to: HexString;
  value: bigint;
  /** Lower-case hex, "0x" for none. */
  data: HexString;
  gas: bigint;
  maxFeePerGas: bigint;
  maxPriorityFeePerGas: bigint;
}

export interface SignedTransaction {
  /** The serialized signed transaction: the bytes to broadcast. */
  rawTransaction: HexString;
  /** keccak256 of rawTransaction. */
  transactionHash: HexString;
  /** EIP-55 address of the signing key. */
  from: HexString;
}

/** Why a seed file cannot be used; never carries the file's content. */
export class SeedFileError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SeedFileError';
  }
}

/** The text of the mnemonic file `file`; an error names the file and the reason, never the content. */
export function readSeedFile(file: string, variable = 'SIGNER_SEED_FILE'): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'unreadable';
    throw new SeedFileError(`${variable} ${file} cannot be read (${code})`);
  }
}

/**
 * The private account key at `path` (e.g. m/84'/0'/0') of a BIP39 mnemonic (English words, valid
 * checksum, no passphrase); the seed and the master key are wiped. The caller wipes the account key.
 */
export function accountKeyOfMnemonic(text: string, source: string, path: string): HDKey {
  const mnemonic = text.normalize('NFKD').trim().split(/\s+/).join(' ');
  if (!validateMnemonic(mnemonic, wordlist)) {
    throw new SeedFileError(`${source} does not hold a valid BIP39 mnemonic (English words, 12–24 of them, with a correct checksum)`);
  }
  const seed = mnemonicToSeedSync(mnemonic);
  const master = HDKey.fromMasterSeed(seed);
  seed.fill(0);
  const account = master.derive(path);
  master.wipePrivateData();
  return account;
}

/** One signing key: its address, and signatures; the key itself is not reachable from outside. */
export class SigningAccount {
  readonly #account: LocalAccount;
  readonly address: HexString;

  constructor(key: HDKey) {
    if (!key.privateKey) throw new Error('a derived key has no private key');
    this.#account = privateKeyToAccount(`0x${Buffer.from(key.privateKey).toString('hex')}`);
    this.address = this.#account.address;
  }

  async sign(tx: Eip1559Transaction): Promise<SignedTransaction> {
    const sign = this.#account.signTransaction;
    if (!sign) throw new Error('the account cannot sign transactions');
    const rawTransaction = await sign({ type: 'eip1559', chainId: tx.chainId, nonce: tx.nonce, to: tx.to, value: tx.value, data: tx.data, gas: tx.gas, maxFeePerGas: tx.maxFeePerGas, maxPriorityFeePerGas: tx.maxPriorityFeePerGas });
    return { rawTransaction, transactionHash: keccak256(rawTransaction), from: this.address };
  }

  toJSON(): { address: string } {
    return { address: this.address };
  }
}

/** The signing keys of one account: deposit keys (receive branch) and the treasury key. */
export class EthereumSigningKeys {
  readonly #receiveBranch: HDKey;
  readonly #treasury: SigningAccount;
  /** Identity of the account key (chain code + public key), as INVOICE_XPUB_<COIN> must have it. */
  readonly accountKeyMaterial: string;
  /** The account's extended PUBLIC key (xpub): what INVOICE_XPUB_ETH/_USDT/_USDC must be set to. */
  readonly accountXpub: string;
  readonly treasuryAddress: HexString;

  private constructor(account: HDKey) {
    this.accountKeyMaterial = keyMaterialOf(account);
    this.accountXpub = account.publicExtendedKey;
    this.#receiveBranch = account.deriveChild(0);
    const treasuryKey = account.deriveChild(TREASURY_BRANCH).deriveChild(TREASURY_INDEX);
    this.#treasury = new SigningAccount(treasuryKey);
    treasuryKey.wipePrivateData();
    this.treasuryAddress = this.#treasury.address;
  }

  /** Reads and checks the mnemonic in `file` (English BIP39 words, valid checksum; no passphrase). */
  static fromSeedFile(file: string, variable = 'SIGNER_SEED_FILE'): EthereumSigningKeys {
    return EthereumSigningKeys.fromMnemonic(readSeedFile(file, variable), `${variable} ${file}`);
  }

  static fromMnemonic(text: string, source = 'the mnemonic'): EthereumSigningKeys {
    const account = accountKeyOfMnemonic(text, source, ETHEREUM_ACCOUNT_PATH);
    const keys = new EthereumSigningKeys(account);
    account.wipePrivateData();
    return keys;
  }

  /** The treasury (hot) account: account/1/0, never given to a customer. */
  treasury(): SigningAccount {
    return this.#treasury;
  }

  /** The deposit account of receive index `index` (account/0/index), the invoice service's address. */
  deposit(index: number): SigningAccount {
    const child = this.#receiveBranch.deriveChild(index);
    try {
      return new SigningAccount(child);
    } finally {
      child.wipePrivateData();
    }
  }

  /** Not the keys: what a log line or an inspector would show of this object. */
  toJSON(): { treasuryAddress: string } {
    return { treasuryAddress: this.treasuryAddress };
  }

  [Symbol.for('nodejs.util.inspect.custom')](): string {
    return `EthereumSigningKeys(treasury ${this.treasuryAddress})`;
  }
}

/** The EIP-55 form of a 0x-prefixed 20-byte hex address in any case; undefined for anything else. */
export function checksumAddress(raw: string): HexString | undefined {
  return /^0x[0-9a-fA-F]{40}$/.test(raw) ? (toEip55(raw) as HexString) : undefined;
}

/** The exact call data of ERC-20 `transfer(recipient, amount)`, lower-case hex. */
export function tokenTransferData(recipient: HexString, amount: bigint): HexString {
  return encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [recipient, amount] }).toLowerCase() as HexString;
}

/** `transfer(address,uint256)`'s selector. */
const TRANSFER_SELECTOR = '0xa9059cbb';

/**
 * The recipient (EIP-55) and amount of a canonical ERC-20 transfer call, or undefined for anything
 * else (another function, extra or missing bytes, a dirty address word): only exact re-encodings pass.
 */
export function decodeTokenTransfer(data: HexString): { recipient: HexString; amount: bigint } | undefined {
  const lower = data.toLowerCase() as HexString;
  if (!lower.startsWith(TRANSFER_SELECTOR) || lower.length !== 2 + 8 + 64 + 64) return undefined;
  const addressWord = lower.slice(10, 74);
  if (!addressWord.startsWith('0'.repeat(24))) return undefined;
  const recipient = toEip55(addressWord.slice(24)) as HexString;
  const amount = BigInt(`0x${lower.slice(74)}`);
  return tokenTransferData(recipient, amount) === lower ? { recipient, amount } : undefined;
}
