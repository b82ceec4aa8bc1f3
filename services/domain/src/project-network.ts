/** Checks and consequences of a project's environment in requests to the invoice and payout services. */
import { fail, pass, type Check } from '@coinvoice/runtime';
import { isProjectEnvironment, type ProjectEnvironment } from './environment';

/** Live projects use mainnet; sandbox projects use the coin's testnet (same key formats). */
export type Network = 'mainnet' | 'testnet';
export const NETWORKS: readonly Network[] = ['mainnet', 'testnet'];

export function checkEnvironment(raw: unknown): Check<ProjectEnvironment> {
  return isProjectEnvironment(raw) ? pass(raw) : fail('must be live or sandbox');
}

/** Sandbox projects use the coins' testnets, live projects mainnet (docs/architecture.md#sandbox-and-live). */
export function networkOf(environment: ProjectEnvironment): Network {
  return environment === 'sandbox' ? 'testnet' : 'mainnet';
}
