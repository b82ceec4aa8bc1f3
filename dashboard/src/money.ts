/**
 * Amounts for people. A fiat price has exactly its currency's minor units ("19.90 EUR", "1500 JPY"):
 * ISO 4217's, as the browser's Intl knows them, the same digits the API accepts for a price.
 */
function minorUnits(currency: string): number {
  try {
    return new Intl.NumberFormat('en', { style: 'currency', currency }).resolvedOptions().maximumFractionDigits ?? 2;
  } catch {
    return 2; // not an ISO currency code: two decimals, as most fiat has
  }
}

/** "19.90 EUR": the amount with its currency's minor units. */
export function formatFiat(amount: number, currency: string): string {
  return `${amount.toFixed(minorUnits(currency))} ${currency}`;
}

/**
 * An exchange rate with sensible precision: at least the currency's minor units and about six
 * significant digits, so 1 BTC = 92105.26 EUR and 1 TRX = 0.236842 EUR (never 12 decimals).
 */
export function formatRate(rate: number, currency: string): string {
  if (!Number.isFinite(rate) || rate === 0) return `${rate} ${currency}`;
  const magnitude = Math.floor(Math.log10(Math.abs(rate)));
  const decimals = Math.min(12, Math.max(minorUnits(currency), 5 - magnitude));
  return `${rate.toFixed(decimals)} ${currency}`;
}
