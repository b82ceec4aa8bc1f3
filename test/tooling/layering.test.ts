/**
 * The layers the packages keep (README "Layout"):
 * - services/runtime is process infrastructure only: no chain or coin knowledge in its code, its
 *   file names or its dependencies (chain knowledge is services/chains', one module per family);
 * - chain knowledge is imported by the services that handle coins (invoice, payout) and nobody
 *   else — bench measures address derivation and is the one tool allowed to load it;
 * - no workspace keeps a re-export-only file (a shim or a barrel): callers import from the module
 *   that owns a name. A package's own entry point (its package.json `main`) is its public surface
 *   and the one exception.
 * The generated protobuf code (services/runtime/src/gen) is the wire contract and is not read here.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { importsOf, relativeToRepo, REPO_ROOT, sourceFiles, workspaces } from './import-graph';

const packages = workspaces();
const RUNTIME = path.join(REPO_ROOT, 'services', 'runtime');

/** Libraries that only make sense for a chain: codecs, curves, HD keys, node clients. */
const CHAIN_LIBRARIES = [
  'bitcoinjs-lib',
  'ecpair',
  'bip32',
  'bip39',
  'viem',
  'ethers',
  'tronweb',
  'secp256k1',
  'tiny-secp256k1',
  '@bitcoinerlab/secp256k1',
  '@noble/secp256k1',
  '@noble/curves',
  '@scure/bip32',
  '@scure/bip39',
  '@scure/base',
];
const isChainLibrary = (specifier: string): boolean => CHAIN_LIBRARIES.some((lib) => specifier === lib || specifier.startsWith(`${lib}/`));

/** Words that name a chain, a coin or a chain-only concept. */
const CHAIN_WORDS = /\b(bitcoin|litecoin|ethereum|tron|evm|utxo|btc|ltc|eth|usdt|usdc|trx|satoshis?|wei|sun|bech32|base58(check)?|xpub|bip(32|39|44|84)|slip-?44|secp256k1|erc-?20|eip-?55|dust|coins?|currenc(y|ies)|chains?)\b/i;

/** The runtime's hand-written sources (not gen/). */
function runtimeFiles(): string[] {
  return sourceFiles([path.join(RUNTIME, 'src')]);
}

/** The chain-knowledge findings in the runtime: imports, file names, words in its code, its dependencies. */
export function chainKnowledgeIn(files: readonly string[], manifest: { dependencies?: Record<string, string> }): string[] {
  const findings: string[] = [];
  for (const file of files) {
    const relative = relativeToRepo(file);
    if (CHAIN_WORDS.test(path.relative(path.join(RUNTIME, 'src'), file))) findings.push(`${relative}: its name names a chain or coin`);
    for (const imported of importsOf(file, packages)) {
      if (imported.specifier === '@coinvoice/chains' || imported.specifier.startsWith('@coinvoice/chains/')) findings.push(`${relative}: imports ${imported.specifier}`);
      if (isChainLibrary(imported.specifier)) findings.push(`${relative}: imports the chain library ${imported.specifier}`);
    }
    const text = readFileSync(file, 'utf8');
    text.split('\n').forEach((line, index) => {
      const word = CHAIN_WORDS.exec(line);
      if (word) findings.push(`${relative}:${index + 1}: names "${word[0]}"`);
    });
  }
  for (const dependency of Object.keys(manifest.dependencies ?? {})) {
    if (isChainLibrary(dependency)) findings.push(`services/runtime/package.json: depends on the chain library ${dependency}`);
  }
  return findings;
}

/** A file whose every statement is `export … from '…'`: it owns nothing. */
export function isReexportOnly(file: string): boolean {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, false);
  return source.statements.length > 0 && source.statements.every((statement) => ts.isExportDeclaration(statement) && statement.moduleSpecifier !== undefined);
}

describe('services/runtime', () => {
  it('holds no chain or coin knowledge (imports, file names, words, dependencies)', () => {
    const manifest = JSON.parse(readFileSync(path.join(RUNTIME, 'package.json'), 'utf8')) as { dependencies?: Record<string, string> };
    expect(chainKnowledgeIn(runtimeFiles(), manifest)).toEqual([]);
  });

  it('the check finds chain knowledge where there is some (the chains package, read as if it were the runtime)', () => {
    const chains = sourceFiles([path.join(REPO_ROOT, 'services', 'chains', 'src')]);
    const manifest = JSON.parse(readFileSync(path.join(REPO_ROOT, 'services', 'chains', 'package.json'), 'utf8')) as { dependencies?: Record<string, string> };
    const findings = chainKnowledgeIn(chains, manifest);
    expect(findings).toEqual(expect.arrayContaining([expect.stringContaining('imports the chain library @scure/bip32'), expect.stringContaining('depends on the chain library secp256k1')]));
  });
});

describe('chain knowledge', () => {
  /**
   * Workspaces that may import services/chains: the coin-handling services, the derivation
   * benchmark, and the local launcher, which starts one watcher per network of the registry and
   * gives the signer's key to every EVM coin (docs/networks.md: no copy of the list of networks).
   */
  const ALLOWED = new Set(['@coinvoice/chains', '@coinvoice/invoice', '@coinvoice/payout', '@coinvoice/bench', '@coinvoice/local']);

  it('is imported by invoice and payout only (and the derivation benchmark and the local launcher)', () => {
    const importers = packages
      .filter((p) => !ALLOWED.has(p.name))
      .flatMap((p) =>
        sourceFiles([path.join(p.dir, 'src')])
          .filter((file) => importsOf(file, packages).some((i) => i.specifier.startsWith('@coinvoice/chains')))
          .map(relativeToRepo),
      );
    expect(importers).toEqual([]);
  });

  it('and its libraries are dependencies of the chains package, not of the services that do not use them', () => {
    const declaring = packages
      .filter((p) => p.name !== '@coinvoice/chains' && p.name !== '@coinvoice/bench')
      .flatMap((p) => {
        const manifest = JSON.parse(readFileSync(path.join(p.dir, 'package.json'), 'utf8')) as { dependencies?: Record<string, string> };
        return Object.keys(manifest.dependencies ?? {})
          .filter(isChainLibrary)
          .map((dependency) => `${relativeToRepo(p.dir)}: ${dependency}`);
      });
    expect(declaring).toEqual([]);
  });
});

describe('re-export files', () => {
  it('no workspace keeps one beyond its package entry point: callers import from the owner', () => {
    const entries = new Set(packages.map((p) => p.entry).filter((entry): entry is string => entry !== undefined));
    const reexportOnly = packages
      .flatMap((p) => sourceFiles([path.join(p.dir, 'src')]))
      .filter((file) => !entries.has(file) && isReexportOnly(file))
      .map(relativeToRepo);
    expect(reexportOnly).toEqual([]);
  });

  it('the check recognises a shim (the deleted invoice/src/domain/money.ts, as it was)', () => {
    const shim = path.join(REPO_ROOT, 'test', 'tooling', 'fixtures', 'reexport-shim.ts');
    expect(isReexportOnly(shim)).toBe(true);
    expect(isReexportOnly(path.join(REPO_ROOT, 'services', 'chains', 'src', 'currencies.ts'))).toBe(false);
  });
});
