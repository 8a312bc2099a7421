// Browsers may call the REST API from any origin. Its credentials are request headers (an API
// key, a signed upload token), never cookies, so allowing every origin lets a page send nothing
// it could not send anyway; it is what a signed upload token's `uploadUrl` needs to be used from
// a web page. Preflights are answered here, before any guard, with 204.
import type { RequestHandler } from 'express';

const ALLOWED_HEADERS = 'Authorization, X-Api-Key, Content-Type';
const EXPOSED_HEADERS = 'Retry-After, Location, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset';
const METHODS = 'GET, HEAD, POST, PUT, PATCH, DELETE';
const PREFLIGHT_MAX_AGE_S = 600;

export const crossOrigin: RequestHandler = (req, res, next) => {
  if (req.headers.origin === undefined) return next();
  res.set({ 'Access-Control-Allow-Origin': '*', 'Access-Control-Expose-Headers': EXPOSED_HEADERS });
  if (req.method !== 'OPTIONS' || req.headers['access-control-request-method'] === undefined) return next();
  res
    .status(204)
    .set({
      'Access-Control-Allow-Methods': METHODS,
      'Access-Control-Allow-Headers': ALLOWED_HEADERS,
      'Access-Control-Max-Age': String(PREFLIGHT_MAX_AGE_S),
    })
    .end();
};
