// Bundles the operator console (console/src, type-checked by `tsc -p console/tsconfig.json`) into
// dist/console: app.js and app.css, which the API serves at /console (src/programs/console/console.ts).
// Run by `npm run build` and by the image's build stage.
import { build } from 'esbuild';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

await build({
  entryPoints: { app: path.join(root, 'console', 'src', 'main.tsx') },
  outdir: path.join(root, 'dist', 'console'),
  bundle: true,
  format: 'esm',
  target: ['es2022'],
  minify: true,
  legalComments: 'none',
  jsx: 'automatic',
  jsxImportSource: 'preact',
  logLevel: 'warning',
});
