/**
 * The README's batched Bitcoin payout (README "Live payouts", docs/treasury.md#utxo), every process
 * real and started the way `npm start` starts them, against the Esplora STAND-IN (real signed
 * transactions, each input's signature verified against the stand-in's UTXO set — not a node: no
 * Bitcoin node installs here): a customer pays a live BTC invoice; its accounted deposit becomes the
 * treasury's coin; three payouts requested through the API within PAYOUT_BATCH_WAIT leave in ONE
 * transaction, each output exactly its amount, the change to the treasury's change branch; at two
 * confirmations each ends with a signed `payout.completed` webhook carrying that txid.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { HDKey } from '@scure/bip32';
import { generateMnemonic, mnemonicToSeedSync } from '@scure/bip39';
import { wordlist } from '@scure/bip39/wordlists/english';
import * as bitcoin from 'bitcoinjs-lib';
import { ECPairFactory } from 'ecpair';
import * as ecc from '@bitcoinerlab/secp256k1';
import { Webhook } from 'standardwebhooks';
import { EsploraStandIn } from '../../services/invoice/test/support/esplora-stand-in';
import { markEmailVerified } from '../support/accounts';
import { apiKeyHeader, createProjectWithKey, GatewayClient, registerMerchant, type ProjectFixture } from '../support/http';
import { bootSystem, type BootedSystem } from '../support/system';
import { requestVerifiedPayout } from './treasury-walkthrough.support';
import { deleteStreams, eventually, Receiver } from './webhooks.support';

const ECPair = ECPairFactory(ecc);
const mnemonic = generateMnemonic(wordlist, 128);
const account = HDKey.fromMasterSeed(mnemonicToSeedSync(mnemonic)).derive("m/84'/0'/0'");
const changeAddress = (index: number) => bitcoin.payments.p2wpkh({ pubkey: Buffer.from(account.deriveChild(1).deriveChild(index).publicKey!) }).address!;

let esplora: EsploraStandIn;
let system: BootedSystem;
let api: GatewayClient;
let receiver: Receiver;
let live: ProjectFixture;

beforeAll(async () => {
  esplora = await EsploraStandIn.start();
  esplora.setFeeEstimates({ '1': 12.5, '3': 8.2, '6': 4.013, '144': 1.004 });
  receiver = await new Receiver().start();
  const seedFile = path.join(mkdtempSync(path.join(tmpdir(), 'coinvoice-signer-')), 'mnemonic');
  writeFileSync(seedFile, `${mnemonic}\n`, { mode: 0o600 });
  system = await bootSystem({
    env: {
      CHAIN_BITCOIN_ESPLORA_URL: esplora.url,
      CHAIN_BITCOIN_POLL_MS: '200',
      CHAIN_BITCOIN_CONFIRMATIONS: '2',
      INVOICE_XPUB_BTC: account.publicExtendedKey,
      SIGNER_SEED_FILE: seedFile,
      SIGNER_MAX_PAYOUT_BTC: '0.01',
      SIGNER_DAILY_LIMIT_BTC: '0.1',
      PAYOUT_AUTO_MAX_BTC: '0.001',
      PAYOUT_BATCH_WAIT: '3s',
      PAYOUT_PROCESSOR_POLL_MS: '200',
      WEBHOOK_RETRY_SCHEDULE: '200ms,300ms,300ms',
      PASSWORD_HASH_MEMORY_KIB: '1024',
    },
  });
  api = new GatewayClient(system.gatewayUrl);
  const merchant = await registerMerchant(api);
  await markEmailVerified(system, merchant.merchantId);
  live = await createProjectWithKey(api, merchant, 'live', { webhookUrl: receiver.url });
}, 180_000);

afterAll(async () => {
  await system?.stop();
  if (system) await deleteStreams(system.namespace);
  await receiver?.stop();
  await esplora?.close();
});

async function payout(id: string): Promise<Record<string, any>> {
  const res = await api.get(`/api/payout/${id}`, { headers: apiKeyHeader(live.key) });
  expect(res.status).toBe(200);
  return res.body;
}

test('npm start runs the Bitcoin processor beside the signer', () => {
  expect(Object.keys(system.current())).toEqual(expect.arrayContaining(['payout-sign', 'payout-process-bitcoin']));
});

test('a live BTC deposit becomes the treasury\'s coin; three payouts go out in ONE transaction and each completes with its txid', async () => {
  // 1. A customer pays a live BTC invoice; two blocks: Paid, credited, and the deposit is accounted.
  const created = await api.post('/api/invoice', { priceAmount: '600.00', priceCurrency: 'USD', payCurrency: 'BTC', successUrl: 'https://shop.example/ok', cancelUrl: 'https://shop.example/no' }, { headers: apiKeyHeader(live.key) });
  expect(created.status).toBe(201);
  const invoice = created.body as { id: string; address: string; amountExpected: number };
  const sat = Math.round(invoice.amountExpected * 1e8);
  const payer = esplora.fundedPayer(sat + 50_000, 1);
  esplora.broadcast(esplora.pay(payer, [{ address: invoice.address, value: sat }]));
  esplora.mine();
  esplora.mine();
  await eventually(async () => ((await api.get(`/api/invoice/${invoice.id}`, { headers: apiKeyHeader(live.key) })).body.status === 'Paid' ? true : undefined), 30_000, 'the invoice Paid');

  // 2. Three payouts to fresh addresses, under PAYOUT_AUTO_MAX_BTC, requested within PAYOUT_BATCH_WAIT.
  const destinations = [0, 1, 2].map(() => bitcoin.payments.p2wpkh({ pubkey: Buffer.from(ECPair.makeRandom().publicKey) }).address!);
  const amounts = [0.0005, 0.00071234, 0.0003];
  const ids: string[] = [];
  for (const [i, address] of destinations.entries()) ids.push(await requestVerifiedPayout({ api, system, project: live }, { amount: amounts[i]!, currency: 'BTC', address }));

  // 3. One transaction for the three: each payout Pending with the same transactionHash, 0 confirmations.
  const txid = await eventually(async () => {
    const views = await Promise.all(ids.map(payout));
    const hashes = new Set(views.map((v) => v.transactionHash));
    return hashes.size === 1 && views[0]!.transactionHash && esplora.mempool.has(views[0]!.transactionHash) ? (views[0]!.transactionHash as string) : undefined;
  }, 30_000, 'the batch broadcast');
  const inFlight = await payout(ids[0]!);
  expect(inFlight).toMatchObject({ status: 'Pending', transactionHash: txid, confirmations: 0 });
  console.log('in flight:', JSON.stringify(inFlight));
  const tx = esplora.mempool.get(txid)!;
  const outputs = tx.tx.outs.map((o) => ({ address: bitcoin.address.fromOutputScript(Buffer.from(o.script)), value: Number(o.value) }));
  expect(outputs.slice(0, 3)).toEqual(destinations.map((address, i) => ({ address, value: Math.round(amounts[i]! * 1e8) })));
  expect(outputs[3]!.address).toBe(changeAddress(1));
  expect(outputs).toHaveLength(4);
  const fee = tx.prevouts.reduce((s, p) => s + p.value, 0) - outputs.reduce((s, o) => s + o.value, 0);
  console.log('transaction:', JSON.stringify({ txid, inputs: tx.prevouts.map((p) => `${p.txid}:${p.vout}`), outputs, fee, vsize: tx.tx.virtualSize() }));

  // 4. Two blocks: every payout Completed, one signed payout.completed webhook each, with the txid.
  esplora.mine();
  esplora.mine();
  const wh = new Webhook(live.webhookSecret);
  for (const id of ids) {
    const event = await eventually(async () => {
      const request = receiver.requests.find((r) => r.body.includes(id) && r.body.includes('"Completed"'));
      return request
        ? (wh.verify(request.body, { 'webhook-id': String(request.headers['webhook-id']), 'webhook-timestamp': String(request.headers['webhook-timestamp']), 'webhook-signature': String(request.headers['webhook-signature']) }) as Record<string, any>)
        : undefined;
    }, 30_000, `payout.completed of ${id}`);
    expect(event).toMatchObject({ payoutId: id, status: 'Completed', network: 'bitcoin', transactionHash: txid });
    if (id === ids[0]) console.log('payout.completed:', JSON.stringify(event));
    expect(await payout(id)).toMatchObject({ status: 'Completed', transactionHash: txid });
  }
  // Each delivered once: one Completed webhook per payout.
  for (const id of ids) expect(receiver.requests.filter((r) => r.body.includes(id) && r.body.includes('"Completed"'))).toHaveLength(1);
});
