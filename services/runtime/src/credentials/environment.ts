/**
 * A project's environment, in its public REST and event spelling (see common/v1/environment.proto).
 * Fixed when the project is created; it decides the API key prefix and which money is real.
 */
export type ProjectEnvironment = 'live' | 'sandbox';

export const PROJECT_ENVIRONMENTS: readonly ProjectEnvironment[] = ['live', 'sandbox'];

export function isProjectEnvironment(value: unknown): value is ProjectEnvironment {
  return value === 'live' || value === 'sandbox';
}
