/**
 * Process lifecycle shared by every main.ts: a readable one-line exit on bad configuration,
 * graceful shutdown on SIGTERM/SIGINT (and when a parent launcher holding our IPC channel goes
 * away, so no orphan survives it), and a hard exit if shutdown overruns its grace period.
 */
import { ConfigError } from './config';
import type { Logger } from './log';
import { refusePublishedSecrets } from './published-secrets';

export interface Running {
  /** Stops accepting work, finishes in-flight work, releases connections. */
  stop(): Promise<void>;
}

export interface MainOptions {
  name: string;
  graceMs?: number;
  start(): Promise<{ running: Running; logger: Logger }>;
}

/** Prints the reason a process cannot start as one line on stderr and exits 1. */
export function exitOnStartupError(name: string, err: unknown): never {
  const line = err instanceof ConfigError ? err.message : `${name}: failed to start: ${err instanceof Error ? err.message : String(err)}`;
  process.stderr.write(`${line}\n`);
  process.exit(1);
}

export function runMain(options: MainOptions): void {
  const graceMs = options.graceMs ?? 10_000;
  try {
    refusePublishedSecrets(process.env);
  } catch (err) {
    exitOnStartupError(options.name, err);
  }
  options.start().then(
    ({ running, logger }) => {
      let stopping = false;
      const shutdown = (reason: string) => {
        if (stopping) return;
        stopping = true;
        logger.info({ reason }, 'shutting down');
        const hard = setTimeout(() => {
          logger.error({ graceMs }, 'shutdown overran its grace period; exiting');
          process.exit(1);
        }, graceMs + 2_000);
        hard.unref();
        running.stop().then(
          () => {
            logger.info('stopped');
            logger.flush?.();
            process.exit(0);
          },
          (err: unknown) => {
            logger.error({ err }, 'shutdown failed');
            process.exit(1);
          },
        );
      };
      process.on('SIGTERM', () => shutdown('SIGTERM'));
      process.on('SIGINT', () => shutdown('SIGINT'));
      if (process.send) process.on('disconnect', () => shutdown('parent launcher went away'));
      process.on('unhandledRejection', (err) => logger.error({ err }, 'unhandled rejection'));
    },
    (err: unknown) => exitOnStartupError(options.name, err),
  );
}
