// Credentials are checked by the gateway and issued here: their format lives in the shared runtime.
export * from '@coinvoice/runtime/credentials/jwt';
