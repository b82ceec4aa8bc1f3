/**
 * Secrets stay secret: after a whole merchant journey (register, login, projects, webhook secret
 * rotation, keys created, used and revoked, failed logins and verifications), no plain API key and
 * no password is anywhere in the database, and the service's logs (captured at trace level) hold
 * no password, plain key, token or webhook secret.
 */
import { createHash } from 'node:crypto';
import { Environment } from '@coinvoice/runtime/gen/coinvoice/common/v1/environment_pb';
import { authService } from '../src/server';
import { capturingLogger, dumpDatabase, instrumented, register, rpcError, startAuth, uniqueEmail, type StartedAuth } from './support/auth';

const logs = capturingLogger();
let auth: StartedAuth;

beforeAll(async () => {
  auth = await startAuth({ definition: instrumented(authService, { logger: logs.logger }) });
});

afterAll(async () => {
  await auth?.dispose();
});

it('keeps plain keys and passwords out of the database and every secret out of the logs', async () => {
  const client = auth.client;
  const password = 'Secret-Passw0rd-that-must-never-leak';
  const email = uniqueEmail('journey');
  const registered = await register(auth, { email, password, name: 'Journey' });
  const merchantId = registered.merchant.id;
  const login = await client.login({ email, password });
  await rpcError(client.login({ email, password: 'Wrong-Passw0rd-also-never-logged' }));

  const secrets: string[] = [registered.token, login.token];
  const keys: string[] = [];
  for (const environment of [Environment.SANDBOX, Environment.LIVE]) {
    const created = await client.createProject({ merchantId, name: 'p', environment, webhookUrl: 'https://example.com/hook' });
    const projectId = created.project!.id;
    secrets.push(created.webhookSecret);
    secrets.push((await client.rotateWebhookSecret({ merchantId, projectId })).webhookSecret);
    for (const name of ['kept', 'revoked']) {
      const res = await client.createApiKey({ merchantId, projectId, name });
      keys.push(res.key);
      await client.verifyApiKey({ key: res.key });
      if (name === 'revoked') await client.revokeApiKey({ merchantId, projectId, keyId: res.apiKey!.id });
    }
  }
  // A refused (mistyped) key must not be logged either.
  const mistyped = `${keys[0]!.slice(0, -1)}${keys[0]!.endsWith('A') ? 'B' : 'A'}`;
  await rpcError(client.verifyApiKey({ key: mistyped }));
  // Let the outbox relay publish (and mark) what the journey produced before the dump.
  await new Promise((resolve) => setTimeout(resolve, 300));

  // The database: every row of every table, all columns, as text.
  const rows = await dumpDatabase(auth.db);
  const dump = rows.join('\n');
  expect(rows.some((row) => row.startsWith('auth.api_keys:'))).toBe(true);
  for (const key of keys) {
    // The hash is what is stored (proves the dump sees the keys' rows) …
    expect(dump).toContain(createHash('sha256').update(key).digest('hex'));
    // … never the key, nor its secret part beyond the display prefix.
    expect(dump).not.toContain(key);
    expect(dump).not.toContain(key.slice(key.indexOf('_') + 9));
  }
  expect(dump).not.toContain(password);
  for (const token of [registered.token, login.token]) expect(dump).not.toContain(token);

  // The logs: the journey was logged (ids only) …
  const logged = logs.lines.join('');
  expect(logged).toContain('merchant registered');
  expect(logged).toContain('merchant logged in');
  expect(logged).toContain('login refused: wrong password');
  expect(logged).toContain('api key created');
  expect(logged).toContain('api key revoked');
  expect(logged).toContain(merchantId);
  // … and nothing secret.
  for (const value of [password, 'Wrong-Passw0rd-also-never-logged', mistyped, ...keys, ...secrets]) {
    expect(logged).not.toContain(value);
  }
  for (const secret of secrets.filter((s) => s.startsWith('whsec_'))) expect(logged).not.toContain(secret.slice(6));
  for (const token of [registered.token, login.token]) expect(logged).not.toContain(token.split('.')[2]);
});
