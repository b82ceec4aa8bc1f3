/**
 * Account set-up for end-to-end tests: the auth service's admin commands (operators: see
 * operators.ts, the one helper that grants them), and a merchant's email marked verified or not.
 * Merchants signed up through registerMerchant (test/support/http.ts) are verified by their
 * sign-up code already; the address verification flow of older accounts is proven in
 * test/e2e/security.test.ts.
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import postgres from 'postgres';
import { REPO_ROOT, type BootedSystem } from './system';

const run = promisify(execFile);

export const AUTH_MAIN = path.join(REPO_ROOT, 'services', 'auth', 'dist', 'main.js');

/** `node services/auth/dist/main.js <command> <email>` against the system's database. */
export async function authCommand(
  system: Pick<BootedSystem, 'database'>,
  command: 'grant-operator' | 'revoke-operator',
  email: string,
  env: NodeJS.ProcessEnv = {},
): Promise<{ stdout: string; stderr: string }> {
  return run(process.execPath, [AUTH_MAIN, command, email], {
    env: { ...process.env, DATABASE_URL: system.database.url, LOG_LEVEL: 'warn', ...env },
  });
}

/** Marks the merchant's email as verified (a shortcut around the emailed code for tests that need live keys). */
export async function markEmailVerified(system: Pick<BootedSystem, 'database'>, merchantId: string): Promise<void> {
  const db = postgres(system.database.url, { max: 1, onnotice: () => undefined });
  try {
    await db`update auth.merchants set email_verified_at = now() where id = ${merchantId}`;
  } finally {
    await db.end();
  }
}

/**
 * Marks the merchant's email as NOT verified: the state of an account from before sign-up needed
 * the emailed code (issue 27), or of the launcher's local developer, for tests of what an
 * unverified account may not do and of the address verification flow.
 */
export async function markEmailUnverified(system: Pick<BootedSystem, 'database'>, merchantId: string): Promise<void> {
  const db = postgres(system.database.url, { max: 1, onnotice: () => undefined });
  try {
    await db`update auth.merchants set email_verified_at = null where id = ${merchantId}`;
  } finally {
    await db.end();
  }
}

/** The same, by the merchant's (registered) email. */
export async function markEmailVerifiedByEmail(system: Pick<BootedSystem, 'database'>, email: string): Promise<void> {
  const db = postgres(system.database.url, { max: 1, onnotice: () => undefined });
  try {
    await db`update auth.merchants set email_verified_at = now() where email = ${email.trim().toLowerCase()}`;
  } finally {
    await db.end();
  }
}
