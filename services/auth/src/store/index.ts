/** The auth schema's repositories (postgres.js); migrations are the SQL files next to them. */
export * from './rows';
export * from './merchants';
export * from './signing-keys';
export * from './projects';
export * from './api-keys';
export * from './secrets';
export * from './sign-ups';
