/**
 * The repository's TypeScript import graph, read with the TypeScript compiler's parser (no type
 * check, no build): every hand-written source file of every workspace, and for each file the files
 * it imports. Relative specifiers resolve to files; a workspace package's name (`@coinvoice/chains`,
 * `@coinvoice/runtime/gen/…`) resolves to that package's source through its package.json, so an
 * import that crosses packages is an edge like any other.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

export const REPO_ROOT = path.resolve(__dirname, '..', '..');

/** Folders never read: built output, generated code, dependencies. */
const SKIPPED_FOLDERS = new Set(['node_modules', 'dist', 'gen', '.git', 'coverage']);

export interface SourceImport {
  /** The specifier as written. */
  specifier: string;
  /** The repository file it resolves to (absolute), or undefined for a dependency or a builtin. */
  file: string | undefined;
  /** `import type` / `export type`: erased from the emitted JavaScript. */
  typeOnly: boolean;
}

export interface Workspace {
  name: string;
  dir: string;
  /** The file the package's `main` points at, in source form (dist/index.js → src/index.ts). */
  entry: string | undefined;
}

export function workspaces(): Workspace[] {
  const rootPackage = JSON.parse(readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as { workspaces: string[] };
  return rootPackage.workspaces.map((relative) => {
    const dir = path.join(REPO_ROOT, relative);
    const manifest = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as { name: string; main?: string };
    const entry = manifest.main ? sourceOfBuilt(dir, manifest.main) : undefined;
    return { name: manifest.name, dir, entry };
  });
}

/** dist/x/y.js → src/x/y.ts (the layout every workspace here builds with). */
function sourceOfBuilt(dir: string, built: string): string | undefined {
  const source = path.join(dir, built.replace(/^(\.\/)?dist\//, 'src/').replace(/\.js$/, '.ts'));
  return existsSync(source) ? source : undefined;
}

/** Every .ts/.tsx/.mts/.vue-free source file under the given folders. */
export function sourceFiles(folders: readonly string[]): string[] {
  const files: string[] = [];
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir)) {
      if (SKIPPED_FOLDERS.has(entry)) continue;
      const full = path.join(dir, entry);
      if (statSync(full).isDirectory()) walk(full);
      else if (/\.(m?ts|tsx)$/.test(entry) && !entry.endsWith('.d.ts')) files.push(full);
    }
  };
  for (const folder of folders) if (existsSync(folder)) walk(folder);
  return files.sort();
}

const EXTENSIONS = ['.ts', '.tsx', '.mts', '/index.ts', '/index.tsx'];

function resolveFile(base: string): string | undefined {
  if (/\.(m?ts|tsx)$/.test(base) && existsSync(base)) return base;
  const withoutJs = base.replace(/\.(m?js)$/, '');
  for (const extension of EXTENSIONS) {
    const candidate = withoutJs + extension;
    if (existsSync(candidate) && statSync(candidate).isFile()) return candidate;
  }
  return undefined;
}

function resolveSpecifier(specifier: string, fromFile: string, packages: readonly Workspace[]): string | undefined {
  if (specifier.startsWith('.')) return resolveFile(path.resolve(path.dirname(fromFile), specifier));
  const workspace = packages.find((p) => specifier === p.name || specifier.startsWith(`${p.name}/`));
  if (!workspace) return undefined;
  if (specifier === workspace.name) return workspace.entry;
  return resolveFile(path.join(workspace.dir, 'src', specifier.slice(workspace.name.length + 1)));
}

/** The imports and re-exports of one file, plus `require('./x')` calls (lazily loaded modules). */
export function importsOf(file: string, packages: readonly Workspace[] = workspaces()): SourceImport[] {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
  const found: SourceImport[] = [];
  const add = (specifier: string, typeOnly: boolean): void => {
    found.push({ specifier, typeOnly, file: resolveSpecifier(specifier, file, packages) });
  };
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      const clause = node.importClause;
      const typeOnly =
        clause !== undefined &&
        (clause.isTypeOnly ||
          (clause.name === undefined &&
            clause.namedBindings !== undefined &&
            ts.isNamedImports(clause.namedBindings) &&
            clause.namedBindings.elements.length > 0 &&
            clause.namedBindings.elements.every((element) => element.isTypeOnly)));
      add(node.moduleSpecifier.text, typeOnly);
    } else if (ts.isExportDeclaration(node) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      add(node.moduleSpecifier.text, node.isTypeOnly);
    } else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference) && ts.isStringLiteral(node.moduleReference.expression)) {
      add(node.moduleReference.expression.text, node.isTypeOnly);
    } else if (
      ts.isCallExpression(node) &&
      (node.expression.kind === ts.SyntaxKind.ImportKeyword || (ts.isIdentifier(node.expression) && node.expression.text === 'require')) &&
      node.arguments.length === 1 &&
      ts.isStringLiteral(node.arguments[0]!)
    ) {
      add((node.arguments[0] as ts.StringLiteral).text, false);
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) {
      add(node.argument.literal.text, true);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/**
 * Every import circle among `files` (each as the list of files on it, first file repeated last;
 * `extraEdges` adds imports that are not written, for a test of the check itself),
 * found by Tarjan's strongly connected components: one circle reported per component, the shortest
 * path back to its first file, so the message names a real loop to cut.
 */
export function importCircles(
  files: readonly string[],
  packages: readonly Workspace[] = workspaces(),
  extraEdges: ReadonlyArray<readonly [from: string, to: string]> = [],
): string[][] {
  const inGraph = new Set(files);
  const edges = new Map<string, string[]>();
  for (const file of files) {
    const targets = importsOf(file, packages)
      .map((i) => i.file)
      .filter((target): target is string => target !== undefined && inGraph.has(target));
    edges.set(file, [...new Set(targets)]);
  }
  for (const [from, to] of extraEdges) edges.get(from)?.push(to);

  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const components: string[][] = [];
  const strongConnect = (file: string): void => {
    index.set(file, counter);
    low.set(file, counter);
    counter += 1;
    stack.push(file);
    onStack.add(file);
    for (const target of edges.get(file) ?? []) {
      if (!index.has(target)) {
        strongConnect(target);
        low.set(file, Math.min(low.get(file)!, low.get(target)!));
      } else if (onStack.has(target)) {
        low.set(file, Math.min(low.get(file)!, index.get(target)!));
      }
    }
    if (low.get(file) === index.get(file)) {
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        component.push(member);
      } while (member !== file);
      const selfLoop = component.length === 1 && (edges.get(file) ?? []).includes(file);
      if (component.length > 1 || selfLoop) components.push(component);
    }
  };
  for (const file of files) if (!index.has(file)) strongConnect(file);

  return components.map((component) => shortestLoop(component.sort()[0]!, new Set(component), edges));
}

function shortestLoop(start: string, component: ReadonlySet<string>, edges: ReadonlyMap<string, string[]>): string[] {
  const previous = new Map<string, string>();
  const queue = [start];
  const seen = new Set<string>();
  while (queue.length > 0) {
    const file = queue.shift()!;
    for (const target of edges.get(file) ?? []) {
      if (!component.has(target)) continue;
      if (target === start) {
        const loop = [start];
        for (let at: string | undefined = file; at !== undefined && at !== start; at = previous.get(at)) loop.splice(1, 0, at);
        return [...loop, start];
      }
      if (!seen.has(target)) {
        seen.add(target);
        previous.set(target, file);
        queue.push(target);
      }
    }
  }
  return [start, start];
}

export const relativeToRepo = (file: string): string => path.relative(REPO_ROOT, file);
