// The console's only way to the service: the public REST API, with the key the user typed.
// The key lives in sessionStorage (gone with the tab, never sent as a cookie); a 401 forgets it
// and sends the user back to the key prompt.

const KEY = 'stupa.apiKey';

export const storedKey = (): string | null => sessionStorage.getItem(KEY);
export const rememberKey = (key: string): void => sessionStorage.setItem(KEY, key);
export const forgetKey = (): void => sessionStorage.removeItem(KEY);

/** A failure as the API explains it: `{error: {reason, details}}`, or what the network said. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly reason: string,
    readonly details: string,
    /** Retry-After of a 429 or 503: how long the service asks us to wait, in seconds. */
    readonly retryAfterS?: number,
  ) {
    super(`${reason}: ${details}`);
  }
}

let onUnauthorized = (): void => {};
/** What to do when the API refuses the key (revoked, expired): set once by the app. */
export const whenUnauthorized = (fn: () => void): void => {
  onUnauthorized = fn;
};

/** Reads an error body, whatever arrived (a proxy's HTML page is not JSON). */
export function toApiError(status: number, text: string, retryAfter?: string | null): ApiError {
  const wait = retryAfter && /^\d+$/.test(retryAfter) ? Number(retryAfter) : undefined;
  try {
    const body = JSON.parse(text) as { error?: { reason?: string; details?: string } };
    if (body.error?.reason) return new ApiError(status, body.error.reason, body.error.details ?? '', wait);
  } catch {
    // not JSON: described below
  }
  return new ApiError(status, `HTTP_${status}`, text.slice(0, 200) || 'the service gave no explanation', wait);
}

export function refused(err: ApiError): void {
  if (err.status === 401) {
    forgetKey();
    onUnauthorized();
  }
}

type Query = Record<string, string | number | boolean | null | undefined>;

export function withQuery(path: string, query: Query = {}): string {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null && v !== '') params.set(k, String(v));
  const qs = params.toString();
  return qs ? `${path}?${qs}` : path;
}

/** One call: JSON in, JSON out; rejects with an ApiError. */
export async function api<T>(method: string, path: string, options: { query?: Query; body?: unknown; key?: string } = {}): Promise<T> {
  const key = options.key ?? storedKey();
  const headers: Record<string, string> = { Accept: 'application/json' };
  if (key) headers['X-Api-Key'] = key;
  if (options.body !== undefined) headers['Content-Type'] = 'application/json';
  let res: Response;
  try {
    res = await fetch(withQuery(path, options.query), {
      method,
      headers,
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
      credentials: 'omit',
    });
  } catch {
    throw new ApiError(0, 'NETWORK_ERROR', 'the service could not be reached; check the connection and retry');
  }
  const text = await res.text();
  if (!res.ok) {
    const err = toApiError(res.status, text, res.headers.get('Retry-After'));
    if (!options.key) refused(err);
    throw err;
  }
  return (text ? JSON.parse(text) : null) as T;
}

export interface Page<T> {
  items: T[];
  nextCursor: string | null;
}

// The API's shapes the console reads (api/rest/openapi.json has them in full).
export interface FileItem {
  id: string;
  cid: string;
  name: string;
  size: number;
  mimeType: string;
  folderId: string | null;
  createdAt: number;
}
export interface Folder {
  folderId: string;
  name: string;
  parentFolderId: string | null;
  fileCount: number;
  latestSnapshot: { cid: string; takenAt: number } | null;
}
export interface Snapshot {
  cid: string;
  takenAt: number;
  fileCount: number;
  totalSize: number;
}
export interface SnapshotJob {
  id: string | null;
  status: string;
  progress: { linked: number; total: number } | null;
  snapshot: Snapshot | null;
  error?: string | null;
}
export interface Limits {
  storageMB: number;
  requestsPerMinute: number;
  apiKeys: number;
  ipnsNames: number;
  ipnsPublishesPerMonth: number;
  gatewayBandwidthMB: number;
  signedTokens: number;
  webhooks: number;
}
export interface Profile {
  email: string;
  name: string;
  plan: string;
  limits: Limits;
  storageUsedMB: number;
  gatewaySlug: string;
  gatewayUrl: string;
  gatewayTokenRequired: boolean;
  gatewayAllowedOrigins: string[];
  gatewayIpAllowlist: string[];
  gatewayBandwidthUsedMB: number;
}
