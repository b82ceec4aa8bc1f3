/**
 * The unsigned transaction of a batch as a BIP174 PSBT (version 0), the form the signer takes
 * (SignUtxoTransaction, docs/treasury.md#utxo): version 2, locktime 0, every input a P2WPKH output
 * of the account with its witness_utxo and sequence 0xfffffffd (BIP125: replaceable), the payouts'
 * outputs in batch order and the change (if any) last. Addresses of the treasury's change branch
 * (account/1/i) derive from the account xpub the signer answers.
 */
import { Address, OutScript, Transaction } from '@scure/btc-signer';
import { parseExtendedPublicKey } from '@coinvoice/chains/addresses';
import { p2wpkhAddress } from '@coinvoice/chains/utxo/address';

/** BIP125: any sequence below 0xfffffffe signals replaceability; 0xfffffffd keeps locktime meaningful. */
export const RBF_SEQUENCE = 0xfffffffd;

/** The bech32 human-readable part of an address ("bc", "ltc", "tb"). */
export function hrpOf(address: string): string {
  const separator = address.lastIndexOf('1');
  if (separator < 1) throw new Error(`not a bech32 address: ${address}`);
  return address.slice(0, separator).toLowerCase();
}

/** The output script of a P2WPKH bech32 address: OP_0 <20-byte key hash>. */
export function p2wpkhScript(address: string): Uint8Array {
  // Only the bech32 part of the network matters for a segwit address.
  const decoded = Address({ bech32: hrpOf(address), pubKeyHash: 0, scriptHash: 0, wif: 0 }).decode(address.toLowerCase());
  if (decoded.type !== 'wpkh') throw new Error(`not a P2WPKH address: ${address}`);
  return OutScript.encode(decoded);
}

export interface PsbtInput {
  txid: string;
  vout: number;
  amount: bigint;
  address: string;
}

export interface PsbtOutput {
  address: string;
  amount: bigint;
}

/** The base64 PSBT of `inputs` paying `outputs`, in that order. */
export function buildPsbt(inputs: readonly PsbtInput[], outputs: readonly PsbtOutput[]): string {
  const tx = new Transaction({ version: 2, lockTime: 0 });
  for (const input of inputs) {
    tx.addInput({ txid: input.txid, index: input.vout, sequence: RBF_SEQUENCE, witnessUtxo: { script: p2wpkhScript(input.address), amount: input.amount } });
  }
  for (const output of outputs) tx.addOutput({ script: p2wpkhScript(output.address), amount: output.amount });
  return Buffer.from(tx.toPSBT(0)).toString('base64');
}

/** Branches of the account key (docs/treasury.md#keys): 0 receive (deposits), 1 change (the treasury's). */
export type KeyBranch = 0 | 1;

/** Addresses of the account the signer holds, from its xpub: account/branch/index. */
export class AccountAddresses {
  private readonly branches: ReadonlyArray<ReturnType<typeof deriveBranch>>;

  constructor(
    accountXpub: string,
    private readonly hrp: string,
  ) {
    this.branches = [deriveBranch(accountXpub, 0), deriveBranch(accountXpub, 1)];
  }

  address(branch: KeyBranch, index: number): string {
    return p2wpkhAddress(this.branches[branch]!.deriveChild(index).publicKey!, this.hrp);
  }
}

function deriveBranch(accountXpub: string, branch: KeyBranch) {
  const account = parseExtendedPublicKey(accountXpub);
  if (!account.ok) throw new Error(`the signer's account xpub ${account.reason}`);
  return account.value.deriveChild(branch);
}
