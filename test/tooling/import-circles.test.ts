/**
 * No import circle anywhere in the repository: a circle makes a module's value undefined while its
 * own importers still run (whichever file Node loads first wins), and it hides which layer owns
 * what. Every workspace's sources and the tests are one graph here, type-only imports included (a
 * type circle is a layering circle too, and the next edit turns it into a value).
 */
import path from 'node:path';
import { importCircles, relativeToRepo, REPO_ROOT, sourceFiles, workspaces } from './import-graph';

describe('the import graph', () => {
  const packages = workspaces();

  it('has no circle in any workspace or test', () => {
    const files = sourceFiles([...packages.map((p) => p.dir), path.join(REPO_ROOT, 'test')]);
    expect(files.length).toBeGreaterThan(300);
    const circles = importCircles(files, packages).map((loop) => loop.map(relativeToRepo).join(' → '));
    expect(circles).toEqual([]);
  });

  it('finds a circle when there is one (runtime: events/consumer → periodic-worker → service → events/*)', () => {
    // The circle this check was written for, rebuilt from the real files plus one edge the fix
    // removed: periodic-worker.ts importing service.ts again.
    const runtime = path.join(REPO_ROOT, 'services', 'runtime', 'src');
    const files = sourceFiles([runtime]);
    const circles = importCircles(files, packages, [[path.join(runtime, 'periodic-worker.ts'), path.join(runtime, 'service.ts')]]);
    expect(circles.map((loop) => loop.map((file) => path.relative(runtime, file)))).toEqual([
      ['events/consumer.ts', 'periodic-worker.ts', 'service.ts', 'events/consumer.ts'],
    ]);
  });
});
