/**
 * Rows to protobuf messages and proto enums to domain names. Amounts leave as canonical decimal
 * strings ("0.015", never "0.01500000"); the gateway turns them into JSON numbers.
 */
import { create } from '@bufbuild/protobuf';
import { protoEnumMapping } from '@coinvoice/runtime';
import { environmentFromProto, environmentToProto } from '@coinvoice/domain/environment';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { Decimal, formatPlain } from '@coinvoice/domain/money';
import { BalanceSchema, PayoutSchema, PayoutStatus, type Balance, type Payout } from '@coinvoice/runtime/gen/coinvoice/payout/v1/payout_pb';
import type { PayoutStatusName } from './domain/status';
import type { BalanceRow } from './store/ledger';
import type { PayoutRow } from './store/payouts';

/** Status names and the proto enum, both ways (fromProto: undefined for UNSPECIFIED or an unknown number). */
export const PAYOUT_STATUS = protoEnumMapping<PayoutStatusName, PayoutStatus>({
  AwaitingVerification: PayoutStatus.AWAITING_VERIFICATION,
  Pending: PayoutStatus.PENDING,
  Completed: PayoutStatus.COMPLETED,
  Rejected: PayoutStatus.REJECTED,
  Cancelled: PayoutStatus.CANCELLED,
});

export function payoutToProto(row: PayoutRow): Payout {
  return create(PayoutSchema, {
    id: row.id,
    projectId: row.project_id,
    amount: formatPlain(row.amount),
    currency: row.currency,
    network: row.network,
    address: row.address,
    ...(row.note === null ? {} : { note: row.note }),
    status: PAYOUT_STATUS.toProto(row.status),
    ...(row.transaction_hash === null ? {} : { transactionHash: row.transaction_hash }),
    ...(row.admin_note === null ? {} : { adminNote: row.admin_note }),
    createdAt: timestampFromDate(row.created_at),
    updatedAt: timestampFromDate(row.updated_at),
    environment: environmentToProto(row.environment),
    ...(row.claimed_at === null ? {} : { claimedAt: timestampFromDate(row.claimed_at) }),
    ...(row.confirmations === null ? {} : { confirmations: row.confirmations }),
    origin: row.origin,
    ...(row.approved_at === null ? {} : { approvedAt: timestampFromDate(row.approved_at) }),
    ...(row.signer_refusal === null ? {} : { signerRefusal: row.signer_refusal }),
    ...(row.signer_refused_at === null ? {} : { signerRefusedAt: timestampFromDate(row.signer_refused_at) }),
  });
}

/** total = available + pending, computed exactly. */
export function balanceToProto(row: BalanceRow): Balance {
  const available = new Decimal(row.available);
  const pending = new Decimal(row.pending);
  return create(BalanceSchema, {
    currency: row.currency,
    network: row.network,
    available: formatPlain(available),
    pending: formatPlain(pending),
    total: formatPlain(available.plus(pending)),
  });
}
