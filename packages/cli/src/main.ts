/**
 * The `coinvoice` command (the only place that reads the environment and the arguments):
 *
 *   coinvoice login --email you@shop.example [--password …] [--base-url http://127.0.0.1:8080] [--project <id>]
 *   coinvoice invoices create --amount 19.90 --currency EUR --pay BTC [--network bitcoin] --success-url … --cancel-url … [--order-id …] [--description …]
 *   coinvoice invoices get <id>
 *   coinvoice invoices list [--limit 20] [--status Waiting|PartiallyPaid|Confirming|Paid|Expired]
 *   coinvoice sandbox pay <id>
 *   coinvoice rates [--base-url http://127.0.0.1:8080] [--json]
 *   coinvoice currencies [--base-url http://127.0.0.1:8080] [--json]
 *   coinvoice trigger <event type>   (a test event of any type of the catalogue; --help lists them)
 *   coinvoice listen --forward-to http://localhost:3000/webhooks [--events invoice.paid,…]
 *
 * The password may also come from COINVOICE_PASSWORD; the config file is COINVOICE_CONFIG
 * (default ~/.config/coinvoice/config.json).
 */
import { parseArgs } from 'node:util';
import { createInvoice, currencies, getInvoice, INVOICE_STATUSES, listInvoices, login, rates, sandboxPay, trigger, TRIGGER_EVENTS, triggerUsage, type InvoiceStatusFilter, type Io } from './commands';
import { CliError, configPath, readConfig } from './config';
import { listen } from './listen';

const USAGE = `usage:
  coinvoice login --email <email> --password <password> (or COINVOICE_PASSWORD) [--base-url <url>] [--project <id>]
  coinvoice invoices create --amount <decimal> --currency <fiat> --pay <coin> [--network <network>] --success-url <url> --cancel-url <url> [--order-id <id>] [--description <text>]
  coinvoice invoices get <id>
  coinvoice invoices list [--limit <n>] [--status Waiting|PartiallyPaid|Confirming|Paid|Expired]
  coinvoice sandbox pay <id>
  coinvoice rates [--base-url <url>] [--json]
  coinvoice currencies [--base-url <url>] [--json]   (the assets and networks invoices take)
  coinvoice trigger <event type>   (a test event: ${Object.keys(TRIGGER_EVENTS).join(', ')})
  coinvoice listen --forward-to <url> [--events <type,type>]`;

function required(value: string | undefined, flag: string): string {
  if (value === undefined || value === '') throw new CliError(`${flag} is required\n${USAGE}`);
  return value;
}

/** For the public commands: --base-url / COINVOICE_BASE_URL, else the logged-in base URL, else the local default. */
function publicBaseUrl(flag: string | undefined, env: NodeJS.ProcessEnv, io: Io): string {
  const given = flag ?? env.COINVOICE_BASE_URL;
  if (given !== undefined) return given;
  try {
    return readConfig(io.configFile).baseUrl;
  } catch {
    return 'http://127.0.0.1:8080';
  }
}

async function run(argv: string[], env: NodeJS.ProcessEnv): Promise<void> {
  const { values: v, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      email: { type: 'string' },
      password: { type: 'string' },
      'base-url': { type: 'string' },
      project: { type: 'string' },
      amount: { type: 'string' },
      currency: { type: 'string' },
      pay: { type: 'string' },
      network: { type: 'string' },
      'order-id': { type: 'string' },
      description: { type: 'string' },
      'success-url': { type: 'string' },
      'cancel-url': { type: 'string' },
      limit: { type: 'string' },
      status: { type: 'string' },
      'forward-to': { type: 'string' },
      events: { type: 'string' },
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  // A reader that stops early (`| head -1`) closes the pipe: the rest of the output has no one to go to.
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(0);
    throw err;
  });
  const io: Io = { out: (line) => process.stdout.write(`${line}\n`), configFile: configPath(env) };
  const [command, sub, arg] = positionals;
  if (v.help && command === 'trigger') {
    io.out(triggerUsage());
    return;
  }
  if (v.help || command === undefined) {
    io.out(USAGE);
    return;
  }
  switch (`${command} ${sub ?? ''}`.trim()) {
    case 'login':
      await login(io, {
        baseUrl: v['base-url'] ?? env.COINVOICE_BASE_URL ?? 'http://127.0.0.1:8080',
        email: required(v.email, '--email'),
        password: required(v.password ?? env.COINVOICE_PASSWORD, '--password (or COINVOICE_PASSWORD)'),
        ...(v.project ? { project: v.project } : {}),
      });
      return;
    case 'invoices create':
      await createInvoice(io, {
        amount: required(v.amount, '--amount'),
        currency: required(v.currency, '--currency'),
        pay: required(v.pay, '--pay'),
        ...(v.network ? { network: v.network } : {}),
        // Where the customer goes after paying or giving up is the shop's own page: never a guess.
        successUrl: required(v['success-url'], '--success-url'),
        cancelUrl: required(v['cancel-url'], '--cancel-url'),
        ...(v['order-id'] ? { orderId: v['order-id'] } : {}),
        ...(v.description ? { description: v.description } : {}),
      });
      return;
    case 'invoices get':
      await getInvoice(io, required(arg, '<id>'));
      return;
    case 'invoices list': {
      const status = v.status;
      const isStatus = (value: string): value is InvoiceStatusFilter => (INVOICE_STATUSES as readonly string[]).includes(value);
      if (status !== undefined && !isStatus(status)) throw new CliError(`--status must be one of ${INVOICE_STATUSES.join(', ')}`);
      await listInvoices(io, { ...(v.limit ? { limit: v.limit } : {}), ...(status ? { status } : {}) });
      return;
    }
    case 'rates':
      await rates(io, publicBaseUrl(v['base-url'], env, io), { json: v.json === true });
      return;
    case 'currencies':
      await currencies(io, publicBaseUrl(v['base-url'], env, io), { json: v.json === true });
      return;
    case 'sandbox pay':
      await sandboxPay(io, required(arg, '<id>'));
      return;
    default:
      if (command === 'trigger') {
        if (sub === undefined) throw new CliError(`<event type> is required\n${triggerUsage()}`);
        return void (await trigger(io, sub));
      }
      if (command === 'listen') {
        const controller = new AbortController();
        process.once('SIGINT', () => controller.abort());
        process.once('SIGTERM', () => controller.abort());
        await listen(io, {
          forwardTo: required(v['forward-to'], '--forward-to'),
          events: (v.events ?? '').split(',').filter((e) => e !== ''),
          signal: controller.signal,
        });
        return;
      }
      throw new CliError(`unknown command: ${positionals.join(' ')}\n${USAGE}`);
  }
}

/** One line for the user: our own errors as they are, others (e.g. "fetch failed") with their cause. */
function describe(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  if (err instanceof CliError) return err.message;
  const cause = err.cause instanceof Error ? `: ${err.cause.message}` : '';
  return `${err.message}${cause}`;
}

run(process.argv.slice(2), process.env).catch((err: unknown) => {
  process.stderr.write(`coinvoice: ${describe(err)}\n`);
  process.exitCode = 1;
});
