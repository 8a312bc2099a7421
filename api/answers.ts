// Small answers of immutable content, kept in memory, by the gateway and by S3's GetObject (each
// surface its own, as each has its own pool to Kubo's gateway). A page's assets, an app's
// metadata and small objects are read again and again, and each read through Kubo's gateway
// costs more than the access checks around it (measured with `npm run bench -- --gateway`: 4 KiB
// reads at 0.46 of Kubo's own rate when every one went to Kubo). An answer is kept when it is
// complete, 200, marked immutable by Kubo (a path under a CID never changes) and at most
// ANSWER_MAX_BYTES; the memory holds ANSWER_MEMORY_BYTES, least recently used first out. Every
// read still passes the surface's checks (api/gateway/app.ts, api/s3/objects.ts: an S3 key is
// read from its record each time, so an overwritten key is never answered with the old bytes);
// only the bytes come from here. Behind the edge, the gateway marks such an answer of a CID as
// one the edge may keep too (X-Stupa-Keep): the edge then answers the same read again itself for
// a second (edge/caddy/answers.go).
import type { IncomingHttpHeaders } from 'node:http';
import { ANSWER_MAX_BYTES, ANSWER_MEMORY_BYTES } from '../infra/constants.js';

export interface KeptAnswer {
  headers: Record<string, string | string[]>;
  body: Buffer;
}

/** How many answers known to be too large to keep are remembered (their keys only). */
const LARGE_KEYS = 10_000;

export function createAnswerMemory(maxBytes = ANSWER_MEMORY_BYTES, maxAnswer = ANSWER_MAX_BYTES) {
  const kept = new Map<string, KeptAnswer>();
  let bytes = 0;
  // Answers that will never be kept (too large, or not immutable): behind the edge, a read of
  // one goes to the edge at once instead of to Kubo from here first (api/gateway/app.ts).
  const large = new Set<string>();

  function store(key: string, answer: KeptAnswer): void {
    const old = kept.get(key);
    if (old) bytes -= old.body.length;
    kept.delete(key);
    kept.set(key, answer);
    bytes += answer.body.length;
    for (const [oldest, value] of kept) {
      if (bytes <= maxBytes) break;
      kept.delete(oldest);
      bytes -= value.body.length;
    }
  }

  /** Whether an answer with these headers would be kept. */
  function fits(headers: IncomingHttpHeaders | Record<string, string | string[]>): boolean {
    const length = Number(headers['content-length']);
    return String(headers['cache-control'] ?? '').includes('immutable') && Number.isInteger(length) && length <= maxAnswer;
  }

  return {
    /** Where the answer to this read is kept, or null when it may not be (a range, a HEAD). The
     * reader's Accept is part of it: Kubo may answer another format for another Accept. */
    keyOf(upstreamPath: string, method: string, headers: IncomingHttpHeaders): string | null {
      if (method !== 'GET' || headers.range !== undefined || headers['if-range'] !== undefined) return null;
      return `${headers.accept ?? ''}\n${upstreamPath}`;
    },

    fits,

    /** Remembers that the answer for `key` will not be kept. */
    markLarge(key: string): void {
      if (large.size >= LARGE_KEYS) large.delete(large.values().next().value!);
      large.add(key);
    },

    isLarge: (key: string) => large.has(key),

    /** The kept answer, now the most recently used. */
    get(key: string): KeptAnswer | undefined {
      const answer = kept.get(key);
      if (answer) {
        kept.delete(key);
        kept.set(key, answer);
      }
      return answer;
    },

    /** Gathers an answer as it streams; keeps it at the end if it qualifies. */
    collector(key: string, headers: Record<string, string | string[]>) {
      if (!fits(headers)) return null;
      const length = Number(headers['content-length']);
      const parts: Buffer[] = [];
      let received = 0;
      return {
        add(chunk: Buffer) {
          parts.push(chunk);
          received += chunk.length;
        },
        done() {
          if (received === length) store(key, { headers, body: Buffer.concat(parts, received) });
        },
      };
    },

    stats: () => ({ answers: kept.size, bytes }),
  };
}

export type AnswerMemory = ReturnType<typeof createAnswerMemory>;
