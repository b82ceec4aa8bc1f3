/**
 * The secrets this repository publishes (services/runtime/src/published-secrets.ts): every secret
 * of the development overlay is on the list, and a real process started with APP_ENV=production
 * and one of them refuses to start, one line naming the variable, never the value. An outside
 * review started the signer on chain 1 with the overlay's mnemonic, the invoice service with its
 * xpub and event key, and auth with its KEK, in production, without a word.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { ISecret } from 'kubernetes-models/v1/Secret';
import { isPublishedSecret, refusePublishedSecrets } from '@coinvoice/runtime';
import { DEVELOPMENT_KEK_BASE64 } from '@coinvoice/domain/secrets-at-rest';
import { signerAccountXpub } from '../../services/payout/src/signer/role';
import { decodeSecret, loadContext, ofKind, REPO_ROOT } from './checks';
import { bareProcessEnv } from '../support/process-env';

const OVERLAY = path.join(REPO_ROOT, 'deploy/k8s/overlays/development');
/** Values of the development Secrets that are addresses, not secrets (their passwords are checked below). */
const NOT_SECRETS = /_URL$/;
const MNEMONICS = {
  development: readFileSync(path.join(OVERLAY, 'signer-seed/mnemonic'), 'utf8'),
  anvil: 'test test test test test test test test test test test junk',
  testVector: 'abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about',
};

test('every secret of the development overlay, and the development KEK of the source, is on the published list', () => {
  const secrets = ofKind<ISecret>(loadContext('development').objects, 'Secret');
  expect(secrets.length).toBeGreaterThan(5);
  const unlisted: string[] = [];
  let checked = 0;
  for (const secret of secrets) {
    for (const [key, value] of Object.entries(decodeSecret(secret))) {
      if (NOT_SECRETS.test(key) || value.trim() === '') continue;
      const texts =
        key === 'SECRETS_KEK'
          ? [Buffer.from(value, 'base64').toString('hex')]
          : key === 'EVENT_VERIFY_KEYS'
            ? value.split(',').map((e) => Buffer.from(e.slice(e.indexOf('=') + 1), 'base64url').toString('hex'))
            : [value];
      for (const text of texts) {
        checked++;
        if (!isPublishedSecret(text)) unlisted.push(`${secret.metadata?.name}/${key}`);
      }
    }
  }
  expect(unlisted).toEqual([]);
  // The KEK, the xpubs, the mnemonic, four event keys and their public halves, the TLS files.
  expect(checked).toBeGreaterThanOrEqual(20);
  expect(isPublishedSecret(Buffer.from(DEVELOPMENT_KEK_BASE64, 'base64').toString('hex'))).toBe(true);
  // In any letter case or line breaks; a key of one's own is not on it.
  expect(isPublishedSecret(` ${readFileSync(path.join(OVERLAY, 'signer-seed/mnemonic'), 'utf8').toUpperCase().replace(/ /g, '\n')} `)).toBe(true);
  expect(isPublishedSecret('xpub6CUGRUonZSQ4TWtTMmzXdrXDtypWKiKrhko4egpiMZbpiaQL2jkwSB1icqYh2cfDfVxdx4df189oLKnC5fSwqPfgyP3hooxujYzAu3fDVmz')).toBe(false);
});

test('every account xpub of every published mnemonic is on the list, for each network an INVOICE_XPUB_* takes (an outside review started production with the development mnemonic\'s BTC xpub)', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'mnemonics-'));
  const unlisted: string[] = [];
  for (const [name, words] of Object.entries(MNEMONICS)) {
    const file = path.join(dir, name);
    writeFileSync(file, words);
    for (const network of ['ethereum', 'bitcoin', 'litecoin', 'tron']) {
      const xpub = signerAccountXpub({ SIGNER_SEED_FILE: file }, network);
      if (!isPublishedSecret(xpub)) unlisted.push(`${name}/${network}`);
    }
  }
  expect(unlisted).toEqual([]);
  // The invoice service itself, with the development mnemonic's BTC account.
  const file = path.join(dir, 'development');
  const result = spawnSync(process.execPath, [path.join(REPO_ROOT, 'services/invoice/dist/main.js')], {
    env: { PATH: process.env.PATH, APP_ENV: 'production', DATABASE_URL: 'postgres://127.0.0.1:1/none', INVOICE_XPUB_BTC: signerAccountXpub({ SIGNER_SEED_FILE: file }, 'bitcoin') },
    encoding: 'utf8',
    timeout: 20_000,
  });
  expect([result.status, result.stderr.trim()]).toEqual([1, expect.stringMatching(/^config: INVOICE_XPUB_BTC is invalid \(value not shown\): expected a secret of your own/)]);
});

test('production refuses each kind (one line, the variable, never the value); development and keys of one\'s own pass', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'published-'));
  const ownKey = path.join(dir, 'own.pem');
  writeFileSync(ownKey, '-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIB1Y0vqqRx1Pq1oMjV3D0dGz7Qh2y9c5g2Vw2mWq2c3A\n-----END PRIVATE KEY-----\n');
  const refusal = (env: NodeJS.ProcessEnv) => {
    try {
      refusePublishedSecrets({ APP_ENV: 'production', ...env });
      return undefined;
    } catch (err) {
      return (err as Error).message;
    }
  };
  const kek = 'Y29pbnZvaWNlLWRldmVsb3BtZW50LWtlay0wMDAwMDA=';
  expect(refusal({ SECRETS_KEK: kek })).toMatch(/^config: SECRETS_KEK is invalid \(value not shown\): expected a secret of your own/);
  expect(refusal({ SECRETS_KEK: Buffer.alloc(32).toString('base64') })).toMatch(/^config: SECRETS_KEK is invalid \(value not shown\): expected 32 random bytes/);
  // Rotating away from a published KEK keeps it as the previous one: allowed (rotate-kek needs it).
  expect(refusal({ SECRETS_KEK: Buffer.from(Array.from({ length: 32 }, (_, i) => i * 7)).toString('base64'), SECRETS_KEK_PREVIOUS: `${kek},${DEVELOPMENT_KEK_BASE64}` })).toBeUndefined();
  // The same public key in another spelling of its base64url (the last character's unused bits).
  expect(refusal({ EVENT_VERIFY_KEYS: 'auth=put1aP0oNs_yXj-krFmyjfbFNQ_umNcEe3mHZRSTi69' })).toMatch(/^config: EVENT_VERIFY_KEYS is invalid/);
  expect(refusal({ DATABASE_URL: 'postgres://coinvoice:coinvoice-dev@db.internal:5432/coinvoice' })).toMatch(/^config: DATABASE_URL is invalid \(value not shown\)/);
  expect(refusal({ DATABASE_URL: 'postgres://coinvoice:a-password-of-ours@db.internal:5432/coinvoice' })).toBeUndefined();
  expect(refusal({ EVENT_SIGNING_KEY_FILE: path.join(OVERLAY, 'event-keys/invoice.pem') })).toMatch(/^config: EVENT_SIGNING_KEY_FILE is invalid/);
  expect(refusal({ SIGNER_SEED_FILE: path.join(OVERLAY, 'signer-seed/mnemonic') })).toMatch(/^config: SIGNER_SEED_FILE is invalid/);
  expect(refusal({ TLS_KEY_FILE: path.join(OVERLAY, 'tls/payout-signer.key') })).toMatch(/^config: TLS_KEY_FILE is invalid/);
  expect(refusal({ EVENT_VERIFY_KEYS: 'auth=put1aP0oNs_yXj-krFmyjfbFNQ_umNcEe3mHZRSTi68' })).toMatch(/^config: EVENT_VERIFY_KEYS is invalid/);
  for (const message of [refusal({ SECRETS_KEK: kek }), refusal({ EVENT_VERIFY_KEYS: 'auth=put1aP0oNs_yXj-krFmyjfbFNQ_umNcEe3mHZRSTi68' })]) {
    expect(message).not.toMatch(/Y29pbnZv|put1aP0/);
  }
  // Development runs with them (npm start, the development overlay); production with one's own.
  expect(refusal({ APP_ENV: 'development', SECRETS_KEK: kek, EVENT_SIGNING_KEY_FILE: path.join(OVERLAY, 'event-keys/invoice.pem') })).toBeUndefined();
  expect(refusal({ SECRETS_KEK: Buffer.from(Array.from({ length: 32 }, (_, i) => i * 7)).toString('base64'), EVENT_SIGNING_KEY_FILE: ownKey })).toBeUndefined();
});

test('a *_FILE variable that is not a secret file, or names a pipe or a device, is not read: production starts as in development (an outside review saw it hang on LOG_FILE=/dev/stdout)', () => {
  const started = Date.now();
  for (const env of [{ LOG_FILE: '/dev/zero' }, { TLS_KEY_FILE: '/dev/zero' }, { EVENT_SIGNING_KEY_FILE: '/dev/stdin' }]) {
    expect(() => refusePublishedSecrets({ APP_ENV: 'production', ...env })).not.toThrow();
  }
  expect(Date.now() - started).toBeLessThan(1_000);
});

test.each([
  ['services/invoice/dist/main.js', 'INVOICE_XPUB_ETH', { INVOICE_XPUB_ETH: 'xpub6CkQ7A3zEe67x8zKug83c6Qjz2V2xTSk8T3sdqHpdKjAurBGv47ZHSMQ47TtX7dT55i4HhT3gtAMctLsvRaweeBEegCKBbY8imaSybJyVBu' }],
  ['services/auth/dist/main.js', 'SECRETS_KEK', { SECRETS_KEK: 'Y29pbnZvaWNlLWRldmVsb3BtZW50LWtlay0wMDAwMDA=' }],
  ['gateway/dist/main.js', 'EVENT_VERIFY_KEYS', { EVENT_VERIFY_KEYS: 'auth=put1aP0oNs_yXj-krFmyjfbFNQ_umNcEe3mHZRSTi68' }],
] as const)('%s in production with the development overlay\'s %s stops with one line', (entry, variable, env) => {
  const result = spawnSync(process.execPath, [path.join(REPO_ROOT, entry)], {
    env: bareProcessEnv({ APP_ENV: 'production', DATABASE_URL: 'postgres://127.0.0.1:1/none', ...env }),
    encoding: 'utf8',
    timeout: 20_000,
  });
  expect(result.status).toBe(1);
  expect(result.stderr.trim().split('\n')).toEqual([expect.stringMatching(new RegExp(`^config: ${variable} is invalid \\(value not shown\\): expected a secret of your own`))]);
});
