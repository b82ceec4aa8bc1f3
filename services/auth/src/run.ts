import { hostname, userInfo } from 'node:os';
import { previousKeksSetting, SecretBox, secretsKekSetting } from '@coinvoice/domain/secrets-at-rest';
import { commonSettings, createDb, createLogger, exitOnStartupError, loadConfig as loadSettings, redactUrlPassword, refusePublishedSecrets, runService } from '@coinvoice/runtime';
import { OWASP_ARGON2ID_PARAMS, PasswordHasher } from './domain/passwords';
import { changeOperator, OPERATOR_COMMANDS } from './operators/commands';
import { ensureLocalDeveloper } from './operators/local-developer';
import { authService, authSettings } from './server';
import { reencryptSecrets } from './store/secrets';

/**
 * `node main.js` serves (`migrate` never reaches this file: main.ts runs it); and the admin commands, run
 * as a Kubernetes Job or exec:
 *   grant-operator <email> / revoke-operator <email>  operator rights, audit-logged
 *   rotate-kek   re-encrypts every secret at rest with SECRETS_KEK (the old KEK in SECRETS_KEK_PREVIOUS)
 *   local-developer <email>   (development only) the merchant, sandbox project and new sandbox key
 *                `npm start` prints, made here rather than through the rate-limited public registration
 */
const [command, argument] = process.argv.slice(2);

/** The settings of an admin command; a bad or missing one is the one line a service prints, not a stack trace. */
const loadConfig: typeof loadSettings = (settings, env) => {
  try {
    if (command !== undefined) refusePublishedSecrets(env ?? process.env);
    return loadSettings(settings, env);
  } catch (err) {
    exitOnStartupError(`auth ${command}`, err);
  }
};

async function withDatabase(run: (sql: ReturnType<typeof createDb>, logger: ReturnType<typeof createLogger>, database: string) => Promise<void>): Promise<void> {
  const config = loadConfig({ DATABASE_URL: commonSettings.DATABASE_URL, APP_ENV: commonSettings.APP_ENV, LOG_LEVEL: commonSettings.LOG_LEVEL });
  // Said in what a command prints: a command run against the wrong database (DATABASE_URL unset
  // beside a second system, or `npm start`'s embedded Postgres) is seen at once.
  const database = redactUrlPassword(config.DATABASE_URL);
  const logger = createLogger({ service: 'auth', level: config.LOG_LEVEL });
  const sql = createDb({ url: config.DATABASE_URL, schema: 'auth', max: 1 });
  try {
    await run(sql, logger, database);
  } catch (err) {
    process.stderr.write(`auth: ${command} failed: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  } finally {
    await sql.end({ timeout: 5 });
  }
}

const action = command === undefined ? undefined : OPERATOR_COMMANDS[command];
if (action !== undefined) {
  if (argument === undefined) {
    process.stderr.write(`usage: node main.js ${command} <email>\n`);
    process.exit(2);
  }
  // Who ran it, for the audit log: OPERATOR_ACTOR (e.g. set by the Job) or the OS user and host.
  const actor = process.env.OPERATOR_ACTOR || `${userInfo().username}@${hostname()}`;
  void withDatabase(async (sql, logger, database) => {
    const outcome = await changeOperator(sql, { action, email: argument, actor }, logger);
    if (!outcome.ok) {
      process.stderr.write(`auth: ${command} refused: ${outcome.reason} (database ${database})\n`);
      process.exitCode = 1;
    } else {
      process.stdout.write(`${command}: ${argument} ${outcome.changed ? 'done' : 'unchanged (already so)'}; merchant ${outcome.merchantId} (database ${database})\n`);
    }
  });
} else if (command === 'rotate-kek') {
  const keys = loadConfig({ APP_ENV: commonSettings.APP_ENV, SECRETS_KEK: secretsKekSetting, SECRETS_KEK_PREVIOUS: previousKeksSetting });
  void withDatabase(async (sql) => {
    const box = new SecretBox(keys.SECRETS_KEK, keys.SECRETS_KEK_PREVIOUS);
    const report = await reencryptSecrets(sql, box);
    process.stdout.write(`rotate-kek: ${report.webhookSecrets} webhook secret(s), ${report.previousWebhookSecrets} replaced webhook secret(s) still signing and ${report.signingKeys} signing key(s) now under key ${box.current.id}\n`);
  });
} else if (command === 'local-developer') {
  const settings = loadConfig({
    APP_ENV: commonSettings.APP_ENV,
    SECRETS_KEK: secretsKekSetting,
    SECRETS_KEK_PREVIOUS: previousKeksSetting,
    PASSWORD_HASH_MEMORY_KIB: authSettings.PASSWORD_HASH_MEMORY_KIB,
  });
  if (settings.APP_ENV === 'production') {
    process.stderr.write('auth: local-developer is for development only (APP_ENV=production)\n');
    process.exit(2);
  }
  if (argument === undefined) {
    process.stderr.write('usage: LOCAL_DEVELOPER_PASSWORD=… node main.js local-developer <email>\n');
    process.exit(2);
  }
  void withDatabase(async (sql) => {
    const outcome = await ensureLocalDeveloper(
      sql,
      {
        box: new SecretBox(settings.SECRETS_KEK, settings.SECRETS_KEK_PREVIOUS),
        passwords: new PasswordHasher({ ...OWASP_ARGON2ID_PARAMS, memoryKiB: settings.PASSWORD_HASH_MEMORY_KIB }),
      },
      { email: argument, password: process.env.LOCAL_DEVELOPER_PASSWORD ?? '' },
    );
    if (!outcome.ok) {
      process.stderr.write(`auth: local-developer refused: ${outcome.reason}\n`);
      process.exitCode = 1;
    } else {
      process.stdout.write(`${JSON.stringify(outcome.developer)}\n`);
    }
  });
} else {
  runService(authService);
}
