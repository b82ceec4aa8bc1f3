/**
 * The README's "Networks" table is the registry's (services/chains: PAY_METHODS, the EVM network
 * registry, each family's confirmations and source variable), row for row: a network, contract or
 * confirmation count changed in the code and not in the README fails here, with the table to paste.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { loadConfig } from '@coinvoice/runtime';
import { CHAIN_FAMILIES, PAY_METHODS, networkLabel } from '@coinvoice/chains/currencies';
import { chainSources, chainWatcherSettings } from '@coinvoice/chains/watchers';
import type { Chain } from '@coinvoice/chains/coin';

const REPO_ROOT = path.resolve(__dirname, '..', '..');
const README = readFileSync(path.join(REPO_ROOT, 'README.md'), 'utf8');
const BEGIN = '<!-- networks: generated from services/chains, checked by test/tooling/readme-networks.test.ts -->';
const END = '<!-- /networks -->';

function defaultConfirmations(chain: Chain): number {
  for (const family of CHAIN_FAMILIES) {
    const n = family.defaultConfirmations[chain];
    if (n !== undefined) return n;
  }
  throw new Error(`no confirmation policy for ${chain}`);
}

/** The table as the registry says it: one row per (asset, network). */
function networksTable(): string {
  const sources = chainSources(loadConfig(chainWatcherSettings, {}));
  const rows = PAY_METHODS.map((m) => {
    const contract = m.token
      ? `\`${m.token.contract.mainnet}\`${m.chain === 'tron' && m.code === 'USDC' ? ' (only where `CHAIN_TRON_USDC_CONTRACT` is set)' : ''}`
      : 'native';
    const source = sources[m.chain]?.sourceVariable ?? '—';
    return `| ${m.code} | ${networkLabel(m.chain)} (\`${m.chain}\`) | ${contract} | ${m.baseUnitDecimals} | ${defaultConfirmations(m.chain)} | \`${source}\` |`;
  });
  return [
    '| asset | network (`payNetwork`) | contract | decimals on chain | default confirmations | node setting |',
    '| --- | --- | --- | ---: | ---: | --- |',
    ...rows,
  ].join('\n');
}

test('the README lists every (asset, network) of the registry with its contract, decimals, confirmations and node setting', () => {
  const start = README.indexOf(BEGIN);
  const end = README.indexOf(END);
  expect(start).toBeGreaterThan(0);
  expect(end).toBeGreaterThan(start);
  const written = README.slice(start + BEGIN.length, end).trim();
  expect(written).toBe(networksTable());
});

test('the table has a row per registry entry, and the bsc stablecoins show their 18 decimals', () => {
  const table = networksTable().split('\n').slice(2);
  expect(table).toHaveLength(PAY_METHODS.length);
  expect(table.filter((row) => row.includes('(`bsc`)') && /\| (USDT|USDC) \|/.test(row)).every((row) => row.includes('| 18 |'))).toBe(true);
  expect(README).toMatch(/## Networks/);
});
