/**
 * Input rules for the payout service's requests. Every check runs here whatever the caller (the
 * gateway's JSON schema, a direct gRPC client) already did. Violations name the PUBLIC JSON fields
 * (amount, currency, address, note, projectId, payoutId, code, …) so the gateway can put them
 * straight into the problem+json `errors` array. Nothing here does I/O.
 */
import type { ProjectEnvironment } from '@coinvoice/domain/environment';
import { checkEnvironment, networkOf } from '@coinvoice/domain/project-network';
import { bidiControlViolation, checkOptionalOneOf, checkPageSize, checkIdempotencyKey, checkUuid, codePoints, fail, KeysetCursorFormat, pass, RequestFields, requestFingerprintOf, validateKeysetListRequest, validateUuidFields, type Check, type KeysetCursor, type KeysetListInput, type KeysetListRequest, type Validated } from '@coinvoice/runtime';
import { PAY_NETWORKS, type CryptoCurrency } from '@coinvoice/chains/coin';
import { DEFAULT_NETWORK, familyOf, findCryptoCurrency, isPayNetwork, minimumAmount, networkLabel, networksCarrying, payMethod } from '@coinvoice/chains/currencies';
import { isEvmChain } from '@coinvoice/chains/evm/networks';
import { Decimal, MAX_CRYPTO_DECIMALS, MAX_INTEGER_DIGITS, formatPlain, parseCryptoAmount } from '@coinvoice/domain/money';
import type { Network } from '@coinvoice/domain/project-network';
import { isWellFormedCode } from './code';
import { PAYOUT_STATUSES, type PayoutStatusName } from './status';

// Live projects pay out on mainnet, sandbox projects on the coin's testnet: `networkOf`.

export const LIMITS = {
  noteMaxLength: 500,
  adminNoteMaxLength: 500,
} as const;

/**
 * Free text of at most `maxLength` characters (code points): tab, line feed and carriage return
 * allowed, other control characters and unpaired surrogates (which no encoding can store) refused.
 */
function checkText(raw: unknown, maxLength: number, options: { required?: boolean } = {}): Check<string> {
  if (typeof raw !== 'string') return fail('must be a string');
  if (options.required && raw.trim() === '') return fail('is required');
  if (raw.length > maxLength * 2 || codePoints(raw) > maxLength) return fail(`must be at most ${maxLength} characters`);
  if (/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]/.test(raw)) return fail('must not contain control characters');
  if (/\p{Cs}/u.test(raw)) return fail('must be valid Unicode text');
  const bidi = bidiControlViolation(raw);
  if (bidi) return fail(bidi);
  return pass(raw);
}

function checkCurrency(raw: unknown): Check<CryptoCurrency> {
  if (raw === undefined || raw === null || raw === '') return fail('is required');
  return findCryptoCurrency(raw);
}

/**
 * A payout amount: > 0, at most 8 decimals and at most the coin's amount decimals (6 for
 * USDT/USDC/TRX: every payout must be a whole number of the chain's base units), at most 12
 * integer digits, and exactly representable as the JSON number the API answers with.
 */
export function checkPayoutAmount(raw: unknown, coin: CryptoCurrency | undefined, liveMinimums?: PayoutMinimums): Check<Decimal> {
  if (raw === undefined || raw === null || raw === '') return fail('is required');
  // A huge number converted at the edge is long; say what is wrong with it, not its length.
  if (typeof raw === 'string' && /^\d{13,}(\.\d+)?$/.test(raw)) return fail(`must have at most ${MAX_INTEGER_DIGITS} digits before the decimal point`);
  if (typeof raw === 'string' && /^\d+\.\d{9,}$/.test(raw)) return fail(`must have at most ${MAX_CRYPTO_DECIMALS} decimal places`);
  const parsed = parseCryptoAmount(raw, MAX_CRYPTO_DECIMALS);
  if (!parsed.ok) return parsed;
  if (coin && parsed.value.decimalPlaces() > coin.amountDecimals) {
    return fail(`must have at most ${coin.amountDecimals} decimal places for ${coin.code}`);
  }
  // Only a UTXO coin's dust limit can bite here: one amount unit is already the decimals' floor.
  if (coin && parsed.value.lt(minimumAmount(coin))) {
    return fail(`must be at least ${formatPlain(minimumAmount(coin))} ${coin.code} (the chain's dust limit: a smaller output cannot be sent)`);
  }
  const liveMinimum = coin && liveMinimums?.[coin.code];
  if (coin && liveMinimum && parsed.value.lt(liveMinimum)) {
    return fail(`must be at least ${formatPlain(new Decimal(liveMinimum))} ${coin.code} for a live payout (PAYOUT_MIN_${coin.code}: the treasury pays each payout's network fee)`);
  }
  return parsed;
}

/**
 * The smallest live payout per coin code (PAYOUT_MIN_<CODE>, every network of the coin): a payout
 * worth less than its network fee costs the house more than it moves. Sandbox payouts have none.
 */
export type PayoutMinimums = Readonly<Partial<Record<string, string>>>;

/**
 * The registry entry a payout (or an auto-sweep rule) of `coin` is sent with: on `raw`, or absent,
 * on the coin's default network (docs/networks.md#balances-and-payouts). A network that does not
 * carry the coin is refused naming those that do.
 */
export function checkPayoutNetwork(raw: unknown, coin: CryptoCurrency | undefined): Check<CryptoCurrency | undefined> {
  if (raw === undefined || raw === null || raw === '') return pass(coin && payMethod(coin.code, DEFAULT_NETWORK[coin.code]));
  if (typeof raw !== 'string' || !isPayNetwork(raw)) return fail(`must be one of ${networksOf(coin)}`);
  if (!coin) return pass(undefined);
  const method = payMethod(coin.code, raw);
  return method ? pass(method) : fail(`does not carry ${coin.code}: ${coin.code} is paid out on ${networksOf(coin)}`);
}

function networksOf(coin: CryptoCurrency | undefined): string {
  return (coin ? networksCarrying(coin.code) : PAY_NETWORKS).join(', ');
}

/**
 * A destination on the payout's network, in that network's format (its chain family): a Tron
 * address for USDT on tron, an EVM address for USDT on bsc. `network` is mainnet or testnet.
 */
export function checkAddress(raw: unknown, method: CryptoCurrency | undefined, network: Network | undefined): Check<string> {
  if (raw === undefined || raw === null || raw === '') return fail('is required');
  if (typeof raw !== 'string') return fail('must be a string');
  if (!method || !network) return raw.length <= 128 ? pass(raw) : fail('must be at most 128 characters');
  const checked = familyOf(method.chain).validateAddress(raw, method, network);
  if (checked.ok) {
    const lost = lostDestination(checked.value, method, network);
    return lost === undefined ? checked : fail(`is not a destination coins can be sent to: ${lost}`);
  }
  // The default network keeps the message from before networks; another one is named.
  const on = method.chain === DEFAULT_NETWORK[method.code] ? '' : ` on ${networkLabel(method.chain)}`;
  return fail(`is not a valid ${method.code} ${network} address${on}: it ${checked.reason}`);
}

/** The zero address of the EVM networks, and Tron's (0x41 and twenty zero bytes). */
const EVM_ZERO_ADDRESS = '0x0000000000000000000000000000000000000000';
const TRON_ZERO_ADDRESS = 'T9yD14Nj9j7xAB4dbGeiX9h8unkKHxuWwb';

/**
 * Why coins sent to `address` would be lost, if they would: well-formed destinations nobody holds a
 * key to. The zero address passes every format check (an EVM one has no letters to checksum), and a
 * token sent to its own contract is stuck there; both are classic ways to burn a payout.
 */
function lostDestination(address: string, method: CryptoCurrency, network: Network): string | undefined {
  if ((isEvmChain(method.chain) && address === EVM_ZERO_ADDRESS) || (method.chain === 'tron' && address === TRON_ZERO_ADDRESS)) {
    return 'it is the zero address, which nobody holds the key of (coins sent there are burned)';
  }
  const contract = method.token ? method.token.contract[network] : null;
  if (contract !== null && contract !== undefined && address.toLowerCase() === contract.toLowerCase()) {
    return `it is the ${method.code} contract itself (tokens sent to it are stuck there)`;
  }
  return undefined;
}

// ---------------------------------------------------------------------------------------------
// RequestPayout

export interface RequestPayoutInput {
  projectId?: unknown;
  /** 'live' | 'sandbox' (the caller maps the proto enum). */
  environment?: unknown;
  amount?: unknown;
  currency?: unknown;
  address?: unknown;
  note?: unknown;
  idempotencyKey?: unknown;
  /** Optional: the currency's default network when absent. */
  network?: unknown;
  /** PAYOUT_MIN_<CODE>, applied to live payouts. */
  liveMinimums?: PayoutMinimums;
}

export interface NewPayoutRequest {
  projectId: string;
  environment: ProjectEnvironment;
  amount: Decimal;
  /** The registry entry of (currency, network): `currency.chain` is the payout's network. */
  currency: CryptoCurrency;
  /** Canonical form (bech32 lower case, EIP-55 checksummed, base58check). */
  address: string;
  /** Undefined when absent or empty. */
  note: string | undefined;
  idempotencyKey: string | undefined;
  /** Fingerprint of the request's fields, for idempotent replays. */
  fingerprint: string;
}

export function validateRequestPayout(input: RequestPayoutInput): Validated<NewPayoutRequest> {
  const fields = new RequestFields();
  const projectId = fields.take('projectId', checkUuid(input.projectId));
  const environment = fields.take('environment', checkEnvironment(input.environment));
  const coin = fields.take('currency', checkCurrency(input.currency));
  const currency = fields.take('network', checkPayoutNetwork(input.network, coin));
  // With an unsupported currency or network the amount and address are still checked for their shape.
  const amount = fields.take('amount', checkPayoutAmount(input.amount, currency ?? coin, environment === 'live' ? input.liveMinimums : undefined));
  const address = fields.take('address', checkAddress(input.address, currency, environment && networkOf(environment)));
  const note =
    input.note === undefined || input.note === null || input.note === ''
      ? undefined
      : fields.take('note', checkText(input.note, LIMITS.noteMaxLength));
  const idempotencyKey =
    input.idempotencyKey === undefined || input.idempotencyKey === null
      ? undefined
      : fields.take('idempotencyKey', checkIdempotencyKey(input.idempotencyKey));
  return fields.result(() => ({
    projectId: projectId!,
    environment: environment!,
    amount: amount!,
    currency: currency!,
    address: address!,
    note,
    idempotencyKey,
    fingerprint: requestFingerprint(input),
  }));
}

/**
 * SHA-256 over the merchant's fields exactly as sent (amount as the decimal the edge read): the
 * same body with the same Idempotency-Key replays, anything else is a different request. The
 * network joins the fields only when sent, so a key used before networks keeps its fingerprint.
 */
export function requestFingerprint(input: RequestPayoutInput): string {
  const fields = [input.amount, input.currency, input.address, input.note === '' ? null : (input.note ?? null)];
  if (input.network !== undefined && input.network !== null && input.network !== '') fields.push(input.network);
  return requestFingerprintOf(fields);
}

// ---------------------------------------------------------------------------------------------
// Lookups and state changes by id

export interface PayoutRef {
  projectId: string;
  payoutId: string;
}

export function validatePayoutRef(input: { projectId?: unknown; payoutId?: unknown }): Validated<PayoutRef> {
  return validateUuidFields(input, ['projectId', 'payoutId']);
}

/** An operator's reference to any project's payout. */
export function validateOperatorPayoutRef(input: { payoutId?: unknown }): Validated<{ payoutId: string }> {
  return validateUuidFields(input, ['payoutId']);
}

export interface VerifyRequest extends PayoutRef {
  code: string;
}

export function validateVerifyPayout(input: { projectId?: unknown; payoutId?: unknown; code?: unknown }): Validated<VerifyRequest> {
  const fields = new RequestFields();
  const projectId = fields.take('projectId', checkUuid(input.projectId));
  const payoutId = fields.take('payoutId', checkUuid(input.payoutId));
  const code = fields.take<string>(
    'code',
    input.code === undefined || input.code === null || input.code === ''
      ? fail('is required')
      : isWellFormedCode(input.code)
        ? pass(input.code)
        : fail('must be the 6-digit code from the email'),
  );
  return fields.result(() => ({ projectId: projectId!, payoutId: payoutId!, code: code! }));
}

export function validateBalanceQuery(input: { projectId?: unknown; environment?: unknown }): Validated<{ projectId: string; environment: ProjectEnvironment }> {
  const fields = new RequestFields();
  const projectId = fields.take('projectId', checkUuid(input.projectId));
  const environment = fields.take('environment', checkEnvironment(input.environment));
  return fields.result(() => ({ projectId: projectId!, environment: environment! }));
}

// ---------------------------------------------------------------------------------------------
// Operator actions

/**
 * The chain's transaction id: 64 hex digits for Bitcoin, Litecoin and Tron; "0x" + 64 hex digits
 * on every EVM network. Answered in lower case.
 */
export function checkTransactionHash(raw: unknown, coin: CryptoCurrency): Check<string> {
  if (raw === undefined || raw === null || raw === '') return fail('is required');
  if (typeof raw !== 'string') return fail('must be a string');
  if (isEvmChain(coin.chain)) {
    return /^0x[0-9a-fA-F]{64}$/.test(raw) ? pass(raw.toLowerCase()) : fail(`must be a ${coin.code} transaction hash: "0x" followed by 64 hex digits`);
  }
  return /^[0-9a-fA-F]{64}$/.test(raw) ? pass(raw.toLowerCase()) : fail(`must be a ${coin.code} transaction id: 64 hex digits`);
}

export function validateCompletePayout(input: { payoutId?: unknown; transactionHash?: unknown }): Validated<{ payoutId: string; transactionHash: unknown }> {
  const fields = new RequestFields();
  const payoutId = fields.take('payoutId', checkUuid(input.payoutId));
  // The hash's format depends on the payout's coin: checked once the payout is found.
  const transactionHash = fields.take<unknown>(
    'transactionHash',
    input.transactionHash === undefined || input.transactionHash === null || input.transactionHash === ''
      ? fail('is required')
      : typeof input.transactionHash === 'string' && input.transactionHash.length <= 128
        ? pass(input.transactionHash)
        : fail('must be a transaction hash of at most 128 characters'),
  );
  return fields.result(() => ({ payoutId: payoutId!, transactionHash }));
}

export function validateRejectPayout(input: { payoutId?: unknown; adminNote?: unknown }): Validated<{ payoutId: string; adminNote: string }> {
  const fields = new RequestFields();
  const payoutId = fields.take('payoutId', checkUuid(input.payoutId));
  const adminNote = fields.take('adminNote', checkText(input.adminNote ?? '', LIMITS.adminNoteMaxLength, { required: true }));
  return fields.result(() => ({ payoutId: payoutId!, adminNote: adminNote! }));
}

/** The registry entry of a stored payout's or balance's (currency, network): validated when written. */
export function storedMethod(code: string, network: string): CryptoCurrency {
  const found = findCryptoCurrency(code);
  if (!found.ok) throw new Error(`stored payout has unknown currency ${code}`);
  const method = isPayNetwork(network) ? payMethod(found.value.code, network) : undefined;
  if (!method) throw new Error(`stored payout has ${code} on ${network}, a network that does not carry it`);
  return method;
}

// ---------------------------------------------------------------------------------------------
// ListPayouts

export type ListRequest = KeysetListRequest<PayoutStatusName>;

export function validateListPayouts(input: KeysetListInput): Validated<ListRequest> {
  return validateKeysetListRequest(input, PAYOUT_STATUSES, PAYOUT_CURSORS);
}

/** A page boundary: the (createdAt, id) of the last payout shown, newest first. */
export type PayoutCursor = KeysetCursor;

/** Opaque to clients: base64url of "p1:<createdAt epoch ms>:<payout id>". */
export const PAYOUT_CURSORS = new KeysetCursorFormat('p1');

// ---------------------------------------------------------------------------------------------
// ListAllPayouts (operators)

/** The operators' queue: every project's payouts, oldest first, by status and environment. */
export interface OperatorListRequest {
  status: PayoutStatusName | undefined;
  environment: ProjectEnvironment | undefined;
  pageSize: number;
  /** The (createdAt, id) of the last payout shown; the page starts after it. */
  after: KeysetCursor | undefined;
}

/** Opaque to clients: base64url of "q1:<createdAt epoch ms>:<payout id>" (oldest first, unlike p1). */
export const OPERATOR_QUEUE_CURSORS = new KeysetCursorFormat('q1');

export function validateOperatorList(input: { status?: unknown; environment?: unknown; pageSize?: unknown; cursor?: unknown }): Validated<OperatorListRequest> {
  const fields = new RequestFields();
  const status = fields.take('status', checkOptionalOneOf(input.status, PAYOUT_STATUSES));
  const environment = fields.take('environment', checkOptionalOneOf(input.environment, ['live', 'sandbox'] as const));
  const pageSize = fields.take('pageSize', checkPageSize(input.pageSize));
  const after = fields.take<KeysetCursor | undefined>(
    'cursor',
    input.cursor === undefined || input.cursor === '' ? pass(undefined) : OPERATOR_QUEUE_CURSORS.decode(input.cursor),
  );
  return fields.result(() => ({ status, environment, pageSize: pageSize!, after }));
}
