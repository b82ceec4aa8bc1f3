/**
 * What `npm start` hands a newcomer: a merchant, a sandbox project and its API key, ready for the
 * first curl. Kept in the data folder and reused while the key still works; made anew (through
 * the public API, like any merchant would) when the database is new or the key was revoked.
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

export async function ensureSandboxCredentials(gatewayUrl: string, file: string): Promise<SandboxCredentials> {
  if (existsSync(file)) {
    const saved = JSON.parse(readFileSync(file, 'utf8')) as SandboxCredentials;
    if (await keyWorks(gatewayUrl, saved.apiKey)) return saved;
  }
  const email = `developer-${randomBytes(4).toString('hex')}@coinvoice.local`;
  const password = randomBytes(12).toString('base64url');
  const registered = await call(gatewayUrl, 'POST', '/api/merchant/register', { email, password, name: 'Local developer' });
  if (registered.status !== 201) throw new Error(`could not register the local developer: ${registered.status} ${JSON.stringify(registered.body)}`);
  const auth = { authorization: `Bearer ${String(registered.body.token)}` };
  const project = await call(gatewayUrl, 'POST', '/api/merchant/projects', { name: 'Sandbox', environment: 'sandbox' }, auth);
  if (project.status !== 201) throw new Error(`could not create the sandbox project: ${project.status}`);
  const key = await call(gatewayUrl, 'POST', `/api/merchant/projects/${String(project.body.id)}/api-keys`, { name: 'npm start' }, auth);
  if (key.status !== 201) throw new Error(`could not create the sandbox key: ${key.status}`);
  const credentials = { email, password, projectId: String(project.body.id), apiKey: String(key.body.key) };
  writeFileSync(file, `${JSON.stringify(credentials, null, 2)}\n`, { mode: 0o600 });
  return credentials;
}
