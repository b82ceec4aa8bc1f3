/**
 * `npm start`: the whole system on this machine, with one command. Prints the gateway URL when
 * everything is ready; Ctrl-C or SIGTERM stops every process it started.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { useCompileCache } from './compile-cache';
import { resolveNats, resolvePostgres, type Resolved } from './infrastructure';
import { ensureSandboxCredentials } from './sandbox-credentials';
import { CHAIN_SOURCES, configuredChains, createLocalDeveloper, fixedPortsTaken, REPO_ROOT, shownSource, startSystem, treasuryNetworks, type RunningSystem } from './system';

async function main(): Promise<void> {
  useCompileCache(); // for every process started from here
  const dataDir = path.resolve(process.env.COINVOICE_DATA_DIR ?? path.join(REPO_ROOT, '.data'));
  const gatewayPort = Number(process.env.GATEWAY_PORT ?? 8080);
  if (!Number.isInteger(gatewayPort) || gatewayPort < 0 || gatewayPort > 65535) {
    throw new Error(`GATEWAY_PORT=${process.env.GATEWAY_PORT} is invalid: expected a TCP port number (0 picks free ports)`);
  }
  const started: Resolved[] = [];
  let system: RunningSystem | undefined;
  let stopping = false;
  const stopAll = async (code: number) => {
    if (stopping) return;
    stopping = true;
    console.log('stopping coinvoice…');
    await system?.stop();
    for (const dep of started.reverse()) await dep.stop().catch(() => undefined);
    console.log('stopped');
    process.exit(code);
  };
  process.on('SIGINT', () => void stopAll(0));
  process.on('SIGTERM', () => void stopAll(0));
  // Started with an IPC channel (the test suites do): the parent's death closes it, and the
  // system must not outlive a test run that was killed before it could stop it.
  if (process.send) process.on('disconnect', () => void stopAll(0));

  try {
    const taken = await fixedPortsTaken(gatewayPort);
    if (taken) throw new Error(taken);
    const ports = { freePorts: gatewayPort === 0 };
    const postgres = await resolvePostgres(process.env, dataDir, ports);
    started.push(postgres);
    const nats = await resolveNats(process.env, dataDir, ports);
    started.push(nats);
    console.log(`postgres: ${postgres.source}`);
    console.log(`nats:     ${nats.source}`);
    const logDir = path.join(dataDir, 'logs');
    const systemFile = path.join(dataDir, 'system.json');
    // Without SMTP_URL the notifier writes each email (sign-up, email verification and payout codes) to this folder.
    const mailboxDir = process.env.MAILBOX_DIR ?? path.join(dataDir, 'mailbox');
    system = await startSystem({
      databaseUrl: postgres.url,
      natsUrl: nats.url,
      logDir,
      eventKeyDir: path.join(dataDir, 'event-keys'),
      gatewayPort,
      env: { ...process.env, MAILBOX_DIR: mailboxDir },
      onChange: (s) => writeFileSync(systemFile, JSON.stringify({ gatewayUrl: s.gatewayUrl, processes: s.describe() }, null, 2)),
      onRestart: (name, reason) => console.error(`${name} stopped (${reason}); starting it again. Its log: ${path.join(logDir, `${name}.log`)}`),
      onGiveUp: (reason) => {
        console.error(`${reason}: not started again; stopping coinvoice`);
        void stopAll(1);
      },
    });
    // A local developer is a development convenience: with APP_ENV=production (the mTLS
    // rehearsal) nothing is made behind the API's back; sign up in the dashboard.
    const production = process.env.APP_ENV === 'production';
    const credentialsFile = path.join(dataDir, 'sandbox-credentials.json');
    const sandbox = production
      ? undefined
      : await ensureSandboxCredentials(system.gatewayUrl, credentialsFile, (email, password) => createLocalDeveloper(postgres.url, process.env, email, password));
    console.log(`logs:     ${logDir}/<process>.log`);
    if (sandbox) {
      console.log(`sandbox:  x-api-key ${sandbox.apiKey}`);
      console.log(`          (dashboard login ${sandbox.email}; password in ${credentialsFile})`);
    } else {
      console.log('sandbox:  none made (APP_ENV=production: no local developer; sign up in the dashboard)');
    }
    console.log(`dashboard: ${system.gatewayUrl}/dashboard  (sign up${sandbox ? `, or sign in as ${sandbox.email}` : ''})`);
    console.log(`docs:     ${system.gatewayUrl}/docs`);
    if (!process.env.SMTP_URL) console.log(`mailbox:  ${mailboxDir} (emails as .eml files; set SMTP_URL to send them)`);
    printWatchers(system);
    printTreasury(system);
    printDevelopmentKeys(system);
    await printRatesWarning(system.gatewayUrl);
    if (sandbox) {
      console.log('');
      console.log('try it:');
      console.log(`  curl -s ${system.gatewayUrl}/api/invoice -H 'x-api-key: ${sandbox.apiKey}' -H 'content-type: application/json' \\`);
      console.log(`    -d '{"priceAmount":"19.90","priceCurrency":"USD","payCurrency":"BTC","successUrl":"https://example.com/ok","cancelUrl":"https://example.com/cancel"}'`);
    }
    console.log('');
    console.log(`coinvoice is ready at ${system.gatewayUrl}`);
  } catch (err) {
    console.error(`coinvoice could not start: ${err instanceof Error ? err.message : String(err)}`);
    await stopAll(1);
  }
}

/** The chain watchers started, each with the node it follows (live invoices are paid only on those chains). */
function printWatchers(system: RunningSystem): void {
  const chains = configuredChains(process.env);
  if (chains.length === 0) {
    console.log(`watchers: none: live invoices are not watched (set ${Object.values(CHAIN_SOURCES).join(', ')} to watch a chain)`);
    return;
  }
  const processes = system.describe();
  for (const chain of chains) {
    const variable = CHAIN_SOURCES[chain]!;
    const replicas = Object.keys(processes).filter((name) => name === `watch-${chain}` || name.startsWith(`watch-${chain}-`));
    const admin = processes[`watch-${chain}`]?.adminUrl;
    console.log(`watcher:  ${chain} ← ${shownSource(process.env[variable] ?? '')} (${variable}; ${replicas.join(', ')}${admin ? `; metrics ${admin}/metrics` : ''})`);
  }
}

/**
 * Live invoices of a coin without INVOICE_XPUB_<COIN> get addresses of a key pair the invoice
 * service made and keeps, private key included: said at start, not only in the invoice log.
 */
function printDevelopmentKeys(system: RunningSystem): void {
  if (system.developmentKeyCoins.length === 0) return;
  console.log(
    `WARNING:  development keys for ${system.developmentKeyCoins.join(', ')}: live invoices in these coins get addresses of key pairs ` +
      'the invoice service made and keeps (private keys included, invoice.development_keys); never send real funds to them: ' +
      'set INVOICE_XPUB_<COIN> to your wallet account xpubs (README, "Configuration")',
  );
}

/** The treasury's processes (docs/treasury.md), or how to get them. */
function printTreasury(system: RunningSystem): void {
  const networks = treasuryNetworks(process.env);
  if (networks.length === 0) {
    console.log('treasury: off: payouts are completed by operators (set SIGNER_SEED_FILE and a chain node to send them: README, "Live payouts")');
    return;
  }
  const processes = system.describe();
  console.log(`treasury: signer payout-sign (${process.env.SIGNER_SEED_FILE}); processors ${networks.map((n) => `payout-process-${n}`).join(', ')}` +
    `${processes['payout-sign']?.adminUrl ? `; metrics ${processes[`payout-process-${networks[0]}`]?.adminUrl}/metrics` : ''}`);
}

/**
 * Prices from the static table are not the market's: said once at start (and on every live
 * invoice's page in the dashboard), so nobody takes a 2025 price for today's.
 */
async function printRatesWarning(gatewayUrl: string): Promise<void> {
  const res = await fetch(`${gatewayUrl}/api/rates`).catch(() => undefined);
  if (!res?.ok) return;
  const rates = (await res.json()) as { source?: string; rates?: Array<{ quotedAt?: string | null }> };
  if (rates.source !== 'static') return;
  const dated = rates.rates?.find((r) => typeof r.quotedAt === 'string')?.quotedAt;
  console.log(
    `WARNING:  rates come from the static table${dated ? ` of ${dated.slice(0, 10)}` : ''} (RATES_SOURCE=static, the development default): ` +
      'live invoices are priced from it, not from the market; RATES_SOURCE=live asks Coinbase and Kraken',
  );
}

void main();
