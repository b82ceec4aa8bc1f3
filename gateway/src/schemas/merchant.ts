import { Type, type Static } from '@sinclair/typebox';
import { EnvironmentName, patternString, Timestamp, Uuid } from './common';

const Email = Type.String({ maxLength: 254, description: 'Email address (unique, case-insensitive)' });
const Password = Type.String({ maxLength: 128, description: 'Password, 8 to 128 characters' });
const Name = Type.String({ maxLength: 100 });
const WebhookUrl = Type.String({ maxLength: 2048, description: 'http(s) URL that receives signed webhooks' });

export const RegisterBody = Type.Object({ email: Email, password: Password, name: Name }, { additionalProperties: false });
export const LoginBody = Type.Object({ email: Email, password: Password }, { additionalProperties: false });

export const MerchantSchema = Type.Object(
  {
    id: Uuid,
    email: Type.String(),
    name: Type.String(),
    isAdmin: Type.Boolean(),
    createdAt: Timestamp,
    emailVerified: Type.Boolean({ description: 'The email address is confirmed (needed for live API keys and live payouts)' }),
  },
  { $id: 'Merchant' },
);

export const VerifyEmailBody = Type.Object(
  { code: patternString('^[0-9]{6}$', 'must be the 6 digits of the emailed code', { description: 'The 6-digit code emailed at registration (or by the resend route)' }) },
  { additionalProperties: false },
);

export const ChangePasswordBody = Type.Object({ currentPassword: Password, newPassword: Password }, { additionalProperties: false });

export const SessionSchema = Type.Object({ token: Type.String(), expiresAt: Timestamp });
/** The same for a new and a registered email (issue 27): the account comes with the emailed code. */
export const RegisterResponse = Type.Object({
  email: Type.String({ description: 'The email, normalised (trimmed, lower-case): where the code was sent' }),
  codeExpiresAt: Timestamp,
});
export const ConfirmRegistrationBody = Type.Object(
  {
    email: Email,
    code: patternString('^[0-9]{6}$', 'must be the 6 digits of the emailed code', { description: 'The 6-digit code emailed by POST /api/merchant/register' }),
    password: Type.String({ maxLength: 128, description: 'The password given to POST /api/merchant/register' }),
  },
  { additionalProperties: false },
);
export const ConfirmRegistrationResponse = Type.Object({ merchant: MerchantSchema, token: Type.String(), expiresAt: Timestamp });

export const ProjectSchema = Type.Object(
  {
    id: Uuid,
    name: Type.String(),
    environment: EnvironmentName,
    webhookUrl: Type.Union([Type.String(), Type.Null()]),
    invoiceLifetimeMinutes: Type.Integer(),
    paymentTolerancePercent: Type.Number({ description: 'Live invoices: a payment this many percent below amountExpected still pays (0 to 5)' }),
    previousWebhookSecretExpiresAt: Type.Union([Timestamp, Type.Null()], {
      description: 'Until when the last of the secrets rotations replaced still signs webhooks next to the current one (more v1 signatures); null when none does',
    }),
    createdAt: Timestamp,
  },
  { $id: 'Project' },
);
export const CreatedProjectSchema = Type.Object({
  ...ProjectSchema.properties,
  webhookSecret: Type.String({ description: 'whsec_… signing secret; shown only here and on rotation' }),
});

const PaymentTolerancePercent = Type.Number({
  minimum: 0,
  maximum: 5,
  description: 'Percent below amountExpected a live payment may fall short and still pay the invoice (0 to 5, at most 2 decimals; default 0). Fixed on each invoice at creation.',
});

/** A route that takes no query parameters refuses them rather than ignoring one sent by mistake. */
export const NoQuery = Type.Object({}, { additionalProperties: false });

export const RotateWebhookSecretBody = Type.Optional(
  Type.Object(
    {
      previousSecretExpiresInMinutes: Type.Optional(
        Type.Integer({
          minimum: 0,
          maximum: 1440,
          description:
            'How long the replaced secret keeps signing webhooks next to the new one, so your receiver can switch without a failed delivery (0 to 1440 minutes; default 1440). 0: it stops at once, for a secret that leaked. Secrets replaced earlier keep their own expiry (at most three sign next to the current one); DELETE …/webhook-secret/previous stops them all.',
        }),
      ),
    },
    { additionalProperties: false },
  ),
);
export type RotateWebhookSecretBody = Static<typeof RotateWebhookSecretBody>;
export const RotatedWebhookSecretSchema = Type.Object({
  webhookSecret: Type.String({ description: 'The new whsec_… signing secret; shown only here' }),
  previousSecretExpiresAt: Type.Union([Timestamp, Type.Null()], { description: 'Until when the replaced secret signs too; null when it stopped at once' }),
});

export const CreateProjectBody = Type.Object(
  { name: Name, environment: EnvironmentName, webhookUrl: Type.Optional(WebhookUrl), paymentTolerancePercent: Type.Optional(PaymentTolerancePercent) },
  { additionalProperties: false },
);
export const UpdateProjectBody = Type.Object(
  {
    name: Type.Optional(Name),
    webhookUrl: Type.Optional(Type.Union([WebhookUrl, Type.Null()], { description: 'null or "" removes the webhook' })),
    invoiceLifetimeMinutes: Type.Optional(
      Type.Integer({ minimum: 5, maximum: 10080, description: 'Minutes from creation until a Waiting invoice expires (5 to 10080; default 60)' }),
    ),
    paymentTolerancePercent: Type.Optional(PaymentTolerancePercent),
  },
  { additionalProperties: false, minProperties: 1 },
);

export const ApiKeySchema = Type.Object(
  {
    id: Uuid,
    name: Type.String(),
    prefix: Type.String({ description: 'The first characters of the key, to recognise it' }),
    createdAt: Timestamp,
    revokedAt: Type.Union([Timestamp, Type.Null()]),
    lastUsedAt: Type.Union([Timestamp, Type.Null()]),
  },
  { $id: 'ApiKey' },
);
export const CreatedApiKeySchema = Type.Object({
  id: Uuid,
  name: Type.String(),
  key: Type.String({ description: 'The secret key: shown only in this response' }),
  prefix: Type.String(),
  createdAt: Timestamp,
});
export const CreateApiKeyBody = Type.Object({ name: Name }, { additionalProperties: false });

export const ProjectParams = Type.Object({ id: Uuid }, { additionalProperties: false });
export const ApiKeyParams = Type.Object({ id: Uuid, keyId: Uuid }, { additionalProperties: false });

export type RegisterBody = Static<typeof RegisterBody>;
export type ConfirmRegistrationBody = Static<typeof ConfirmRegistrationBody>;
export type LoginBody = Static<typeof LoginBody>;
export type VerifyEmailBody = Static<typeof VerifyEmailBody>;
export type ChangePasswordBody = Static<typeof ChangePasswordBody>;
export type CreateProjectBody = Static<typeof CreateProjectBody>;
export type UpdateProjectBody = Static<typeof UpdateProjectBody>;
export type CreateApiKeyBody = Static<typeof CreateApiKeyBody>;
