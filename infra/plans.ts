// Plans are configuration, not code (docs/api/contract.md, "Users and plans"): a JSON file lists each
// plan's limits. It is read and validated once at start; a bad file stops the process with
// a message naming every wrong field.
import fs from 'node:fs';
import { z } from 'zod';
import { DEFAULT_PLAN_WEBHOOKS } from './constants.js';
import { ConfigError } from './errors.js';

const limit = z.number().int().min(0);

const planSchema = z.strictObject({
  label: z.string().min(1),
  storageMB: limit,
  requestsPerMinute: z.number().int().min(1),
  apiKeys: z.number().int().min(1),
  ipnsNames: limit,
  ipnsPublishesPerMonth: limit,
  gatewayBandwidthMB: limit,
  signedTokens: limit,
  webhooks: limit.default(DEFAULT_PLAN_WEBHOOKS),
  trialDays: z.number().int().min(1).optional(),
});

const plansFileSchema = z
  .strictObject({
    $comment: z.string().optional(),
    defaultPlan: z.string(),
    plans: z.record(z.string().regex(/^[a-z][a-z0-9_-]{0,31}$/), planSchema),
  })
  .refine((doc) => doc.defaultPlan in doc.plans, { message: 'defaultPlan must name one of the plans' });

export type Plan = z.infer<typeof planSchema> & { name: string };
export interface Plans {
  defaultPlan: string;
  byName: ReadonlyMap<string, Plan>;
  get(name: string): Plan;
}

export function loadPlans(file: string): Plans {
  let raw: unknown;
  try {
    raw = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (err) {
    throw new ConfigError([`PLANS_FILE ${file} cannot be read as JSON: ${(err as Error).message}`]);
  }
  const parsed = plansFileSchema.safeParse(raw);
  if (!parsed.success) {
    throw new ConfigError(parsed.error.issues.map((i) => `PLANS_FILE ${file}: ${i.path.join('.') || '(root)'}: ${i.message}`));
  }
  const byName = new Map(Object.entries(parsed.data.plans).map(([name, p]) => [name, { ...p, name }]));
  return {
    defaultPlan: parsed.data.defaultPlan,
    byName,
    get(name: string): Plan {
      // A user whose plan was removed from the file falls back to the default plan rather
      // than locking the account out.
      return byName.get(name) ?? byName.get(parsed.data.defaultPlan)!;
    },
  };
}
