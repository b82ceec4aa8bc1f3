/**
 * Projects. Every merchant-facing read and write is scoped by (merchant_id, project id): a
 * project of another merchant is simply not found.
 */
import { randomUUID } from 'node:crypto';
import type { SecretBox } from '@coinvoice/domain/secrets-at-rest';
import type { Queryable, Sql, TransactionSql } from '@coinvoice/runtime';
import type { ProjectEnvironment } from '@coinvoice/domain/environment';
import { isForeignKeyViolation } from './pg-errors';
import type { ProjectContextRow, ProjectRow } from './rows';
import { openStored, previousWebhookSecretContext, webhookSecretContext } from './secrets';

const PROJECT_COLUMNS = [
  'id',
  'merchant_id',
  'name',
  'environment',
  'webhook_url',
  'invoice_lifetime_minutes',
  'payment_tolerance_percent',
  'previous_webhook_secret_expires_at',
  'created_at',
  'updated_at',
];

export interface NewProject {
  merchantId: string;
  name: string;
  environment: ProjectEnvironment;
  webhookUrl: string | null;
  webhookSecret: string;
  /** Decimal string 0–5. */
  paymentTolerancePercent: string;
}

/** Fields to change; absent ones stay as they are. `webhookUrl: null` removes the webhook. */
export interface ProjectChanges {
  name?: string;
  webhookUrl?: string | null;
  invoiceLifetimeMinutes?: number;
  /** Decimal string 0–5. */
  paymentTolerancePercent?: string;
}

export class ProjectStore {
  /** `box` seals the webhook secret (SECRETS_KEK): never stored in plaintext. */
  constructor(
    private readonly sql: Sql,
    private readonly box: SecretBox,
  ) {}

  /** The new project, or undefined when the merchant does not exist. */
  async create(project: NewProject): Promise<ProjectRow | undefined> {
    // The id first: the sealed secret is bound to its row.
    const id = randomUUID();
    const secret = this.box.encrypt(project.webhookSecret, webhookSecretContext(id));
    try {
      const [row] = await this.sql<ProjectRow[]>`
        insert into projects (id, merchant_id, name, environment, webhook_url, webhook_secret, webhook_secret_kek_id, payment_tolerance_percent)
        values (${id}, ${project.merchantId}, ${project.name}, ${project.environment}, ${project.webhookUrl}, ${secret}, ${this.box.current.id},
                ${project.paymentTolerancePercent}::numeric)
        returning ${this.sql(PROJECT_COLUMNS)}`;
      return row;
    } catch (err) {
      if (isForeignKeyViolation(err, 'projects_merchant_id_fkey')) return undefined;
      throw err;
    }
  }

  /** Oldest first. */
  async listByMerchant(merchantId: string): Promise<ProjectRow[]> {
    return this.sql<ProjectRow[]>`
      select ${this.sql(PROJECT_COLUMNS)} from projects
      where merchant_id = ${merchantId}
      order by created_at, id`;
  }

  /** The merchant's project; undefined when it does not exist or belongs to someone else. */
  async findOwned(merchantId: string, projectId: string, db: Queryable = this.sql): Promise<ProjectRow | undefined> {
    const [row] = await db<ProjectRow[]>`
      select ${db(PROJECT_COLUMNS)} from projects
      where id = ${projectId} and merchant_id = ${merchantId}`;
    return row;
  }

  /** Applies `changes` (at least one field) to the merchant's project; undefined when not theirs. */
  async update(tx: TransactionSql, merchantId: string, projectId: string, changes: ProjectChanges): Promise<ProjectRow | undefined> {
    const columns: Record<string, string | number | null> = {};
    if (changes.name !== undefined) columns.name = changes.name;
    if (changes.webhookUrl !== undefined) columns.webhook_url = changes.webhookUrl;
    if (changes.invoiceLifetimeMinutes !== undefined) columns.invoice_lifetime_minutes = changes.invoiceLifetimeMinutes;
    if (changes.paymentTolerancePercent !== undefined) columns.payment_tolerance_percent = changes.paymentTolerancePercent;
    if (Object.keys(columns).length === 0) return this.findOwned(merchantId, projectId, tx);
    const [row] = await tx<ProjectRow[]>`
      update projects set ${tx(columns)}, updated_at = now()
      where id = ${projectId} and merchant_id = ${merchantId}
      returning ${tx(PROJECT_COLUMNS)}`;
    return row;
  }

  /**
   * Replaces the webhook secret of the merchant's project; undefined when not theirs. The replaced
   * secret keeps signing next to the new one for `previousValidMs` (0: it stops now), replacing any
   * earlier previous secret (docs/webhook-delivery.md#secret-rotation).
   */
  async replaceWebhookSecret(tx: TransactionSql, merchantId: string, projectId: string, secret: string, previousValidMs: number): Promise<ProjectRow | undefined> {
    const [current] = await tx<{ webhook_secret: string; webhook_secret_kek_id: string | null }[]>`
      select webhook_secret, webhook_secret_kek_id from projects
      where id = ${projectId} and merchant_id = ${merchantId}
      for update`;
    if (!current) return undefined;
    const previous =
      previousValidMs > 0
        ? this.box.encrypt(openStored(this.box, current.webhook_secret, current.webhook_secret_kek_id, webhookSecretContext(projectId)), previousWebhookSecretContext(projectId))
        : null;
    const [row] = await tx<ProjectRow[]>`
      update projects
      set webhook_secret = ${this.box.encrypt(secret, webhookSecretContext(projectId))}, webhook_secret_kek_id = ${this.box.current.id},
          previous_webhook_secret = ${previous}, previous_webhook_secret_kek_id = ${previous === null ? null : this.box.current.id},
          previous_webhook_secret_expires_at = ${previous === null ? null : tx`now() + ${previousValidMs}::bigint * interval '1 millisecond'`},
          updated_at = now()
      where id = ${projectId} and merchant_id = ${merchantId}
      returning ${tx(PROJECT_COLUMNS)}`;
    return row;
  }

  /** Stops the previous webhook secret of the merchant's project now; undefined when not theirs. */
  async endPreviousWebhookSecret(tx: TransactionSql, merchantId: string, projectId: string): Promise<{ row: ProjectRow; ended: boolean } | undefined> {
    const [row] = await tx<(ProjectRow & { ended: boolean })[]>`
      with before as (
        select id, (previous_webhook_secret_expires_at > now()) as in_force from projects
        where id = ${projectId} and merchant_id = ${merchantId}
        for update
      )
      update projects p
      set previous_webhook_secret = null, previous_webhook_secret_kek_id = null, previous_webhook_secret_expires_at = null,
          updated_at = case when p.previous_webhook_secret is null then p.updated_at else now() end
      from before
      where p.id = before.id
      returning ${tx(PROJECT_COLUMNS.map((column) => `p.${column}`))}, coalesce(before.in_force, false) as ended`;
    if (!row) return undefined;
    const { ended, ...project } = row;
    return { row: project, ended };
  }

  /** A project with its merchant's email and the webhook secret, for other services. */
  async findContext(projectId: string): Promise<ProjectContextRow | undefined> {
    const [row] = await this.sql<
      (Omit<ProjectContextRow, 'previous_webhook_secret'> & {
        webhook_secret_kek_id: string | null;
        previous_webhook_secret: string | null;
        previous_webhook_secret_kek_id: string | null;
      })[]
    >`
      select p.id, p.merchant_id, p.name, p.environment, p.webhook_url, p.invoice_lifetime_minutes, p.payment_tolerance_percent::text,
             p.created_at, p.updated_at, p.webhook_secret, p.webhook_secret_kek_id,
             -- Only while in force: an expired previous secret is never handed out.
             case when p.previous_webhook_secret_expires_at > now() then p.previous_webhook_secret end as previous_webhook_secret,
             case when p.previous_webhook_secret_expires_at > now() then p.previous_webhook_secret_kek_id end as previous_webhook_secret_kek_id,
             case when p.previous_webhook_secret_expires_at > now() then p.previous_webhook_secret_expires_at end as previous_webhook_secret_expires_at,
             m.email as merchant_email, (m.email_verified_at is not null) as merchant_email_verified
      from projects p join merchants m on m.id = p.merchant_id
      where p.id = ${projectId}`;
    if (!row) return undefined;
    const { webhook_secret_kek_id: kekId, previous_webhook_secret_kek_id: previousKekId, ...context } = row;
    return {
      ...context,
      webhook_secret: openStored(this.box, row.webhook_secret, kekId, webhookSecretContext(row.id)),
      previous_webhook_secret:
        row.previous_webhook_secret === null ? null : openStored(this.box, row.previous_webhook_secret, previousKekId, previousWebhookSecretContext(row.id)),
    };
  }
}

/**
 * Erases up to `limit` previous webhook secrets whose overlap has ended (their expiry passed, by
 * Postgres' clock); says how many. The project's updated_at stays: the merchant changed nothing.
 */
export async function eraseExpiredPreviousWebhookSecrets(sql: Sql, limit: number): Promise<number> {
  const erased = await sql`
    update projects
    set previous_webhook_secret = null, previous_webhook_secret_kek_id = null, previous_webhook_secret_expires_at = null
    where id in (
      select id from projects
      where previous_webhook_secret_expires_at <= now()
      order by previous_webhook_secret_expires_at
      limit ${limit}
      for update skip locked
    )`;
  return erased.count;
}
