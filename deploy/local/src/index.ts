/** The launcher's pieces, for tools that start the system themselves (the benchmark). */
export * from './infrastructure';
export * from './system';
export { ensureSandboxCredentials } from './sandbox-credentials';
export { ensureEventKeys } from './event-keys';
export { awaitSignUpCode, readMailbox, signUpCodesIn } from './mailbox';
