// Tells the edges to forget an account's kept answers (edge/caddy/answers.go) when what
// decides its gateway reads changes: its access rules, a token deleted. Each edge's purge
// listener (EDGE_PURGE_URLS) is asked at once, and the change is confirmed after they answered,
// so a read after the confirmation meets the new rules. An edge that does not answer within
// EDGE_PURGE_TIMEOUT_MS is logged and passed over: what it keeps lives EDGE_ANSWER_TTL_MS.
import { EDGE_PURGE_TIMEOUT_MS } from '../infra/constants.js';
import type { Logger } from '../infra/logger.js';
import { EDGE_PURGE_PATH, EDGE_SECRET_HEADER } from './protocol.js';

export interface EdgeAnswers {
  /** Resolves once every edge forgot the account's answers or was passed over; never rejects. */
  forget(account: string): Promise<void>;
}

export function createEdgeAnswers(edge: { secret: string | null; purgeUrls: string[] }, logger: Logger): EdgeAnswers {
  const { secret, purgeUrls } = edge;
  return {
    async forget(account) {
      if (!secret || purgeUrls.length === 0) return;
      await Promise.all(
        purgeUrls.map(async (base) => {
          try {
            const res = await fetch(`${base}${EDGE_PURGE_PATH}`, {
              method: 'POST',
              headers: { [EDGE_SECRET_HEADER]: secret, 'Content-Type': 'text/plain' },
              body: account,
              signal: AbortSignal.timeout(EDGE_PURGE_TIMEOUT_MS),
            });
            await res.arrayBuffer();
            if (res.status !== 204) throw new Error(`status ${res.status}`);
          } catch (err) {
            logger.warn({ edge: base, err: (err as Error).message }, 'an edge did not forget the account; its answers live their second');
          }
        }),
      );
    },
  };
}
