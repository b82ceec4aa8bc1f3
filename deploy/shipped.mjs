#!/usr/bin/env node
// What the image ships, worked out from the workspaces (package.json) rather than listed in the
// Dockerfile, so a workspace added or split off needs no change there (deploy/README.md).
//
// The processes run from the gateway and every workspace under services/; with the workspaces
// these depend on (their `dependencies` naming another workspace), they are the shipped
// workspaces. Of each, the image holds its package.json, its compiled dist/ (without type
// declarations and build info), every non-TypeScript file under src/ (the SQL migrations, read at
// run time) and its assets/ folder; and the dashboard's built files, which the gateway serves.
//
//   node deploy/shipped.mjs workspaces         the shipped workspaces' folders, one per line
//   node deploy/shipped.mjs roots              the folders the image's files come from, one per
//                                              line (src/ only for its non-TypeScript files)
//   node deploy/shipped.mjs manifests <dest>   every workspace's package.json (and the files its
//                                              `bin` names), the root's and the lock, into <dest>:
//                                              what `npm ci` needs, so its layer is reused until
//                                              they change
//   node deploy/shipped.mjs copy <dest>        the shipped files (after tsc -b and the dashboard's
//                                              build) into <dest>
//   node deploy/shipped.mjs prune              after `npm ci --omit=dev` of the shipped workspaces:
//                                              removes every other workspace folder, and from
//                                              node_modules what Node never loads (.ts, .map)
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';

/** Built files served by a shipped process rather than imported: the dashboard (gateway, /dashboard). */
const SERVED = ['dashboard/dist'];

const readJson = (file) => JSON.parse(readFileSync(file, 'utf8'));

/** The workspaces present (.dockerignore leaves some out of the build context: bench, tests). */
function workspaces() {
  const root = readJson('package.json');
  return (root.workspaces ?? [])
    .filter((dir) => existsSync(path.join(dir, 'package.json')))
    .map((dir) => ({ dir, pkg: readJson(path.join(dir, 'package.json')) }));
}

function shippedWorkspaces() {
  const all = workspaces();
  const byName = new Map(all.map((w) => [w.pkg.name, w]));
  const shipped = new Set();
  const visit = (w) => {
    if (shipped.has(w)) return;
    shipped.add(w);
    for (const dep of Object.keys(w.pkg.dependencies ?? {})) {
      const target = byName.get(dep);
      if (target) visit(target);
    }
  };
  for (const w of all) if (w.dir === 'gateway' || w.dir.startsWith('services/')) visit(w);
  return all.filter((w) => shipped.has(w));
}

function filesUnder(dir) {
  const out = [];
  const walk = (d) => {
    for (const entry of readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, entry.name);
      if (entry.isDirectory()) walk(p);
      else out.push(p);
    }
  };
  if (existsSync(dir)) walk(dir);
  return out;
}

function copyFile(file, dest) {
  mkdirSync(path.dirname(path.join(dest, file)), { recursive: true });
  cpSync(file, path.join(dest, file));
}

function manifests(dest) {
  copyFile('package.json', dest);
  copyFile('package-lock.json', dest);
  for (const { dir, pkg } of workspaces()) {
    copyFile(path.join(dir, 'package.json'), dest);
    const bins = typeof pkg.bin === 'string' ? [pkg.bin] : Object.values(pkg.bin ?? {});
    for (const bin of bins) copyFile(path.join(dir, bin), dest);
  }
}

const runtimeFile = (file) => !/\.d\.ts(\.map)?$|\.tsbuildinfo$/.test(file);

function roots() {
  return [...shippedWorkspaces().flatMap(({ dir }) => ['dist', 'src', 'assets'].map((sub) => `${dir}/${sub}`)), ...SERVED];
}

function copy(dest) {
  for (const { dir } of shippedWorkspaces()) {
    const dist = path.join(dir, 'dist');
    if (!existsSync(dist)) throw new Error(`${dist} does not exist: build before copying`);
    copyFile(path.join(dir, 'package.json'), dest);
    for (const file of filesUnder(dist)) if (runtimeFile(file)) copyFile(file, dest);
    for (const file of filesUnder(path.join(dir, 'src'))) if (!file.endsWith('.ts')) copyFile(file, dest);
    for (const file of filesUnder(path.join(dir, 'assets'))) copyFile(file, dest);
  }
  for (const dir of SERVED) {
    if (!existsSync(dir) || !statSync(dir).isDirectory()) throw new Error(`${dir} does not exist: build before copying`);
    for (const file of filesUnder(dir)) copyFile(file, dest);
  }
}

function prune() {
  const keep = new Set(shippedWorkspaces().map((w) => w.dir));
  const all = workspaces();
  for (const { dir } of all) if (!keep.has(dir)) rmSync(dir, { recursive: true, force: true });
  // Folders left empty by that (e.g. packages/ once packages/cli and packages/client are gone).
  for (const { dir } of all) {
    for (let parent = path.dirname(dir); parent !== '.'; parent = path.dirname(parent)) {
      if (existsSync(parent) && readdirSync(parent).length === 0) rmSync(parent, { recursive: true });
    }
  }
  for (const file of filesUnder('node_modules')) {
    // Links npm made to the workspaces just removed.
    if (!existsSync(file)) rmSync(file, { force: true });
    // What Node never loads: TypeScript sources and declarations, source maps (no process runs with
    // --enable-source-maps). About half of the production dependencies' bytes (viem ships all three).
    else if (NEVER_LOADED.test(file)) rmSync(file);
  }
}

const NEVER_LOADED = /\.[cm]?ts$|\.map$/;

const [command, dest] = process.argv.slice(2);
if (command === 'workspaces') process.stdout.write(`${shippedWorkspaces().map((w) => w.dir).join('\n')}\n`);
else if (command === 'roots') process.stdout.write(`${roots().join('\n')}\n`);
else if (command === 'manifests' && dest) manifests(dest);
else if (command === 'copy' && dest) copy(dest);
else if (command === 'prune') prune();
else {
  process.stderr.write('usage: node deploy/shipped.mjs workspaces | roots | manifests <dest> | copy <dest> | prune\n');
  process.exit(64);
}
