/**
 * The Tron side of the treasury tests (docs/treasury.md#tron): the test seed's Tron account
 * (m/44'/195'/0', INVOICE_XPUB_TRX) and treasury (account/1/0), derived here with the independent
 * codecs (not the signer's TronSigningKeys), fresh payout addresses, and the node calls a
 * processor makes, against the Tron stand-in.
 */
import { randomBytes } from 'node:crypto';
import { HDKey } from '@scure/bip32';
import { mnemonicToSeedSync } from '@scure/bip39';
import { base58CheckEncode, ethereumKeyHash } from '../../../invoice/test/support/independent-codecs';
import { tronHex } from '../../../invoice/test/support/tron-stand-in';
import { TEST_MNEMONIC } from './signer';

const tronAccount = HDKey.fromMasterSeed(mnemonicToSeedSync(TEST_MNEMONIC)).derive("m/44'/195'/0'");
const treasuryKey = tronAccount.deriveChild(1).deriveChild(0);

export const TEST_TRON_XPUB = tronAccount.publicExtendedKey;
export const TEST_TRON_TREASURY = base58CheckEncode(Buffer.concat([Buffer.of(0x41), ethereumKeyHash(treasuryKey.publicKey!)]));

/** A Tron address nobody holds a key of (a payout destination, a token contract). */
export function freshTronAddress(): string {
  return base58CheckEncode(Buffer.concat([Buffer.of(0x41), randomBytes(20)]));
}

/** The node's JSON answer to a POST of `body` to `path`. */
export async function tronCall(url: string, path: string, body: unknown): Promise<Record<string, unknown>> {
  const response = await fetch(`${url}${path}`, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
  return (await response.json()) as Record<string, unknown>;
}

/** A node-built TRX transfer (visible: base58 addresses). */
export async function createTrxTransfer(url: string, from: string, to: string, sun: bigint) {
  return (await tronCall(url, '/wallet/createtransaction', { owner_address: from, to_address: to, amount: Number(sun), visible: true })) as unknown as NodeTransaction;
}

/** A node-built TRC-20 transfer(to, amount) call of `contract`. */
export async function createTrc20Transfer(url: string, contract: string, from: string, to: string, amount: bigint, feeLimit: number) {
  const parameter = tronHex(to).slice(2).padStart(64, '0') + amount.toString(16).padStart(64, '0');
  const answer = await tronCall(url, '/wallet/triggersmartcontract', {
    owner_address: from,
    contract_address: contract,
    function_selector: 'transfer(address,uint256)',
    parameter,
    fee_limit: feeLimit,
    call_value: 0,
    visible: true,
  });
  return answer.transaction as NodeTransaction;
}

export interface NodeTransaction {
  txID: string;
  raw_data: Record<string, unknown>;
  raw_data_hex: string;
  visible: boolean;
}

export async function broadcast(url: string, tx: NodeTransaction, signature: string) {
  return tronCall(url, '/wallet/broadcasttransaction', { ...tx, signature: [signature] });
}
