/**
 * Dependency patches are applied at install time and fail the install loudly (patches/README.md):
 * the root postinstall runs patch-package in its strict mode, the patched dependency is pinned to
 * the patch's exact version, the installed postgres.js carries the patch, and patch-package exits
 * non-zero, naming the package, when the patch no longer applies (a changed release).
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { REPO_ROOT } from '../support/system';

const PATCH_PACKAGE = path.join(REPO_ROOT, 'node_modules', 'patch-package', 'index.js');
const readJson = (file: string) => JSON.parse(readFileSync(path.join(REPO_ROOT, file), 'utf8'));

function patchPackage(appRoot: string) {
  return spawnSync(process.execPath, [PATCH_PACKAGE, '--error-on-fail', '--error-on-warn'], { cwd: appRoot, encoding: 'utf8', env: { ...process.env, CI: '' } });
}

/** A throwaway project with the repository's patches and a copy of the installed postgres.js. */
function scratchProject(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'patches-'));
  writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'scratch', private: true }));
  cpSync(path.join(REPO_ROOT, 'patches'), path.join(dir, 'patches'), { recursive: true });
  cpSync(path.join(REPO_ROOT, 'node_modules', 'postgres'), path.join(dir, 'node_modules', 'postgres'), { recursive: true });
  return dir;
}

test('npm ci runs patch-package strictly, and postgres.js is pinned to the patched version', () => {
  expect(readJson('package.json').scripts.postinstall).toBe('patch-package --error-on-fail --error-on-warn');
  const patches = readdirSync(path.join(REPO_ROOT, 'patches')).filter((f) => f.endsWith('.patch'));
  expect(patches).toEqual(['postgres+3.4.9.patch']);
  for (const workspace of ['services/runtime', 'bench']) {
    expect(readJson(`${workspace}/package.json`).dependencies.postgres).toBe('3.4.9');
  }
  expect(readJson('node_modules/postgres/package.json').version).toBe('3.4.9');
});

test('the installed postgres.js carries the patch (every build of connection.js)', () => {
  for (const build of ['cjs/src', 'src', 'cf/src']) {
    const source = readFileSync(path.join(REPO_ROOT, 'node_modules', 'postgres', build, 'connection.js'), 'utf8');
    expect(source).toContain('porsager/postgres#1208');
    expect(source).toContain('porsager/postgres#1223');
  }
});

test('a postgres.js whose code changed under the patch fails the install with a message naming it', () => {
  const dir = scratchProject();
  try {
    // The patch is already applied in the copy: patch-package accepts that.
    expect(patchPackage(dir).status).toBe(0);
    // A release that reworded the patched function: the patch cannot apply.
    const file = path.join(dir, 'node_modules', 'postgres', 'cjs', 'src', 'connection.js');
    writeFileSync(file, readFileSync(file, 'utf8').replace(/function nextWrite\(fn\) \{[\s\S]*?\n  \}\n/, 'function nextWrite(fn) {\n    return socket.write(chunk, fn)\n  }\n'));
    const run = patchPackage(dir);
    expect(run.status).not.toBe(0);
    expect(run.stdout + run.stderr).toMatch(/postgres/);
    expect(run.stdout + run.stderr).toMatch(/fail/i);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a different installed version than the patch was made for fails the install too', () => {
  const dir = scratchProject();
  try {
    const manifest = path.join(dir, 'node_modules', 'postgres', 'package.json');
    writeFileSync(manifest, readFileSync(manifest, 'utf8').replace('"version": "3.4.9"', '"version": "3.4.10"'));
    const run = patchPackage(dir);
    expect(run.status).not.toBe(0);
    expect(run.stdout + run.stderr).toMatch(/3\.4\.9/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
