/**
 * One error model across the system. Services throw `ServiceError`s: a Connect code plus a stable
 * snake_case `code` and optional field violations, carried as a coinvoice.common.v1.ErrorDetail.
 * The gateway turns any ConnectError into RFC 9457 application/problem+json with `httpStatusOf`,
 * the one place where Connect codes map to HTTP statuses.
 */
import { create } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import { ErrorDetailSchema, FieldViolationSchema } from './gen/coinvoice/common/v1/error_pb';

export { Code } from '@connectrpc/connect';

export interface Violation {
  field: string;
  message: string;
}

export function serviceError(code: Code, errorCode: string, message: string, violations: Violation[] = []): ConnectError {
  const detail = create(ErrorDetailSchema, {
    code: errorCode,
    violations: violations.map((v) => create(FieldViolationSchema, v)),
  });
  return new ConnectError(message, code, undefined, [{ desc: ErrorDetailSchema, value: detail }]);
}

export const errors = {
  validation: (violations: Violation[], message = 'the request is invalid') =>
    serviceError(Code.InvalidArgument, 'validation_failed', message, violations),
  notFound: (what: string) => serviceError(Code.NotFound, 'not_found', `${what} not found`),
  conflict: (errorCode: string, message: string) => serviceError(Code.FailedPrecondition, errorCode, message),
  unauthenticated: (errorCode: string, message: string) => serviceError(Code.Unauthenticated, errorCode, message),
  forbidden: (errorCode: string, message: string) => serviceError(Code.PermissionDenied, errorCode, message),
};

export interface ErrorFacts {
  code: string;
  message: string;
  violations: Violation[];
  /** Set when a rate limit refused the call (code rate_limited). */
  rateLimit?: { policy: string; limit: number; windowSeconds: number; retryAfterSeconds: number };
}

/** The stable code and violations of any error (a ConnectError from a service, or anything else). */
export function errorFacts(err: unknown): ErrorFacts & { connectCode: Code } {
  const connectError = ConnectError.from(err);
  const [detail] = connectError.findDetails(ErrorDetailSchema);
  return {
    connectCode: connectError.code,
    code: detail?.code || defaultErrorCode(connectError.code),
    message: connectError.rawMessage,
    violations: detail?.violations.map((v) => ({ field: v.field, message: v.message })) ?? [],
    ...(detail?.rateLimit
      ? {
          rateLimit: {
            policy: detail.rateLimit.policy,
            limit: detail.rateLimit.limit,
            windowSeconds: detail.rateLimit.windowSeconds,
            retryAfterSeconds: detail.rateLimit.retryAfterSeconds,
          },
        }
      : {}),
  };
}

const HTTP_STATUS: Record<Code, number> = {
  [Code.Canceled]: 499,
  [Code.Unknown]: 500,
  [Code.InvalidArgument]: 400,
  [Code.DeadlineExceeded]: 504,
  [Code.NotFound]: 404,
  [Code.AlreadyExists]: 409,
  [Code.PermissionDenied]: 403,
  [Code.ResourceExhausted]: 429,
  [Code.FailedPrecondition]: 409,
  [Code.Aborted]: 409,
  [Code.OutOfRange]: 400,
  [Code.Unimplemented]: 501,
  [Code.Internal]: 500,
  [Code.Unavailable]: 503,
  [Code.DataLoss]: 500,
  [Code.Unauthenticated]: 401,
};

/** Error codes whose HTTP status is more specific than their Connect code's. */
const HTTP_STATUS_BY_ERROR_CODE: Record<string, number> = {
  idempotency_key_reused: 422,
  // A payout's Complete names a transaction that does not pay it (the payout service's check of a Complete).
  transaction_mismatch: 422,
  transaction_failed: 422,
};

export function httpStatusOf(code: Code, errorCode?: string): number {
  return (errorCode && HTTP_STATUS_BY_ERROR_CODE[errorCode]) || HTTP_STATUS[code] || 500;
}

function defaultErrorCode(code: Code): string {
  switch (code) {
    case Code.InvalidArgument:
    case Code.OutOfRange:
      return 'validation_failed';
    case Code.NotFound:
      return 'not_found';
    case Code.Unauthenticated:
      return 'unauthenticated';
    case Code.PermissionDenied:
      return 'forbidden';
    case Code.FailedPrecondition:
    case Code.Aborted:
    case Code.AlreadyExists:
      return 'conflict';
    case Code.ResourceExhausted:
      return 'rate_limited';
    case Code.Unavailable:
    case Code.DeadlineExceeded:
      return 'service_unavailable';
    default:
      return 'internal_error';
  }
}
