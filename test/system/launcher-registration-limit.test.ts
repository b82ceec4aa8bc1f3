/**
 * `npm start` on a database whose public registration limit for 127.0.0.1 is used up (a machine
 * that signed up test accounts this hour) still comes up with a working sandbox key: the launcher
 * makes its developer through the auth service, never through POST /api/merchant/register.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { createTestDatabase, type TestDatabase } from '../support/infra';
import { bootSystem, type BootedSystem } from '../support/system';

// The shipped limit (README): 10 registrations per client IP per hour.
const SHIPPED_REGISTER_LIMIT = { RATE_LIMIT_REGISTER_PER_IP: '10/1h' };

let database: TestDatabase;
let system: BootedSystem | undefined;

beforeAll(async () => {
  database = await createTestDatabase('cvlimit');
});

afterAll(async () => {
  await system?.stop();
  await database?.drop();
});

function register(gatewayUrl: string): Promise<Response> {
  return fetch(`${gatewayUrl}/api/merchant/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email: `someone-${randomUUID().slice(0, 8)}@example.com`, password: 'a-long-password', name: 'Someone' }),
  });
}

test('npm start comes up with a sandbox key when 127.0.0.1 may not register any more', async () => {
  // A first start, then registrations from 127.0.0.1 until the public route refuses them.
  const first = await bootSystem({ database, env: SHIPPED_REGISTER_LIMIT, timeoutMs: 90_000 });
  let refused = false;
  for (let i = 0; i < 11 && !refused; i++) refused = (await register(first.gatewayUrl)).status === 429;
  expect(refused).toBe(true);
  await first.stop();

  // A fresh clone on that database: no saved credentials, the limit still exhausted.
  system = await bootSystem({ database, env: SHIPPED_REGISTER_LIMIT, timeoutMs: 90_000 });
  expect((await register(system.gatewayUrl)).status).toBe(429);
  const key = /sandbox:\s+x-api-key (SBX_[0-9A-Za-z]{40})/.exec(system.output())?.[1];
  expect(key).toBeDefined();
  const created = await fetch(`${system.gatewayUrl}/api/invoice`, {
    method: 'POST',
    headers: { 'x-api-key': key!, 'content-type': 'application/json' },
    body: JSON.stringify({ priceAmount: '19.90', priceCurrency: 'USD', payCurrency: 'BTC', successUrl: 'https://shop.example/ok', cancelUrl: 'https://shop.example/cancel' }),
  });
  expect(created.status).toBe(201);
  // The dashboard login it printed works too.
  const saved = JSON.parse(readFileSync(path.join(system.dataDir, 'sandbox-credentials.json'), 'utf8')) as { email: string; password: string };
  const login = await fetch(`${system.gatewayUrl}/api/merchant/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email: saved.email, password: saved.password }),
  });
  expect(login.status).toBe(200);
}, 240_000);
