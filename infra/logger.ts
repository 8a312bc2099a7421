import { pino, type Logger } from 'pino';

export type { Logger };

// Credentials never reach a log line: the headers that carry them are removed, and the
// request URL is logged without its query string (signed URLs and gateway tokens live there).
export function createLogger(level: string, name = 'stupa'): Logger {
  return pino({
    name,
    level,
    redact: {
      paths: [
        'req.headers["x-api-key"]',
        'req.headers.authorization',
        'req.headers["x-gateway-token"]',
        'req.headers.cookie',
        'apiKey',
        '*.apiKey',
        'secret',
        '*.secret',
      ],
      remove: true,
    },
  });
}
