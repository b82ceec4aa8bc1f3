// Coin and money rules are shared (payouts validate addresses too): they live in the runtime.
export * from '@coinvoice/runtime/coins/money';
