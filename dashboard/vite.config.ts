/// <reference types="node" />
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import preact from '@preact/preset-vite';
import { defineConfig, type Plugin } from 'vite';

const require = createRequire(import.meta.url);

/**
 * The gateway's /docs page runs Scalar API Reference's self-contained browser build: copied here
 * from its npm package into dist/docs/scalar.js, beside the dashboard's files the gateway already
 * serves, so the image ships this one 4 MB file and not the package's ~290 MB of dependencies
 * (Vue, CodeMirror, …), which only a build uses.
 */
function docsScalar(): Plugin {
  return {
    name: 'coinvoice-docs-scalar',
    generateBundle() {
      // The package's main entry is dist/index.js; the browser build sits next to it.
      const file = path.join(path.dirname(require.resolve('@scalar/api-reference')), 'browser', 'standalone.js');
      this.emitFile({ type: 'asset', fileName: 'docs/scalar.js', source: readFileSync(file, 'utf8') });
    },
  };
}

// Served by the gateway under /dashboard/ (see gateway/src/routes/dashboard.ts): every asset URL
// carries that base, file names carry a content hash so they can be cached for good.
export default defineConfig({
  base: '/dashboard/',
  plugins: [preact(), docsScalar()],
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    // No inline scripts or data: URLs: the page's CSP allows scripts and styles from 'self' only.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
  },
});
