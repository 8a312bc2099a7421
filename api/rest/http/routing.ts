import type { NextFunction, Request, RequestHandler, Response, Router } from 'express';
import { methodNotAllowed } from '../errors.js';

type Method = 'get' | 'post' | 'put' | 'delete' | 'patch';
type Handler = (req: Request, res: Response, next: NextFunction) => unknown;

/**
 * Registers the methods of one path, and answers 405 with `Allow` for every other method,
 * so an unknown method gets a JSON error like everything else. Handlers may be async:
 * Express 5 passes their rejections to the error handler.
 */
export function resource(router: Router, path: string, handlers: Partial<Record<Method, Handler | Handler[]>>): void {
  const route = router.route(path);
  const allowed: string[] = [];
  for (const [method, handler] of Object.entries(handlers) as [Method, Handler | Handler[]][]) {
    route[method](...([handler].flat() as RequestHandler[]));
    allowed.push(method.toUpperCase());
    if (method === 'get') allowed.push('HEAD');
  }
  route.all((req, _res, next) => next(methodNotAllowed(req.method, allowed)));
}

/** What every feature router receives: the use-cases' components, the authentication and
 * rate-limit chain to put in front of its paths, and the REST settings. */
export interface RouterOptions {
  guard: RequestHandler[];
  jsonLimit: string;
}
