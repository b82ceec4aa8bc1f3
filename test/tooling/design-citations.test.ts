/**
 * Every design citation in the repository names a file inside it: no tracked file (node_modules
 * and dist aside) cites the design notes a clone does not have, and every `docs/<page>.md` or
 * `docs/<page>.md#<heading>` a comment or document names exists, heading included
 * (docs/architecture.md is the page code comments cite).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { anchorsOf } from '../support/markdown';
import { REPO_ROOT } from '../support/system';

/** The out-of-repository notes, by name (spelled in two parts so this file does not cite them). */
const OUTSIDE_NOTES = new RegExp(`\\b${'DES' + 'IGN'}(\\.md)?\\b`);
/** `docs/page.md`, `../docs/page.md#heading`: a path into docs/, with an optional heading. */
const DOCS_CITATION = /(?<![\w./-])((?:\.\.\/)*docs\/[\w.-]+\.md)(?:#([\p{L}\p{N}_-]+))?/gu;

/** This file: its examples name pages and headings that do not exist, on purpose. */
const SELF = path.relative(REPO_ROOT, __filename);

function trackedFiles(): string[] {
  return execFileSync('git', ['ls-files', '-z'], { cwd: REPO_ROOT, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 })
    .split('\0')
    .filter((file) => file !== '' && file !== SELF && !file.split('/').some((segment) => segment === 'node_modules' || segment === 'dist'));
}

/** What is wrong with the citations of one file (`file` relative to the repository root). */
function citationProblems(file: string, text: string, readDoc: (absolute: string) => string | undefined): string[] {
  const problems: string[] = [];
  text.split('\n').forEach((line, i) => {
    const where = `${file}:${i + 1}`;
    if (OUTSIDE_NOTES.test(line)) problems.push(`${where}: cites the design notes outside the repository (cite docs/architecture.md#<heading>)`);
    for (const match of line.matchAll(DOCS_CITATION)) {
      const [, target = '', anchor] = match;
      const absolute = target.startsWith('../') ? path.resolve(REPO_ROOT, path.dirname(file), target) : path.resolve(REPO_ROOT, target);
      const doc = readDoc(absolute);
      if (doc === undefined) problems.push(`${where}: ${target} does not exist`);
      else if (anchor !== undefined && !anchorsOf(doc).has(anchor)) problems.push(`${where}: ${target} has no heading #${anchor}`);
    }
  });
  return problems;
}

function readDocFromDisk(absolute: string): string | undefined {
  return existsSync(absolute) && statSync(absolute).isFile() ? readFileSync(absolute, 'utf8') : undefined;
}

test('every design citation names a file in the repository, and a heading that exists there', () => {
  const files = trackedFiles();
  expect(files.length).toBeGreaterThan(100);
  const problems: string[] = [];
  for (const file of files) {
    const absolute = path.join(REPO_ROOT, file);
    if (!existsSync(absolute) || !statSync(absolute).isFile() || statSync(absolute).size > 4 * 1024 * 1024) continue;
    const bytes = readFileSync(absolute);
    if (bytes.includes(0)) continue; // binary
    problems.push(...citationProblems(file, bytes.toString('utf8'), readDocFromDisk));
  }
  expect(problems).toEqual([]);
});

test('the check catches what it claims to', () => {
  const page = '# Architecture\n## Derived status\n## Rates\n';
  const docs = new Map([[path.join(REPO_ROOT, 'docs', 'architecture.md'), page]]);
  const read = (absolute: string) => docs.get(absolute);
  const notes = 'DES' + 'IGN';
  expect(citationProblems('services/x/src/a.ts', ` * the status rule (${notes}.md §9)`, read)).toHaveLength(1);
  expect(citationProblems('services/x/src/a.ts', ` * the status rule (${notes} §9)`, read)).toHaveLength(1);
  expect(citationProblems('services/x/src/a.ts', ' * the status rule (docs/architecture.md#derived-status)', read)).toEqual([]);
  expect(citationProblems('services/x/src/a.ts', ' * (docs/architecture.md#derived-statuses)', read)).toEqual([
    'services/x/src/a.ts:1: docs/architecture.md has no heading #derived-statuses',
  ]);
  expect(citationProblems('bench/results.md', 'see [rates](../docs/architecture.md#rates) and docs/design.md', read)).toEqual([
    'bench/results.md:1: docs/design.md does not exist',
  ]);
  expect(citationProblems('a/b/README.md', '[x](../../docs/architecture.md#nope)', read)).toEqual(['a/b/README.md:1: ../../docs/architecture.md has no heading #nope']);
});
