/** The invoice service's pure domain: money, currencies, rates and quotes, addresses, status, request rules. No I/O. */
export * from './money';
export * from './currencies';
export * from './rates';
export * from './addresses';
export * from './status';
export * from './payments';
export * from './requests';
export * from './live-rates';
