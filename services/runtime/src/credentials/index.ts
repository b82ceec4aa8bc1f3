/**
 * Credential formats shared by the auth service (which issues them) and the gateway (which checks
 * them on every request without asking auth): API keys and EdDSA session JWTs.
 */
export * from './environment';
export * from './api-keys';
export * from './jwt';
export * from './one-time-code';
