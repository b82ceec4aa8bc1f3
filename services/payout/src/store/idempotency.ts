/**
 * `idempotency_keys`: RequestPayout's Idempotency-Key, per project, 24 h; the row names the
 * payout it created in `payout_id`. How keys are claimed, replayed and expired: the runtime's
 * IdempotencyKeys.
 */
import { IdempotencyKeys } from '@coinvoice/runtime';

export const payoutIdempotencyKeys = new IdempotencyKeys('payout', 'payouts');
