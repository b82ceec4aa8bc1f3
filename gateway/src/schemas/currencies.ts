import { Type } from '@sinclair/typebox';

/** GET /api/currencies: every (asset, network) this deployment takes (docs/networks.md). */
export const CurrenciesSchema = Type.Object(
  {
    currencies: Type.Array(
      Type.Object(
        {
          currency: Type.String({ description: 'The asset: the invoice’s payCurrency (BTC, LTC, ETH, USDT, USDC, TRX, POL, BNB)' }),
          network: Type.String({ description: 'The network: the invoice’s payNetwork (bitcoin, litecoin, ethereum, base, arbitrum, optimism, polygon, bsc, tron)' }),
          name: Type.String({ description: 'The asset as paid on this network, e.g. "Tether USD (BEP-20)"' }),
          networkLabel: Type.String({ description: 'The network as customers know it: "Ethereum", "BNB Smart Chain", "Tron"…' }),
          decimals: Type.Integer({ minimum: 0, description: 'Decimals of invoice and payout amounts (USDT and USDC: 6 on every network)' }),
          baseUnitDecimals: Type.Integer({ minimum: 0, description: 'Decimals of the on-chain unit (18 for USDT and USDC on bsc)' }),
          confirmations: Type.Integer({ minimum: 1, description: 'Confirmations a live invoice on this network needs before it is Paid' }),
          minimumAmount: Type.Number({ description: 'The smallest invoice or payout amount, in currency (written from the exact decimal)' }),
          contract: Type.Union([Type.String(), Type.Null()], { description: 'The token contract on the main chain; null for a network’s own coin' }),
          chainId: Type.Union([Type.Integer(), Type.Null()], { description: 'The EIP-155 chain id of an EVM network; null elsewhere' }),
          watched: Type.Boolean({ description: 'Whether a node watches this network here: live invoices on it are detected. Sandbox invoices work on every listed pair' }),
        },
        { additionalProperties: false },
      ),
      { description: 'Assets in registry order, each asset’s networks in registry order' },
    ),
  },
  { $id: 'Currencies', additionalProperties: false },
);
