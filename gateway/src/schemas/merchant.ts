import { Type, type Static } from '@sinclair/typebox';
import { EnvironmentName, Timestamp, Uuid } from './common';

const Email = Type.String({ maxLength: 254, description: 'Email address (unique, case-insensitive)' });
const Password = Type.String({ maxLength: 128, description: 'Password, 8 to 128 characters' });
const Name = Type.String({ maxLength: 100 });
const WebhookUrl = Type.String({ maxLength: 2048, description: 'http(s) URL that receives signed webhooks' });

export const RegisterBody = Type.Object({ email: Email, password: Password, name: Name }, { additionalProperties: false });
export const LoginBody = Type.Object({ email: Email, password: Password }, { additionalProperties: false });

export const MerchantSchema = Type.Object(
  { id: Uuid, email: Type.String(), name: Type.String(), isAdmin: Type.Boolean(), createdAt: Timestamp },
  { $id: 'Merchant' },
);

export const SessionSchema = Type.Object({ token: Type.String(), expiresAt: Timestamp });
export const RegisterResponse = Type.Object({ merchant: MerchantSchema, token: Type.String(), expiresAt: Timestamp });

export const ProjectSchema = Type.Object(
  {
    id: Uuid,
    name: Type.String(),
    environment: EnvironmentName,
    webhookUrl: Type.Union([Type.String(), Type.Null()]),
    invoiceLifetimeMinutes: Type.Integer(),
    createdAt: Timestamp,
  },
  { $id: 'Project' },
);
export const CreatedProjectSchema = Type.Object({
  ...ProjectSchema.properties,
  webhookSecret: Type.String({ description: 'whsec_… signing secret; shown only here and on rotation' }),
});

export const CreateProjectBody = Type.Object(
  { name: Name, environment: EnvironmentName, webhookUrl: Type.Optional(WebhookUrl) },
  { additionalProperties: false },
);
export const UpdateProjectBody = Type.Object(
  {
    name: Type.Optional(Name),
    webhookUrl: Type.Optional(Type.Union([WebhookUrl, Type.Null()], { description: 'null or "" removes the webhook' })),
    invoiceLifetimeMinutes: Type.Optional(
      Type.Integer({ minimum: 5, maximum: 10080, description: 'Minutes from creation until a Waiting invoice expires (5 to 10080; default 60)' }),
    ),
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
export type LoginBody = Static<typeof LoginBody>;
export type CreateProjectBody = Static<typeof CreateProjectBody>;
export type UpdateProjectBody = Static<typeof UpdateProjectBody>;
export type CreateApiKeyBody = Static<typeof CreateApiKeyBody>;
