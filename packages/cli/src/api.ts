/** The typed client of the configured gateway, and how an API error becomes one line for the user. */
import { createCoinvoiceClient, type CoinvoiceClient, type Problem } from '@coinvoice/client';
import { CliError, type CliConfig } from './config';

export function apiKeyClient(config: CliConfig): CoinvoiceClient {
  return createCoinvoiceClient({ baseUrl: config.baseUrl, apiKey: config.apiKey });
}

export function merchantClient(config: Pick<CliConfig, 'baseUrl' | 'token'>): CoinvoiceClient {
  return createCoinvoiceClient({ baseUrl: config.baseUrl, token: config.token });
}

/** The data of a successful answer; an error answer becomes a CliError naming its code and fields. */
export function unwrap<T>(result: { data?: T; error?: unknown; response: Response }, what: string): T {
  if (result.data !== undefined && result.response.ok) return result.data;
  const problem = result.error as Partial<Problem> | undefined;
  const fields = (problem?.errors ?? []).map((e) => `${e.field} ${e.message}`).join('; ');
  // A session or key that no longer works (expired after 12 hours, revoked): logging in again helps.
  const hint = result.response.status === 401 && what !== 'login' ? ' (run `coinvoice login` again)' : '';
  throw new CliError(
    `${what} failed: ${result.response.status} ${problem?.code ?? result.response.statusText}${problem?.detail ? `: ${problem.detail}` : ''}${fields ? ` (${fields})` : ''}${hint}`,
  );
}
