/**
 * The Esplora stand-in judges what it is sent (support/esplora-stand-in.ts): the treasury tests
 * rely on its refusals, so each refusal is proven here against hand-built transactions.
 */
import * as ecc from '@bitcoinerlab/secp256k1';
import * as bitcoin from 'bitcoinjs-lib';
import { ECPairFactory, type ECPairInterface } from 'ecpair';
import { EsploraStandIn, type Payer } from './support/esplora-stand-in';

const ECPair = ECPairFactory(ecc);
const network = bitcoin.networks.bitcoin;
const destination = bitcoin.payments.p2wpkh({ pubkey: Buffer.from(ECPair.makeRandom().publicKey), network }).address!;

let standIn: EsploraStandIn;
beforeEach(async () => {
  standIn = await EsploraStandIn.start(network);
});
afterEach(async () => {
  await standIn.close();
});

interface Spend {
  inputs: Array<{ txid: string; vout: number; value: number }>;
  outputs: Array<{ address: string; value: number }>;
  /** nSequence of every input: RBF-signalling by default. */
  sequence?: number;
}

/**
 * A P2WPKH spend built and signed by hand: `signWith` signs (default: the payer's key), while the
 * witness always names the payer's public key — so a wrong signer gives a valid-looking witness
 * whose signature does not verify.
 */
function spend(payer: Payer, { inputs, outputs, sequence = 0xfffffffd }: Spend, signWith: ECPairInterface = payer.key): bitcoin.Transaction {
  const tx = new bitcoin.Transaction();
  tx.version = 2;
  for (const input of inputs) tx.addInput(Buffer.from(input.txid, 'hex').reverse(), input.vout, sequence);
  for (const output of outputs) tx.addOutput(bitcoin.address.toOutputScript(output.address, network), BigInt(output.value));
  const scriptCode = bitcoin.payments.p2pkh({ hash: bitcoin.crypto.hash160(Buffer.from(payer.key.publicKey)) }).output!;
  inputs.forEach((input, index) => {
    const sighash = tx.hashForWitnessV0(index, scriptCode, BigInt(input.value), bitcoin.Transaction.SIGHASH_ALL);
    const signature = bitcoin.script.signature.encode(signWith.sign(sighash), bitcoin.Transaction.SIGHASH_ALL);
    tx.setWitness(index, [signature, Buffer.from(payer.key.publicKey)]);
  });
  return tx;
}

async function post(hex: string): Promise<{ status: number; body: string }> {
  const res = await fetch(`${standIn.url}/tx`, { method: 'POST', body: hex });
  return { status: res.status, body: await res.text() };
}

test('a correctly signed spend of a known output is accepted, served from the mempool, then mined', async () => {
  const payer = standIn.fundedPayer(100_000, 1);
  const coin = payer.utxos[0]!;
  const tx = spend(payer, { inputs: [coin], outputs: [{ address: destination, value: 99_000 }] });
  expect(await post(tx.toHex())).toEqual({ status: 200, body: tx.getId() });
  const served = await (await fetch(`${standIn.url}/tx/${tx.getId()}`)).json();
  expect(served).toMatchObject({ txid: tx.getId(), fee: 1_000, status: { confirmed: false } });
  expect(standIn.unspentOf(destination)).toEqual([{ txid: tx.getId(), vout: 0, value: 99_000, confirmed: false }]);
  standIn.mine();
  expect(standIn.unspentOf(destination)).toEqual([{ txid: tx.getId(), vout: 0, value: 99_000, confirmed: true }]);
});

test('a signature by another key is refused, and so is a signed transaction whose output was changed afterwards', async () => {
  const payer = standIn.fundedPayer(100_000, 1);
  const coin = payer.utxos[0]!;
  const wrongKey = spend(payer, { inputs: [coin], outputs: [{ address: destination, value: 99_000 }] }, ECPair.makeRandom());
  const refused = await post(wrongKey.toHex());
  expect(refused.status).toBe(400);
  expect(refused.body).toMatch(/mandatory-script-verify-flag-failed/);

  const tampered = spend(payer, { inputs: [coin], outputs: [{ address: destination, value: 99_000 }] });
  tampered.outs[0]!.value = 99_500n;
  expect((await post(tampered.toHex())).body).toMatch(/mandatory-script-verify-flag-failed/);
  expect(standIn.mempool.size).toBe(0);
  expect(standIn.broadcasts.map((b) => b.accepted)).toEqual([false, false]);
});

test('an unknown output, an output spent in the chain and a fee below zero are refused', async () => {
  const payer = standIn.fundedPayer(100_000, 1);
  const coin = payer.utxos[0]!;
  const unknown = spend(payer, { inputs: [{ txid: 'ab'.repeat(32), vout: 0, value: 100_000 }], outputs: [{ address: destination, value: 1_000 }] });
  expect((await post(unknown.toHex())).body).toMatch(/bad-txns-inputs-missingorspent/);
  const overspend = spend(payer, { inputs: [coin], outputs: [{ address: destination, value: 100_001 }] });
  expect((await post(overspend.toHex())).body).toMatch(/bad-txns-in-belowout/);

  const first = spend(payer, { inputs: [coin], outputs: [{ address: destination, value: 99_000 }] });
  expect((await post(first.toHex())).status).toBe(200);
  standIn.mine();
  const again = spend(payer, { inputs: [coin], outputs: [{ address: destination, value: 90_000 }] });
  expect((await post(again.toHex())).body).toMatch(/bad-txns-inputs-missingorspent/);
});

test('a double spend is refused unless it is a BIP125 replacement paying enough more; a replacement evicts the original', async () => {
  const payer = standIn.fundedPayer(100_000, 2);
  const [rbfCoin, finalCoin] = payer.utxos;

  // The original does not signal replaceability: any conflict is refused.
  const final = spend(payer, { inputs: [finalCoin!], outputs: [{ address: destination, value: 99_000 }], sequence: 0xffffffff });
  expect((await post(final.toHex())).status).toBe(200);
  const conflict = spend(payer, { inputs: [finalCoin!], outputs: [{ address: destination, value: 90_000 }] });
  expect((await post(conflict.toHex())).body).toMatch(/txn-mempool-conflict/);

  // Signalled: a bump of less than 1 sat/vB of the replacement's own size is refused, a real one accepted.
  const original = spend(payer, { inputs: [rbfCoin!], outputs: [{ address: destination, value: 99_000 }] });
  expect((await post(original.toHex())).status).toBe(200);
  const tooSmall = spend(payer, { inputs: [rbfCoin!], outputs: [{ address: destination, value: 98_990 }] });
  expect((await post(tooSmall.toHex())).body).toMatch(/insufficient fee/);
  const replacement = spend(payer, { inputs: [rbfCoin!], outputs: [{ address: destination, value: 98_000 }] });
  expect((await post(replacement.toHex())).status).toBe(200);
  expect(standIn.mempool.has(original.getId())).toBe(false);
  expect(standIn.mempool.has(replacement.getId())).toBe(true);
  expect(standIn.mempool.has(final.getId())).toBe(true);
});

test('fee estimates are served as Esplora serves them, and a test sets them', async () => {
  const defaults = (await (await fetch(`${standIn.url}/fee-estimates`)).json()) as Record<string, number>;
  expect(Object.keys(defaults)).toEqual(expect.arrayContaining(['1', '6', '25', '144', '1008']));
  expect(defaults['1']).toBeGreaterThan(defaults['25']!);
  standIn.setFeeEstimates(EsploraStandIn.feeCurve(300, 150));
  const spike = (await (await fetch(`${standIn.url}/fee-estimates`)).json()) as Record<string, number>;
  expect(spike['1']).toBe(300);
  expect(spike['144']).toBe(150);
});
