// The web console (web/): static files built by scripts/build-console.mjs, served on the REST
// API's address at /console/. The page calls the same public REST API with the user's key, so
// it can do nothing the API would refuse; this router only hands out the files, under a strict
// Content-Security-Policy (no inline script or style, requests to this origin only).
import fs from 'node:fs';
import path from 'node:path';
import { Router } from 'express';
import type { Config } from '../../infra/config.js';
import { projectRoot } from '../../infra/paths.js';
import { HttpError } from './errors.js';
import { resource } from './http/routing.js';

export const consoleDir = path.join(projectRoot, 'web/dist');

const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/** The console's files: nothing else under /console/ is served. */
const FILES = new Map([
  ['', 'index.html'],
  ['console.js', 'console.js'],
  ['console.css', 'console.css'],
]);

export function consoleRoutes(config: Pick<Config, 's3'>): Router {
  const router = Router();
  const headers = { 'Content-Security-Policy': CSP, 'X-Content-Type-Options': 'nosniff', 'Cache-Control': 'no-cache' };

  resource(router, '/console/config.json', {
    // What the page cannot learn from the REST API: the S3 interface's address.
    get: (_req, res) => void res.set(headers).json({ s3Endpoint: config.s3.publicUrl, s3Region: config.s3.region }),
  });
  resource(router, '/console{/:file}', {
    get: (req, res, next) => {
      // Without the slash, the page's relative URLs would resolve one level up.
      if (req.path === '/console') return res.redirect(301, '/console/');
      const name = FILES.get(String(req.params.file ?? ''));
      if (!name) throw new HttpError(404, 'NOT_FOUND', `no console file ${req.path}`);
      if (!fs.existsSync(path.join(consoleDir, name)))
        throw new HttpError(503, 'CONSOLE_NOT_BUILT', 'the console is not built: run `npm run build:console` (npm start and npm test do)');
      res.sendFile(name, { root: consoleDir, headers }, (err) => err && next(err));
    },
  });
  return router;
}
