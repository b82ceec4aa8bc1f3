/** Where `coinvoice login` keeps what the other commands need: one JSON file, readable by its owner only. */
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

export interface CliConfig {
  baseUrl: string;
  email: string;
  /** Merchant session token (dashboard routes: invoices list). */
  token: string;
  tokenExpiresAt: string;
  projectId: string;
  projectName: string;
  environment: 'live' | 'sandbox';
  /** The API key `login` created for the CLI in that project. */
  apiKey: string;
  /** Its id: the next login of the same project keeps the key while it is not revoked (absent in configs of earlier versions). */
  apiKeyId?: string;
  /**
   * The key `login` made in every project it was used with, by `projectKeyRef`: switching to
   * another project and back keeps each project's key instead of minting one per switch (the
   * file being the only place its secret is kept).
   */
  projectKeys?: Record<string, { apiKey: string; apiKeyId: string }>;
}

/** Where a project's CLI key is kept in `projectKeys`: one gateway's project. */
export function projectKeyRef(baseUrl: string, projectId: string): string {
  return `${baseUrl} ${projectId}`;
}

export class CliError extends Error {}

/** The config file: COINVOICE_CONFIG, else $XDG_CONFIG_HOME/coinvoice/config.json, else ~/.config/…. */
export function configPath(env: NodeJS.ProcessEnv): string {
  if (env.COINVOICE_CONFIG) return path.resolve(env.COINVOICE_CONFIG);
  const base = env.XDG_CONFIG_HOME ?? path.join(env.HOME ?? '.', '.config');
  return path.join(base, 'coinvoice', 'config.json');
}

export function readConfig(file: string): CliConfig {
  if (!existsSync(file)) throw new CliError(`not logged in: run \`coinvoice login\` first (no ${file})`);
  const parsed = JSON.parse(readFileSync(file, 'utf8')) as Partial<CliConfig>;
  for (const key of ['baseUrl', 'token', 'projectId', 'apiKey'] as const) {
    if (typeof parsed[key] !== 'string' || parsed[key] === '') throw new CliError(`${file} has no ${key}: run \`coinvoice login\` again`);
  }
  return parsed as CliConfig;
}

export function writeConfig(file: string, config: CliConfig): void {
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  writeFileSync(file, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 });
  chmodSync(file, 0o600);
}
