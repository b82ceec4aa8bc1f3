import preact from '@preact/preset-vite';
import { defineConfig } from 'vite';

// Served by the gateway under /dashboard/ (see gateway/src/routes/dashboard.ts): every asset URL
// carries that base, file names carry a content hash so they can be cached for good.
export default defineConfig({
  base: '/dashboard/',
  plugins: [preact()],
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    // No inline scripts or data: URLs: the page's CSP allows scripts and styles from 'self' only.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
  },
});
