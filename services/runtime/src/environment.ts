/** Checks and consequences of a project's environment in requests to the invoice and payout services. */
import type { Network } from './coins/currencies';
import { isProjectEnvironment, type ProjectEnvironment } from './credentials/environment';
import { fail, pass, type Check } from './validation';

export function checkEnvironment(raw: unknown): Check<ProjectEnvironment> {
  return isProjectEnvironment(raw) ? pass(raw) : fail('must be live or sandbox');
}

/** Sandbox projects use the coins' testnets, live projects mainnet (docs/architecture.md#sandbox-and-live). */
export function networkOf(environment: ProjectEnvironment): Network {
  return environment === 'sandbox' ? 'testnet' : 'mainnet';
}
