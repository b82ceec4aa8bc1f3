/** The signer's Prometheus metrics (docs/treasury.md#signer-policy): refusals by rule, signatures by purpose. */
import { Counter, type Registry } from 'prom-client';

export interface SignerMetrics {
  refusals: Counter<'rule'>;
  signatures: Counter<'purpose'>;
}

export function createSignerMetrics(registry: Registry): SignerMetrics {
  return {
    refusals: new Counter({ name: 'signer_refusals_total', help: 'Requests the signer refused, by rule (docs/treasury.md#signer-policy)', labelNames: ['rule'] as const, registers: [registry] }),
    signatures: new Counter({ name: 'signer_signatures_total', help: 'Transactions the signer signed, by purpose', labelNames: ['purpose'] as const, registers: [registry] }),
  };
}
