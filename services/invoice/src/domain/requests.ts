/**
 * Input rules for the invoice service's requests. Every check runs again here whatever the caller
 * (gateway JSON schema, a direct gRPC client) already did. Violations name the PUBLIC JSON fields
 * (priceAmount, payCurrency, successUrl, …) so the gateway can put them straight into the
 * problem+json `errors` array. Nothing here does I/O.
 */
import type { ProjectEnvironment } from '@coinvoice/domain/environment';
import { checkEnvironment } from '@coinvoice/domain/project-network';
import { bidiControlViolation, checkIdempotencyKey, checkUuid, codePoints, fail, KeysetCursorFormat, pass, RequestFields, requestFingerprintOf, validateKeysetListRequest, validateUuidFields, type Check, type KeysetCursor, type KeysetListInput, type KeysetListRequest, type Validated, type Violation } from '@coinvoice/runtime';
import type { CryptoCurrency } from '@coinvoice/chains/coin';
import { findCryptoCurrency } from '@coinvoice/chains/currencies';
import { findFiatCurrency, type FiatCurrency } from '@coinvoice/domain/fiat';
import { MAX_CRYPTO_DECIMALS, parseCryptoAmount, parsePositiveDecimal, parsePriceAmount, type Decimal } from '@coinvoice/domain/money';
import { INVOICE_STATUSES, type InvoiceStatusName } from './status';

// Sandbox projects get testnet addresses, live projects mainnet (docs/architecture.md#sandbox-and-live): `networkOf`.

export const LIMITS = {
  urlMaxLength: 2048,
  orderIdMaxLength: 255,
  orderDescriptionMaxLength: 1000,
  projectNameMaxLength: 255,
  transactionHashMaxLength: 128,
  payNetworkMaxLength: 32,
  /** lifetimeMinutes bounds: up to one week, like the project setting (auth allows 5–10080). */
  lifetimeMinMinutes: 1,
  lifetimeMaxMinutes: 10_080,
  defaultLifetimeMinutes: 60,
} as const;

/**
 * Free text bounded in characters (code points), without control characters (NUL, escapes…);
 * `multiline` also allows tab, line feed and carriage return.
 */
function checkText(raw: unknown, maxLength: number, options: { multiline?: boolean; required?: boolean } = {}): Check<string> {
  if (typeof raw !== 'string') return fail('must be a string');
  if (options.required && raw.trim() === '') return fail('is required');
  if (raw.length > maxLength * 2 || codePoints(raw) > maxLength) return fail(`must be at most ${maxLength} characters`);
  const forbidden = options.multiline ? /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]/ : /\p{Cc}/u;
  if (forbidden.test(raw)) return fail('must not contain control characters');
  const bidi = bidiControlViolation(raw);
  if (bidi) return fail(bidi);
  return pass(raw);
}

/**
 * An absolute http(s) URL of at most 2048 characters, echoed exactly as given: no whitespace or
 * control characters (the URL parser would silently drop some), no credentials, a host.
 */
export function checkRedirectUrl(raw: unknown): Check<string> {
  if (raw === undefined || raw === null || raw === '') return fail('is required');
  if (typeof raw !== 'string') return fail('must be a string');
  if (raw.length > LIMITS.urlMaxLength) return fail(`must be at most ${LIMITS.urlMaxLength} characters`);
  if (/[\s\p{Cc}]/u.test(raw)) return fail('must not contain spaces or control characters');
  const url = URL.parse(raw);
  if (!url) return fail('must be an absolute URL such as "https://shop.example/thanks"');
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return fail('must be an http or https URL');
  if (url.username !== '' || url.password !== '') return fail('must not contain credentials');
  if (url.hostname === '') return fail('must have a host');
  return pass(raw);
}

function checkLifetime(raw: unknown): Check<number> {
  if (raw === undefined || raw === null) return pass(LIMITS.defaultLifetimeMinutes);
  if (typeof raw !== 'number' || !Number.isInteger(raw)) return fail('must be a whole number of minutes');
  if (raw < LIMITS.lifetimeMinMinutes || raw > LIMITS.lifetimeMaxMinutes) {
    return fail(`must be between ${LIMITS.lifetimeMinMinutes} and ${LIMITS.lifetimeMaxMinutes} minutes`);
  }
  return pass(raw);
}

// ---------------------------------------------------------------------------------------------
// CreateInvoice

export interface CreateInvoiceInput {
  projectId?: unknown;
  /** 'live' | 'sandbox' (the caller maps the proto enum). */
  environment?: unknown;
  projectName?: unknown;
  priceAmount?: unknown;
  priceCurrency?: unknown;
  payCurrency?: unknown;
  /** The network to pay on (docs/networks.md); absent: payCurrency's default network. */
  payNetwork?: unknown;
  successUrl?: unknown;
  cancelUrl?: unknown;
  orderId?: unknown;
  orderDescription?: unknown;
  isDonation?: unknown;
  idempotencyKey?: unknown;
  lifetimeMinutes?: unknown;
}

export interface NewInvoiceRequest {
  projectId: string;
  environment: ProjectEnvironment;
  projectName: string;
  priceAmount: Decimal;
  priceCurrency: FiatCurrency;
  /** The asset on its default network; the handler resolves `payNetwork` against what is enabled here. */
  payCurrency: CryptoCurrency;
  /** As given (shape checked here); undefined: the default network. */
  payNetwork: string | undefined;
  successUrl: string;
  cancelUrl: string;
  orderId: string | undefined;
  orderDescription: string | undefined;
  isDonation: boolean;
  idempotencyKey: string | undefined;
  lifetimeMinutes: number;
  /** Fingerprint of the merchant's request body, for idempotent replays (see `requestFingerprint`). */
  fingerprint: string;
}

export function validateCreateInvoice(input: CreateInvoiceInput): Validated<NewInvoiceRequest> {
  const fields = new RequestFields();
  const projectId = fields.take('projectId', checkUuid(input.projectId));
  const environment = fields.take('environment', checkEnvironment(input.environment));
  const projectName = fields.take('projectName', checkText(input.projectName, LIMITS.projectNameMaxLength, { required: true }));
  const priceCurrency = fields.take('priceCurrency', requiredValue(input.priceCurrency, findFiatCurrency));
  // With an unsupported price currency the amount is still checked for its shape.
  const priceAmount = fields.take(
    'priceAmount',
    requiredValue(input.priceAmount, (raw) =>
      priceCurrency ? parsePriceAmount(raw, priceCurrency) : parsePositiveDecimal(raw, MAX_CRYPTO_DECIMALS),
    ),
  );
  const payCurrency = fields.take('payCurrency', requiredValue(input.payCurrency, findCryptoCurrency));
  // Whether the network carries the asset and is enabled is the catalog's question (domain/pay-methods.ts).
  const payNetwork =
    input.payNetwork === undefined || input.payNetwork === null
      ? undefined
      : fields.take('payNetwork', checkText(input.payNetwork, LIMITS.payNetworkMaxLength, { required: true }));
  const successUrl = fields.take('successUrl', checkRedirectUrl(input.successUrl));
  const cancelUrl = fields.take('cancelUrl', checkRedirectUrl(input.cancelUrl));
  const orderId =
    input.orderId === undefined || input.orderId === null
      ? undefined
      : fields.take('orderId', checkText(input.orderId, LIMITS.orderIdMaxLength));
  const orderDescription =
    input.orderDescription === undefined || input.orderDescription === null
      ? undefined
      : fields.take('orderDescription', checkText(input.orderDescription, LIMITS.orderDescriptionMaxLength, { multiline: true }));
  const isDonation = fields.take(
    'isDonation',
    input.isDonation === undefined ? pass(false) : typeof input.isDonation === 'boolean' ? pass(input.isDonation) : fail('must be true or false'),
  );
  const idempotencyKey =
    input.idempotencyKey === undefined || input.idempotencyKey === null
      ? undefined
      : fields.take('idempotencyKey', checkIdempotencyKey(input.idempotencyKey));
  const lifetimeMinutes = fields.take('lifetimeMinutes', checkLifetime(input.lifetimeMinutes));

  return fields.result(() => {
    const request = {
      projectId: projectId!,
      environment: environment!,
      projectName: projectName!,
      priceAmount: priceAmount!,
      priceCurrency: priceCurrency!,
      payCurrency: payCurrency!,
      payNetwork,
      successUrl: successUrl!,
      cancelUrl: cancelUrl!,
      orderId,
      orderDescription,
      isDonation: isDonation!,
      idempotencyKey,
      lifetimeMinutes: lifetimeMinutes!,
    };
    return { ...request, fingerprint: requestFingerprint(input) };
  });
}

function requiredValue<T>(raw: unknown, parse: (raw: unknown) => Check<T>): Check<T> {
  if (raw === undefined || raw === null || raw === '') return fail('is required');
  return parse(raw);
}

/**
 * SHA-256 over what the merchant sent (the REST body's fields, exactly as given), not over what
 * the gateway adds (project name, environment, lifetime): the same body with the same
 * Idempotency-Key replays, anything else is a different request.
 */
export function requestFingerprint(input: CreateInvoiceInput): string {
  return requestFingerprintOf([
    input.priceAmount,
    input.priceCurrency,
    input.payCurrency,
    input.successUrl,
    input.cancelUrl,
    input.orderId ?? null,
    input.orderDescription ?? null,
    input.isDonation === true,
    // Last, and only when given: a body without payNetwork keeps the fingerprint it had before networks.
    ...(input.payNetwork === undefined || input.payNetwork === null ? [] : [input.payNetwork]),
  ]);
}

// ---------------------------------------------------------------------------------------------
// Lookups by id

export interface InvoiceRef {
  projectId: string;
  invoiceId: string;
}

export function validateInvoiceRef(input: { projectId?: unknown; invoiceId?: unknown }): Validated<InvoiceRef> {
  return validateUuidFields(input, ['projectId', 'invoiceId']);
}

export function validateInvoiceId(input: { invoiceId?: unknown }): Validated<string> {
  const fields = new RequestFields();
  const invoiceId = fields.take('invoiceId', checkUuid(input.invoiceId));
  return fields.result(() => invoiceId!);
}

// ---------------------------------------------------------------------------------------------
// PayInvoice

export interface PayRequest extends InvoiceRef {
  /** Checked here for shape (> 0, ≤ 8 decimals); against the coin's decimals once it is known. */
  amountReceived: Decimal | undefined;
  transactionHash: string | undefined;
}

export function validatePayInvoice(input: {
  projectId?: unknown;
  invoiceId?: unknown;
  amountReceived?: unknown;
  transactionHash?: unknown;
}): Validated<PayRequest> {
  const fields = new RequestFields();
  const projectId = fields.take('projectId', checkUuid(input.projectId));
  const invoiceId = fields.take('invoiceId', checkUuid(input.invoiceId));
  const amountReceived =
    input.amountReceived === undefined || input.amountReceived === null
      ? undefined
      : fields.take('amountReceived', parseCryptoAmount(input.amountReceived, MAX_CRYPTO_DECIMALS));
  const transactionHash =
    input.transactionHash === undefined || input.transactionHash === null
      ? undefined
      : fields.take('transactionHash', checkTransactionHash(input.transactionHash));
  return fields.result(() => ({ projectId: projectId!, invoiceId: invoiceId!, amountReceived, transactionHash }));
}

/** 1–128 printable ASCII characters without spaces (hex hashes, or a test's own label). */
function checkTransactionHash(raw: unknown): Check<string> {
  if (typeof raw !== 'string') return fail('must be a string');
  if (raw === '') return fail('must not be empty');
  if (raw.length > LIMITS.transactionHashMaxLength) return fail(`must be at most ${LIMITS.transactionHashMaxLength} characters`);
  if (!/^[\x21-\x7e]+$/.test(raw)) return fail('must be printable ASCII without spaces');
  return pass(raw);
}

/** The received amount against the invoice's coin: at most its amount decimals (8, or 6 for USDT/USDC/TRX). */
export function checkAmountForCoin(amount: Decimal, coin: CryptoCurrency): Violation | undefined {
  if (amount.decimalPlaces() > coin.amountDecimals) {
    return { field: 'amountReceived', message: `must have at most ${coin.amountDecimals} decimal places for ${coin.code}` };
  }
  return undefined;
}

// ---------------------------------------------------------------------------------------------
// ListInvoices

/** A project's invoices, optionally only those with one order id (the dashboard's search). */
export type ListRequest = KeysetListRequest<InvoiceStatusName> & { orderId: string | undefined };

export function validateListInvoices(input: KeysetListInput & { orderId?: unknown }): Validated<ListRequest> {
  const list = validateKeysetListRequest(input, INVOICE_STATUSES, INVOICE_CURSORS);
  const orderId = input.orderId === undefined ? pass(undefined) : checkText(input.orderId, LIMITS.orderIdMaxLength, { required: true });
  if (list.ok && orderId.ok) return { ok: true, value: { ...list.value, orderId: orderId.value } };
  const violations = list.ok ? [] : [...list.violations];
  if (!orderId.ok) violations.push({ field: 'orderId', message: orderId.reason });
  return { ok: false, violations };
}

/** A page boundary: the (createdAt, id) of the last invoice shown, newest first. */
export type InvoiceCursor = KeysetCursor;

/** Opaque to clients: base64url of "v1:<createdAt epoch ms>:<invoice id>". */
export const INVOICE_CURSORS = new KeysetCursorFormat('v1');

export function encodeCursor(cursor: InvoiceCursor): string {
  return INVOICE_CURSORS.encode(cursor);
}

export function decodeCursor(raw: unknown): Check<InvoiceCursor> {
  return INVOICE_CURSORS.decode(raw);
}
