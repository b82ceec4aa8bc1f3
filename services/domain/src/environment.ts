/**
 * A project's environment, in its public REST and event spelling (see common/v1/environment.proto).
 * Fixed when the project is created; it decides the API key prefix and which money is real.
 *
 * The ONE mapping between the proto enum and the spelling, for the whole repository. It fails
 * closed: UNSPECIFIED or a value this code does not know is never taken for live or sandbox
 * (docs/accounting.md) — the caller refuses it.
 */
import { Environment } from '@coinvoice/runtime/gen/coinvoice/common/v1/environment_pb';

export type ProjectEnvironment = 'live' | 'sandbox';

export const PROJECT_ENVIRONMENTS: readonly ProjectEnvironment[] = ['live', 'sandbox'];

export function isProjectEnvironment(value: unknown): value is ProjectEnvironment {
  return value === 'live' || value === 'sandbox';
}

export function environmentToProto(environment: ProjectEnvironment): Environment {
  switch (environment) {
    case 'live':
      return Environment.LIVE;
    case 'sandbox':
      return Environment.SANDBOX;
    default:
      throw new Error(`unknown environment ${JSON.stringify(environment satisfies never)}`);
  }
}

/** 'live' | 'sandbox'; undefined for UNSPECIFIED and for any value this code does not know. */
export function environmentFromProto(environment: Environment): ProjectEnvironment | undefined {
  switch (environment) {
    case Environment.LIVE:
      return 'live';
    case Environment.SANDBOX:
      return 'sandbox';
    default:
      return undefined;
  }
}

/**
 * The environment a service's answer names; throws when it is unspecified or unknown (a bug or a
 * newer peer upstream): nothing may be decided on a guess.
 */
export function requireEnvironment(environment: Environment, what: string): ProjectEnvironment {
  const name = environmentFromProto(environment);
  if (name === undefined) throw new UnknownEnvironmentError(`${what}: environment ${environment} is unspecified or unknown`);
  return name;
}

export class UnknownEnvironmentError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UnknownEnvironmentError';
  }
}
