import { Type } from '@sinclair/typebox';
import { Timestamp, Uuid } from './common';
import { ExactDecimal, InvoiceStatusName } from './invoice';

/** Only what the paying customer needs: never order ids, descriptions, project or merchant data. */
export const CheckoutSchema = Type.Object(
  {
    id: Uuid,
    status: InvoiceStatusName,
    payCurrency: Type.String(),
    payNetwork: Type.String({ description: 'The network to pay on: the page names it and warns to send only on it' }),
    payNetworkLabel: Type.String({ description: 'The network as customers know it: "Ethereum", "Base", "BNB Smart Chain", "Tron"…' }),
    tokenContract: Type.Union([Type.String(), Type.Null()], {
      description: 'The token contract a stablecoin is sent with (null for a network’s own coin, or a test chain without the issuer’s contract)',
    }),
    amountExpected: Type.Number(),
    amountExpectedDecimal: ExactDecimal('amountExpected'),
    amountReceived: Type.Number(),
    amountReceivedDecimal: ExactDecimal('amountReceived'),
    address: Type.String(),
    paymentUri: Type.String({ description: 'BIP21 / EIP-681 style URI a wallet opens (also the QR code)' }),
    priceAmount: Type.Number(),
    priceCurrency: Type.String(),
    createdAt: Timestamp,
    expiredAt: Timestamp,
    isSandbox: Type.Boolean(),
    successUrl: Type.String(),
    cancelUrl: Type.String(),
    confirmations: Type.Optional(Type.Integer({ minimum: 0, description: 'Live only: the fewest confirmations among the payments counting' })),
    confirmationsRequired: Type.Optional(Type.Integer({ minimum: 1, description: 'Live only' })),
    amountRemaining: Type.Optional(Type.Number({ description: 'Live only: what is still missing, 0 once covered' })),
    amountRemainingDecimal: Type.Optional(ExactDecimal('Live only: amountRemaining')),
  },
  { $id: 'Checkout', additionalProperties: false },
);
