// The caller's profile: who they are, their plan and its limits, their storage (distinct
// content, as the quota counts it) and their gateway.
import { defaultGatewaySettings } from '../infra/db/users.js';
import { toMB } from './analytics.js';
import { gatewayBytesThisMonth } from './bandwidth.js';
import { accountGatewayUrl } from './gateway.js';
import type { Caller, UseCaseDeps } from './deps.js';

export interface Profile {
  userId: string;
  email: string;
  name: string;
  plan: string;
  limits: {
    storageMB: number;
    requestsPerMinute: number;
    apiKeys: number;
    ipnsNames: number;
    ipnsPublishesPerMonth: number;
    gatewayBandwidthMB: number;
    signedTokens: number;
    webhooks: number;
    trialDays?: number;
  };
  storageUsedMB: number;
  gatewaySlug: string;
  gatewayUrl: string;
  gatewayTokenRequired: boolean;
  gatewayAllowedOrigins: string[];
  gatewayIpAllowlist: string[];
  gatewayBandwidthUsedMB: number;
  createdAt: number;
}

export async function getProfile(deps: Pick<UseCaseDeps, 'db' | 'config'>, caller: Caller): Promise<Profile> {
  const { user, plan } = caller;
  const [gatewaySlug, used, gatewayBytes] = await Promise.all([
    // Users from before slugs get theirs now (infra/db/users.ts).
    deps.db.users.gatewaySlugOf(user),
    deps.db.usage.used(user._id),
    gatewayBytesThisMonth(deps.db, user._id),
  ]);
  const gateway = user.gateway ?? defaultGatewaySettings();
  // The plan that applies (a user whose plan left the plans file has the default plan's).
  const { name: planName, label: _label, ...limits } = plan;
  return {
    userId: user._id,
    email: user.email,
    name: user.name,
    plan: planName,
    limits,
    storageUsedMB: toMB(used),
    gatewaySlug,
    gatewayUrl: accountGatewayUrl(deps.config, gatewaySlug),
    gatewayTokenRequired: gateway.tokenRequired,
    gatewayAllowedOrigins: gateway.allowedOrigins,
    gatewayIpAllowlist: gateway.ipAllowlist,
    gatewayBandwidthUsedMB: toMB(gatewayBytes),
    createdAt: user.createdAt,
  };
}
