/**
 * The auth service under test: started in this process on free ports (startTestService) against
 * a fresh database and event namespace of its own, a real gRPC client, a direct connection to its
 * schema for inspection, and a NATS connection to watch its events.
 */
import { Writable } from 'node:stream';
import { randomBytes } from 'node:crypto';
import type { DescMessage, MessageShape } from '@bufbuild/protobuf';
import { fromJson } from '@bufbuild/protobuf';
import { connectNats, createDb, createLogger, createRpcClient, errorFacts, EventNamespace, type Logger, type ServiceDefinition, type Sql, type TransactionSql } from '@coinvoice/runtime';
import { AuthService } from '@coinvoice/runtime/gen/coinvoice/auth/v1/auth_pb';
import type { Client } from '@connectrpc/connect';
import type { Msg, NatsConnection, Subscription } from 'nats';
import { startTestService, type TestService, type TestServiceOptions } from '../../../../test/support/service';
import { RELAXED_RATE_LIMITS } from '../../../../test/support/rate-limits';
import { NotifierStandIn } from '../../../../test/support/notifier-stand-in';
import { authService, type authSettings } from '../../src/server';

export type AuthClient = Client<typeof AuthService>;
type AuthDefinition = ServiceDefinition<typeof authSettings>;

/** Fast argon2id for tests (the default is the OWASP 19 MiB). */
export const TEST_PASSWORD_MEMORY_KIB = '1024';

export interface StartedAuth {
  svc: TestService;
  client: AuthClient;
  /** Direct pool on the service's schema, for inspecting what it stored. */
  db: Sql;
  nats: NatsConnection;
  namespace: EventNamespace;
  /** Where the service's emails go (NOTIFIER_URL), with every request kept. */
  notifier: NotifierStandIn;
  dispose(): Promise<void>;
}

export async function startAuth(
  options: { env?: NodeJS.ProcessEnv; definition?: AuthDefinition } & Omit<TestServiceOptions, 'env'> = {},
): Promise<StartedAuth> {
  const notifier = await new NotifierStandIn().start();
  const svc = await startTestService(options.definition ?? authService, {
    ...options,
    env: { PASSWORD_HASH_MEMORY_KIB: TEST_PASSWORD_MEMORY_KIB, NOTIFIER_URL: notifier.url, ...RELAXED_RATE_LIMITS, ...options.env },
  });
  const client = createRpcClient(AuthService, svc.url);
  const db = createDb({ url: svc.database.url, schema: 'auth', max: 2 });
  const nats = await connectNats({ url: svc.env.NATS_URL ?? '', name: 'auth-test' });
  const namespace = new EventNamespace(svc.namespace);
  return {
    svc,
    client,
    db,
    nats,
    namespace,
    notifier,
    async dispose() {
      await db.end({ timeout: 5 });
      await svc.dispose();
      await notifier.stop();
      if (!options.namespace) {
        const jsm = await nats.jetstreamManager();
        await jsm.streams.delete(namespace.streamName('auth')).catch(() => undefined);
      }
      await nats.close();
    },
  };
}

/** The error an RPC failed with, as the gateway sees it (Connect code, stable code, violations). */
export async function rpcError(call: Promise<unknown>): Promise<ReturnType<typeof errorFacts>> {
  try {
    await call;
  } catch (err) {
    return errorFacts(err);
  }
  throw new Error('expected the RPC to fail, it succeeded');
}

export function uniqueEmail(label = 'merchant'): string {
  return `${label}.${randomBytes(4).toString('hex')}@example.com`;
}

export const PASSWORD = 'correct horse battery staple';

/** Signs a merchant up as a person does: RegisterMerchant, then ConfirmRegistration with the emailed code. */
export async function register(auth: Pick<StartedAuth, 'client' | 'notifier'>, overrides: { email?: string; password?: string; name?: string } = {}) {
  const email = overrides.email ?? uniqueEmail();
  const started = await auth.client.registerMerchant({ email, password: overrides.password ?? PASSWORD, name: overrides.name ?? 'Acme Ltd' });
  const code = auth.notifier.signUpCodes(started.email).at(-1);
  if (code === undefined) throw new Error(`no sign-up code was emailed to ${started.email}`);
  const res = await auth.client.confirmRegistration({ email, code, password: overrides.password ?? PASSWORD });
  if (!res.merchant) throw new Error('ConfirmRegistration answered no merchant');
  return { merchant: res.merchant, token: res.token, email };
}

/**
 * Messages published on `subject` (core NATS, as the gateway listens) from now on, optionally only
 * those `accept` keeps (an event about another test's project can still be in flight).
 */
export class SubjectWatcher {
  readonly messages: { msg: Msg; receivedAt: number }[] = [];
  private readonly sub: Subscription;
  private readonly done: Promise<void>;

  /**
   * Subscribed, and known to the server: a publish right after this cannot precede the
   * subscription (a CI run missed the first of two events a test made at once).
   */
  static async start(nats: NatsConnection, subject: string, accept: (msg: Msg) => boolean = () => true): Promise<SubjectWatcher> {
    const watcher = new SubjectWatcher(nats, subject, accept);
    await nats.flush();
    return watcher;
  }

  private constructor(nats: NatsConnection, subject: string, accept: (msg: Msg) => boolean) {
    const sub = nats.subscribe(subject);
    this.sub = sub;
    this.done = (async () => {
      for await (const msg of sub) if (accept(msg)) this.messages.push({ msg, receivedAt: Date.now() });
    })();
  }

  /** Resolves once `count` messages arrived; rejects after `timeoutMs`. */
  async waitFor(count: number, timeoutMs = 5_000): Promise<{ msg: Msg; receivedAt: number }[]> {
    const deadline = Date.now() + timeoutMs;
    while (this.messages.length < count) {
      if (Date.now() > deadline) throw new Error(`expected ${count} message(s) on ${this.sub.getSubject()}, got ${this.messages.length}`);
      await sleep(5);
    }
    return this.messages.slice(0, count);
  }

  async close(): Promise<void> {
    this.sub.unsubscribe();
    await this.done;
  }
}

/** Accepts the events whose `event-key` header (what the event is about) is `key`. */
export function aboutKey(key: string): (msg: Msg) => boolean {
  return (msg) => msg.headers?.get('event-key') === key;
}

export function decodeEvent<D extends DescMessage>(schema: D, msg: Msg): MessageShape<D> {
  return fromJson(schema, JSON.parse(new TextDecoder().decode(msg.data)));
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Every row of every table of the database's own schemas, as text (all columns, any type). */
export async function dumpDatabase(db: Sql): Promise<string[]> {
  const tables = await db<{ schema: string; table: string }[]>`
    select table_schema as schema, table_name as table from information_schema.tables
    where table_type = 'BASE TABLE' and table_schema not in ('pg_catalog', 'information_schema')`;
  const rows: string[] = [];
  for (const { schema, table } of tables) {
    const found = await db<{ row: string }[]>`select t::text as row from ${db(`${schema}.${table}`)} t`;
    rows.push(...found.map((r) => `${schema}.${table}: ${r.row}`));
  }
  return rows;
}

// ---------------------------------------------------------------------------------------------
// Instrumented service definitions

/** Counts the queries a pool (and the transactions it begins) sends to Postgres. */
export class QueryCounter {
  count = 0;

  /** `sql` as a proxy that counts every query before passing it through unchanged. */
  wrap<T extends Sql | TransactionSql>(sql: T): T {
    const counter = this;
    return new Proxy(sql, {
      // sql`…` (a tagged template: the first argument has `raw`) sends a query; sql(value) only
      // builds a fragment (identifiers, value lists) and is not counted.
      apply(target, thisArg, args: unknown[]) {
        const first = args[0];
        if (Array.isArray(first) && 'raw' in first) counter.count += 1;
        return Reflect.apply(target, thisArg, args);
      },
      get(target, prop) {
        const value: unknown = Reflect.get(target, prop, target);
        if (typeof value !== 'function') return value;
        if (prop === 'begin') {
          return (...args: unknown[]) => {
            counter.count += 1;
            const callback = args[args.length - 1] as (tx: TransactionSql) => unknown;
            args[args.length - 1] = (tx: TransactionSql) => callback(counter.wrap(tx));
            return (value as (...a: unknown[]) => unknown).apply(target, args);
          };
        }
        if (prop === 'unsafe' || prop === 'file' || prop === 'reserve' || prop === 'savepoint') {
          return (...args: unknown[]) => {
            counter.count += 1;
            return (value as (...a: unknown[]) => unknown).apply(target, args);
          };
        }
        return (value as (...a: unknown[]) => unknown).bind(target);
      },
    });
  }
}

/**
 * `definition` with its build given a wrapped pool and/or another logger: the service runs
 * unchanged (same handlers, stores and gRPC server) while the test observes what it does.
 */
export function instrumented(
  definition: AuthDefinition,
  hooks: { queries?: QueryCounter; logger?: Logger },
): AuthDefinition {
  return {
    ...definition,
    build: (deps) =>
      definition.build({
        ...deps,
        sql: hooks.queries ? hooks.queries.wrap(deps.sql) : deps.sql,
        logger: hooks.logger ?? deps.logger,
      }),
  };
}

/** A logger at `trace` that keeps every line it writes. */
export function capturingLogger(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer | string, _encoding, callback) {
      lines.push(chunk.toString());
      callback();
    },
  });
  return { logger: createLogger({ service: 'auth', level: 'trace', destination }), lines };
}
