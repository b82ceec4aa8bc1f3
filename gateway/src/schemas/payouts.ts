/**
 * Payouts at the edge: the service description's Payout table field for field, the balance,
 * history and the request bodies. With a merchant JWT, `projectId` names the project (body for
 * POSTs, query for GETs) and is required; with an API key it may be left out (the key's project).
 */
import { ExactDecimal } from './invoice';
import { Type, type Static } from '@sinclair/typebox';
import { CursorParam, EnvironmentName, LimitParam, Timestamp, Uuid } from './common';

export const PayoutStatusName = Type.Union([
  Type.Literal('AwaitingVerification'),
  Type.Literal('Pending'),
  Type.Literal('Completed'),
  Type.Literal('Rejected'),
  Type.Literal('Cancelled'),
]);

export const ProjectIdField = Type.Optional(
  Type.String({
    format: 'uuid',
    description: 'The project. Required with a merchant JWT; with an x-api-key it may be left out (it must then be the key’s project)',
  }),
);

/** The network of a balance or payout (docs/networks.md): `payNetwork`'s names. */
const NETWORK_NAMES = 'bitcoin, litecoin, ethereum, base, arbitrum, optimism, polygon, bsc, tron';

export const PayoutSchema = Type.Object(
  {
    id: Uuid,
    amount: Type.Number({ description: 'Requested amount, in currency' }),
    currency: Type.String({ description: 'Coin code: BTC, LTC, ETH, USDT, USDC, TRX, POL, BNB' }),
    network: Type.String({ description: `The network the payout is sent on (${NETWORK_NAMES}); its (currency, network) balance pays it` }),
    address: Type.String({ description: 'Destination wallet address (checksum-validated; canonical form)' }),
    note: Type.String({ description: 'Merchant’s note, up to 500 characters ("" when none was given)' }),
    status: PayoutStatusName,
    transactionHash: Type.Union([Type.String(), Type.Null()], {
      description:
        'The on-chain transaction that sends the funds: set while a Pending payout is in flight (sent by coinvoice, counting confirmations) and when Completed; null before anything was sent',
    }),
    adminNote: Type.Union([Type.String(), Type.Null()], { description: 'The operator’s reason for a rejection; null unless Rejected' }),
    createdAt: Timestamp,
    environment: Type.Union([Type.Literal('live'), Type.Literal('sandbox')], {
      description: 'The project’s environment: sandbox payouts complete by themselves once verified (simulated transaction hash)',
    }),
    processing: Type.Boolean({
      description: 'true while a Pending payout is being sent (an operator claimed it): it can no longer be cancelled (409 payout_in_flight)',
    }),
    confirmations: Type.Union([Type.Integer({ minimum: 0 }), Type.Null()], {
      description: 'Confirmations of the transaction in flight (while Pending with a transactionHash); null when none was sent by coinvoice',
    }),
    origin: Type.Union([Type.Literal('merchant'), Type.Literal('auto_sweep')], {
      description: 'Who asked for the payout: the merchant (POST /api/payout/request), or the project’s auto-sweep configuration (created already verified)',
    }),
    approvedAt: Type.Union([Timestamp, Type.Null()], {
      description: 'When an operator approved the payout (payouts above the automatic maximum wait for it); null otherwise',
    }),
  },
  { $id: 'Payout' },
);

export const RequestPayoutBody = Type.Object(
  {
    // A decimal string like invoice prices ("0.015"), or a JSON number; either is taken exactly as written.
    amount: Type.Union(
      [
        Type.String({ minLength: 1, maxLength: 64, description: 'Decimal string, e.g. "0.015"' }),
        Type.Number({ exclusiveMinimum: 0, description: 'JSON number, e.g. 0.015' }),
      ],
      { description: 'Amount in currency: > 0, at most 8 decimal places (6 for USDT, USDC and TRX); a decimal string or a number' },
    ),
    currency: Type.String({ maxLength: 16, description: 'Coin code: BTC, LTC, ETH, USDT, USDC, TRX, POL, BNB' }),
    network: Type.Optional(
      Type.String({
        maxLength: 32,
        description: `The network to send on (${NETWORK_NAMES}); default the currency’s default network (BTC bitcoin, LTC litecoin, ETH/USDT/USDC ethereum, TRX tron, POL polygon, BNB bsc). It must carry the currency (400 naming the networks that do), and the (currency, network) balance is debited`,
      }),
    ),
    address: Type.String({
      maxLength: 128,
      description:
        'Destination address on that network with a valid checksum (an EVM address on EVM networks, a Tron address on tron): mainnet for live projects, testnet (tb1…, tltc1…, Sepolia, Shasta) for sandbox projects',
    }),
    projectId: ProjectIdField,
    note: Type.Optional(Type.String({ maxLength: 500, description: 'Up to 500 characters' })),
  },
  { additionalProperties: false },
);
export type RequestPayoutBody = Static<typeof RequestPayoutBody>;

export const VerifyPayoutBody = Type.Object(
  {
    payoutId: Uuid,
    code: Type.String({ maxLength: 32, description: 'The 6-digit code emailed to the merchant, as a string. 5 attempts; a wrong code answers 400 invalid_verification_code' }),
    projectId: ProjectIdField,
  },
  { additionalProperties: false },
);
export type VerifyPayoutBody = Static<typeof VerifyPayoutBody>;

export const ProjectBody = Type.Optional(Type.Object({ projectId: ProjectIdField }, { additionalProperties: false }));
export type ProjectBody = Static<typeof ProjectBody>;

export const ProjectQuery = Type.Object({ projectId: ProjectIdField }, { additionalProperties: false });
export type ProjectQuery = Static<typeof ProjectQuery>;

export const PayoutHistoryQuery = Type.Object(
  { projectId: ProjectIdField, status: Type.Optional(PayoutStatusName), limit: LimitParam, cursor: CursorParam },
  { additionalProperties: false },
);
export type PayoutHistoryQuery = Static<typeof PayoutHistoryQuery>;

export const PayoutHistorySchema = Type.Object({
  items: Type.Array(PayoutSchema, { description: 'Newest first' }),
  nextCursor: Type.Union([Type.String(), Type.Null()], { description: 'Pass as cursor for the next page; null on the last page' }),
});

export const BalanceSchema = Type.Object({
  projectId: Uuid,
  environment: Type.Union([Type.Literal('live'), Type.Literal('sandbox')], { description: 'Sandbox projects have sandbox balances only' }),
  balances: Type.Array(
    Type.Object({
      currency: Type.String(),
      network: Type.String({ description: `The network the money is on (${NETWORK_NAMES}): balances are per (currency, network)` }),
      available: Type.Number({ description: 'Free to pay out' }),
      pending: Type.Number({ description: 'Held by open (AwaitingVerification or Pending) payouts' }),
      total: Type.Number({ description: 'available + pending' }),
      availableDecimal: ExactDecimal('available'),
      pendingDecimal: ExactDecimal('pending'),
      totalDecimal: ExactDecimal('total'),
    }),
    { description: 'One entry per (currency, network) the project has been paid in, by currency then network' },
  ),
});

export const CompletePayoutBody = Type.Object(
  {
    transactionHash: Type.String({
      minLength: 1,
      maxLength: 128,
      description: 'The transaction that sent the funds: 64 hex digits (bitcoin, litecoin, tron) or "0x" + 64 hex digits (EVM networks)',
    }),
  },
  { additionalProperties: false },
);
export type CompletePayoutBody = Static<typeof CompletePayoutBody>;

export const RejectPayoutBody = Type.Object(
  { adminNote: Type.String({ minLength: 1, maxLength: 500, description: 'Why the payout is refused (up to 500 characters); shown to the merchant' }) },
  { additionalProperties: false },
);
export type RejectPayoutBody = Static<typeof RejectPayoutBody>;

export const OperatorPayoutQuery = Type.Object(
  {
    status: Type.Optional(PayoutStatusName),
    environment: Type.Optional(EnvironmentName),
    limit: LimitParam,
    cursor: CursorParam,
  },
  { additionalProperties: false },
);
export type OperatorPayoutQuery = Static<typeof OperatorPayoutQuery>;

export const OperatorPayoutListSchema = Type.Object({
  items: Type.Array(Type.Object({ ...PayoutSchema.properties, projectId: Uuid }), { description: 'Oldest first: the order to work the queue in' }),
  nextCursor: Type.Union([Type.String(), Type.Null()], { description: 'Pass as cursor for the next page; null on the last page' }),
});

export const LedgerCheckSchema = Type.Object(
  {
    violations: Type.Array(
      Type.Object(
        {
          kind: Type.Union(
            [
              Type.Literal('balance_mismatch'),
              Type.Literal('credit_missing'),
              Type.Literal('credit_amount_mismatch'),
              Type.Literal('credit_duplicated'),
              Type.Literal('credit_unbacked'),
            ],
            { description: 'Which invariant failed (docs/accounting.md)' },
          ),
          detail: Type.String({ description: 'What and where: project, environment, currency, invoice, payment, amounts' }),
        },
        { additionalProperties: false },
      ),
      { description: 'Empty when every invariant holds' },
    ),
    balancesChecked: Type.Integer({ minimum: 0 }),
    creditsChecked: Type.Integer({ minimum: 0 }),
  },
  { $id: 'LedgerCheck', additionalProperties: false },
);

export const CreditMissingSchema = Type.Object(
  {
    credited: Type.Array(
      Type.Object(
        {
          invoiceId: Uuid,
          projectId: Uuid,
          paymentId: Type.Union([Type.String(), Type.Null()], { description: 'chain:transaction:output of a late payment; null for the invoice.paid credit' }),
          currency: Type.String({ description: 'The coin credited' }),
          network: Type.String({ description: 'The network of the balance credited' }),
          amount: Type.String({ description: 'Decimal string, the asset’s full precision' }),
        },
        { additionalProperties: false },
      ),
      { description: 'The credits that went in now: each reported by the invoice service and missing from the ledger' },
    ),
    skipped: Type.Array(
      Type.Object({ kind: Type.Literal('credit_missing'), detail: Type.String({ description: 'The credit and why the ledger cannot take it' }) }, { additionalProperties: false }),
      { description: 'Missing credits not credited (a report the ledger cannot take); empty normally' },
    ),
  },
  { $id: 'CreditMissing', additionalProperties: false },
);

