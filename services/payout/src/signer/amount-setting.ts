/** A limit stated as an amount of a coin in its usual unit, read by the signer's settings. */
import type { Setting } from '@coinvoice/runtime';
import type { CryptoCode } from '@coinvoice/chains/coin';
import { cryptoCurrency } from '@coinvoice/chains/currencies';
import { parsePositiveDecimal, toBaseUnits } from '@coinvoice/domain/money';

/** An amount of `asset` in its usual unit (e.g. `2.5` ETH), held as base units. */
export function assetAmountSetting(asset: CryptoCode, devDefault: string): Setting<bigint> {
  const decimals = cryptoCurrency(asset).baseUnitDecimals;
  return {
    expected: `a positive amount of ${asset} such as ${devDefault} (at most ${decimals} decimals)`,
    devDefault,
    parse: (raw) => {
      const amount = parsePositiveDecimal(raw.trim(), decimals);
      return amount.ok ? toBaseUnits(amount.value, decimals) : undefined;
    },
  };
}

