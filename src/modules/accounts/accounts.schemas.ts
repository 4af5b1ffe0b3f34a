export const PLANS = ['free', 'pro', 'business', 'enterprise'] as const;
export type Plan = (typeof PLANS)[number];

/** Requests per minute and per day for each plan (spec "Limits"); enterprise carries its own numbers. */
export const PLAN_LIMITS: Record<Exclude<Plan, 'enterprise'>, { minute: number; day: number }> = {
  free: { minute: 60, day: 1_000 },
  pro: { minute: 300, day: 10_000 },
  business: { minute: 1_000, day: 50_000 },
};

export const SCOPES = [
  'documents:read',
  'documents:write',
  'faqs:read',
  'faqs:write',
  'conversations:read',
  'conversations:write',
  'analytics:read',
  'webhooks:read',
  'webhooks:write',
  'workflows:read',
  'workflows:write',
  'rundowns:read',
  'rundowns:write',
  'chat',
] as const;
export type Scope = (typeof SCOPES)[number];

export const KEY_TYPES = ['server', 'public'] as const;
export type KeyType = (typeof KEY_TYPES)[number];

export interface AuthContext {
  accountId: string;
  plan: Plan;
  limits: { minute: number; day: number };
  keyId: string;
  keyType: KeyType;
  scopes: ReadonlySet<string>;
}
