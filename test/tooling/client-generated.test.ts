/**
 * The typed client's types (packages/client/src/openapi.ts) are what openapi-typescript makes of
 * the committed OpenAPI document now: a contract change without `npm run openapi:snapshot`
 * (which regenerates them) fails here.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { REPO_ROOT } from '../support/system';

test('packages/client/src/openapi.ts is generated from gateway/openapi.snapshot.json', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'client-gen-'));
  try {
    const fresh = path.join(dir, 'openapi.ts');
    execFileSync(path.join(REPO_ROOT, 'node_modules', '.bin', 'openapi-typescript'), [path.join(REPO_ROOT, 'gateway', 'openapi.snapshot.json'), '-o', fresh], { stdio: 'pipe' });
    expect(readFileSync(path.join(REPO_ROOT, 'packages', 'client', 'src', 'openapi.ts'), 'utf8')).toBe(readFileSync(fresh, 'utf8'));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 60_000);
