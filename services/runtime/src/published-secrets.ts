/**
 * Secrets anyone with this repository holds (docs/architecture.md#published-secrets): the
 * development overlay's (deploy/k8s/overlays/development: its KEK, xpubs, signer mnemonic, event
 * keys, TLS keys and certificates), the development KEK derived in source, and the well-known test
 * mnemonics. APP_ENV=production refuses to start with any of them, one line naming the variable
 * (the value is never shown): copying the development overlay's Secrets into production would
 * otherwise send live deposits to addresses of a published mnemonic, let anyone forge signed events,
 * and leave secrets at rest under a published key. Kept as SHA-256 of a normal form, so this file
 * does not publish them once more; test/deploy/published-secrets.test.ts checks that every secret
 * of the development overlay is listed.
 */
import { createHash } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { ConfigError } from './config';

const PUBLISHED_SECRET_FINGERPRINTS: ReadonlySet<string> = new Set([
  // SECRETS_KEK of the development overlay
  'c9d78b3d6f6ddc608343a89e7e07e1454a1ed8146e8fff7938819983ce34b95d',
  // DEVELOPMENT_KEK_BASE64 (the development default)
  'bb9c9949ecf6afa1c910a5c56aa60ab884362b42779f290b5439a5b0413b9a92',
  // INVOICE_XPUB_* of the development overlay
  '63fa9150a76cec1e22cd3817acf9d78354c06a3d8e782c4173b54f8f916b6161',
  // signer-seed/mnemonic
  'c1e6a6cf7302d86cef78a9ed989ef5e9cc6c3fdea0e0aaff10a49d7b17949198',
  // anvil's default mnemonic
  'f79cd64f9cea237897b8133e4b905b361c6f166faa5a1c64c32280938f5b707e',
  // the BIP39 test vector mnemonic
  'c557eec878dfd852ba3f88087c4f350f09c55537ab5e549c3cd14320ec3cef38',
  // event-keys/auth.pem
  '1203c33becc2af3e7422f365ae31008a278ea8e08562cc3e31bb0b31cabd74f2',
  // event-keys/invoice.pem
  '7cc0d0aa03c32fcb78ade9c47f3f66422ef482255ade032f4275953ebed140ca',
  // event-keys/payout.pem
  '5c1d40c754a5d88e7ddcdd2a76ed5829c229650db0621c29125b51243db4e9bd',
  // event-keys/notifier.pem
  '249fc4e0576da4050124119a82971f1a0b40e5c75fec925ddfad1066c85b6f07',
  // the public key of event-keys/auth.pem
  '767d2ebdfb8e9aecc02c67675f76dc71b2b4d95105f430a86cc0bf1bee8ea34d',
  // the public key of event-keys/invoice.pem
  '40009443a0a00735921ffb9501a0266c12633ac5d335549314eb11f8a7e283ca',
  // the public key of event-keys/payout.pem
  '09dde2ddceef5061543846b31966966403f08417226f382be09161600cab686a',
  // the public key of event-keys/notifier.pem
  '7b9ea38a590e2b8219506fc0b9ba33b534203dc9c6867692e2a64e8f0076cf8a',
  // tls/ca.crt
  '65cbc2f262f7c8eeabfda7603705e48a79d766920c84bbd57548ea1d15ffe939',
  // tls/payout-processor.crt
  '06bb7f89cb722feccff588d9378b6b4000ee06087c2932558ee3ea093160f7ec',
  // tls/payout-processor.key
  'ce8274e0bbc3c230b45027ebea7d625c2fbb123f21a021f6a95a38b6628fd9db',
  // tls/payout-signer.crt
  'b75b5be583f95266bd652cbf24b007461c79a9bed9d477e66f088b9d3efbfc9a',
  // tls/payout-signer.key
  'ff61fe282f4fabd2986f58555952095a9046244fd5cd7539a2820efe212daa1e',
]);

/** SHA-256 of `text` trimmed, its whitespace runs made one space, lower-cased. */
export function secretFingerprint(text: string): string {
  return createHash('sha256').update(text.trim().replace(/\s+/g, ' ').toLowerCase()).digest('hex');
}

export function isPublishedSecret(text: string): boolean {
  return PUBLISHED_SECRET_FINGERPRINTS.has(secretFingerprint(text));
}

/** A key-encryption key's bytes as the fingerprint's text (hex), from its base64 (SECRETS_KEK). */
function kekText(base64: string): string | undefined {
  const bytes = Buffer.from(base64.trim().replace(/-/g, '+').replace(/_/g, '/'), 'base64');
  return bytes.length === 32 ? bytes.toString('hex') : undefined;
}

/** Files named by *_FILE variables are read when at most this large (keys, certificates, a mnemonic). */
const MAX_SECRET_FILE_BYTES = 64 * 1024;

/**
 * The secrets `env` configures, each with the variable it came from: SECRETS_KEK and
 * SECRETS_KEK_PREVIOUS (as key bytes), INVOICE_XPUB_*, EVENT_VERIFY_KEYS' keys (a published private
 * half makes its public one forgeable), and the contents of every file a *_FILE variable names.
 */
function configuredSecrets(env: NodeJS.ProcessEnv): Array<{ variable: string; text: string }> {
  const found: Array<{ variable: string; text: string }> = [];
  const add = (variable: string, text: string | undefined) => {
    if (text !== undefined && text.trim() !== '') found.push({ variable, text });
  };
  for (const [variable, value] of Object.entries(env)) {
    if (value === undefined || value.trim() === '') continue;
    if (variable === 'SECRETS_KEK' || variable === 'SECRETS_KEK_PREVIOUS') {
      for (const key of value.split(',')) add(variable, kekText(key));
    } else if (variable.startsWith('INVOICE_XPUB_')) {
      add(variable, value);
    } else if (variable === 'EVENT_VERIFY_KEYS') {
      for (const entry of value.split(',')) add(variable, entry.slice(entry.indexOf('=') + 1));
    } else if (variable.endsWith('_FILE')) {
      try {
        if (statSync(value.trim()).size <= MAX_SECRET_FILE_BYTES) add(variable, readFileSync(value.trim(), 'utf8'));
      } catch {
        // Unreadable here: the setting's own check names it.
      }
    }
  }
  return found;
}

/**
 * Throws a ConfigError naming the first variable of `env` that holds a published secret, or a
 * SECRETS_KEK of fewer than 8 distinct bytes (32 zero bytes is no key), when APP_ENV=production.
 */
export function refusePublishedSecrets(env: NodeJS.ProcessEnv): void {
  if (env.APP_ENV !== 'production') return;
  for (const { variable, text } of configuredSecrets(env)) {
    if (isPublishedSecret(text)) {
      throw new ConfigError(variable, 'a secret of your own: this one is published in the repository (the development overlay or a test fixture), and APP_ENV=production never runs with it', undefined, false);
    }
    if (variable.startsWith('SECRETS_KEK') && new Set(Buffer.from(text, 'hex')).size < 8) {
      throw new ConfigError(variable, '32 random bytes (openssl rand -base64 32): this key has fewer than 8 distinct bytes', undefined, false);
    }
  }
}
