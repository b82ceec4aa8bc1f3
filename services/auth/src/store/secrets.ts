/**
 * Where the auth service's secrets at rest live and how they are (re-)encrypted: webhook secrets
 * (projects.webhook_secret, and previous_webhook_secrets.secret while a rotation's overlap lasts) and JWT signing keys (signing_keys.private_key_pem), each sealed with
 * the runtime SecretBox and bound to its row (the context names table, column and row id).
 */
import type { SecretBox } from '@coinvoice/domain/secrets-at-rest';
import type { Sql, TransactionSql } from '@coinvoice/runtime';


export const webhookSecretContext = (projectId: string) => `projects.webhook_secret:${projectId.toLowerCase()}`;
export const previousWebhookSecretContext = (id: string) => `previous_webhook_secrets.secret:${id.toLowerCase()}`;
export const signingKeyContext = (kid: string) => `signing_keys.private_key_pem:${kid}`;

/** Opens a stored value: encrypted, or plaintext written before encryption (kek id null). */
export function openStored(box: SecretBox, stored: string, kekId: string | null, context: string): string {
  return kekId === null ? stored : box.decrypt(stored, context);
}

export interface ReencryptionReport {
  webhookSecrets: number;
  /** Replaced webhook secrets still kept for a rotation's overlap. */
  previousWebhookSecrets: number;
  signingKeys: number;
}

/**
 * Encrypts every plaintext secret and re-wraps every secret under an older KEK with the current
 * one, in batches, each row under its lock. Safe to run on several replicas at once.
 */
export async function reencryptSecrets(sql: Sql, box: SecretBox, batchSize = 200): Promise<ReencryptionReport> {
  const report: ReencryptionReport = { webhookSecrets: 0, previousWebhookSecrets: 0, signingKeys: 0 };
  const current = box.current.id;
  report.webhookSecrets = await inBatches(sql, batchSize, async (tx) => {
    const rows = await tx<{ id: string; webhook_secret: string; webhook_secret_kek_id: string | null }[]>`
      select id, webhook_secret, webhook_secret_kek_id from projects
      where webhook_secret_kek_id is distinct from ${current}
      order by id limit ${batchSize} for update skip locked`;
    for (const row of rows) {
      const context = webhookSecretContext(row.id);
      const plain = openStored(box, row.webhook_secret, row.webhook_secret_kek_id, context);
      await tx`update projects set webhook_secret = ${box.encrypt(plain, context)}, webhook_secret_kek_id = ${current} where id = ${row.id}`;
    }
    return rows.length;
  });
  report.previousWebhookSecrets = await inBatches(sql, batchSize, async (tx) => {
    const rows = await tx<{ id: string; secret: string }[]>`
      select id, secret from previous_webhook_secrets
      where secret_kek_id <> ${current}
      order by id limit ${batchSize} for update skip locked`;
    for (const row of rows) {
      const context = previousWebhookSecretContext(row.id);
      await tx`update previous_webhook_secrets set secret = ${box.encrypt(box.decrypt(row.secret, context), context)}, secret_kek_id = ${current} where id = ${row.id}`;
    }
    return rows.length;
  });
  await sql.begin(async (tx) => {
    const rows = await tx<{ kid: string; private_key_pem: string; private_key_kek_id: string | null }[]>`
      select kid, private_key_pem, private_key_kek_id from signing_keys
      where private_key_kek_id is distinct from ${current} for update skip locked`;
    for (const row of rows) {
      const context = signingKeyContext(row.kid);
      const plain = openStored(box, row.private_key_pem, row.private_key_kek_id, context);
      await tx`update signing_keys set private_key_pem = ${box.encrypt(plain, context)}, private_key_kek_id = ${current} where kid = ${row.kid}`;
    }
    report.signingKeys += rows.length;
  });
  return report;
}

/** Runs `batch` (each in its own transaction) until one handles fewer than `batchSize` rows; the rows handled in all. */
async function inBatches(sql: Sql, batchSize: number, batch: (tx: TransactionSql) => Promise<number>): Promise<number> {
  let handled = 0;
  for (;;) {
    const rows = await sql.begin(batch);
    handled += rows;
    if (rows < batchSize) return handled;
  }
}
