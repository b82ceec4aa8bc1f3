/**
 * Webhook secrets and signing keys at rest (issue 12): sealed with SECRETS_KEK, never stored in
 * plaintext; rows from before encryption are sealed at start; a KEK rotation (new key, the old one
 * as SECRETS_KEK_PREVIOUS, `rotate-kek`) keeps every secret readable and leaves nothing under the
 * old key; without the right key nothing opens.
 */
import { randomBytes } from 'node:crypto';
import { kekFromBytes, SecretBox } from '@coinvoice/domain/secrets-at-rest';
import { createDb, type Sql } from '@coinvoice/runtime';
import { Environment } from '@coinvoice/runtime/gen/coinvoice/common/v1/environment_pb';
import { reencryptSecrets } from '../src/store/secrets';
import { createTestDatabase, type TestDatabase } from '../../../test/support/infra';
import { dumpDatabase, register, startAuth, type StartedAuth } from './support/auth';

const keyA = randomBytes(32);
const keyB = randomBytes(32);
const b64 = (key: Buffer) => key.toString('base64');
let database: TestDatabase;
let db: Sql;

beforeAll(async () => {
  database = await createTestDatabase('cvkek');
});

afterAll(async () => {
  await db?.end({ timeout: 5 });
  await database?.drop().catch(() => undefined);
});

async function authWith(env: NodeJS.ProcessEnv): Promise<StartedAuth> {
  return startAuth({ database, env });
}

test('sealed under KEK A; rotated to B with rotate-kek; readable with B alone; plaintext rows sealed at start', async () => {
  let auth = await authWith({ SECRETS_KEK: b64(keyA) });
  db = createDb({ url: database.url, schema: 'auth', max: 2 });
  const { merchant } = await register(auth);
  const created = await auth.client.createProject({ merchantId: merchant.id, name: 'p', environment: Environment.SANDBOX, webhookUrl: 'https://example.com/h' });
  const projectId = created.project!.id;
  const secret = created.webhookSecret;
  const [row] = await db<{ webhook_secret: string; webhook_secret_kek_id: string }[]>`select webhook_secret, webhook_secret_kek_id from projects where id = ${projectId}`;
  expect(row!.webhook_secret).not.toContain(secret.slice(6));
  expect(row!.webhook_secret_kek_id).toBe(kekFromBytes(keyA).id);
  expect((await dumpDatabase(db)).join('\n')).not.toMatch(/whsec_|PRIVATE KEY/);
  const jwksBefore = (await auth.client.getJwks({})).keys.map((k) => k.kid);

  // A row as written before encryption existed: sealed when auth starts.
  await db`update projects set webhook_secret = 'whsec_cGxhaW4=', webhook_secret_kek_id = null where id = ${projectId}`;
  await auth.dispose();
  auth = await authWith({ SECRETS_KEK: b64(keyA) });
  expect((await auth.client.getProjectContext({ projectId })).webhookSecret).toBe('whsec_cGxhaW4=');
  expect((await db`select webhook_secret_kek_id from projects where id = ${projectId}`)[0]!.webhook_secret_kek_id).toBe(kekFromBytes(keyA).id);
  await auth.client.rotateWebhookSecret({ merchantId: merchant.id, projectId }).then((r) => r.webhookSecret);
  const current = (await auth.client.getProjectContext({ projectId })).webhookSecret;
  // The replaced secret signs on for a day (docs/webhook-delivery.md#secret-rotation): sealed too, in a row of its own.
  expect((await auth.client.getProjectContext({ projectId })).previousWebhookSecrets.map((p) => p.secret)).toEqual(['whsec_cGxhaW4=']);
  const [previousRow] = await db<{ secret: string; secret_kek_id: string }[]>`select secret, secret_kek_id from previous_webhook_secrets where project_id = ${projectId}`;
  expect(previousRow!.secret).toMatch(/^v1\./);
  expect(previousRow!.secret_kek_id).toBe(kekFromBytes(keyA).id);
  await auth.dispose();

  // Rotation: B current, A previous; the command re-wraps everything under B.
  const report = await reencryptSecrets(db, new SecretBox(kekFromBytes(keyB), [kekFromBytes(keyA)]));
  expect(report.webhookSecrets).toBeGreaterThanOrEqual(1);
  expect(report.previousWebhookSecrets).toBe(1);
  expect(report.signingKeys).toBeGreaterThanOrEqual(1);
  const kekIds = await db<{ id: string | null }[]>`
    select webhook_secret_kek_id as id from projects
    union all select secret_kek_id from previous_webhook_secrets
    union all select private_key_kek_id from signing_keys`;
  expect(new Set(kekIds.map((r) => r.id))).toEqual(new Set([kekFromBytes(keyB).id]));

  auth = await authWith({ SECRETS_KEK: b64(keyB) });
  expect((await auth.client.getProjectContext({ projectId })).webhookSecret).toBe(current);
  expect((await auth.client.getProjectContext({ projectId })).previousWebhookSecrets.map((p) => p.secret)).toEqual(['whsec_cGxhaW4=']);
  expect((await auth.client.getJwks({})).keys.map((k) => k.kid)).toEqual(jwksBefore);
  await auth.dispose();

  // A alone opens nothing any more.
  const [sealed] = await db<{ webhook_secret: string }[]>`select webhook_secret from projects where id = ${projectId}`;
  expect(() => new SecretBox(kekFromBytes(keyA)).decrypt(sealed!.webhook_secret, `projects.webhook_secret:${projectId}`)).toThrow(/not configured/);
  expect(new SecretBox(kekFromBytes(keyB)).decrypt(sealed!.webhook_secret, `projects.webhook_secret:${projectId}`)).toBe(current);
}, 60_000);
