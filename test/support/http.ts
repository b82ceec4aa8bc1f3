/** A small JSON client for end-to-end tests through the gateway, plus merchant fixtures. */
import { randomBytes } from 'node:crypto';
import { awaitSignUpCode, signUpCodesIn } from '../../deploy/local/src/mailbox';
import { mailboxOf } from './mail';

export interface JsonResponse<T = any> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

export interface RequestOptions {
  headers?: Record<string, string>;
  /** A raw body sent as is (for malformed-input tests: text, or bytes); otherwise `body` is JSON-encoded. */
  raw?: string | Uint8Array;
  body?: unknown;
}

export class GatewayClient {
  constructor(readonly baseUrl: string) {}

  async request<T = any>(method: string, path: string, options: RequestOptions = {}): Promise<JsonResponse<T>> {
    const headers: Record<string, string> = { ...options.headers };
    let payload: string | Uint8Array | undefined;
    if (options.raw !== undefined) payload = options.raw;
    else if (options.body !== undefined) {
      payload = JSON.stringify(options.body);
      headers['content-type'] ??= 'application/json';
    }
    const res = await fetch(`${this.baseUrl}${path}`, { method, headers, body: payload as string | Uint8Array<ArrayBuffer> | undefined });
    const text = await res.text();
    let body: unknown = undefined;
    if (text !== '') {
      try {
        body = JSON.parse(text);
      } catch {
        body = text;
      }
    }
    return { status: res.status, headers: res.headers, body: body as T, text };
  }

  get<T = any>(path: string, options?: RequestOptions) {
    return this.request<T>('GET', path, options);
  }
  post<T = any>(path: string, body?: unknown, options: RequestOptions = {}) {
    return this.request<T>('POST', path, { ...options, body });
  }
  put<T = any>(path: string, body?: unknown, options: RequestOptions = {}) {
    return this.request<T>('PUT', path, { ...options, body });
  }
  patch<T = any>(path: string, body?: unknown, options: RequestOptions = {}) {
    return this.request<T>('PATCH', path, { ...options, body });
  }
  delete<T = any>(path: string, options?: RequestOptions) {
    return this.request<T>('DELETE', path, options);
  }
}

export const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
export const apiKeyHeader = (key: string) => ({ 'x-api-key': key });

export interface MerchantFixture {
  email: string;
  password: string;
  token: string;
  merchantId: string;
}

/**
 * Signs a merchant up as a person does (issue 27): register, read the code from the system's email
 * (test/support/mail.ts), confirm. The account's email is verified.
 */
export async function registerMerchant(api: GatewayClient, overrides: Partial<{ email: string; password: string; name: string }> = {}): Promise<MerchantFixture> {
  const email = overrides.email ?? `m-${randomBytes(6).toString('hex')}@example.com`;
  const password = overrides.password ?? `pw-${randomBytes(8).toString('hex')}`;
  const mailbox = mailboxOf(api.baseUrl);
  const codesBefore = signUpCodesIn(mailbox.messages(), email).length;
  const started = await api.post('/api/merchant/register', { email, password, name: overrides.name ?? 'Test Merchant' });
  if (started.status !== 202) throw new Error(`register failed: ${started.status} ${started.text}`);
  const code = await awaitSignUpCode(() => mailbox.messages(), email, codesBefore);
  const res = await api.post('/api/merchant/register/confirm', { email, code, password });
  if (res.status !== 201) throw new Error(`register confirm failed: ${res.status} ${res.text}`);
  return { email, password, token: res.body.token, merchantId: res.body.merchant.id };
}

export interface ProjectFixture {
  id: string;
  webhookSecret: string;
  key: string;
  keyId: string;
}

export async function createProjectWithKey(
  api: GatewayClient,
  merchant: MerchantFixture,
  environment: 'live' | 'sandbox',
  extra: { webhookUrl?: string; name?: string } = {},
): Promise<ProjectFixture> {
  const project = await api.post('/api/merchant/projects', { name: extra.name ?? `Shop ${environment}`, environment, ...(extra.webhookUrl ? { webhookUrl: extra.webhookUrl } : {}) }, { headers: bearer(merchant.token) });
  if (project.status !== 201) throw new Error(`create project failed: ${project.status} ${project.text}`);
  const key = await api.post(`/api/merchant/projects/${project.body.id}/api-keys`, { name: 'test key' }, { headers: bearer(merchant.token) });
  if (key.status !== 201) throw new Error(`create key failed: ${key.status} ${key.text}`);
  return { id: project.body.id, webhookSecret: project.body.webhookSecret, key: key.body.key, keyId: key.body.id };
}

/** Asserts the RFC 9457 shape every error of the gateway has; returns the body. */
export function expectProblem(res: JsonResponse, status: number, code?: string) {
  expect({ status: res.status, contentType: res.headers.get('content-type') }).toEqual({
    status,
    contentType: expect.stringContaining('application/problem+json'),
  });
  expect(res.body).toMatchObject({ type: expect.any(String), title: expect.any(String), status, detail: expect.any(String), code: expect.any(String), requestId: expect.any(String) });
  if (code) expect(res.body.code).toBe(code);
  expect(res.text).not.toMatch(/\n\s+at /); // never a stack trace
  return res.body;
}
