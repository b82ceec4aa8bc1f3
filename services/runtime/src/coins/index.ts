/**
 * Coins and money shared by the services that handle them (invoice, payout): the currency
 * registry, exact decimal money, and address derivation/validation. A subpath of the runtime
 * (`@coinvoice/runtime/coins`) so processes that never touch an address don't load the crypto.
 */
export * from './money';
export * from './currencies';
export * from './addresses';
