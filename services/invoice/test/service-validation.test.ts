/**
 * Bad input over gRPC: each refused with InvalidArgument / validation_failed naming the public
 * field, never an internal error; then property-based: random CreateInvoice and PayInvoice
 * requests only ever succeed or fail with an input/state error, never Internal or Unknown.
 */
import fc from 'fast-check';
import { Code, errorFacts } from '@coinvoice/runtime';
import { Environment } from '@coinvoice/runtime/gen/coinvoice/common/v1/environment_pb';
import { InvoiceStatus } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/invoice_pb';
import { Decimal } from '@coinvoice/domain/money';
import {
  createRequest,
  rejection,
  sandboxProject,
  startInvoiceHarness,
  type CreateRequest,
  type Harness,
} from './support/harness';

let h: Harness;

beforeAll(async () => {
  h = await startInvoiceHarness();
});

afterAll(async () => {
  await h?.dispose();
});

const CREATE_FIELDS = [
  'projectId',
  'environment',
  'projectName',
  'priceAmount',
  'priceCurrency',
  'payCurrency',
  'successUrl',
  'cancelUrl',
  'orderId',
  'orderDescription',
  'isDonation',
  'idempotencyKey',
  'lifetimeMinutes',
];

const huge = 'x'.repeat(200_000);

describe('CreateInvoice refuses bad input naming the field', () => {
  test.each<[string, Partial<CreateRequest>, string, string | RegExp]>([
    ['unsupported pay currency', { payCurrency: 'DOGE' }, 'payCurrency', 'unsupported currency "DOGE"; supported: BTC, LTC, ETH, USDT, USDC, TRX, POL, BNB'],
    ['unsupported price currency', { priceCurrency: 'RUB' }, 'priceCurrency', 'unsupported currency "RUB"; supported: USD, EUR, GBP, JPY, CHF, CAD, AUD'],
    ['a crypto price currency', { priceCurrency: 'BTC' }, 'priceCurrency', /unsupported currency "BTC"/],
    ['missing pay currency', { payCurrency: '' }, 'payCurrency', 'is required'],
    ['negative price', { priceAmount: '-10.00' }, 'priceAmount', 'must be greater than 0'],
    ['zero price', { priceAmount: '0' }, 'priceAmount', 'must be greater than 0'],
    ['zero with decimals', { priceAmount: '0.00' }, 'priceAmount', 'must be greater than 0'],
    ['non-numeric price', { priceAmount: 'twenty' }, 'priceAmount', /plain decimal number/],
    ['exponent', { priceAmount: '1e5' }, 'priceAmount', /plain decimal number/],
    ['comma decimal', { priceAmount: '10,50' }, 'priceAmount', /plain decimal number/],
    ['padded price', { priceAmount: ' 10' }, 'priceAmount', /plain decimal number/],
    ['too many decimals', { priceAmount: '10.001' }, 'priceAmount', 'must have at most 2 decimal places for USD'],
    ['decimals in JPY', { priceAmount: '1500.5', priceCurrency: 'JPY' }, 'priceAmount', 'must be a whole number: JPY has no minor units'],
    ['absurd price', { priceAmount: '1234567890123' }, 'priceAmount', 'must have at most 12 digits before the decimal point'],
    ['a price below the dust limit of BTC', { priceAmount: '0.01' }, 'priceAmount', /^is too small: it comes to 0\.0000001 BTC, below the smallest payable amount of 0\.00000294 BTC/],
    ['missing price', { priceAmount: '' }, 'priceAmount', 'is required'],
    ['javascript: URL', { successUrl: 'javascript:alert(1)' }, 'successUrl', 'must be an http or https URL'],
    ['relative URL', { successUrl: '/thanks' }, 'successUrl', /must be an absolute URL/],
    ['URL without host', { cancelUrl: 'https://' }, 'cancelUrl', /absolute URL|host/],
    ['URL with a newline', { cancelUrl: 'https://shop.example/\nx' }, 'cancelUrl', 'must not contain spaces or control characters'],
    ['URL over 2048 characters', { successUrl: `https://shop.example/${'a'.repeat(2040)}` }, 'successUrl', 'must be at most 2048 characters'],
    ['huge URL', { cancelUrl: `https://shop.example/${huge}` }, 'cancelUrl', 'must be at most 2048 characters'],
    ['orderId over 255 characters', { orderId: 'o'.repeat(256) }, 'orderId', 'must be at most 255 characters'],
    ['orderId with NUL', { orderId: 'abc\u0000' }, 'orderId', 'must not contain control characters'],
    ['huge description', { orderDescription: huge }, 'orderDescription', 'must be at most 1000 characters'],
    ['description with NUL', { orderDescription: 'a\u0000b' }, 'orderDescription', 'must not contain control characters'],
    ['lifetime 0', { lifetimeMinutes: 0 }, 'lifetimeMinutes', 'must be between 1 and 10080 minutes'],
    ['negative lifetime', { lifetimeMinutes: -5 }, 'lifetimeMinutes', 'must be between 1 and 10080 minutes'],
    ['idempotency key over 255 characters', { idempotencyKey: 'k'.repeat(256) }, 'idempotencyKey', 'must be at most 255 characters'],
    ['project id not a UUID', { projectId: 'project-1' }, 'projectId', 'must be a UUID'],
    ['environment unspecified', { environment: Environment.UNSPECIFIED }, 'environment', 'must be live or sandbox'],
    ['empty project name', { projectName: '' }, 'projectName', 'is required'],
  ])('%s', async (_, change, field, message) => {
    const err = await rejection(h.client.createInvoice(createRequest(sandboxProject(), change)));
    expect(err).toMatchObject({ connectCode: Code.InvalidArgument, code: 'validation_failed' });
    expect(err.violations).toEqual([{ field, message: typeof message === 'string' ? message : expect.stringMatching(message) }]);
    expect(err.message).toContain(field);
  });

  test('several bad fields are all named at once', async () => {
    const err = await rejection(
      h.client.createInvoice(createRequest(sandboxProject(), { priceAmount: 'abc', payCurrency: 'XXX', successUrl: 'nope' })),
    );
    expect(err.violations.map((v) => v.field)).toEqual(['priceAmount', 'payCurrency', 'successUrl']);
  });

  test('validate_only checks the rules and creates nothing', async () => {
    const project = sandboxProject();
    const err = await rejection(h.client.createInvoice(createRequest(project, { validateOnly: true, priceAmount: '-1', payCurrency: 'XXX' })));
    expect(err).toMatchObject({ connectCode: Code.InvalidArgument, code: 'validation_failed' });
    expect(err.violations.map((v) => v.field)).toEqual(['priceAmount', 'payCurrency']);
    const valid = await h.client.createInvoice(createRequest(project, { validateOnly: true }));
    expect(valid.invoice).toBeUndefined();
    expect((await h.client.listInvoices({ projectId: project.projectId })).invoices).toEqual([]);
  });
});

describe('property: random requests never cause an internal error', () => {
  /** Mostly valid values with the occasional bad one, so that both outcomes are exercised. */
  const mostly = <T>(valid: fc.Arbitrary<T>, invalid: fc.Arbitrary<T>) =>
    fc.oneof({ weight: 12, arbitrary: valid }, { weight: 1, arbitrary: invalid });
  const decimalString = fc
    .tuple(fc.integer({ min: 0, max: 10 ** 6 }), fc.option(fc.integer({ min: 0, max: 999 }), { nil: undefined }), fc.integer({ min: 0, max: 3 }))
    .map(([whole, fraction, pad]) => (fraction === undefined ? String(whole) : `${whole}.${String(fraction).padStart(pad, '0')}`));
  const anyText = (maxLength: number) => fc.string({ unit: 'binary', maxLength });
  const priceAmount = mostly(
    decimalString,
    fc.oneof(
      anyText(20),
      fc.constantFrom('-1', '0', '0.00', '1e3', 'NaN', 'Infinity', '.5', '5.', '00.5', '１２', '0x10', '1_000', '9'.repeat(70)),
      fc.double({ noNaN: false }).map(String),
    ),
  );
  const fiat = mostly(fc.constantFrom('USD', 'EUR', 'GBP', 'JPY', 'CHF', 'CAD', 'AUD'), fc.oneof(fc.constantFrom('usd', 'BTC', ''), anyText(5)));
  const coin = mostly(fc.constantFrom('BTC', 'LTC', 'ETH', 'USDT', 'USDC', 'TRX'), fc.oneof(fc.constantFrom('btc', 'USD', ''), anyText(6)));
  const url = mostly(
    fc.webUrl({ withQueryParameters: true, withFragments: true }),
    fc.oneof(anyText(40), fc.constantFrom('javascript:x', 'https://', 'http://a b', 'mailto:a@b.c', `https://x.example/${'y'.repeat(3000)}`)),
  );
  const request = fc.record({
    projectId: mostly(fc.uuid(), anyText(40)),
    environment: mostly(fc.constantFrom(Environment.LIVE, Environment.SANDBOX), fc.constantFrom(Environment.UNSPECIFIED, 7 as Environment)),
    projectName: mostly(fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 40 }).filter((s) => s.trim() !== ''), anyText(300)),
    priceAmount,
    priceCurrency: fiat,
    payCurrency: coin,
    successUrl: url,
    cancelUrl: url,
    orderId: fc.option(mostly(fc.string({ unit: 'grapheme', maxLength: 60 }), anyText(300)), { nil: undefined }),
    orderDescription: fc.option(mostly(fc.lorem(), anyText(1100)), { nil: undefined }),
    isDonation: fc.boolean(),
    idempotencyKey: fc.option(mostly(fc.uuid(), anyText(300)), { nil: undefined }),
    lifetimeMinutes: fc.option(mostly(fc.integer({ min: 1, max: 10_080 }), fc.integer({ min: -100, max: 20_000 })), { nil: undefined }),
  });
  let created = 0;
  let refused = 0;

  test('CreateInvoice: success echoes the input, failure is validation_failed naming known fields (or a reused key)', async () => {
    await fc.assert(
      fc.asyncProperty(request, async (req) => {
        try {
          const { invoice } = await h.client.createInvoice(req);
          expect(invoice!.status).toBe(InvoiceStatus.WAITING);
          expect(new Decimal(invoice!.priceAmount).eq(req.priceAmount)).toBe(true);
          expect(invoice!.successUrl).toBe(req.successUrl);
          expect(invoice!.orderId).toBe(req.orderId);
          created += 1;
        } catch (err) {
          refused += 1;
          const facts = errorFacts(err);
          if (facts.connectCode === Code.FailedPrecondition) {
            expect(facts.code).toBe('idempotency_key_reused');
            return;
          }
          expect(facts).toMatchObject({ connectCode: Code.InvalidArgument, code: 'validation_failed' });
          expect(facts.violations.length).toBeGreaterThan(0);
          for (const v of facts.violations) expect(CREATE_FIELDS).toContain(v.field);
        }
      }),
      { numRuns: 150 },
    );
    // Both outcomes were exercised.
    expect(created).toBeGreaterThan(10);
    expect(refused).toBeGreaterThan(10);
  });

  test('PayInvoice: any amount/hash is paid, refused as invalid, or refused as not payable', async () => {
    const project = sandboxProject();
    const invoices = await Promise.all(
      ['BTC', 'USDT'].map(async (payCurrency) => (await h.client.createInvoice(createRequest(project, { payCurrency }))).invoice!),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...invoices),
        fc.option(fc.oneof(decimalString, anyText(20), fc.double().map(String)), { nil: undefined }),
        fc.option(fc.oneof(anyText(200), fc.stringMatching(/^[0-9a-f]{64}$/)), { nil: undefined }),
        async (invoice, amountReceived, transactionHash) => {
          try {
            await h.client.payInvoice({ projectId: project.projectId, invoiceId: invoice.id, amountReceived, transactionHash });
          } catch (err) {
            const facts = errorFacts(err);
            expect([Code.InvalidArgument, Code.FailedPrecondition]).toContain(facts.connectCode);
            expect(['validation_failed', 'invoice_not_payable']).toContain(facts.code);
            for (const v of facts.violations) expect(['amountReceived', 'transactionHash']).toContain(v.field);
          }
        },
      ),
      { numRuns: 60 },
    );
  });
});
