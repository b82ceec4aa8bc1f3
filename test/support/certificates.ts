/**
 * A throwaway internal CA and certificates for mutual-TLS tests, made with the machine's openssl:
 * each certificate names its holder in subjectAltName (DNS:<name>, plus 127.0.0.1 so a test can
 * dial the loopback address), as cert-manager issues them in the cluster.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

export interface IssuedCertificate {
  certFile: string;
  keyFile: string;
  cert: Buffer;
  key: Buffer;
}

export class TestCertificateAuthority {
  readonly dir = mkdtempSync(path.join(tmpdir(), 'coinvoice-ca-'));
  readonly caFile = path.join(this.dir, 'ca.pem');
  private readonly caKeyFile = path.join(this.dir, 'ca.key');

  constructor(commonName = 'coinvoice test CA') {
    this.openssl(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', this.caKeyFile, '-out', this.caFile, '-days', '2', '-subj', `/CN=${commonName}`]);
  }

  get ca(): Buffer {
    return readFileSync(this.caFile);
  }

  /** A certificate for `name` (subjectAltName DNS:name, IP:127.0.0.1), signed by this CA. */
  issue(name: string): IssuedCertificate {
    const keyFile = path.join(this.dir, `${name}.key`);
    const csrFile = path.join(this.dir, `${name}.csr`);
    const certFile = path.join(this.dir, `${name}.pem`);
    const extFile = path.join(this.dir, `${name}.ext`);
    writeFileSync(extFile, `subjectAltName=DNS:${name},IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n`);
    this.openssl(['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', keyFile, '-out', csrFile, '-subj', `/CN=${name}`]);
    this.openssl(['x509', '-req', '-in', csrFile, '-CA', this.caFile, '-CAkey', this.caKeyFile, '-CAcreateserial', '-out', certFile, '-days', '2', '-extfile', extFile]);
    return { certFile, keyFile, cert: readFileSync(certFile), key: readFileSync(keyFile) };
  }

  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }

  private openssl(args: string[]): void {
    execFileSync('openssl', args, { stdio: 'pipe' });
  }
}
