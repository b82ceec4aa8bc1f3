/**
 * What `npm start` hands a newcomer: a merchant, a sandbox project and its API key, ready for the
 * first curl. Kept in the data folder and reused while the key still works; made anew by the auth
 * service's `local-developer` command when the database is new or the key was revoked.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';

export interface SandboxCredentials {
  email: string;
  password: string;
  projectId: string;
  apiKey: string;
}

async function call(gatewayUrl: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${gatewayUrl}${path}`, {
    method,
    headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

async function keyWorks(gatewayUrl: string, apiKey: string): Promise<boolean> {
  // An authenticated lookup of an invoice that does not exist answers 404; a dead key 401.
  const res = await call(gatewayUrl, 'GET', '/api/invoice/00000000-0000-4000-8000-000000000000', undefined, { 'x-api-key': apiKey });
  return res.status === 404;
}

/**
 * Makes (or reuses) the developer through the auth service's own `local-developer` command, run
 * next to the database like any admin command: never through the public POST
 * /api/merchant/register, whose per-IP limit a machine that registered test accounts this hour
 * has used up.
 */
export type CreateDeveloper = (email: string, password: string) => Promise<{ projectId: string; apiKey: string }>;

export async function ensureSandboxCredentials(gatewayUrl: string, file: string, createDeveloper: CreateDeveloper): Promise<SandboxCredentials> {
  const saved = existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as SandboxCredentials) : undefined;
  if (saved && (await keyWorks(gatewayUrl, saved.apiKey))) return saved;
  // A revoked key or a new database: the same login again when there is one, a new one otherwise.
  const email = saved?.email ?? `developer-${randomBytes(4).toString('hex')}@coinvoice.local`;
  const password = saved?.password ?? randomBytes(12).toString('base64url');
  const developer = await createDeveloper(email, password);
  const credentials = { email, password, projectId: developer.projectId, apiKey: developer.apiKey };
  writeFileSync(file, `${JSON.stringify(credentials, null, 2)}\n`, { mode: 0o600 });
  return credentials;
}
