import { pino, type Logger } from 'pino';
import pretty from 'pino-pretty';

export type { Logger };

// Credentials never reach a log line: the headers that carry them are removed, and the
// request URL is logged without its query string (signed URLs and gateway tokens live there).
// `pretty` is for a person at a terminal (config.logFormat); everything else gets JSON lines.
export function createLogger(level: string, name = 'stupa', format: 'json' | 'pretty' = 'json'): Logger {
  const options = {
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
  };
  if (format === 'json') return pino(options);
  // Written in this process rather than pino's transport thread: a line is on the terminal
  // before the process can exit, so a crash's last lines are not lost.
  return pino(options, pretty({ sync: true, colorize: true, ignore: 'pid,hostname', translateTime: 'SYS:HH:MM:ss.l' }));
}
