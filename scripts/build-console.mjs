#!/usr/bin/env node
// Builds the web console (web/src → web/dist): one ES module and one stylesheet, minified by
// esbuild, plus web/index.html. Run by scripts/bootstrap.mjs (npm start, npm test, npm run api)
// and `npm run build:console`; it takes well under a second, so it always rebuilds.
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';

const web = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'web');
const out = path.join(web, 'dist');

await esbuild.build({
  entryPoints: { console: path.join(web, 'src/main.tsx') },
  outdir: out,
  bundle: true,
  minify: true,
  format: 'esm',
  target: 'es2020',
  jsx: 'automatic',
  jsxImportSource: 'preact',
  legalComments: 'none',
  logLevel: 'warning',
});
fs.copyFileSync(path.join(web, 'index.html'), path.join(out, 'index.html'));

if (process.argv.includes('--sizes')) {
  for (const name of ['console.js', 'console.css']) {
    const bytes = fs.readFileSync(path.join(out, name));
    process.stdout.write(`${name}: ${bytes.length} bytes, ${zlib.gzipSync(bytes, { level: 9 }).length} gzipped\n`);
  }
}
