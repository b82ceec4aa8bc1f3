/**
 * Issue 12 point 4: the whole system in production mode (APP_ENV=production) with mutual TLS
 * between every process, certificates from a throwaway CA made with openssl in this test. Internal
 * ports refuse a client without a certificate; a certificate lets its holder call only what its
 * name may call (per-RPC allow-lists); CompletePayout needs a valid operator token even with the
 * gateway's certificate; and the system works end to end through the gateway over mTLS.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { createRpcClient, errorFacts, type RpcTls } from '@coinvoice/runtime';
import { AuthService } from '@coinvoice/runtime/gen/coinvoice/auth/v1/auth_pb';
import { InvoiceService } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/invoice_pb';
import { NotifierService } from '@coinvoice/runtime/gen/coinvoice/notifier/v1/notifier_pb';
import { PayoutService } from '@coinvoice/runtime/gen/coinvoice/payout/v1/payout_pb';
import { createAddressDeriver, generateDevelopmentKeyPair } from '@coinvoice/chains/addresses';
import { mailText, SmtpInbox } from '../../services/notifier/test/support/smtp';
import { eventually } from '../../services/notifier/test/support/receiver';
import { TestCertificateAuthority, type IssuedCertificate } from '../support/certificates';
import { apiKeyHeader, createProjectWithKey, GatewayClient, registerMerchant } from '../support/http';
import { bootSystem, type BootedSystem } from '../support/system';
import { throwawayXpubs } from '../support/xpubs';
import { smtpMailbox } from '../support/mail';

const NAMES = ['gateway', 'auth', 'invoice', 'payout', 'notifier'] as const;
type Name = (typeof NAMES)[number];

let ca: TestCertificateAuthority;
let certs: Record<Name | 'stranger', IssuedCertificate>;
let inbox: SmtpInbox;
let system: BootedSystem;
let api: GatewayClient;

const tlsAs = (name: Name | 'stranger'): RpcTls => ({ ca: ca.ca, cert: certs[name].cert, key: certs[name].key });
const url = (service: Exclude<Name, 'gateway'>) => system.processes[service].grpcUrl!;

beforeAll(async () => {
  ca = new TestCertificateAuthority();
  certs = Object.fromEntries([...NAMES, 'stranger'].map((n) => [n, ca.issue(n)])) as typeof certs;
  inbox = await new SmtpInbox().start();
  const perProcess = Object.fromEntries(
    NAMES.flatMap((n) => [
      [`${n.toUpperCase()}_TLS_CERT_FILE`, certs[n].certFile],
      [`${n.toUpperCase()}_TLS_KEY_FILE`, certs[n].keyFile],
    ]),
  );
  system = await bootSystem({
    mail: smtpMailbox(inbox),
    env: {
      APP_ENV: 'production',
      // Production refuses to run without every enabled coin's xpubs (never development keys).
      ...throwawayXpubs(),
      TLS_CA_FILE: ca.caFile,
      ...perProcess,
      SMTP_URL: inbox.url,
      EMAIL_FROM: 'coinvoice <no-reply@coinvoice.test>',
      SECRETS_KEK: randomBytes(32).toString('base64'),
      PASSWORD_HASH_MEMORY_KIB: '1024',
    },
  });
  api = new GatewayClient(system.gatewayUrl);
}, 120_000);

afterAll(async () => {
  await system?.stop();
  await inbox?.stop();
  ca?.remove();
});

/** One unary call with a bare @grpc/grpc-js client: the gRPC status code it ends with. */
function bareCall(target: string, credentials: grpc.ChannelCredentials, path: string): Promise<grpc.status> {
  const client = new grpc.Client(target.replace(/^https?:\/\//, ''), credentials);
  return new Promise((resolve) => {
    client.makeUnaryRequest(
      path,
      (arg: Buffer) => arg,
      (buf: Buffer) => buf,
      Buffer.alloc(0),
      new grpc.Metadata(),
      { deadline: Date.now() + 5_000 },
      (err) => {
        client.close();
        resolve(err ? err.code : grpc.status.OK);
      },
    );
  });
}

const PROBES: Record<Exclude<Name, 'gateway'>, string> = {
  auth: '/coinvoice.auth.v1.AuthService/GetJwks',
  invoice: '/coinvoice.invoice.v1.InvoiceService/GetInvoice',
  payout: '/coinvoice.payout.v1.PayoutService/ListPayouts',
  notifier: '/coinvoice.notifier.v1.NotifierService/ListWebhookDeliveries',
};

test('every service refuses a plain grpc-js client without a client certificate (and a plaintext one)', async () => {
  for (const service of ['auth', 'invoice', 'payout', 'notifier'] as const) {
    expect(url(service)).toMatch(/^https:/);
    expect(await bareCall(url(service), grpc.credentials.createSsl(ca.ca), PROBES[service])).toBe(grpc.status.UNAVAILABLE);
    expect(await bareCall(url(service), grpc.credentials.createInsecure(), PROBES[service])).toBe(grpc.status.UNAVAILABLE);
    // The same bare client with the gateway's certificate gets an answer from the service itself.
    expect(await bareCall(url(service), grpc.credentials.createSsl(ca.ca, certs.gateway.key, certs.gateway.cert), PROBES[service])).not.toBe(grpc.status.UNAVAILABLE);
  }
});

test("with the gateway's certificate only what the gateway may call; other names per their allow-lists", async () => {
  const refusedCode = async (call: Promise<unknown>) => call.then(() => 'allowed', (err: unknown) => errorFacts(err).code);
  const asGateway = {
    auth: createRpcClient(AuthService, url('auth'), { tls: tlsAs('gateway') }),
    invoice: createRpcClient(InvoiceService, url('invoice'), { tls: tlsAs('gateway') }),
    payout: createRpcClient(PayoutService, url('payout'), { tls: tlsAs('gateway') }),
    notifier: createRpcClient(NotifierService, url('notifier'), { tls: tlsAs('gateway') }),
  };
  // What the gateway calls.
  expect((await asGateway.auth.getJwks({})).keys.length).toBeGreaterThan(0);
  expect(await refusedCode(asGateway.invoice.getInvoice({ projectId: randomUUID(), invoiceId: randomUUID() }))).toBe('not_found');
  // What it may not: the webhook secret, the operator check, the code emails.
  expect(await refusedCode(asGateway.auth.getProjectContext({ projectId: randomUUID() }))).toBe('caller_not_allowed');
  expect(await refusedCode(asGateway.auth.verifyOperatorToken({ token: 'x' }))).toBe('caller_not_allowed');
  expect(await refusedCode(asGateway.auth.rotateSigningKey({}))).toBe('caller_not_allowed');
  expect(await refusedCode(asGateway.notifier.sendPayoutVerificationEmail({ email: 'victim@example.com', code: '123456' }))).toBe('caller_not_allowed');
  expect(await refusedCode(asGateway.notifier.sendEmailVerificationEmail({ email: 'victim@example.com', code: '123456' }))).toBe('caller_not_allowed');
  expect(await refusedCode(asGateway.notifier.sendSignUpAttemptEmail({ email: 'victim@example.com' }))).toBe('caller_not_allowed');
  // CompletePayout passes the allow-list, and is refused without a valid operator token.
  expect(await refusedCode(asGateway.payout.completePayout({ payoutId: randomUUID(), transactionHash: 'a'.repeat(64) }))).toBe('invalid_token');
  expect(await refusedCode(asGateway.payout.completePayout({ payoutId: randomUUID(), transactionHash: 'a'.repeat(64), operatorToken: 'forged' }))).toBe('invalid_token');
  expect(await refusedCode(asGateway.payout.rejectPayout({ payoutId: randomUUID(), adminNote: 'x' }))).toBe('invalid_token');

  // The payout service's name may ask for a project's context and send the payout email, not more.
  const asPayout = createRpcClient(AuthService, url('auth'), { tls: tlsAs('payout') });
  expect(await refusedCode(asPayout.getProjectContext({ projectId: randomUUID() }))).toBe('not_found');
  expect(await refusedCode(asPayout.createApiKey({ merchantId: randomUUID(), projectId: randomUUID(), name: 'k' }))).toBe('caller_not_allowed');
  // A certificate of this CA with a name no list holds calls nothing (health aside).
  const stranger = createRpcClient(AuthService, url('auth'), { tls: tlsAs('stranger') });
  expect(await refusedCode(stranger.getJwks({}))).toBe('caller_not_allowed');
  expect(await refusedCode(stranger.getProjectContext({ projectId: randomUUID() }))).toBe('caller_not_allowed');
});

test('the system works end to end over mTLS: register (email by auth → notifier), pay in the sandbox, request a payout (payout → auth, payout → notifier)', async () => {
  // Signing up reads the code auth had the notifier email (issue 27): auth → notifier over mTLS.
  const merchant = await registerMerchant(api);
  expect(inbox.messages.some((m) => m.to.includes(merchant.email) && mailText(m.raw).includes('sign-up code'))).toBe(true);
  const project = await createProjectWithKey(api, merchant, 'sandbox');
  const invoice = await api.post(
    '/api/invoice',
    { priceAmount: '10.00', priceCurrency: 'USD', payCurrency: 'BTC', successUrl: 'https://shop.example/ok', cancelUrl: 'https://shop.example/no' },
    { headers: apiKeyHeader(project.key) },
  );
  expect(invoice.status).toBe(201);
  expect((await api.post(`/api/invoice/${invoice.body.id}/sandbox/pay`, { amountReceived: 0.002 }, { headers: apiKeyHeader(project.key) })).status).toBe(200);
  await eventually(async () => {
    const res = await api.get('/api/payout/balance', { headers: apiKeyHeader(project.key) });
    return (res.body.balances as Array<{ available: number }>)[0]?.available === 0.002 ? true : undefined;
  }, 15_000, 'the ledger credit');
  const deriver = createAddressDeriver(generateDevelopmentKeyPair('BTC', 'testnet').xpub, 'BTC', 'testnet');
  if (!deriver.ok) throw new Error(deriver.reason);
  const requested = await api.post('/api/payout/request', { amount: 0.001, currency: 'BTC', address: deriver.value.addressAt(0) }, { headers: apiKeyHeader(project.key) });
  expect(requested.status).toBe(201);
  await inbox.waitFor((m) => m.to.includes(merchant.email) && mailText(m.raw).includes(requested.body.id), 15_000);
  expect((await api.get('/readyz')).status).toBe(200);
});
