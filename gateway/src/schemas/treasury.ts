/**
 * The treasury at the edge (docs/treasury.md): a project's auto-sweep configuration
 * (merchant), and the operators' sweep tasks, Treasury page and pause switch. Amounts are exact
 * decimal strings: thresholds, balances and sums are not the seed's payout numbers.
 */
import { Type, type Static } from '@sinclair/typebox';
import { CursorParam, LimitParam, patternString, Timestamp, Uuid } from './common';
import { OperatorPayoutListSchema } from './payouts';

const DecimalString = (description: string) => patternString('^[0-9]+(\\.[0-9]+)?$', 'must be a plain decimal number such as "10.50"', { description });

export const AutoSweepEntrySchema = Type.Object(
  {
    currency: Type.String({ description: 'Payout currency: BTC, LTC, ETH, USDT, USDC, TRX, POL or BNB' }),
    network: Type.String({ description: 'The network of the balance swept and of the payout (ethereum, bsc, tron, …): one rule per (currency, network)' }),
    address: Type.String({ description: 'Destination, canonical form (checksum-validated for that network, mainnet or testnet as the project)' }),
    threshold: DecimalString('Available balance (decimal string) at which the whole balance is paid out to the address'),
  },
  { additionalProperties: false },
);

export const AutoSweepSchema = Type.Object(
  {
    projectId: Uuid,
    environment: Type.Union([Type.Literal('live'), Type.Literal('sandbox')], {
      description: 'Sandbox projects keep a configuration but are never swept',
    }),
    entries: Type.Array(AutoSweepEntrySchema, { description: 'The active rules, by currency then network' }),
    pendingChange: Type.Union(
      [
        Type.Object(
          {
            entries: Type.Array(AutoSweepEntrySchema, { description: 'New or changed destinations the emailed code activates' }),
            expiresAt: Timestamp,
            attemptsLeft: Type.Integer({ minimum: 0 }),
          },
          { additionalProperties: false },
        ),
        Type.Null(),
      ],
      { description: 'A change awaiting the 6-digit code emailed to the merchant (POST …/auto-sweep/verify); null when none' },
    ),
  },
  { $id: 'AutoSweep', additionalProperties: false },
);

export const PutAutoSweepBody = Type.Object(
  {
    entries: Type.Array(
      Type.Object(
        {
          currency: Type.String({ maxLength: 16, description: 'BTC, LTC, ETH, USDT, USDC, TRX, POL or BNB; one entry per (currency, network)' }),
          network: Type.Optional(
            Type.String({
              maxLength: 32,
              description: 'The network whose balance is swept (ethereum, bsc, tron, …); default the currency’s default network. It must carry the currency',
            }),
          ),
          address: Type.String({ maxLength: 128, description: 'Destination of that coin on that network (mainnet for live, testnet for sandbox)' }),
          threshold: Type.Union([Type.String({ minLength: 1, maxLength: 64 }), Type.Number({ exclusiveMinimum: 0 })], {
            description: 'Decimal > 0 with at most the coin’s payout decimals (8; 6 for USDT, USDC, TRX); a string or a number taken exactly as written',
          }),
        },
        { additionalProperties: false },
      ),
      { maxItems: 32, description: 'The whole configuration: (currency, network) pairs left out are removed' },
    ),
  },
  { additionalProperties: false },
);
export type PutAutoSweepBody = Static<typeof PutAutoSweepBody>;

export const VerifyAutoSweepBody = Type.Object(
  { code: Type.String({ maxLength: 32, description: 'The 6-digit code emailed to the merchant. 5 attempts; a wrong code answers 400 invalid_verification_code' }) },
  { additionalProperties: false },
);
export type VerifyAutoSweepBody = Static<typeof VerifyAutoSweepBody>;

export const SweepTaskStatus = Type.Union([Type.Literal('pending'), Type.Literal('sent'), Type.Literal('confirmed'), Type.Literal('skipped_dust')]);

export const SweepTaskQuery = Type.Object(
  {
    invoiceId: Type.Optional(Type.String({ format: 'uuid', description: 'Only the tasks of this invoice' })),
    status: Type.Optional(SweepTaskStatus),
    network: Type.Optional(patternString('^[a-z][a-z0-9-]{0,31}$', 'must be a network name such as ethereum', { description: 'e.g. ethereum' })),
    limit: LimitParam,
    cursor: CursorParam,
  },
  { additionalProperties: false },
);
export type SweepTaskQuery = Static<typeof SweepTaskQuery>;

export const SweepTaskSchema = Type.Object(
  {
    id: Type.String({ description: 'The task id' }),
    paymentId: Type.String({ description: 'The deposit: "<chain>:<transaction>:<output>"' }),
    invoiceId: Uuid,
    projectId: Uuid,
    network: Type.String(),
    asset: Type.String(),
    depositAddress: Type.String(),
    amount: DecimalString('The deposit, in the asset (decimal string)'),
    status: SweepTaskStatus,
    skipReason: Type.Union([Type.String(), Type.Null()], { description: 'Why a dust deposit is not swept; null otherwise' }),
    transactionHash: Type.Union([Type.String(), Type.Null()], { description: 'The sweep transaction once sent' }),
    createdAt: Timestamp,
    updatedAt: Timestamp,
  },
  { $id: 'SweepTask', additionalProperties: false },
);

export const SweepTaskListSchema = Type.Object({
  items: Type.Array(SweepTaskSchema, { description: 'Newest first' }),
  nextCursor: Type.Union([Type.String(), Type.Null()], { description: 'Pass as cursor for the next page; null on the last page' }),
});

const TreasuryPayout = OperatorPayoutListSchema.properties.items.items;

export const TreasuryNetworkSchema = Type.Object(
  {
    network: Type.String(),
    address: Type.Union([Type.String(), Type.Null()], { description: 'The treasury (hot) address; null until the network’s processor has run' }),
    paused: Type.Boolean({ description: 'Paused: the processor starts no new transfer' }),
    pausedBy: Type.Union([Type.String(), Type.Null()], { description: 'The operator who paused it' }),
    balances: Type.Array(
      Type.Object({
        asset: Type.String(),
        amount: Type.Union([DecimalString('Read from the chain node now'), Type.Null()]),
        unavailableReason: Type.Union([Type.String(), Type.Null()], { description: 'Why amount is null: no node configured, no address yet, or the node could not be asked' }),
      }),
    ),
    pendingSweeps: Type.Array(
      Type.Object({ asset: Type.String(), count: Type.Integer({ minimum: 0 }), amount: DecimalString('Sum of the deposits awaiting sweep') }),
      { description: 'Deposits awaiting sweep, per asset' },
    ),
    inFlight: Type.Array(TreasuryPayout, { description: 'Live payouts sent and not yet final (Pending with a transactionHash), oldest first' }),
    approvalQueue: Type.Array(TreasuryPayout, {
      description: 'Live verified Pending payouts above PAYOUT_AUTO_MAX_<ASSET>, neither approved nor claimed, oldest first: approve them with POST /api/admin/payouts/{id}/approve',
    }),
    refusedBySigner: Type.Array(
      Type.Object({
        ...TreasuryPayout.properties,
        signerRefusal: Type.String({ description: 'Why the signer refused to sign it, e.g. above SIGNER_MAX_PAYOUT_<ASSET> or the day’s limit' }),
        signerRefusedAt: Timestamp,
      }),
      {
        description:
          'Live Pending payouts the signer refused to sign, oldest refusal first (docs/treasury.md#signer-refusals): unsent until an operator rejects them (POST /api/admin/payouts/{id}/reject) or the signer’s limits allow them; signed later, they leave this list',
      },
    ),
  },
  { $id: 'TreasuryNetwork' },
);

export const TreasurySchema = Type.Object({ networks: Type.Array(TreasuryNetworkSchema) });

export const NetworkParams = Type.Object({ network: patternString('^[a-z][a-z0-9-]{0,31}$', 'must be a network name such as ethereum', { description: 'e.g. ethereum' }) }, { additionalProperties: false });
