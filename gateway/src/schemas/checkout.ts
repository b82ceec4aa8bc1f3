import { Type } from '@sinclair/typebox';
import { Timestamp, Uuid } from './common';
import { InvoiceStatusName } from './invoice';

/** Only what the paying customer needs: never order ids, descriptions, project or merchant data. */
export const CheckoutSchema = Type.Object(
  {
    id: Uuid,
    status: InvoiceStatusName,
    payCurrency: Type.String(),
    amountExpected: Type.Number(),
    amountReceived: Type.Number(),
    address: Type.String(),
    paymentUri: Type.String({ description: 'BIP21 / EIP-681 style URI a wallet opens (also the QR code)' }),
    priceAmount: Type.Number(),
    priceCurrency: Type.String(),
    createdAt: Timestamp,
    expiredAt: Timestamp,
    isSandbox: Type.Boolean(),
    successUrl: Type.String(),
    cancelUrl: Type.String(),
  },
  { $id: 'Checkout', additionalProperties: false },
);
