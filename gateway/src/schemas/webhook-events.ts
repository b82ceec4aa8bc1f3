/**
 * The bodies of the webhooks the notifier sends, documented in the OpenAPI `webhooks` section.
 * The notifier's payload table (services/notifier/src/domain/payloads.ts) produces them; the
 * webhook tests validate real deliveries against these schemas, so the two cannot drift.
 */
import { Type, type TSchema } from '@sinclair/typebox';

const Environment = Type.Union([Type.Literal('live'), Type.Literal('sandbox')]);
const Uuid = Type.String({ format: 'uuid' });

export const InvoicePaidWebhook = Type.Object(
  {
    invoiceId: Uuid,
    orderId: Type.String({ description: 'The invoice’s orderId ("" when none was given)' }),
    status: Type.Literal('Paid'),
    amount: Type.Number({ description: 'The amount received, in currency' }),
    currency: Type.String({ description: 'The invoice’s payCurrency' }),
    environment: Environment,
  },
  { additionalProperties: false },
);

export const InvoiceExpiredWebhook = Type.Object(
  {
    invoiceId: Uuid,
    orderId: Type.String(),
    status: Type.Literal('Expired'),
    currency: Type.String(),
    environment: Environment,
  },
  { additionalProperties: false },
);

export const WEBHOOK_EVENTS: Record<string, { summary: string; body: TSchema }> = {
  'invoice.paid': { summary: 'An invoice was paid (in the sandbox: a simulated payment)', body: InvoicePaidWebhook },
  'invoice.expired': { summary: 'A Waiting invoice passed its expiredAt unpaid', body: InvoiceExpiredWebhook },
};
