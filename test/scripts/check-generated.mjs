// Fails when the committed generated code differs from what `buf generate` makes of proto/ now.
// GENERATED_DIR may point at another copy (the check's own test uses it).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..', '..');
const committed = path.resolve(process.env.GENERATED_DIR ?? path.join(root, 'services/runtime/src/gen'));
const scratch = mkdtempSync(path.join(tmpdir(), 'coinvoice-gen-'));

function files(dir, base = dir) {
  return readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    return statSync(full).isDirectory() ? files(full, base) : [path.relative(base, full)];
  });
}

try {
  execFileSync('buf', ['generate', '-o', scratch], { cwd: root, stdio: 'inherit' });
  const fresh = path.join(scratch, 'services/runtime/src/gen');
  const want = new Set(files(fresh));
  const have = new Set(files(committed));
  const problems = [];
  for (const f of want) {
    if (!have.has(f)) problems.push(`missing: ${f}`);
    else if (readFileSync(path.join(fresh, f), 'utf8') !== readFileSync(path.join(committed, f), 'utf8')) problems.push(`stale: ${f}`);
  }
  for (const f of have) if (!want.has(f)) problems.push(`not generated from proto/: ${f}`);
  if (problems.length > 0) {
    console.error(`generated code is not current (run npm run generate):\n  ${problems.join('\n  ')}`);
    process.exit(1);
  }
  console.log(`generated code is current (${want.size} files)`);
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
