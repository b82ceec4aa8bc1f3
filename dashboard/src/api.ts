/**
 * The only way the dashboard talks to coinvoice: same-origin JSON calls to the public
 * /api/merchant/*, /api/payout/* and /api/admin/* routes with the session token. Every failure
 * becomes an ApiError carrying the problem+json `detail` and `errors`, so pages can show them.
 */
import { clearSession, currentToken } from './session';

export interface FieldError {
  field: string;
  message: string;
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    readonly detail: string,
    readonly errors: FieldError[] = [],
  ) {
    super(detail);
  }
}

interface Problem {
  detail?: unknown;
  title?: unknown;
  code?: unknown;
  errors?: unknown;
}

function problemOf(status: number, body: unknown): ApiError {
  const p = (typeof body === 'object' && body !== null ? body : {}) as Problem;
  const errors = Array.isArray(p.errors)
    ? p.errors.filter((e): e is FieldError => typeof e?.field === 'string' && typeof e?.message === 'string')
    : [];
  const detail = typeof p.detail === 'string' ? p.detail : typeof p.title === 'string' ? p.title : `the server answered ${status}`;
  return new ApiError(status, typeof p.code === 'string' ? p.code : 'http_error', detail, errors);
}

/** Called when the session is no longer accepted (401): the app goes back to sign-in. */
let onSessionLost: () => void = () => undefined;
export function whenSessionLost(handler: () => void): void {
  onSessionLost = handler;
}

export async function request<T>(method: string, path: string, body?: unknown, options: { auth?: boolean } = {}): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' };
  const token = currentToken();
  if (options.auth !== false && token) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  let res: Response;
  try {
    res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: 'omit' });
  } catch {
    throw new ApiError(0, 'network_error', 'coinvoice could not be reached; check your connection and try again');
  }
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = text === '' ? undefined : JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  if (!res.ok) {
    const error = problemOf(res.status, parsed);
    if (res.status === 401 && options.auth !== false && token) {
      clearSession();
      onSessionLost();
    }
    throw error;
  }
  return parsed as T;
}

export const api = {
  get: <T>(path: string) => request<T>('GET', path),
  post: <T>(path: string, body?: unknown) => request<T>('POST', path, body),
  put: <T>(path: string, body: unknown) => request<T>('PUT', path, body),
  patch: <T>(path: string, body: unknown) => request<T>('PATCH', path, body),
  delete: (path: string) => request<void>('DELETE', path),
};

/** A query string from the defined, non-empty values. */
export function query(params: Record<string, string | number | undefined | null>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : '';
}
