// User use-cases. There is no sign-up endpoint: operators create users with the admin CLI.
import type { User } from '../../infra/db/users.js';
import { createApiKey, type ApiKeyDeps } from './apikeys.js';
import { Conflict, InvalidInput, NotFound } from './errors.js';

function checkPlan(deps: ApiKeyDeps, plan: string): string {
  const { plans } = deps.config;
  if (!plans.byName.has(plan))
    throw new InvalidInput(`unknown plan ${plan}; plans: ${[...plans.byName.keys()].join(', ')}`, 'UNKNOWN_PLAN');
  return plan;
}

/** A new user on `plan` (the default plan when absent) with a first API key, shown once. */
export async function createUser(deps: ApiKeyDeps, input: { email: string; name: string; plan?: string }) {
  const email = input.email.trim().toLowerCase();
  if (!/^[^\s@]+@[^\s@]+$/.test(email)) throw new InvalidInput(`${input.email} is not an email address`, 'INVALID_EMAIL');
  const plan = checkPlan(deps, input.plan ?? deps.config.plans.defaultPlan);
  const user = await deps.db.users.create({ email, name: input.name, plan });
  if (!user) throw new Conflict('EMAIL_TAKEN', `a user with email ${email} exists`);
  // Stores nothing yet; counted from zero, so its storage is never summed from records.
  await deps.db.usage.init(user._id);
  const key = await createApiKey(deps, { userId: user._id, maxKeys: deps.config.plans.get(plan).apiKeys });
  return { user, apiKey: key.apiKey, keyPrefix: key.keyPrefix };
}

export async function getUser(deps: ApiKeyDeps, userId: string): Promise<User> {
  const user = await deps.db.users.get(userId);
  if (!user) throw new NotFound(`user ${userId}`);
  return user;
}

/** Every user, oldest first: an operator's listing, not a request path. */
export const listUsers = (deps: ApiKeyDeps): Promise<User[]> => deps.db.users.list();

export async function setPlan(deps: ApiKeyDeps, userId: string, plan: string): Promise<User> {
  checkPlan(deps, plan);
  const user = await deps.db.users.setPlan(userId, plan);
  if (!user) throw new NotFound(`user ${userId}`);
  return user;
}
