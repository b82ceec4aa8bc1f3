/** The payout service's pure domain: status transitions, the verification code, request rules. No I/O. */
export * from './status';
export * from './code';
export * from './requests';
