/**
 * The session token, kept in localStorage so a reload stays signed in. Signing out ends the
 * account's sessions on the server (POST /api/merchant/logout) and drops the token here.
 */
const KEY = 'coinvoice.session';

interface Stored {
  token: string;
  expiresAt: string;
}

export function currentToken(): string | null {
  try {
    const raw = localStorage.getItem(KEY);
    if (!raw) return null;
    const s = JSON.parse(raw) as Stored;
    if (typeof s.token !== 'string' || Date.parse(s.expiresAt) <= Date.now()) {
      localStorage.removeItem(KEY);
      return null;
    }
    return s.token;
  } catch {
    return null;
  }
}

export function saveSession(token: string, expiresAt: string): void {
  localStorage.setItem(KEY, JSON.stringify({ token, expiresAt } satisfies Stored));
}

export function clearSession(): void {
  localStorage.removeItem(KEY);
}
