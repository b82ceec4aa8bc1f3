/**
 * The invoice service over gRPC against real Postgres and NATS: create → get with every field and
 * its value rules, money exactness, cross-project isolation, the checkout view, the owner lookup,
 * listing with cursor pagination, no event on creation, and a plain @grpc/grpc-js client.
 */
import { randomUUID } from 'node:crypto';
import { create, fromBinary, toBinary, toJson } from '@bufbuild/protobuf';
import { timestampDate } from '@bufbuild/protobuf/wkt';
import * as grpc from '@grpc/grpc-js';
import { Code } from '@coinvoice/runtime';
import { Environment } from '@coinvoice/runtime/gen/coinvoice/common/v1/environment_pb';
import {
  CheckoutSchema,
  CreateInvoiceRequestSchema,
  CreateInvoiceResponseSchema,
  GetInvoiceRequestSchema,
  GetInvoiceResponseSchema,
  InvoiceStatus,
  type CreateInvoiceRequest,
  type CreateInvoiceResponse,
  type GetInvoiceRequest,
  type GetInvoiceResponse,
  type Invoice,
} from '@coinvoice/runtime/gen/coinvoice/invoice/v1/invoice_pb';
import { validateAddress } from '@coinvoice/chains/addresses';
import { Decimal } from '@coinvoice/domain/money';
import {
  createRequest,
  liveProject,
  mapLimit,
  publishedEvents,
  rejection,
  sandboxProject,
  startInvoiceHarness,
  streamEvents,
  type Harness,
} from './support/harness';

let h: Harness;

beforeAll(async () => {
  h = await startInvoiceHarness();
});

afterAll(async () => {
  await h?.dispose();
});

async function createInvoice(...args: Parameters<typeof createRequest>): Promise<Invoice> {
  const res = await h.client.createInvoice(createRequest(...args));
  expect(res.idempotentReplay).toBe(false);
  return res.invoice!;
}

const ms = (t: Invoice['createdAt']) => timestampDate(t!).getTime();

describe('CreateInvoice then GetInvoice', () => {
  test('returns every field of the Invoice object with its value rules, and get returns the same', async () => {
    const project = sandboxProject('Coffee Corner');
    const before = Date.now();
    const invoice = await createInvoice(project, {
      priceAmount: '19.99',
      priceCurrency: 'USD',
      payCurrency: 'BTC',
      orderId: 'order-42',
      orderDescription: 'Two flat whites',
      successUrl: 'https://coffee.example/thanks?o=42',
      cancelUrl: 'https://coffee.example/cart',
    });
    const after = Date.now();

    expect(invoice.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(invoice).toMatchObject({
      orderId: 'order-42',
      orderDescription: 'Two flat whites',
      priceAmount: '19.99',
      priceAmountInUsd: '19.99',
      amountReceived: '0',
      priceCurrency: 'USD',
      payCurrency: 'BTC',
      status: InvoiceStatus.WAITING,
      // 19.99 / 105000 = 0.000190380952…, rounded UP to 8 decimals
      amountExpected: '0.00019039',
      successUrl: 'https://coffee.example/thanks?o=42',
      cancelUrl: 'https://coffee.example/cart',
      projectName: 'Coffee Corner',
      isDonation: false,
      projectId: project.projectId,
      environment: Environment.SANDBOX,
      rate: '105000',
    });
    expect(invoice.transactionHash).toBeUndefined();
    expect(invoice.paidAt).toBeUndefined();
    // Database clock, milliseconds; a generous window for clock differences.
    expect(ms(invoice.createdAt)).toBeGreaterThanOrEqual(before - 2_000);
    expect(ms(invoice.createdAt)).toBeLessThanOrEqual(after + 2_000);
    expect(ms(invoice.expiredAt) - ms(invoice.createdAt)).toBe(60 * 60_000);
    // Sandbox: a testnet (tb1…) P2WPKH address with a valid checksum.
    expect(invoice.address).toMatch(/^tb1q[02-9ac-hj-np-z]{38}$/);
    expect(validateAddress('BTC', 'testnet', invoice.address).ok).toBe(true);

    const got = await h.client.getInvoice({ projectId: project.projectId, invoiceId: invoice.id });
    expect(got.invoice).toEqual(invoice);
  });

  test('optional fields: absent stays absent, isDonation is echoed, the lifetime comes from the request', async () => {
    const project = sandboxProject();
    const invoice = await createInvoice(project, { orderId: undefined, orderDescription: undefined, isDonation: true, lifetimeMinutes: 15 });
    expect(invoice.orderId).toBeUndefined();
    expect(invoice.orderDescription).toBeUndefined();
    expect(invoice.isDonation).toBe(true);
    expect(ms(invoice.expiredAt) - ms(invoice.createdAt)).toBe(15 * 60_000);
    expect((await h.client.getInvoice({ projectId: project.projectId, invoiceId: invoice.id })).invoice).toEqual(invoice);
  });

  test('an invoice of another project answers not_found, exactly like a missing one', async () => {
    const owner = sandboxProject();
    const invoice = await createInvoice(owner);
    const foreign = await rejection(h.client.getInvoice({ projectId: randomUUID(), invoiceId: invoice.id }));
    const missing = await rejection(h.client.getInvoice({ projectId: owner.projectId, invoiceId: randomUUID() }));
    expect(foreign).toEqual({ connectCode: Code.NotFound, code: 'not_found', message: 'invoice not found', violations: [] });
    expect(missing).toEqual(foreign);
  });

  test('a malformed invoice id answers validation_failed naming invoiceId', async () => {
    const err = await rejection(h.client.getInvoice({ projectId: randomUUID(), invoiceId: 'not-a-uuid' }));
    expect(err).toMatchObject({ connectCode: Code.InvalidArgument, code: 'validation_failed', violations: [{ field: 'invoiceId', message: 'must be a UUID' }] });
  });
});

describe('money', () => {
  test.each([
    // [price, priceCurrency, payCurrency, priceAmount, priceAmountInUsd, amountExpected, rate]
    ['0.30', 'USD', 'USDT', '0.30', '0.30', '0.3', '1'], // 0.1 + 0.2 is exactly 0.30 here
    ['0.10', 'USD', 'USDC', '0.10', '0.10', '0.1', '1'],
    // JPY has no minor units; 10.35 USD / 105000 = 0.0000985714… rounded up. The rate shown,
    // 105000 / 0.0069 = 15217391.304347…, has the fewest digits (12 at least) that give the amount back.
    ['1500', 'JPY', 'BTC', '1500', '10.35', '0.00009858', '15217391.3043'],
    // 0.25 × 1.14 = 0.285 → half-UP 0.29 USD; the amount is 0.285 USDT exactly, from the USD prices
    // (0.285001 when it came from the cross rate cut down to 12 digits, 0.877192982456).
    ['0.25', 'EUR', 'USDT', '0.25', '0.29', '0.285', '0.877192982457'],
    ['100', 'EUR', 'ETH', '100.00', '114.00', '0.0456', '2192.98245615'],
    ['5', 'GBP', 'TRX', '5.00', '6.75', '25', '0.2'],
  ])('%s %s in %s: priceAmount %s, priceAmountInUsd %s, amountExpected %s at rate %s', async (price, fiat, coin, priceAmount, inUsd, expected, rate) => {
    const invoice = await createInvoice(sandboxProject(), { priceAmount: price, priceCurrency: fiat, payCurrency: coin });
    expect(invoice).toMatchObject({ priceAmount, priceAmountInUsd: inUsd, amountExpected: expected, rate });
    // The merchant never receives less than the price at the fixed rate.
    expect(new Decimal(invoice.amountExpected).times(invoice.rate).gte(price)).toBe(true);
    // Nor the customer asked for more: one base unit less falls short at the rate shown.
    const unit = new Decimal(10).pow(-new Decimal(invoice.amountExpected).decimalPlaces() || 0);
    expect(new Decimal(invoice.amountExpected).minus(unit).times(invoice.rate).lt(price)).toBe(true);
  });

  test('the rate is fixed at creation and stored with the invoice', async () => {
    const project = sandboxProject();
    const invoice = await createInvoice(project, { priceAmount: '250.00', priceCurrency: 'CHF', payCurrency: 'LTC' });
    const [row] = await h.sql<{ rate: string; amount_expected: string; price_amount_in_usd: string }[]>`
      select rate::text, amount_expected::text, price_amount_in_usd::text from invoices where id = ${invoice.id}`;
    expect(new Decimal(row!.rate).eq(invoice.rate)).toBe(true);
    expect(new Decimal(row!.amount_expected).eq(invoice.amountExpected)).toBe(true);
    expect(new Decimal(row!.price_amount_in_usd).eq(invoice.priceAmountInUsd)).toBe(true);
    expect(invoice.priceAmountInUsd).toBe('302.50');
    const [type] = await h.sql<{ t: string }[]>`
      select data_type as t from information_schema.columns
      where table_schema = 'invoice' and table_name = 'invoices' and column_name = 'amount_expected'`;
    expect(type?.t).toBe('numeric');
  });
});

describe('addresses by environment', () => {
  test.each([
    ['BTC', /^bc1q/, /^tb1q/],
    ['LTC', /^ltc1q/, /^tltc1q/],
    ['ETH', /^0x[0-9a-fA-F]{40}$/, /^0x[0-9a-fA-F]{40}$/],
    ['USDC', /^0x[0-9a-fA-F]{40}$/, /^0x[0-9a-fA-F]{40}$/],
    ['TRX', /^T[1-9A-HJ-NP-Za-km-z]{33}$/, /^T[1-9A-HJ-NP-Za-km-z]{33}$/],
  ] as const)('%s: live projects get mainnet addresses, sandbox projects testnet ones', async (coin, mainnet, testnet) => {
    const live = await createInvoice(liveProject(), { payCurrency: coin });
    const sandbox = await createInvoice(sandboxProject(), { payCurrency: coin });
    expect(live.address).toMatch(mainnet);
    expect(sandbox.address).toMatch(testnet);
    expect(validateAddress(coin, 'mainnet', live.address).ok).toBe(true);
    expect(validateAddress(coin, 'testnet', sandbox.address).ok).toBe(true);
    expect(live.address).not.toBe(sandbox.address);
    expect(live.environment).toBe(Environment.LIVE);
  });
});

describe('GetCheckout', () => {
  test('exposes only what the customer needs, with a BIP21 payment URI', async () => {
    const invoice = await createInvoice(sandboxProject(), { payCurrency: 'BTC', orderId: 'secret-order', orderDescription: 'secret' });
    const { checkout } = await h.client.getCheckout({ invoiceId: invoice.id });
    expect(checkout).toMatchObject({
      id: invoice.id,
      status: InvoiceStatus.WAITING,
      payCurrency: 'BTC',
      amountExpected: invoice.amountExpected,
      address: invoice.address,
      priceAmount: invoice.priceAmount,
      priceCurrency: invoice.priceCurrency,
      amountReceived: '0',
      isSandbox: true,
      successUrl: invoice.successUrl,
      cancelUrl: invoice.cancelUrl,
      paymentUri: `bitcoin:${invoice.address}?amount=${invoice.amountExpected}`,
    });
    expect(checkout!.expiredAt).toEqual(invoice.expiredAt);
    expect(checkout!.createdAt).toEqual(invoice.createdAt);
    const json = JSON.stringify(toJson(CheckoutSchema, checkout!));
    for (const hidden of ['secret-order', 'secret', invoice.projectId, invoice.projectName]) expect(json).not.toContain(hidden);
  });

  test('ERC-20 on a live project: EIP-681 transfer on the token contract, in token base units', async () => {
    const invoice = await createInvoice(liveProject(), { payCurrency: 'USDC', priceAmount: '12.34' });
    const { checkout } = await h.client.getCheckout({ invoiceId: invoice.id });
    expect(checkout!.isSandbox).toBe(false);
    expect(checkout!.paymentUri).toBe(`ethereum:0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48/transfer?address=${invoice.address}&uint256=12340000`);
  });

  test('ETH on sandbox names the Sepolia chain and the amount in wei', async () => {
    const invoice = await createInvoice(sandboxProject(), { payCurrency: 'ETH', priceAmount: '25.00' });
    const { checkout } = await h.client.getCheckout({ invoiceId: invoice.id });
    expect(checkout!.paymentUri).toBe(`ethereum:${invoice.address}@11155111?value=10000000000000000`);
  });

  test('unknown id: not_found; malformed id: validation_failed', async () => {
    expect(await rejection(h.client.getCheckout({ invoiceId: randomUUID() }))).toMatchObject({ code: 'not_found' });
    expect(await rejection(h.client.getCheckout({ invoiceId: '../etc' }))).toMatchObject({
      connectCode: Code.InvalidArgument,
      violations: [{ field: 'invoiceId' }],
    });
  });
});

describe('GetInvoiceProject', () => {
  test('answers the owning project and its environment', async () => {
    const sandbox = sandboxProject();
    const live = liveProject();
    const a = await createInvoice(sandbox);
    const b = await createInvoice(live);
    expect(await h.client.getInvoiceProject({ invoiceId: a.id })).toMatchObject({ projectId: sandbox.projectId, environment: Environment.SANDBOX });
    expect(await h.client.getInvoiceProject({ invoiceId: b.id })).toMatchObject({ projectId: live.projectId, environment: Environment.LIVE });
    expect(await rejection(h.client.getInvoiceProject({ invoiceId: randomUUID() }))).toMatchObject({ code: 'not_found' });
  });
});

describe('ListInvoices', () => {
  test('newest first, filtered by status, paginated with a cursor that is stable under concurrent inserts', async () => {
    const project = sandboxProject();
    const other = sandboxProject();
    await createInvoice(other);
    const created = await mapLimit(Array.from({ length: 23 }, (_, i) => i), 4, () => createInvoice(project));
    const paid = created.slice(0, 3);
    for (const invoice of paid) await h.client.payInvoice({ projectId: project.projectId, invoiceId: invoice.id });

    // Default page size 20.
    const first = await h.client.listInvoices({ projectId: project.projectId });
    expect(first.invoices).toHaveLength(20);
    expect(first.nextCursor).not.toBe('');

    // Page with 7 at a time while more invoices are being created: every invoice that existed
    // when paging started appears exactly once, newest first, and none of the new ones.
    const seen: Invoice[] = [];
    let cursor = '';
    const inserting = mapLimit(Array.from({ length: 10 }, (_, i) => i), 2, () => createInvoice(project));
    do {
      const page = await h.client.listInvoices({ projectId: project.projectId, pageSize: 7, cursor });
      expect(page.invoices.length).toBeLessThanOrEqual(7);
      seen.push(...page.invoices);
      cursor = page.nextCursor;
    } while (cursor !== '');
    const added = await inserting;
    const seenIds = seen.map((i) => i.id);
    expect(new Set(seenIds).size).toBe(seenIds.length);
    expect(seenIds.filter((id) => !added.some((a) => a.id === id)).sort()).toEqual(created.map((i) => i.id).sort());
    const order = seen.map((i) => [ms(i.createdAt), i.id] as const);
    for (let i = 1; i < order.length; i++) {
      const [t0, id0] = order[i - 1]!;
      const [t1, id1] = order[i]!;
      expect(t0 > t1 || (t0 === t1 && id0 > id1)).toBe(true);
    }
    expect(seen.every((i) => i.projectId === project.projectId)).toBe(true);

    const onlyPaid = await h.client.listInvoices({ projectId: project.projectId, status: InvoiceStatus.PAID });
    expect(onlyPaid.invoices.map((i) => i.id).sort()).toEqual(paid.map((i) => i.id).sort());
    expect(onlyPaid.invoices.every((i) => i.status === InvoiceStatus.PAID)).toBe(true);
    expect(onlyPaid.nextCursor).toBe('');

    const nobody = await h.client.listInvoices({ projectId: randomUUID() });
    expect(nobody).toMatchObject({ invoices: [], nextCursor: '' });
  });

  test('bad status, page size or cursor answer validation_failed naming the field', async () => {
    const projectId = randomUUID();
    expect(await rejection(h.client.listInvoices({ projectId, status: InvoiceStatus.UNSPECIFIED }))).toMatchObject({ violations: [{ field: 'status' }] });
    expect(await rejection(h.client.listInvoices({ projectId, pageSize: -5 }))).toMatchObject({ violations: [{ field: 'pageSize' }] });
    expect(await rejection(h.client.listInvoices({ projectId, cursor: 'bogus' }))).toMatchObject({ violations: [{ field: 'cursor' }] });
    expect(await rejection(h.client.listInvoices({ projectId: 'nope' }))).toMatchObject({ violations: [{ field: 'projectId' }] });
  });
});

test('CreateInvoice publishes no event: nothing acts on a creation (docs/performance.md#events); paying it publishes invoice.paid', async () => {
  const project = sandboxProject();
  const invoice = await createInvoice(project, { orderId: 'no-created-event', payCurrency: 'LTC' });
  await h.client.payInvoice({ projectId: project.projectId, invoiceId: invoice.id });
  await publishedEvents(h, 'invoice.paid', 1);
  // Everything the stream holds about this invoice: its payment, not its creation.
  const ofInvoice = (await streamEvents(h.nats, h.svc.namespace)).filter((e) => e.payload.invoiceId === invoice.id);
  expect(ofInvoice.map((e) => e.type)).toEqual(['invoice.paid']);
});

describe('a plain @grpc/grpc-js client (an internal caller, no Connect code)', () => {
  const definition = {
    createInvoice: {
      path: '/coinvoice.invoice.v1.InvoiceService/CreateInvoice',
      requestStream: false,
      responseStream: false,
      requestSerialize: (m: CreateInvoiceRequest) => Buffer.from(toBinary(CreateInvoiceRequestSchema, m)),
      requestDeserialize: (b: Buffer) => fromBinary(CreateInvoiceRequestSchema, b),
      responseSerialize: (m: CreateInvoiceResponse) => Buffer.from(toBinary(CreateInvoiceResponseSchema, m)),
      responseDeserialize: (b: Buffer) => fromBinary(CreateInvoiceResponseSchema, b),
    },
    getInvoice: {
      path: '/coinvoice.invoice.v1.InvoiceService/GetInvoice',
      requestStream: false,
      responseStream: false,
      requestSerialize: (m: GetInvoiceRequest) => Buffer.from(toBinary(GetInvoiceRequestSchema, m)),
      requestDeserialize: (b: Buffer) => fromBinary(GetInvoiceRequestSchema, b),
      responseSerialize: (m: GetInvoiceResponse) => Buffer.from(toBinary(GetInvoiceResponseSchema, m)),
      responseDeserialize: (b: Buffer) => fromBinary(GetInvoiceResponseSchema, b),
    },
  } satisfies grpc.ServiceDefinition;
  const GrpcInvoiceClient = grpc.makeGenericClientConstructor(definition, 'InvoiceService');

  function call<Req, Res>(client: grpc.Client, method: grpc.MethodDefinition<Req, Res>, request: Req): Promise<Res> {
    return new Promise((resolve, reject) => {
      client.makeUnaryRequest(method.path, method.requestSerialize, method.responseDeserialize, request, (err: grpc.ServiceError | null, res?: Res) => {
        if (err || !res) reject(err ?? new Error('no response'));
        else resolve(res);
      });
    });
  }

  test('creates and gets an invoice; another project gets NOT_FOUND', async () => {
    const client = new GrpcInvoiceClient(new URL(h.svc.url).host, grpc.credentials.createInsecure());
    try {
      const project = liveProject('Grpc Shop');
      const request = create(CreateInvoiceRequestSchema, createRequest(project, { priceAmount: '42.00', payCurrency: 'ETH' }));
      const created = await call(client, definition.createInvoice, request);
      expect(created.invoice).toMatchObject({ priceAmount: '42.00', payCurrency: 'ETH', status: InvoiceStatus.WAITING, projectName: 'Grpc Shop' });
      const got = await call(client, definition.getInvoice, create(GetInvoiceRequestSchema, { projectId: project.projectId, invoiceId: created.invoice!.id }));
      expect(got.invoice).toEqual(created.invoice);
      await expect(
        call(client, definition.getInvoice, create(GetInvoiceRequestSchema, { projectId: randomUUID(), invoiceId: created.invoice!.id })),
      ).rejects.toMatchObject({ code: grpc.status.NOT_FOUND });
      await expect(
        call(client, definition.createInvoice, create(CreateInvoiceRequestSchema, createRequest(project, { payCurrency: 'DOGE' }))),
      ).rejects.toMatchObject({ code: grpc.status.INVALID_ARGUMENT });
    } finally {
      client.close();
    }
  });
});
