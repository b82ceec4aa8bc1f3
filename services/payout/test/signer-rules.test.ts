/**
 * The signer's decoding rules on their own (docs/treasury.md#signer-policy): only an exact ERC-20
 * transfer(address, uint256) is read as one, and a malformed transaction is refused before any rule.
 */
import { create } from '@bufbuild/protobuf';
import { Code } from '@coinvoice/runtime';
import { decodeTokenTransfer, tokenTransferData } from '@coinvoice/chains/evm/signing-keys';
import { EvmTransactionSchema } from '@coinvoice/runtime/gen/coinvoice/signer/v1/signer_pb';
import { decodeTransaction, movementOf, Refusal } from '../src/signer/policy';

const RECIPIENT = '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed';
const USDT = '0xdAC17F958D2ee523a2206206994597C13D831ec7';
const USDC = '0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48';
const transfer = tokenTransferData(RECIPIENT, 1_500_000n);

function refusalOf(run: () => unknown): { rule: string; connectCode: Code } {
  try {
    run();
  } catch (err) {
    if (err instanceof Refusal) return { rule: err.rule, connectCode: err.connectCode };
    throw err;
  }
  throw new Error('expected a refusal');
}

const tx = (fields: Partial<{ to: string; value: string; data: string; maxFeePerGas: string; maxPriorityFeePerGas: string; gasLimit: bigint }>) =>
  create(EvmTransactionSchema, { chainId: 1n, nonce: 0n, to: USDT, value: '0', data: '0x', gasLimit: 60_000n, maxFeePerGas: '10', maxPriorityFeePerGas: '1', ...fields });

test('an exact transfer(address, uint256) decodes to its recipient (EIP-55) and amount, in either case', () => {
  expect(transfer).toBe(`0xa9059cbb${'0'.repeat(24)}${RECIPIENT.slice(2).toLowerCase()}${(1_500_000n).toString(16).padStart(64, '0')}`);
  expect(decodeTokenTransfer(transfer)).toEqual({ recipient: RECIPIENT, amount: 1_500_000n });
  expect(decodeTokenTransfer(transfer.toUpperCase().replace('0X', '0x') as `0x${string}`)).toEqual({ recipient: RECIPIENT, amount: 1_500_000n });
});

test('anything else is not a transfer: another selector, extra or missing bytes, dirty address bits', () => {
  expect(decodeTokenTransfer(`0x095ea7b3${transfer.slice(10)}`)).toBeUndefined(); // approve
  expect(decodeTokenTransfer(`${transfer}00`)).toBeUndefined();
  expect(decodeTokenTransfer(transfer.slice(0, -2) as `0x${string}`)).toBeUndefined();
  expect(decodeTokenTransfer(`0xa9059cbb${'0'.repeat(23)}1${transfer.slice(34)}`)).toBeUndefined();
  expect(decodeTokenTransfer('0x')).toBeUndefined();
});

test('a token movement needs the contract, no value and an exact transfer; an ETH movement no data', () => {
  const contracts = { USDT, USDC } as const;
  expect(movementOf(decodeTransaction(tx({ data: transfer })), 'USDT', contracts)).toEqual({ asset: 'USDT', recipient: RECIPIENT, amount: 1_500_000n });
  expect(refusalOf(() => movementOf(decodeTransaction(tx({ to: USDC, data: transfer })), 'USDT', contracts)).rule).toBe('destination_mismatch');
  expect(refusalOf(() => movementOf(decodeTransaction(tx({ value: '1', data: transfer })), 'USDT', contracts)).rule).toBe('amount_mismatch');
  expect(refusalOf(() => movementOf(decodeTransaction(tx({ data: `${transfer}00` })), 'USDT', contracts)).rule).toBe('call_data_mismatch');
  expect(movementOf(decodeTransaction(tx({ to: RECIPIENT.toLowerCase(), value: '7' })), 'ETH', contracts)).toEqual({ asset: 'ETH', recipient: RECIPIENT, amount: 7n });
  expect(refusalOf(() => movementOf(decodeTransaction(tx({ to: RECIPIENT, value: '7', data: '0x00' })), 'ETH', contracts)).rule).toBe('call_data_mismatch');
});

test('a malformed transaction is invalid_request (InvalidArgument)', () => {
  for (const fields of [
    { to: '0x1234' },
    { data: '0xabc' },
    { data: 'deadbeef' },
    { value: '-1' },
    { value: '1.5' },
    { maxFeePerGas: '1e9' },
    { maxFeePerGas: '10', maxPriorityFeePerGas: '11' },
    { gasLimit: 20_999n },
  ]) {
    expect({ fields, ...refusalOf(() => decodeTransaction(tx(fields))) }).toEqual({ fields, rule: 'invalid_request', connectCode: Code.InvalidArgument });
  }
  expect(refusalOf(() => decodeTransaction(undefined)).rule).toBe('invalid_request');
});
