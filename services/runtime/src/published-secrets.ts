/**
 * Secrets anyone with this repository holds (docs/architecture.md#published-secrets): the
 * development overlay's (deploy/k8s/overlays/development: its KEK, xpubs, signer mnemonic and the
 * account xpubs of every network it derives, event keys, TLS keys and certificates, database
 * password), the development KEK derived in source, and the well-known test mnemonics with their
 * account xpubs. APP_ENV=production refuses to start with any of them, one line naming the variable
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
  // the standard test-vector mnemonic (abandon … about)
  'c557eec878dfd852ba3f88087c4f350f09c55537ab5e549c3cd14320ec3cef38',
  // event-keys/auth.pem
  '1203c33becc2af3e7422f365ae31008a278ea8e08562cc3e31bb0b31cabd74f2',
  // event-keys/invoice.pem
  '7cc0d0aa03c32fcb78ade9c47f3f66422ef482255ade032f4275953ebed140ca',
  // event-keys/payout.pem
  '5c1d40c754a5d88e7ddcdd2a76ed5829c229650db0621c29125b51243db4e9bd',
  // event-keys/notifier.pem
  '249fc4e0576da4050124119a82971f1a0b40e5c75fec925ddfad1066c85b6f07',
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
  // the public key of event-keys/auth.pem (its bytes)
  '41e3786ba7126d01ae6a7bfa4703f1985fc30777bec7a4f76f248976c98a7cfc',
  // the public key of event-keys/invoice.pem (its bytes)
  '21098b11d850001794af2e0f2c4463b387848b52c87cd4f8ef9b28719233e584',
  // the public key of event-keys/payout.pem (its bytes)
  '90e1d6535e748a8c7c5424c04d0d556857691593d88b9e64855a26971b849998',
  // the public key of event-keys/notifier.pem (its bytes)
  '94fb90565ef5f620f9a50901e92e5938fbbcbc1c8535302e44d966b8cf36868e',
  // the development overlay's database password
  'c24f3338c2d30d50b5c06a38fa13533554ee0f64bb0373fdbbbd744105688c06',
  // account key 1 of the development overlay's signer mnemonic
  'ddaa2288b2026d2972cabae35a1985fbb736cd8f97c7bbea619124cd1d8e3f52',
  // account key 2 of the development overlay's signer mnemonic
  'c56ffc5ca775ad8bf1c8afc588bcaa9c40e19f4271ddb7d5781ad2cf29337f74',
  // account key 3 of the development overlay's signer mnemonic
  '7677096a4a3693e32e40239e9c4fbf73bacc31f2548514e66e147f297c5e8105',
  // account key 1 of anvil's default mnemonic
  '28e5c2dc20e2e22454ea56a5c3c610afc85d4900e1c4ccb5dee327bf45a73126',
  // account key 2 of anvil's default mnemonic
  'f2825c6323c7a518dcebca8ad42ab7110944d6b3c1eedde542cdaea8574370ed',
  // account key 3 of anvil's default mnemonic
  'ea5e6c5b36e8689f6b3c223887704d38263611c6fea3b5a7692169cabf156320',
  // account key 4 of anvil's default mnemonic
  'ae7f6bcfddc04c75ba46e83c07204fb3aec8612c61a4d841482f56852b80ddd4',
  // account key 1 of the standard test-vector mnemonic
  '1346ebed2532f5f42326c53afe8dd52e3ed06ad9bc686f810ac715e020aa47b7',
  // account key 2 of the standard test-vector mnemonic
  '06d55da94b3833ebe30969e6a247987fa73c7eb821a4101a0122b1a512884cfa',
  // account key 3 of the standard test-vector mnemonic
  '42acdfacab47224d06b12432212a2c1ca7293b0a9b7b4d6bb79314db7a9fbda3',
  // account key 4 of the standard test-vector mnemonic
  '39deea7f00932120c4f8040534f7988336e4954d017b0215220a3f358b65c897',
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

/** The files coinvoice reads secrets from: keys, certificates, the signer's seed. */
const SECRET_FILE_VARIABLES = ['EVENT_SIGNING_KEY_FILE', 'SIGNER_SEED_FILE', 'TLS_CA_FILE', 'TLS_CERT_FILE', 'TLS_KEY_FILE'];
/** A secret file is read when it is a regular file of at most this size (never a pipe or a device). */
const MAX_SECRET_FILE_BYTES = 64 * 1024;

/**
 * The secrets `env` configures, each with the variable it came from: SECRETS_KEK (its key bytes;
 * not SECRETS_KEK_PREVIOUS, where a published key is on its way out by `rotate-kek`),
 * INVOICE_XPUB_*, EVENT_VERIFY_KEYS' keys (their bytes: a published private half makes its public
 * one forgeable), the password of every *_URL, and the contents of the secret files.
 */
function configuredSecrets(env: NodeJS.ProcessEnv): Array<{ variable: string; text: string }> {
  const found: Array<{ variable: string; text: string }> = [];
  const add = (variable: string, text: string | undefined) => {
    if (text !== undefined && text.trim() !== '') found.push({ variable, text });
  };
  for (const [variable, value] of Object.entries(env)) {
    if (value === undefined || value.trim() === '') continue;
    if (variable === 'SECRETS_KEK') {
      add(variable, kekText(value));
    } else if (variable.startsWith('INVOICE_XPUB_')) {
      add(variable, value);
    } else if (variable === 'EVENT_VERIFY_KEYS') {
      for (const entry of value.split(',')) add(variable, Buffer.from(entry.slice(entry.indexOf('=') + 1).trim(), 'base64url').toString('hex'));
    } else if (variable.endsWith('_URL')) {
      add(variable, passwordOf(value));
    } else if (SECRET_FILE_VARIABLES.includes(variable)) {
      try {
        const stat = statSync(value.trim());
        if (stat.isFile() && stat.size <= MAX_SECRET_FILE_BYTES) add(variable, readFileSync(value.trim(), 'utf8'));
      } catch {
        // Unreadable here: the setting's own check names it.
      }
    }
  }
  return found;
}

function passwordOf(url: string): string | undefined {
  try {
    return decodeURIComponent(new URL(url).password) || undefined;
  } catch {
    return undefined;
  }
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
