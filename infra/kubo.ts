// Kubo through kubo-rpc-client (its RPC API, /api/v0).
import { create, type KuboRPCClient } from 'kubo-rpc-client';

export type Kubo = KuboRPCClient;

export function createKubo(apiUrl: string): Kubo {
  return create({ url: new URL('/api/v0', apiUrl) });
}

/** Throws unless Kubo answers `id` within `timeoutMs`. */
export async function checkKubo(kubo: Kubo, timeoutMs: number): Promise<void> {
  await kubo.id({ signal: AbortSignal.timeout(timeoutMs) });
}
