/**
 * The CLI and the typed client are publishable: `npm pack` makes tarballs with a name, a license,
 * a README, the built code (and the CLI's `bin`), nothing else; installed from those tarballs
 * alone (their registry dependencies taken from this repository's node_modules, nothing
 * downloaded) the `coinvoice` binary runs and the client builds a working client.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const REPO_ROOT = path.resolve(__dirname, '..', '..');
const PACKAGES = { cli: path.join(REPO_ROOT, 'packages', 'cli'), client: path.join(REPO_ROOT, 'packages', 'client') };

interface PackedFile {
  path: string;
}
interface Packed {
  name: string;
  filename: string;
  files: PackedFile[];
}

let scratch: string;
const packed: Record<keyof typeof PACKAGES, Packed> = {} as never;

beforeAll(async () => {
  scratch = mkdtempSync(path.join(tmpdir(), 'coinvoice-pack-'));
  for (const [name, dir] of Object.entries(PACKAGES) as Array<[keyof typeof PACKAGES, string]>) {
    const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', scratch], { cwd: dir });
    packed[name] = (JSON.parse(stdout) as Packed[])[0]!;
  }
}, 60_000);

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

test.each(Object.keys(PACKAGES) as Array<keyof typeof PACKAGES>)('@coinvoice/%s packs with its name, license, README and built code only', (name) => {
  const manifest = JSON.parse(readFileSync(path.join(PACKAGES[name], 'package.json'), 'utf8')) as Record<string, unknown>;
  expect(manifest).toMatchObject({ name: `@coinvoice/${name}`, license: 'MIT', publishConfig: { access: 'public' } });
  expect(manifest.private).toBeUndefined();
  const files = packed[name].files.map((f) => f.path);
  expect(files).toEqual(expect.arrayContaining(['package.json', 'README.md', 'dist/index.js', 'dist/index.d.ts']));
  expect(files.filter((f) => !/^(package\.json|README\.md|dist\/|bin\/)/.test(f))).toEqual([]);
  expect(files.filter((f) => f.endsWith('.tsbuildinfo') || f.startsWith('src/'))).toEqual([]);
  if (name === 'cli') {
    expect(manifest.bin).toEqual({ coinvoice: 'bin/coinvoice.js' });
    expect(files).toEqual(expect.arrayContaining(['bin/coinvoice.js', 'dist/main.js']));
  }
});

test('installed from the tarballs alone, the coinvoice binary runs and the client makes a client', async () => {
  const modules = path.join(scratch, 'install', 'node_modules');
  mkdirSync(path.join(modules, '@coinvoice'), { recursive: true });
  for (const name of Object.keys(PACKAGES) as Array<keyof typeof PACKAGES>) {
    const target = path.join(modules, '@coinvoice', name);
    mkdirSync(target);
    await run('tar', ['-xzf', path.join(scratch, packed[name].filename), '-C', target, '--strip-components=1']);
  }
  // Their registry dependencies, as npm would install them (here: this repository's copies).
  for (const dependency of ['openapi-fetch', 'openapi-typescript-helpers', 'eventsource-parser']) {
    symlinkSync(path.join(REPO_ROOT, 'node_modules', dependency), path.join(modules, dependency));
  }
  const bin = path.join(modules, '@coinvoice', 'cli', 'bin', 'coinvoice.js');
  const help = await run(process.execPath, [bin, '--help'], { env: { ...process.env, COINVOICE_CONFIG: path.join(scratch, 'config.json') } });
  expect(help.stdout).toContain('coinvoice invoices create --amount <decimal>');
  const notLoggedIn = await run(process.execPath, [bin, 'invoices', 'get', 'x'], { env: { ...process.env, COINVOICE_CONFIG: path.join(scratch, 'config.json') } }).catch(
    (err: { code: number; stderr: string }) => err,
  );
  expect(notLoggedIn).toMatchObject({ code: 1, stderr: expect.stringContaining('not logged in') });
  const client = await run(
    process.execPath,
    ['-e', "const c = require('@coinvoice/client').createCoinvoiceClient({ baseUrl: 'http://127.0.0.1:1', apiKey: 'SBX_x' }); console.log(typeof c.GET, typeof c.POST)"],
    { cwd: path.join(scratch, 'install') },
  );
  expect(client.stdout.trim()).toBe('function function');
});
