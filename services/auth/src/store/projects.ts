/**
 * Projects. Every merchant-facing read and write is scoped by (merchant_id, project id): a
 * project of another merchant is simply not found.
 */
import type { Queryable, Sql, TransactionSql } from '@coinvoice/runtime';
import type { ProjectEnvironment } from '../domain';
import { isForeignKeyViolation } from './pg-errors';
import type { ProjectContextRow, ProjectRow } from './rows';

const PROJECT_COLUMNS = ['id', 'merchant_id', 'name', 'environment', 'webhook_url', 'invoice_lifetime_minutes', 'created_at', 'updated_at'];

export interface NewProject {
  merchantId: string;
  name: string;
  environment: ProjectEnvironment;
  webhookUrl: string | null;
  webhookSecret: string;
}

/** Fields to change; absent ones stay as they are. `webhookUrl: null` removes the webhook. */
export interface ProjectChanges {
  name?: string;
  webhookUrl?: string | null;
  invoiceLifetimeMinutes?: number;
}

export class ProjectStore {
  constructor(private readonly sql: Sql) {}

  /** The new project, or undefined when the merchant does not exist. */
  async create(project: NewProject): Promise<ProjectRow | undefined> {
    try {
      const [row] = await this.sql<ProjectRow[]>`
        insert into projects (merchant_id, name, environment, webhook_url, webhook_secret)
        values (${project.merchantId}, ${project.name}, ${project.environment}, ${project.webhookUrl}, ${project.webhookSecret})
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
    if (Object.keys(columns).length === 0) return this.findOwned(merchantId, projectId, tx);
    const [row] = await tx<ProjectRow[]>`
      update projects set ${tx(columns)}, updated_at = now()
      where id = ${projectId} and merchant_id = ${merchantId}
      returning ${tx(PROJECT_COLUMNS)}`;
    return row;
  }

  /** Replaces the webhook secret of the merchant's project; undefined when not theirs. */
  async replaceWebhookSecret(tx: TransactionSql, merchantId: string, projectId: string, secret: string): Promise<ProjectRow | undefined> {
    const [row] = await tx<ProjectRow[]>`
      update projects set webhook_secret = ${secret}, updated_at = now()
      where id = ${projectId} and merchant_id = ${merchantId}
      returning ${tx(PROJECT_COLUMNS)}`;
    return row;
  }

  /** A project with its merchant's email and the webhook secret, for other services. */
  async findContext(projectId: string): Promise<ProjectContextRow | undefined> {
    const [row] = await this.sql<ProjectContextRow[]>`
      select p.id, p.merchant_id, p.name, p.environment, p.webhook_url, p.invoice_lifetime_minutes,
             p.created_at, p.updated_at, p.webhook_secret, m.email as merchant_email
      from projects p join merchants m on m.id = p.merchant_id
      where p.id = ${projectId}`;
    return row;
  }
}
