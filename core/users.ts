// User use-cases. There is no sign-up endpoint: operators create users with the admin CLI.
import type { User } from '../infra/db/users.js';
import { createApiKey, type ApiKeyDeps } from './apikeys.js';
import { LIST_DEFAULT_LIMIT, LIST_MAX_LIMIT } from '../infra/constants.js';
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

/**
 * A page of users, newest first, and the cursor of the next page (null after the last): an
 * operator's listing, paged like an API list so that it costs the same at a million users.
 */
export async function listUsers(
  deps: ApiKeyDeps,
  page: { limit?: number; after?: string },
): Promise<{ users: User[]; next: string | null }> {
  const limit = page.limit ?? LIST_DEFAULT_LIMIT;
  if (!Number.isInteger(limit) || limit < 1 || limit > LIST_MAX_LIMIT)
    throw new InvalidInput(`limit must be an integer from 1 to ${LIST_MAX_LIMIT}`, 'INVALID_LIMIT');
  // One more than asked says whether there is a next page.
  const users = await deps.db.users.list(limit + 1, page.after);
  if (users === null) throw new NotFound(`user ${page.after} (the page cursor)`);
  const more = users.length > limit;
  if (more) users.pop();
  return { users, next: more ? users[users.length - 1]!._id : null };
}

export async function setPlan(deps: ApiKeyDeps, userId: string, plan: string): Promise<User> {
  checkPlan(deps, plan);
  const user = await deps.db.users.setPlan(userId, plan);
  if (!user) throw new NotFound(`user ${userId}`);
  return user;
}
