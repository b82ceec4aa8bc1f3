/**
 * The treasury's routes (docs/treasury.md): a project's auto-sweep configuration
 * (merchant JWT; the project must be the merchant's, else 404 as for every project route), and the
 * operators' sweep tasks, Treasury page and pause switch (admin JWT, the token verified again by
 * the payout service).
 */
import type { AuthService } from '@coinvoice/runtime/gen/coinvoice/auth/v1/auth_pb';
import type { AutoSweepConfig, PayoutService, TreasuryNetwork } from '@coinvoice/runtime/gen/coinvoice/payout/v1/payout_pb';
import type { Client } from '@connectrpc/connect';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { merchantPrincipal, type authHooks } from '../auth/hooks';
import { environmentName, isoTime } from '../json';
import { parseLimit } from '../schemas/common';
import { ProjectParams } from '../schemas/merchant';
import {
  AutoSweepSchema,
  NetworkParams,
  PutAutoSweepBody,
  SweepTaskListSchema,
  SweepTaskQuery,
  TreasuryNetworkSchema,
  TreasurySchema,
  VerifyAutoSweepBody,
} from '../schemas/treasury';
import { amountDecimal, payoutJson } from './payouts';

export interface TreasuryRouteDeps {
  auth: Client<typeof AuthService>;
  payouts: Client<typeof PayoutService>;
  hooks: ReturnType<typeof authHooks>;
}

const bearer = [{ bearerAuth: [] }];

export function autoSweepJson(config: AutoSweepConfig | undefined) {
  if (!config) throw new Error('auto-sweep configuration missing from a service response');
  const entry = (e: { currency: string; network: string; address: string; threshold: string }) => ({ currency: e.currency, network: e.network, address: e.address, threshold: e.threshold });
  return {
    projectId: config.projectId,
    environment: environmentName(config.environment),
    entries: config.entries.map(entry),
    pendingChange: config.pendingChange
      ? { entries: config.pendingChange.entries.map(entry), expiresAt: isoTime(config.pendingChange.expiresAt), attemptsLeft: config.pendingChange.attemptsLeft }
      : null,
  };
}

function treasuryNetworkJson(n: TreasuryNetwork | undefined) {
  if (!n) throw new Error('treasury network missing from a service response');
  const withProject = (p: Parameters<typeof payoutJson>[0]) => ({ ...payoutJson(p), projectId: p!.projectId });
  return {
    network: n.network,
    address: n.address ?? null,
    paused: n.paused,
    pausedBy: n.pausedBy ?? null,
    balances: n.balances.map((b) => ({ asset: b.asset, amount: b.amount ?? null, unavailableReason: b.unavailableReason ?? null })),
    pendingSweeps: n.pendingSweeps.map((s) => ({ asset: s.asset, count: Number(s.count), amount: s.amount })),
    inFlight: n.inFlight.map(withProject),
    approvalQueue: n.approvalQueue.map(withProject),
    refusedBySigner: n.refusedBySigner.map((p) => ({ ...withProject(p), signerRefusal: p.signerRefusal ?? '', signerRefusedAt: isoTime(p.signerRefusedAt) })),
  };
}

/** The merchant's project (auth answers not_found for another merchant's) and its environment. */
async function ownProject(auth: TreasuryRouteDeps['auth'], req: FastifyRequest, projectId: string) {
  const { project } = await auth.getProject({ merchantId: merchantPrincipal(req).merchantId, projectId });
  if (!project) throw new Error('project missing from a service response');
  return project;
}

export function treasuryRoutes(app: FastifyInstance, { auth, payouts, hooks }: TreasuryRouteDeps): void {
  app.get<{ Params: { id: string } }>('/api/merchant/projects/:id/auto-sweep', {
    schema: {
      tags: ['dashboard'],
      summary: 'A project’s auto-sweep configuration: per (currency, network) a destination and a threshold, and a change awaiting its emailed code',
      security: bearer,
      params: ProjectParams,
      response: { 200: AutoSweepSchema },
    },
    onRequest: hooks.merchant,
    handler: async (req) => {
      const project = await ownProject(auth, req, req.params.id);
      const res = await payouts.getAutoSweep({ projectId: project.id, environment: project.environment });
      return autoSweepJson(res.config);
    },
  });

  app.put<{ Params: { id: string }; Body: PutAutoSweepBody }>('/api/merchant/projects/:id/auto-sweep', {
    schema: {
      tags: ['dashboard'],
      summary: 'Replace a project’s auto-sweep configuration; a new or changed destination waits for a 6-digit code emailed to the merchant (202)',
      description:
        'The body is the whole configuration. (currency, network) pairs left out are removed at once, and a new threshold for an unchanged destination applies at once (200). ' +
        'A new or changed destination answers 202 with pendingChange and emails a code; POST …/auto-sweep/verify activates it (5 attempts, 15 minutes). ' +
        'A later PUT replaces a change still awaiting its code. When a live project’s available balance in a (currency, network) reaches its threshold, the whole balance is paid out to the destination ' +
        '(a payout with origin auto_sweep, created verified). Sandbox projects keep the configuration and are never swept.',
      security: bearer,
      params: ProjectParams,
      body: PutAutoSweepBody,
      response: { 200: AutoSweepSchema, 202: AutoSweepSchema },
    },
    onRequest: hooks.merchant,
    handler: async (req, reply) => {
      const entries = req.body.entries.map((e, i) => ({
        currency: e.currency,
        network: e.network ?? '',
        address: e.address,
        threshold: amountDecimal(e, 'threshold', `entries[${i}].threshold`),
      }));
      const project = await ownProject(auth, req, req.params.id);
      const res = await payouts.setAutoSweep({ projectId: project.id, environment: project.environment, entries });
      const json = autoSweepJson(res.config);
      return reply.code(json.pendingChange ? 202 : 200).send(json);
    },
  });

  app.post<{ Params: { id: string }; Body: VerifyAutoSweepBody }>('/api/merchant/projects/:id/auto-sweep/verify', {
    schema: {
      tags: ['dashboard'],
      summary: 'Activate the pending auto-sweep change with the emailed code',
      description:
        'A wrong code answers 400 invalid_verification_code with the attempts left (the 5th discards the change); an expired code 409 verification_code_expired; no change awaiting a code 409 auto_sweep_change_not_pending.',
      security: bearer,
      params: ProjectParams,
      body: VerifyAutoSweepBody,
      response: { 200: AutoSweepSchema },
    },
    onRequest: hooks.merchant,
    handler: async (req) => {
      const project = await ownProject(auth, req, req.params.id);
      const res = await payouts.verifyAutoSweep({ projectId: project.id, code: req.body.code });
      return autoSweepJson(res.config);
    },
  });

  app.get<{ Querystring: SweepTaskQuery }>('/api/admin/sweep-tasks', {
    schema: {
      tags: ['admin'],
      summary: 'Operators: sweep tasks (deposits moving to the treasury address), newest first, by invoice, status and network',
      security: bearer,
      querystring: SweepTaskQuery,
      response: { 200: SweepTaskListSchema },
    },
    onRequest: hooks.admin,
    handler: async (req) => {
      const res = await payouts.listSweepTasks({
        invoiceId: req.query.invoiceId,
        status: req.query.status,
        network: req.query.network,
        pageSize: parseLimit(req.query.limit),
        cursor: req.query.cursor ?? '',
        operatorToken: merchantPrincipal(req).token,
      });
      return {
        items: res.sweepTasks.map((t) => ({
          id: t.id,
          paymentId: t.paymentId,
          invoiceId: t.invoiceId,
          projectId: t.projectId,
          network: t.network,
          asset: t.asset,
          depositAddress: t.depositAddress,
          amount: t.amount,
          status: t.status,
          skipReason: t.skipReason ?? null,
          transactionHash: t.transactionHash ?? null,
          createdAt: isoTime(t.createdAt),
          updatedAt: isoTime(t.updatedAt),
        })),
        nextCursor: res.nextCursor || null,
      };
    },
  });

  app.get('/api/admin/treasury', {
    schema: {
      tags: ['admin'],
      summary: 'Operators: the Treasury page, per network: treasury address and balances (read from the node), pause switch, deposits awaiting sweep, payouts in flight, the approval queue',
      security: bearer,
      response: { 200: TreasurySchema },
    },
    onRequest: hooks.admin,
    handler: async (req) => {
      const res = await payouts.getTreasury({ operatorToken: merchantPrincipal(req).token });
      return { networks: res.networks.map(treasuryNetworkJson) };
    },
  });

  for (const action of ['pause', 'resume'] as const) {
    app.post<{ Params: { network: string } }>(`/api/admin/treasury/:network/${action}`, {
      schema: {
        tags: ['admin'],
        summary:
          action === 'pause'
            ? 'Operators: pause a network’s treasury: its processor starts no new transfer (transactions already sent are still followed)'
            : 'Operators: resume a paused network’s treasury',
        description: 'A network no processor has recorded yet answers 404 not_found.',
        security: bearer,
        params: NetworkParams,
        response: { 200: TreasuryNetworkSchema },
      },
      onRequest: hooks.admin,
      handler: async (req) => {
        const res = await payouts.setTreasuryPaused({ network: req.params.network, paused: action === 'pause', operatorToken: merchantPrincipal(req).token });
        return treasuryNetworkJson(res.network);
      },
    });
  }
}

