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
  'created_at',
  'updated_at',
];

/** At most this many replaced secrets sign next to the current one; a rotation beyond drops the one ending first. */
export const MAX_PREVIOUS_WEBHOOK_SECRETS = 3;

/**
 * A project row's columns, and when the last of its replaced secrets stops signing (null when none
 * is in force), for `select … from projects <alias>` and `update projects <alias> … returning`.
 */
function projectColumns(q: Queryable, alias: string) {
  return q`${q(PROJECT_COLUMNS.map((column) => `${alias}.${column}`))},
    (select max(s.expires_at) from previous_webhook_secrets s where s.project_id = ${q(alias)}.id and s.expires_at > now()) as previous_webhook_secret_expires_at`;
}

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
  /**
   * Creates the merchant's project unless it has `maxPerMerchant` already ('limit_reached');
   * undefined when the merchant does not exist.
   */
  async create(project: NewProject, maxPerMerchant: number): Promise<ProjectRow | 'limit_reached' | undefined> {
    // The id first: the sealed secret is bound to its row.
    const id = randomUUID();
    const secret = this.box.encrypt(project.webhookSecret, webhookSecretContext(id));
    return this.sql.begin(async (tx) => {
      // The merchant's row lock serialises its creations: the count below cannot race another.
      const [merchant] = await tx`select 1 from merchants where id = ${project.merchantId} for update`;
      if (!merchant) return undefined;
      const [counted] = await tx<{ n: number }[]>`select count(*)::int as n from projects where merchant_id = ${project.merchantId}`;
      if ((counted?.n ?? 0) >= maxPerMerchant) return 'limit_reached';
      const [row] = await tx<ProjectRow[]>`
        insert into projects (id, merchant_id, name, environment, webhook_url, webhook_secret, webhook_secret_kek_id, payment_tolerance_percent)
        values (${id}, ${project.merchantId}, ${project.name}, ${project.environment}, ${project.webhookUrl}, ${secret}, ${this.box.current.id},
                ${project.paymentTolerancePercent}::numeric)
        returning ${tx(PROJECT_COLUMNS)}, null::timestamptz as previous_webhook_secret_expires_at`;
      return row;
    });
  }

  /** Oldest first. */
  async listByMerchant(merchantId: string): Promise<ProjectRow[]> {
    return this.sql<ProjectRow[]>`
      select ${projectColumns(this.sql, 'p')} from projects p
      where p.merchant_id = ${merchantId}
      order by p.created_at, p.id`;
  }

  /** The merchant's project; undefined when it does not exist or belongs to someone else. */
  async findOwned(merchantId: string, projectId: string, db: Queryable = this.sql): Promise<ProjectRow | undefined> {
    const [row] = await db<ProjectRow[]>`
      select ${projectColumns(db, 'p')} from projects p
      where p.id = ${projectId} and p.merchant_id = ${merchantId}`;
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
      update projects p set ${tx(columns)}, updated_at = now()
      where p.id = ${projectId} and p.merchant_id = ${merchantId}
      returning ${projectColumns(tx, 'p')}`;
    return row;
  }

  /**
   * Replaces the webhook secret of the merchant's project; undefined when not theirs. The replaced
   * secret keeps signing next to the new one for `previousValidMs` (0: not at all), as do those
   * replaced before it until their own expiry, at most MAX_PREVIOUS_WEBHOOK_SECRETS of them
   * (docs/webhook-delivery.md#secret-rotation). Also says until when the replaced one signs.
   */
  async replaceWebhookSecret(
    tx: TransactionSql,
    merchantId: string,
    projectId: string,
    secret: string,
    previousValidMs: number,
  ): Promise<{ row: ProjectRow; previousUntil: Date | null } | undefined> {
    // Under the project's lock: concurrent rotations apply one after the other.
    const [current] = await tx<{ webhook_secret: string; webhook_secret_kek_id: string | null }[]>`
      select webhook_secret, webhook_secret_kek_id from projects
      where id = ${projectId} and merchant_id = ${merchantId}
      for update`;
    if (!current) return undefined;
    let previousUntil: Date | null = null;
    if (previousValidMs > 0) {
      const replaced = openStored(this.box, current.webhook_secret, current.webhook_secret_kek_id, webhookSecretContext(projectId));
      const id = randomUUID();
      const [kept] = await tx<{ expires_at: Date }[]>`
        insert into previous_webhook_secrets (id, project_id, secret, secret_kek_id, expires_at)
        values (${id}, ${projectId}, ${this.box.encrypt(replaced, previousWebhookSecretContext(id))}, ${this.box.current.id},
                now() + ${previousValidMs}::bigint * interval '1 millisecond')
        returning expires_at`;
      previousUntil = kept!.expires_at;
    }
    // Beyond the cap, the replaced secrets that would stop first go now; expired ones go too.
    await tx`
      delete from previous_webhook_secrets
      where project_id = ${projectId}
        and (expires_at <= now() or id in (
          select id from previous_webhook_secrets where project_id = ${projectId} and expires_at > now()
          order by expires_at desc, created_at desc offset ${MAX_PREVIOUS_WEBHOOK_SECRETS}))`;
    const [row] = await tx<ProjectRow[]>`
      update projects p
      set webhook_secret = ${this.box.encrypt(secret, webhookSecretContext(projectId))}, webhook_secret_kek_id = ${this.box.current.id}, updated_at = now()
      where p.id = ${projectId} and p.merchant_id = ${merchantId}
      returning ${projectColumns(tx, 'p')}`;
    return row && { row, previousUntil };
  }

  /** Stops every replaced secret of the merchant's project from signing, now; undefined when not theirs. */
  async endPreviousWebhookSecrets(tx: TransactionSql, merchantId: string, projectId: string): Promise<{ row: ProjectRow; ended: number } | undefined> {
    const [owned] = await tx<{ id: string }[]>`select id from projects where id = ${projectId} and merchant_id = ${merchantId} for update`;
    if (!owned) return undefined;
    const ended = await tx<{ in_force: boolean }[]>`
      delete from previous_webhook_secrets where project_id = ${projectId}
      returning (expires_at > now()) as in_force`;
    const endedInForce = ended.filter((r) => r.in_force).length;
    const [row] = await tx<ProjectRow[]>`
      update projects p set updated_at = case when ${endedInForce > 0} then now() else p.updated_at end
      where p.id = ${projectId}
      returning ${projectColumns(tx, 'p')}`;
    return { row: row!, ended: endedInForce };
  }

  /** A project with its merchant's email and the webhook secret, for other services. */
  async findContext(projectId: string): Promise<ProjectContextRow | undefined> {
    const [row] = await this.sql<(Omit<ProjectContextRow, 'previous_webhook_secrets'> & { webhook_secret_kek_id: string | null })[]>`
      select ${projectColumns(this.sql, 'p')}, p.webhook_secret, p.webhook_secret_kek_id,
             m.email as merchant_email, (m.email_verified_at is not null) as merchant_email_verified
      from projects p join merchants m on m.id = p.merchant_id
      where p.id = ${projectId}`;
    if (!row) return undefined;
    // Only those in force: an expired replaced secret is never handed out.
    const previous = await this.sql<{ id: string; secret: string; secret_kek_id: string; expires_at: Date }[]>`
      select id, secret, secret_kek_id, expires_at from previous_webhook_secrets
      where project_id = ${projectId} and expires_at > now()
      order by expires_at desc, created_at desc`;
    const { webhook_secret_kek_id: kekId, ...context } = row;
    return {
      ...context,
      webhook_secret: openStored(this.box, row.webhook_secret, kekId, webhookSecretContext(row.id)),
      previous_webhook_secrets: previous.map((p) => ({ secret: this.box.decrypt(p.secret, previousWebhookSecretContext(p.id)), expires_at: p.expires_at })),
    };
  }

}

/**
 * Erases up to `limit` replaced webhook secrets whose overlap has ended (their expiry passed, by
 * Postgres' clock); says how many.
 */
export async function eraseExpiredPreviousWebhookSecrets(sql: Sql, limit: number): Promise<number> {
  const erased = await sql`
    delete from previous_webhook_secrets
    where id in (select id from previous_webhook_secrets where expires_at <= now() order by expires_at limit ${limit} for update skip locked)`;
  return erased.count;
}
