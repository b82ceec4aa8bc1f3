/**
 * Invoice addresses through the running service: 1,000 invoices created concurrently get 1,000
 * distinct addresses, each valid by the domain validator AND by the independent codecs; a key
 * shared by ETH/USDT/USDC has one counter; a configured BIP84 key yields the published
 * addresses; development keys are generated once, kept across restarts, and shared by two
 * replicas starting at the same moment.
 */
import { HDKey } from '@scure/bip32';
import { InvoiceService } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/invoice_pb';
import { connectNats, createDb, createLogger, createRpcClient, EventNamespace } from '@coinvoice/runtime';
import { createTestDatabase, testNatsUrl, uniqueName } from '../../../test/support/infra';
import { startTestService, type TestService } from '../../../test/support/service';
import { createAddressDeriver, generateDevelopmentKeyPair, validateAddress } from '@coinvoice/chains/addresses';
import type { Chain, CryptoCode } from '@coinvoice/chains/coin';
import { cryptoCurrency, payMethod } from '@coinvoice/chains/currencies';
import { invoiceService } from '../src/server';
import {
  createRequest,
  liveProject,
  mapLimit,
  sandboxProject,
  startInvoiceHarness,
  type Harness,
} from './support/harness';
import { base58CheckDecode, decodeSegwitV0, eip55, ethereumKeyHash, hash160 } from './support/independent-codecs';

/** One testnet account key (fixed seed) configured for ETH, USDT and USDC at once. */
const SHARED_EVM = generateDevelopmentKeyPair('ETH', 'testnet', new Uint8Array(32).fill(7));
/** The BIP84 test vector account key (mnemonic "abandon … about"), m/84'/0'/0'. */
const BIP84_ZPUB = 'zpub6rFR7y4Q2AijBEqTUquhVz398htDFrtymD9xYYfG1m4wAcvPhXNfE3EfH1r1ADqtfSdVCToUG868RvUUkgDKf31mGDtKsAYz2oz2AGutZYs';

async function deleteStream(namespace: string): Promise<void> {
  const nats = await connectNats({ url: testNatsUrl(), name: 'invoice-test', logger: createLogger({ service: 'test', level: 'silent' }) });
  const jsm = await nats.jetstreamManager();
  await jsm.streams.delete(new EventNamespace(namespace).streamName('invoice')).catch(() => undefined);
  await nats.drain();
}

/** Independent check: decode with the spec-written codecs, by the entry's address format (POL and BNB are EVM). */
function independentlyValid(coin: CryptoCode, address: string, network?: Chain): boolean {
  const method = network === undefined ? cryptoCurrency(coin) : payMethod(coin, network)!;
  switch (method.addressFormat) {
    case 'p2wpkh': {
      const decoded = decodeSegwitV0(address);
      return decoded !== null && decoded.hrp === (method.chain === 'bitcoin' ? 'tb' : 'tltc') && decoded.version === 0 && decoded.program.length === 20;
    }
    case 'eip55':
      return /^0x[0-9a-fA-F]{40}$/.test(address) && eip55(address.slice(2).toLowerCase()) === address;
    case 'tron-base58check': {
      const payload = base58CheckDecode(address);
      return payload !== null && payload.length === 21 && payload[0] === 0x41;
    }
  }
}

describe('one service instance', () => {
  let h: Harness;

  beforeAll(async () => {
    h = await startInvoiceHarness({
      env: {
        INVOICE_XPUB_ETH_TESTNET: SHARED_EVM.xpub,
        INVOICE_XPUB_USDT_TESTNET: SHARED_EVM.xpub,
        INVOICE_XPUB_USDC_TESTNET: SHARED_EVM.xpub,
        INVOICE_XPUB_BTC: BIP84_ZPUB,
      },
    });
  });

  afterAll(async () => {
    await h?.dispose();
  });

  test('a configured BIP84 account key gives the published receive addresses, in order', async () => {
    const project = liveProject();
    const first = (await h.client.createInvoice(createRequest(project, { payCurrency: 'BTC' }))).invoice!;
    const second = (await h.client.createInvoice(createRequest(project, { payCurrency: 'BTC' }))).invoice!;
    // BIP84 test vectors, m/84'/0'/0'/0/0 and m/84'/0'/0'/0/1.
    expect(first.address).toBe('bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu');
    expect(second.address).toBe('bc1qnjg0jd8228aq7egyzacy8cys3knf9xvrerkf9g');
  });

  test('1,000 invoices created concurrently get 1,000 distinct, valid addresses; the shared EVM key has one counter', async () => {
    const coins: CryptoCode[] = ['BTC', 'ETH', 'USDT', 'USDC', 'TRX', 'LTC'];
    const projects = Array.from({ length: 10 }, () => sandboxProject());
    const started = Date.now();
    const invoices = await mapLimit(Array.from({ length: 1000 }, (_, i) => i), 50, async (i) => {
      const coin = coins[i % coins.length]!;
      const res = await h.client.createInvoice(createRequest(projects[i % projects.length]!, { payCurrency: coin, priceAmount: '10.00' }));
      return { coin, address: res.invoice!.address, id: res.invoice!.id };
    });
    const elapsedMs = Date.now() - started;

    expect(new Set(invoices.map((i) => i.address)).size).toBe(1000);
    const invalid = invoices.filter(
      ({ coin, address }) => !validateAddress(coin, 'testnet', address).ok || !independentlyValid(coin, address),
    );
    expect(invalid).toEqual([]);

    // ETH, USDT and USDC share the configured key: their invoices hold indexes 0..n-1 of that one
    // key, each address being the key's child at its index (checked independently).
    const evm = invoices.filter((i) => i.coin === 'ETH' || i.coin === 'USDT' || i.coin === 'USDC').length;
    expect(evm).toBe(501);
    const rows = await h.sql<{ id: string; address: string; address_index: number; xpub: string; key_id: number }[]>`
      select i.id, i.address, i.address_index, k.xpub, k.id as key_id
      from invoices i join address_keys k on k.id = i.key_id
      where i.pay_currency in ('ETH', 'USDT', 'USDC') and i.environment = 'sandbox'`;
    expect(rows).toHaveLength(evm);
    expect(new Set(rows.map((r) => r.xpub))).toEqual(new Set([SHARED_EVM.xpub]));
    expect(rows.map((r) => r.address_index).sort((a, b) => a - b)).toEqual(Array.from({ length: evm }, (_, i) => i));
    // The key's sequence hands out the next index after them, never one of theirs again.
    const [next] = await h.sql.unsafe(`select last_value::int as last from address_index_${rows[0]!.key_id}`);
    expect(next!.last).toBe(evm - 1);
    const receive = HDKey.fromExtendedKey(SHARED_EVM.xpub, { public: 0x043587cf, private: 0x04358394 }).deriveChild(0);
    for (const row of rows.filter((r) => r.address_index % 25 === 0)) {
      const keyHash = ethereumKeyHash(receive.deriveChild(row.address_index).publicKey!);
      expect(row.address).toBe(eip55(keyHash.toString('hex')));
    }

    // Seconds, not minutes (typically ~6 s here; the bound leaves room for a busy shared machine).
    expect(elapsedMs).toBeLessThan(60_000);
  });

  test('an address comes from the entry\'s key currency: USDT on tron from the TRX key, USDT on bsc from the USDT key (docs/networks.md)', async () => {
    const project = sandboxProject();
    const create = async (payCurrency: CryptoCode, payNetwork?: string) =>
      (await h.client.createInvoice(createRequest(project, { payCurrency, payNetwork, priceAmount: '10.00' }))).invoice!;
    const trx = await create('TRX');
    const usdtTron = await create('USDT', 'tron');
    const usdtEthereum = await create('USDT');
    const usdtBsc = await create('USDT', 'bsc');
    expect([trx, usdtTron, usdtEthereum, usdtBsc].map((i) => i.payNetwork)).toEqual(['tron', 'tron', 'ethereum', 'bsc']);
    expect(independentlyValid('USDT', usdtTron.address, 'tron')).toBe(true);
    expect(usdtTron.address.startsWith('T')).toBe(true);
    expect(independentlyValid('USDT', usdtBsc.address, 'bsc')).toBe(true);

    const rows = await h.sql<{ id: string; key_id: number; address_index: number; pay_network: string }[]>`
      select id, key_id, address_index, pay_network from invoices where id in ${h.sql([trx.id, usdtTron.id, usdtEthereum.id, usdtBsc.id])}`;
    const row = (id: string) => rows.find((r) => r.id === id)!;
    expect(row(usdtBsc.id).pay_network).toBe('bsc');
    // One key and one counter per key currency: an address is never issued twice across networks.
    expect(row(usdtTron.id).key_id).toBe(row(trx.id).key_id);
    expect(row(usdtTron.id).address_index).toBe(row(trx.id).address_index + 1);
    expect(row(usdtBsc.id).key_id).toBe(row(usdtEthereum.id).key_id);
    expect(row(usdtBsc.id).address_index).toBe(row(usdtEthereum.id).address_index + 1);

    // Each address is its key's child at its index, checked independently of the service.
    const [trxKey] = await h.sql<{ xpub: string }[]>`select xpub from development_keys where currency = 'TRX' and network = 'testnet'`;
    const trxReceive = HDKey.fromExtendedKey(trxKey!.xpub, { public: 0x043587cf, private: 0x04358394 }).deriveChild(0);
    expect(base58CheckDecode(usdtTron.address)?.toString('hex')).toBe(`41${ethereumKeyHash(trxReceive.deriveChild(row(usdtTron.id).address_index).publicKey!).toString('hex')}`);
    const usdtReceive = HDKey.fromExtendedKey(SHARED_EVM.xpub, { public: 0x043587cf, private: 0x04358394 }).deriveChild(0);
    expect(usdtBsc.address).toBe(eip55(ethereumKeyHash(usdtReceive.deriveChild(row(usdtBsc.id).address_index).publicKey!).toString('hex')));
  });

  test('development keys are kept: after a restart the same key continues at the next index', async () => {
    const project = sandboxProject();
    const before = (await h.client.createInvoice(createRequest(project, { payCurrency: 'TRX' }))).invoice!;
    const [key] = await h.sql<{ xpub: string }[]>`select xpub from development_keys where currency = 'TRX' and network = 'testnet'`;
    await h.svc.stop();
    const restarted = await h.svc.startAgain();
    try {
      const client = createRpcClient(InvoiceService, restarted.url);
      const after = (await client.createInvoice(createRequest(project, { payCurrency: 'TRX' }))).invoice!;
      const indexes = await h.sql<{ id: string; address_index: number }[]>`
        select id, address_index from invoices where id in ${h.sql([before.id, after.id])}`;
      const indexOf = (id: string) => indexes.find((r) => r.id === id)!.address_index;
      expect(indexOf(after.id)).toBe(indexOf(before.id) + 1);
      const deriver = createAddressDeriver(key!.xpub, 'TRX', 'testnet');
      expect(deriver.ok && deriver.value.addressAt(indexOf(after.id))).toBe(after.address);
      expect(deriver.ok && deriver.value.addressAt(indexOf(before.id))).toBe(before.address);
      // Configured keys are never stored as development keys.
      const [count] = await h.sql<{ n: number }[]>`select count(*)::int as n from development_keys`;
      // 8 coins × mainnet/testnet, less the 4 configured above.
      expect(count?.n).toBe(16 - 4);
    } finally {
      await restarted.stop();
    }
  });
});

test('two replicas starting at once on a fresh database share one set of development keys', async () => {
  const database = await createTestDatabase('cvinvoice');
  const namespace = uniqueName('t');
  const services: TestService[] = [];
  try {
    services.push(
      ...(await Promise.all([
        startTestService(invoiceService, { database, namespace }),
        startTestService(invoiceService, { database, namespace }),
      ])),
    );
    const project = sandboxProject();
    const created = await Promise.all(
      services.flatMap((svc) => {
        const client = createRpcClient(InvoiceService, svc.url);
        return [0, 1, 2].map(() => client.createInvoice(createRequest(project, { payCurrency: 'BTC' })));
      }),
    );
    const addresses = created.map((r) => r.invoice!.address);
    expect(new Set(addresses).size).toBe(6);

    const sql = createDb({ url: database.url, schema: 'invoice', max: 1 });
    try {
      const keys = await sql<{ xpub: string }[]>`select xpub from development_keys where currency = 'BTC' and network = 'testnet'`;
      expect(keys).toHaveLength(1);
      const [all] = await sql<{ n: number }[]>`select count(*)::int as n from development_keys`;
      expect(all?.n).toBe(16); // 8 coins × mainnet/testnet
      // Both replicas derive from the stored key: every address is its child at indexes 0..5.
      const deriver = createAddressDeriver(keys[0]!.xpub, 'BTC', 'testnet');
      if (!deriver.ok) throw new Error(deriver.reason);
      expect(addresses.sort()).toEqual([0, 1, 2, 3, 4, 5].map((i) => deriver.value.addressAt(i)).sort());
      const receive = HDKey.fromExtendedKey(keys[0]!.xpub, { public: 0x043587cf, private: 0x04358394 }).deriveChild(0);
      expect(decodeSegwitV0(deriver.value.addressAt(3))?.program).toEqual(hash160(receive.deriveChild(3).publicKey!));
    } finally {
      await sql.end({ timeout: 5 });
    }
  } finally {
    for (const svc of services) await svc.stop();
    await database.drop().catch(() => undefined);
    await deleteStream(namespace);
  }
});
