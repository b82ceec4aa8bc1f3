/** The merchant dashboard API (/api/merchant/*): accounts, projects, API keys. Bearer JWT. */
import type { FastifyInstance } from 'fastify';
import { Type } from '@sinclair/typebox';
import { writtenDecimal } from '../exact-json';
import type { AuthService } from '@coinvoice/runtime/gen/coinvoice/auth/v1/auth_pb';
import type { Client } from '@connectrpc/connect';
import { merchantPrincipal, type authHooks } from '../auth/hooks';
import { noStore } from '../no-store';
import { apiKeyJson, environmentOf, isoTime, isoTimeOrNull, merchantJson, projectJson } from '../json';
import {
  ApiKeyParams,
  ApiKeySchema,
  CreateApiKeyBody,
  CreatedApiKeySchema,
  CreatedProjectSchema,
  ChangePasswordBody,
  ConfirmRegistrationBody,
  ConfirmRegistrationResponse,
  CreateProjectBody,
  LoginBody,
  VerifyEmailBody,
  MerchantSchema,
  ProjectParams,
  ProjectSchema,
  RegisterBody,
  RegisterResponse,
  NoQuery,
  RotatedWebhookSecretSchema,
  RotateWebhookSecretBody,
  SessionSchema,
  UpdateProjectBody,
} from '../schemas/merchant';

export interface MerchantRouteDeps {
  auth: Client<typeof AuthService>;
  hooks: ReturnType<typeof authHooks>;
}

const bearer = [{ bearerAuth: [] }];

export function merchantRoutes(app: FastifyInstance, { auth, hooks }: MerchantRouteDeps): void {
  app.post<{ Body: RegisterBody }>('/api/merchant/register', {
    schema: {
      tags: ['dashboard'],
      summary: 'Start creating a merchant account: a code is emailed to the address',
      description:
        'Answers 202 alike whether or not the email has an account, so nobody learns which emails are registered. ' +
        'A new email receives a 6-digit code to confirm with POST /api/merchant/register/confirm; a registered one ' +
        'receives a note that someone tried to sign up. Registering again replaces the code.',
      body: RegisterBody,
      response: { 202: RegisterResponse },
    },
    handler: async (req, reply) => {
      const res = await auth.registerMerchant({ ...req.body, clientIp: req.ip });
      return reply.code(202).send({ email: res.email, codeExpiresAt: isoTime(res.codeExpiresAt) });
    },
  });

  app.post<{ Body: ConfirmRegistrationBody }>('/api/merchant/register/confirm', {
    schema: {
      tags: ['dashboard'],
      summary: 'Create the account with the emailed code and the password you registered with; signs in (the email is verified)',
      description:
        'A wrong code or password, an email without a pending sign-up and a registered email all answer 400 invalid_verification_code ' +
        '(5 attempts per code); a code too old or out of attempts answers 409 verification_code_expired (register again). ' +
        'Registering the email again replaces the pending sign-up: its code and password.',
      body: ConfirmRegistrationBody,
      response: { 201: ConfirmRegistrationResponse },
    },
    onSend: noStore,
    handler: async (req, reply) => {
      const res = await auth.confirmRegistration({ ...req.body, clientIp: req.ip });
      return reply.code(201).send({ merchant: merchantJson(res.merchant), token: res.token, expiresAt: isoTime(res.expiresAt) });
    },
  });

  app.post<{ Body: LoginBody }>('/api/merchant/login', {
    schema: { tags: ['dashboard'], summary: 'Log in and get a session token', body: LoginBody, response: { 200: SessionSchema } },
    onSend: noStore,
    handler: async (req) => {
      const res = await auth.login({ ...req.body, clientIp: req.ip });
      return { token: res.token, expiresAt: isoTime(res.expiresAt) };
    },
  });

  app.post<{ Body: VerifyEmailBody }>('/api/merchant/email/verify', {
    schema: {
      tags: ['dashboard'],
      summary: 'Confirm your email address with the emailed code (needed for live API keys and live payouts)',
      description: 'A wrong code answers 400 invalid_verification_code (5 attempts per code); no valid code pending answers 409 verification_code_expired.',
      security: bearer,
      body: VerifyEmailBody,
      response: { 200: MerchantSchema },
    },
    onRequest: hooks.merchant,
    handler: async (req) => merchantJson((await auth.verifyEmail({ merchantId: merchantPrincipal(req).merchantId, code: req.body.code })).merchant),
  });

  app.post('/api/merchant/email/verification', {
    schema: {
      tags: ['dashboard'],
      summary: 'Email a new verification code (the previous one stops working)',
      security: bearer,
      response: { 202: Type.Object({}) },
    },
    onRequest: hooks.merchant,
    handler: async (req, reply) => {
      await auth.resendEmailVerification({ merchantId: merchantPrincipal(req).merchantId });
      return reply.code(202).send({});
    },
  });

  app.post('/api/merchant/logout', {
    schema: { tags: ['dashboard'], summary: 'End every session of your account (each token answers 401 within a second)', security: bearer, response: { 204: Type.Null() } },
    onRequest: hooks.merchant,
    handler: async (req, reply) => {
      await auth.logout({ merchantId: merchantPrincipal(req).merchantId });
      return reply.code(204).send();
    },
  });

  app.post<{ Body: ChangePasswordBody }>('/api/merchant/password', {
    schema: {
      tags: ['dashboard'],
      summary: 'Change your password: every older session ends; a new token is returned',
      security: bearer,
      body: ChangePasswordBody,
      response: { 200: SessionSchema },
    },
    onRequest: hooks.merchant,
    onSend: noStore,
    handler: async (req) => {
      const res = await auth.changePassword({ merchantId: merchantPrincipal(req).merchantId, ...req.body });
      return { token: res.token, expiresAt: isoTime(res.expiresAt) };
    },
  });

  app.get('/api/merchant/me', {
    schema: { tags: ['dashboard'], summary: 'The logged-in merchant', security: bearer, response: { 200: MerchantSchema } },
    onRequest: hooks.merchant,
    handler: async (req) => merchantJson((await auth.getMerchant({ merchantId: merchantPrincipal(req).merchantId })).merchant),
  });

  app.post<{ Body: CreateProjectBody }>('/api/merchant/projects', {
    schema: {
      tags: ['dashboard'],
      summary: 'Create a project (live or sandbox); the webhook secret is shown once',
      description:
        'An account holds at most MAX_PROJECTS_PER_MERCHANT projects (default 100; projects are not deleted): one more answers 409 too_many_projects.',
      security: bearer,
      body: CreateProjectBody,
      response: { 201: CreatedProjectSchema },
    },
    onRequest: hooks.merchant,
    onSend: noStore,
    handler: async (req, reply) => {
      const res = await auth.createProject({
        merchantId: merchantPrincipal(req).merchantId,
        name: req.body.name,
        environment: environmentOf(req.body.environment),
        webhookUrl: req.body.webhookUrl,
        paymentTolerancePercent: percentField(req.body, 'paymentTolerancePercent'),
      });
      return reply.code(201).send({ ...projectJson(res.project), webhookSecret: res.webhookSecret });
    },
  });

  app.get('/api/merchant/projects', {
    schema: { tags: ['dashboard'], summary: 'List your projects', security: bearer, response: { 200: Type.Object({ items: Type.Array(ProjectSchema) }) } },
    onRequest: hooks.merchant,
    handler: async (req) => {
      const res = await auth.listProjects({ merchantId: merchantPrincipal(req).merchantId });
      return { items: res.projects.map(projectJson) };
    },
  });

  app.get<{ Params: { id: string } }>('/api/merchant/projects/:id', {
    schema: { tags: ['dashboard'], summary: 'Get a project', security: bearer, params: ProjectParams, response: { 200: ProjectSchema } },
    onRequest: hooks.merchant,
    handler: async (req) => {
      const res = await auth.getProject({ merchantId: merchantPrincipal(req).merchantId, projectId: req.params.id });
      return projectJson(res.project);
    },
  });

  app.patch<{ Params: { id: string }; Body: UpdateProjectBody }>('/api/merchant/projects/:id', {
    schema: {
      tags: ['dashboard'],
      summary: 'Change a project’s name, webhook URL or invoice lifetime',
      security: bearer,
      params: ProjectParams,
      body: UpdateProjectBody,
      response: { 200: ProjectSchema },
    },
    onRequest: hooks.merchant,
    handler: async (req) => {
      const { name, webhookUrl, invoiceLifetimeMinutes } = req.body;
      const res = await auth.updateProject({
        merchantId: merchantPrincipal(req).merchantId,
        projectId: req.params.id,
        name,
        // null and "" both remove the webhook (the proto's empty string).
        webhookUrl: webhookUrl === null ? '' : webhookUrl,
        invoiceLifetimeMinutes,
        paymentTolerancePercent: percentField(req.body, 'paymentTolerancePercent'),
      });
      return projectJson(res.project);
    },
  });

  app.post<{ Params: { id: string }; Body: RotateWebhookSecretBody }>('/api/merchant/projects/:id/webhook-secret/rotate', {
    schema: {
      tags: ['dashboard'],
      summary: 'Replace the project’s webhook signing secret; the new one is shown once, and the replaced one keeps signing next to it for a while (default a day)',
      security: bearer,
      params: ProjectParams,
      querystring: NoQuery,
      body: RotateWebhookSecretBody,
      response: { 200: RotatedWebhookSecretSchema },
    },
    onRequest: hooks.merchant,
    onSend: noStore,
    handler: async (req) => {
      const res = await auth.rotateWebhookSecret({
        merchantId: merchantPrincipal(req).merchantId,
        projectId: req.params.id,
        previousSecretExpiresInMinutes: req.body?.previousSecretExpiresInMinutes,
      });
      return { webhookSecret: res.webhookSecret, previousSecretExpiresAt: isoTimeOrNull(res.previousSecretExpiresAt) };
    },
  });

  app.delete<{ Params: { id: string } }>('/api/merchant/projects/:id/webhook-secret/previous', {
    schema: {
      tags: ['dashboard'],
      summary: 'Stop every secret rotations replaced from signing webhooks, now (the current secret alone signs from the next attempt on)',
      security: bearer,
      params: ProjectParams,
      querystring: NoQuery,
      response: { 200: ProjectSchema },
    },
    onRequest: hooks.merchant,
    handler: async (req) => {
      const res = await auth.endPreviousWebhookSecret({ merchantId: merchantPrincipal(req).merchantId, projectId: req.params.id });
      return projectJson(res.project);
    },
  });

  app.post<{ Params: { id: string }; Body: { name: string } }>('/api/merchant/projects/:id/api-keys', {
    schema: {
      tags: ['dashboard'],
      summary: 'Create an API key for the project; the key is shown once',
      description:
        'A project holds at most MAX_ACTIVE_API_KEYS_PER_PROJECT unrevoked keys (default 20): one more answers 409 too_many_api_keys (revoke one first).',
      security: bearer,
      params: ProjectParams,
      body: CreateApiKeyBody,
      response: { 201: CreatedApiKeySchema },
    },
    onRequest: hooks.merchant,
    onSend: noStore,
    handler: async (req, reply) => {
      const res = await auth.createApiKey({ merchantId: merchantPrincipal(req).merchantId, projectId: req.params.id, name: req.body.name });
      const meta = apiKeyJson(res.apiKey);
      return reply.code(201).send({ id: meta.id, name: meta.name, key: res.key, prefix: meta.prefix, createdAt: meta.createdAt });
    },
  });

  app.get<{ Params: { id: string } }>('/api/merchant/projects/:id/api-keys', {
    schema: {
      tags: ['dashboard'],
      summary: 'List the project’s API keys (never the keys themselves)',
      security: bearer,
      params: ProjectParams,
      response: { 200: Type.Object({ items: Type.Array(ApiKeySchema) }) },
    },
    onRequest: hooks.merchant,
    handler: async (req) => {
      const res = await auth.listApiKeys({ merchantId: merchantPrincipal(req).merchantId, projectId: req.params.id });
      return { items: res.apiKeys.map(apiKeyJson) };
    },
  });

  app.delete<{ Params: { id: string; keyId: string } }>('/api/merchant/projects/:id/api-keys/:keyId', {
    schema: { tags: ['dashboard'], summary: 'Revoke an API key, at once', security: bearer, params: ApiKeyParams, response: { 204: Type.Null() } },
    onRequest: hooks.merchant,
    handler: async (req, reply) => {
      await auth.revokeApiKey({ merchantId: merchantPrincipal(req).merchantId, projectId: req.params.id, keyId: req.params.keyId });
      return reply.code(204).send();
    },
  });
}

/** A JSON number percent, as written (`writtenDecimal`), as the decimal string auth validates (at most 2 decimals). */
function percentField(body: object, key: string): string | undefined {
  return (body as Record<string, unknown>)[key] === undefined ? undefined : writtenDecimal(body, key);
}
