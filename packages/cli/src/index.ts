/** The CLI's commands as functions (the `coinvoice` binary is main.ts). */
export * from './commands';
export { configPath, readConfig, CliError, type CliConfig } from './config';
export { forward, listen, type StreamedWebhook } from './listen';
