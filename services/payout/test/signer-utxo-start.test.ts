/**
 * Issue 25: the signer starts only if each configured INVOICE_XPUB_BTC / INVOICE_XPUB_LTC is its
 * seed's BIP84 account key (docs/treasury.md#utxo-signer-policy), and `sign xpub bitcoin|litecoin`
 * prints those keys.
 */
import { signerAccountXpub } from '../src/signer/role';
import { prepareSignerDatabase, startTestSigner, TEST_ACCOUNT_XPUB, TEST_BTC_XPUB, TEST_LTC_XPUB, writeSeedFile, type SignerDatabase } from './support/signer';

let db: SignerDatabase;
beforeAll(async () => {
  db = await prepareSignerDatabase();
}, 60_000);
afterAll(async () => {
  await db?.dispose();
});

const start = (env: NodeJS.ProcessEnv) => startTestSigner({ databaseUrl: db.signerUrl, ownerDatabaseUrl: db.database.url, env });

it('refuses to start when INVOICE_XPUB_BTC or INVOICE_XPUB_LTC is another key than the seed’s account', async () => {
  await expect(start({ INVOICE_XPUB_BTC: TEST_LTC_XPUB })).rejects.toThrow("INVOICE_XPUB_BTC is not the m/84'/0'/0' key of the mnemonic in SIGNER_SEED_FILE");
  await expect(start({ INVOICE_XPUB_LTC: TEST_BTC_XPUB })).rejects.toThrow("INVOICE_XPUB_LTC is not the m/84'/2'/0' key of the mnemonic in SIGNER_SEED_FILE");
  // The Ethereum account's key is no BIP84 key either.
  await expect(start({ INVOICE_XPUB_BTC: TEST_ACCOUNT_XPUB })).rejects.toThrow('INVOICE_XPUB_BTC is not');
});

it('starts with both keys its own', async () => {
  const signer = await start({ INVOICE_XPUB_BTC: TEST_BTC_XPUB, INVOICE_XPUB_LTC: TEST_LTC_XPUB });
  await signer.stop();
});

it('`sign xpub bitcoin|litecoin` answers the BIP84 account xpubs; without a network the Ethereum one', () => {
  const seed = writeSeedFile();
  try {
    const env = { SIGNER_SEED_FILE: seed.file };
    expect(signerAccountXpub(env, 'bitcoin')).toBe(TEST_BTC_XPUB);
    expect(signerAccountXpub(env, 'litecoin')).toBe(TEST_LTC_XPUB);
    expect(signerAccountXpub(env)).toBe(TEST_ACCOUNT_XPUB);
    expect(() => signerAccountXpub(env, 'dogecoin')).toThrow('no account xpub for network dogecoin');
  } finally {
    seed.remove();
  }
});
