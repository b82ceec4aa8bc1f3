/** The generated-code check passes on the repo as committed and fails when a file drifts. */
import { spawnSync } from 'node:child_process';
import { appendFileSync, cpSync, mkdtempSync, rmSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { REPO_ROOT } from '../support/system';

const CHECK = path.join(REPO_ROOT, 'test/scripts/check-generated.mjs');
const GEN = path.join(REPO_ROOT, 'services/runtime/src/gen');
const binPath = `${path.join(REPO_ROOT, 'node_modules/.bin')}${path.delimiter}${process.env.PATH}`;

function check(generatedDir?: string) {
  const env = { ...process.env, PATH: binPath, ...(generatedDir ? { GENERATED_DIR: generatedDir } : {}) };
  return spawnSync(process.execPath, [CHECK], { env, encoding: 'utf8', timeout: 60_000 });
}

let copy: string;
beforeEach(() => {
  copy = mkdtempSync(path.join(tmpdir(), 'coinvoice-gen-copy-'));
  cpSync(GEN, copy, { recursive: true });
});
afterEach(() => rmSync(copy, { recursive: true, force: true }));

test('the committed generated code is current', () => {
  const result = check();
  expect(result.stderr).toBe('');
  expect(result.status).toBe(0);
});

test('an edited generated file fails the check', () => {
  appendFileSync(path.join(copy, 'grpc/health/v1/health_pb.ts'), '\n// edited by hand\n');
  const result = check(copy);
  expect(result.status).toBe(1);
  expect(result.stderr).toContain('stale: grpc/health/v1/health_pb.ts');
});

test('a missing generated file fails the check', () => {
  unlinkSync(path.join(copy, 'coinvoice/common/v1/error_pb.ts'));
  const result = check(copy);
  expect(result.status).toBe(1);
  expect(result.stderr).toContain('missing: coinvoice/common/v1/error_pb.ts');
});

test('buf lint is clean', () => {
  const result = spawnSync('buf', ['lint'], { cwd: REPO_ROOT, env: { ...process.env, PATH: binPath }, encoding: 'utf8' });
  expect(result.stdout + result.stderr).toBe('');
  expect(result.status).toBe(0);
});
