/** The auth service's pure domain: key formats, password hashing, session tokens, input rules. */
export * from './environment';
export * from './api-keys';
export * from './passwords';
export * from './jwt';
export * from './webhook-secrets';
export * from './validation';
export * from './webhook-url-policy';
