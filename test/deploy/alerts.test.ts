/**
 * deploy/k8s/monitoring/prometheus-rules.yaml: a PrometheusRule whose every alert has an
 * expression, a severity and a summary, and whose expressions name only metrics the services
 * register (so a renamed metric cannot silently disarm an alert).
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { REPO_ROOT } from '../support/system';

interface Rule {
  alert: string;
  expr: string;
  labels: { severity: string };
  annotations: { summary: string };
}

const document = parse(readFileSync(path.join(REPO_ROOT, 'deploy/k8s/monitoring/prometheus-rules.yaml'), 'utf8')) as {
  kind: string;
  spec: { groups: Array<{ name: string; rules: Rule[] }> };
};
const rules = document.spec.groups.flatMap((g) => g.rules);

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    if (name === 'node_modules' || name === 'dist' || name === 'test' || name === 'gen') return [];
    return statSync(full).isDirectory() ? sources(full) : full.endsWith('.ts') ? [full] : [];
  });
}
const registered = new Set(
  sources(path.join(REPO_ROOT, 'services')).flatMap((file) => [...readFileSync(file, 'utf8').matchAll(/name: '([a-z_]+)'/g)].map((m) => m[1]!)),
);

test('a PrometheusRule with the incident alert among well-formed rules', () => {
  expect(document.kind).toBe('PrometheusRule');
  expect(rules.map((r) => r.alert)).toContain('CoinvoiceCreditedPaymentLeftChain');
  expect(rules.map((r) => r.alert)).toContain('CoinvoiceLedgerInvariantViolated');
  for (const rule of rules) {
    expect(rule).toMatchObject({ alert: expect.stringMatching(/^Coinvoice[A-Za-z]+$/), expr: expect.any(String), annotations: { summary: expect.any(String) } });
    expect(['page', 'warn']).toContain(rule.labels.severity);
  }
});

test('every metric an alert reads is registered by a service', () => {
  const functions = new Set(['increase', 'rate', 'sum', 'max', 'by', 'on', 'outcome', 'chain', 'kind', 'reason', 'consumer']);
  for (const rule of rules) {
    const names = [...rule.expr.matchAll(/\b([a-z][a-z_]*[a-z])\b/g)].map((m) => m[1]!).filter((n) => n.includes('_') && !functions.has(n));
    expect(names.length).toBeGreaterThan(0);
    for (const name of names) expect({ alert: rule.alert, metric: name, registered: registered.has(name) }).toEqual({ alert: rule.alert, metric: name, registered: true });
  }
});

test('the UTXO treasury\'s alerts: fees above PAYOUT_MAX_FEE_RATE (the processor\'s gauge), a batch that can never be mined, a confirmed batch lost in a deep reorg', () => {
  const byName = new Map(rules.map((r) => [r.alert, r]));
  expect(byName.get('CoinvoiceUtxoTreasuryWaitingForFees')?.expr).toBe('max by (network) (payout_processor_fee_cap_waiting{network=~"bitcoin|litecoin"}) > 0');
  // The EVM alert no longer speaks of SIGNER_MAX_FEE_PER_GAS_WEI for Bitcoin or Litecoin.
  expect(byName.get('CoinvoiceProcessorWaitingForFees')?.expr).toContain('network!~"bitcoin|litecoin"');
  expect(byName.get('CoinvoiceUtxoBatchAbandoned')).toMatchObject({ labels: { severity: 'page' }, expr: expect.stringContaining('payout_processor_batches_abandoned_total') });
  expect(byName.get('CoinvoiceUtxoBatchLostInReorg')).toMatchObject({ labels: { severity: 'page' }, expr: expect.stringContaining('payout_processor_lost_rebroadcasts_total') });
});
