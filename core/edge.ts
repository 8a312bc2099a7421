// What the edge asks the service beyond access decisions: whether a host name is one of its
// own, before it gets a certificate for it on demand (ACME, stack/edge.ts). An account's
// gateway (`<slug>.<gateway domain>`) or an existing bucket (`<bucket>.<S3 domain>`) is; any
// other name under those domains is not, so nobody can make the edge ask for certificates of
// names that serve nothing.
import type { UseCaseDeps } from './deps.js';

type Deps = Pick<UseCaseDeps, 'db' | 'config'>;

export async function servesHostName(deps: Deps, name: string): Promise<boolean> {
  const host = name.toLowerCase();
  const under = (domain: string) => (host.endsWith(`.${domain}`) ? host.slice(0, -domain.length - 1) : null);
  const slug = under(deps.config.gateway.domain);
  if (slug && !slug.includes('.')) {
    const owner = await deps.db.users.slugs.owner(slug);
    if (owner) return true;
  }
  const bucket = under(deps.config.s3.domain);
  if (bucket && /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(bucket)) return (await deps.db.buckets.get(bucket)) !== null;
  return false;
}
