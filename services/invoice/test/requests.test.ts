/** Request rules of the invoice service (pure): field by field, with the public field names. */
import { createHash, randomUUID } from 'node:crypto';
import {
  checkRedirectUrl,
  decodeCursor,
  encodeCursor,
  requestFingerprint,
  validateCreateInvoice,
  validateListInvoices,
  validatePayInvoice,
  type CreateInvoiceInput,
} from '../src/domain/requests';

const base: CreateInvoiceInput = {
  projectId: randomUUID(),
  environment: 'sandbox',
  projectName: 'Shop',
  priceAmount: '10.00',
  priceCurrency: 'USD',
  payCurrency: 'BTC',
  successUrl: 'https://shop.example/ok',
  cancelUrl: 'https://shop.example/cancel',
};

function violationsOf(input: CreateInvoiceInput) {
  const result = validateCreateInvoice(input);
  return result.ok ? [] : result.violations;
}

test('a minimal request is valid, with the documented defaults', () => {
  const result = validateCreateInvoice(base);
  expect(result.ok).toBe(true);
  if (!result.ok) return;
  expect(result.value.isDonation).toBe(false);
  expect(result.value.lifetimeMinutes).toBe(60);
  expect(result.value.orderId).toBeUndefined();
  expect(result.value.priceAmount.toString()).toBe('10');
  expect(result.value.priceCurrency.code).toBe('USD');
});

test.each<[string, Partial<CreateInvoiceInput>, string, RegExp]>([
  ['unsupported pay currency', { payCurrency: 'DOGE' }, 'payCurrency', /supported: BTC, LTC, ETH, USDT, USDC, TRX, POL, BNB/],
  ['unsupported price currency', { priceCurrency: 'XYZ' }, 'priceCurrency', /supported: USD, EUR, GBP, JPY, CHF, CAD, AUD/],
  ['zero price', { priceAmount: '0' }, 'priceAmount', /greater than 0/],
  ['negative price', { priceAmount: '-5' }, 'priceAmount', /greater than 0/],
  ['non-numeric price', { priceAmount: 'ten' }, 'priceAmount', /plain decimal/],
  ['exponent price', { priceAmount: '1e3' }, 'priceAmount', /plain decimal/],
  ['three decimals in USD', { priceAmount: '1.005' }, 'priceAmount', /at most 2 decimal places for USD/],
  ['decimals in JPY', { priceAmount: '1500.5', priceCurrency: 'JPY' }, 'priceAmount', /JPY has no minor units/],
  ['missing price', { priceAmount: '' }, 'priceAmount', /required/],
  ['ftp URL', { successUrl: 'ftp://shop.example/' }, 'successUrl', /http or https/],
  ['relative URL', { cancelUrl: '/cancel' }, 'cancelUrl', /absolute URL/],
  ['URL with spaces', { successUrl: 'https://shop.example/a b' }, 'successUrl', /spaces/],
  ['URL with credentials', { successUrl: 'https://u:p@shop.example/' }, 'successUrl', /credentials/],
  ['URL too long', { successUrl: `https://shop.example/${'a'.repeat(2030)}` }, 'successUrl', /at most 2048/],
  ['orderId too long', { orderId: 'x'.repeat(256) }, 'orderId', /at most 255/],
  ['orderId with NUL', { orderId: 'a\u0000b' }, 'orderId', /control characters/],
  ['orderId with a bidi override', { orderId: 'order\u202E1-2' }, 'orderId', /bidirectional control characters/],
  ['description with a bidi isolate', { orderDescription: 'Pay \u2067here\u2069' }, 'orderDescription', /bidirectional control characters/],
  ['description too long', { orderDescription: 'x'.repeat(1001) }, 'orderDescription', /at most 1000/],
  ['lifetime 0', { lifetimeMinutes: 0 }, 'lifetimeMinutes', /between 1 and 10080/],
  ['lifetime too long', { lifetimeMinutes: 10_081 }, 'lifetimeMinutes', /between 1 and 10080/],
  ['empty idempotency key', { idempotencyKey: '' }, 'idempotencyKey', /empty/],
  ['non-ASCII idempotency key', { idempotencyKey: 'clé' }, 'idempotencyKey', /ASCII/],
  ['project id not a UUID', { projectId: 'p1' }, 'projectId', /UUID/],
  ['environment unspecified', { environment: 'unspecified (0)' }, 'environment', /live or sandbox/],
  ['empty project name', { projectName: '' }, 'projectName', /required/],
  ['payNetwork not a string', { payNetwork: 56 }, 'payNetwork', /must be a string/],
  ['empty payNetwork', { payNetwork: '' }, 'payNetwork', /required/],
  ['payNetwork too long', { payNetwork: 'b'.repeat(33) }, 'payNetwork', /at most 32/],
])('%s → %s refused', (_, change, field, message) => {
  const violations = violationsOf({ ...base, ...change });
  expect(violations).toEqual([{ field, message: expect.stringMatching(message) }]);
});

test('currency codes are taken in any letter case and normalised', () => {
  const result = validateCreateInvoice({ ...base, priceCurrency: 'eur', payCurrency: 'bTc' });
  expect(result.ok).toBe(true);
  if (!result.ok) return;
  expect(result.value.priceCurrency.code).toBe('EUR');
  expect(result.value.payCurrency.code).toBe('BTC');
});

test('every problem is reported at once', () => {
  const fields = violationsOf({ ...base, priceAmount: 'x', payCurrency: 'X', successUrl: 'nope', cancelUrl: '' }).map((v) => v.field);
  expect(fields).toEqual(['priceAmount', 'payCurrency', 'successUrl', 'cancelUrl']);
});

test('descriptions may span lines; order ids may not', () => {
  expect(violationsOf({ ...base, orderDescription: 'line 1\nline 2\ttab' })).toEqual([]);
  expect(violationsOf({ ...base, orderId: 'a\nb' })).toEqual([{ field: 'orderId', message: 'must not contain control characters' }]);
});

test('lengths count characters, not UTF-16 units', () => {
  expect(violationsOf({ ...base, orderId: '😀'.repeat(255) })).toEqual([]);
  expect(violationsOf({ ...base, orderId: '😀'.repeat(256) })).toHaveLength(1);
});

test('redirect URLs are echoed exactly as given', () => {
  expect(checkRedirectUrl('https://shop.example/a?b=c#d')).toEqual({ ok: true, value: 'https://shop.example/a?b=c#d' });
  expect(checkRedirectUrl('http://localhost:3000/x')).toEqual({ ok: true, value: 'http://localhost:3000/x' });
});

test('payNetwork is taken as given (the catalog judges it) and left undefined when absent', () => {
  const given = validateCreateInvoice({ ...base, payCurrency: 'USDT', payNetwork: 'bsc' });
  expect(given.ok && given.value.payNetwork).toBe('bsc');
  const absent = validateCreateInvoice(base);
  expect(absent.ok && absent.value.payNetwork).toBeUndefined();
});

describe('request fingerprint (idempotency)', () => {
  test('a body without payNetwork keeps the fingerprint it had before networks', () => {
    expect(requestFingerprint(base)).toBe(requestFingerprint({ ...base, payNetwork: undefined }));
    // The fields before networks, in their order: a key stored by an earlier release still replays.
    const before = createHash('sha256')
      .update(JSON.stringify([base.priceAmount, base.priceCurrency, base.payCurrency, base.successUrl, base.cancelUrl, null, null, false]))
      .digest('hex');
    expect(requestFingerprint(base)).toBe(before);
  });

  test('ignores what the gateway adds and the key itself', () => {
    const a = requestFingerprint({ ...base, idempotencyKey: 'k1', lifetimeMinutes: 5 });
    const b = requestFingerprint({ ...base, projectName: 'Renamed', environment: 'live', idempotencyKey: 'k2' });
    expect(a).toBe(b);
  });

  test.each<Partial<CreateInvoiceInput>>([
    { priceAmount: '10.01' },
    { priceAmount: '10' }, // another spelling is another body
    { payCurrency: 'ETH' },
    { orderId: 'o-1' },
    { orderDescription: 'x' },
    { isDonation: true },
    { successUrl: 'https://shop.example/ok2' },
    { payNetwork: 'ethereum' },
    { payNetwork: 'bsc' },
  ])('changes with the merchant body: %o', (change) => {
    expect(requestFingerprint({ ...base, ...change })).not.toBe(requestFingerprint(base));
  });
});

describe('PayInvoice input', () => {
  const ids = { projectId: randomUUID(), invoiceId: randomUUID() };

  test('amount and hash are optional', () => {
    expect(validatePayInvoice(ids)).toMatchObject({ ok: true, value: { amountReceived: undefined, transactionHash: undefined } });
  });

  test.each<[unknown, RegExp]>([
    ['0', /greater than 0/],
    ['-1', /greater than 0/],
    ['0.000000001', /at most 8 decimal places/],
    ['abc', /plain decimal/],
  ])('amountReceived %p is refused', (amountReceived, message) => {
    expect(validatePayInvoice({ ...ids, amountReceived })).toEqual({
      ok: false,
      violations: [{ field: 'amountReceived', message: expect.stringMatching(message) }],
    });
  });

  test('transactionHash: 1 to 128 printable characters', () => {
    expect(validatePayInvoice({ ...ids, transactionHash: 'a'.repeat(128) }).ok).toBe(true);
    expect(validatePayInvoice({ ...ids, transactionHash: 'a'.repeat(129) })).toMatchObject({ ok: false, violations: [{ field: 'transactionHash' }] });
    expect(validatePayInvoice({ ...ids, transactionHash: 'a b' })).toMatchObject({ ok: false, violations: [{ field: 'transactionHash' }] });
  });

  test('malformed ids are named', () => {
    expect(validatePayInvoice({ projectId: 'x', invoiceId: 'y' })).toMatchObject({
      ok: false,
      violations: [{ field: 'projectId' }, { field: 'invoiceId' }],
    });
  });
});

describe('ListInvoices input and cursors', () => {
  const projectId = randomUUID();

  test('page size: default 20, capped at 100, negative refused', () => {
    expect(validateListInvoices({ projectId, pageSize: 0 })).toMatchObject({ ok: true, value: { pageSize: 20 } });
    expect(validateListInvoices({ projectId, pageSize: 500 })).toMatchObject({ ok: true, value: { pageSize: 100 } });
    expect(validateListInvoices({ projectId, pageSize: -1 })).toMatchObject({ ok: false, violations: [{ field: 'pageSize' }] });
  });

  test('status must be a known status', () => {
    expect(validateListInvoices({ projectId, status: 'Paid' })).toMatchObject({ ok: true, value: { status: 'Paid' } });
    expect(validateListInvoices({ projectId, status: 'Done' })).toMatchObject({ ok: false, violations: [{ field: 'status' }] });
  });

  test('a cursor round-trips and tampering is refused', () => {
    const cursor = { createdAt: new Date('2026-03-04T05:06:07.089Z'), id: randomUUID() };
    const encoded = encodeCursor(cursor);
    expect(decodeCursor(encoded)).toEqual({ ok: true, value: cursor });
    expect(decodeCursor('not a cursor!')).toEqual({ ok: false, reason: 'is not a valid cursor' });
    expect(decodeCursor(Buffer.from('v1:abc:def').toString('base64url'))).toEqual({ ok: false, reason: 'is not a valid cursor' });
    expect(validateListInvoices({ projectId, cursor: 'garbage' })).toMatchObject({ ok: false, violations: [{ field: 'cursor' }] });
  });
});
