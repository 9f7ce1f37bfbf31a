import { z } from 'zod';
import { intent, oracleModelName, positiveInt, usd, version } from './common.js';

export const POLICY_SCHEMA = 'actor_policy.v0';

/** An actor pattern: an exact id (`aa.chatgpt`), a prefix wildcard (`aa.*`) or `*`. */
export const actorPattern = z
  .string()
  .regex(/^(\*|[a-z][a-z0-9_]*(\.[a-z0-9_]+)*(\.\*)?)$/, 'an actor id, a prefix such as aa.*, or *');

/** `ceo_approval`: a dispatch along the edge carries a CEO-signed approval of its exact request (approval.v0). */
export const requirement = z.enum(['budget_check', 'context_pin', 'delegation_envelope_check', 'task_scope_bound', 'coo_gate', 'ceo_approval']);

export const edge = z.strictObject({
  from: actorPattern,
  to: actorPattern,
  intents: z.array(intent).min(1),
  requires: z.array(requirement).default([]),
});

export const modelPrice = z.strictObject({
  input_usd_per_million: usd,
  output_usd_per_million: usd,
  /** Most output tokens the runner will ever ask for, whatever the budget allows. */
  max_output_tokens: positiveInt.max(1_000_000),
});

/** actor_policy.v0: edges, intents, limits, budgets, retries and model prices. Signed by the CEO. */
export const actorPolicy = z
  .strictObject({
    schema_version: z.literal(POLICY_SCHEMA),
    version,
    edges: z.array(edge).max(200),
    limits: z.strictObject({
      max_hops: positiveInt.max(64),
      max_ttl_seconds: positiveInt.max(30 * 86_400),
      max_context_files: positiveInt.max(1000),
      max_context_bytes: positiveInt.max(64 * 1024 * 1024),
      max_prompt_bytes: positiveInt.max(4 * 1024 * 1024),
    }),
    budgets: z.strictObject({
      max_cost_usd_per_message: usd,
      max_cost_usd_per_correlation: usd,
      daily_cost_cap_usd: usd,
      max_runtime_seconds: positiveInt.max(86_400),
    }),
    retries: z.strictObject({
      transient_max_attempts: positiveInt.max(10),
      malformed_output_max_attempts: positiveInt.max(10),
      backoff_base_seconds: z.number().finite().nonnegative().max(3600),
      backoff_max_seconds: z.number().finite().nonnegative().max(86_400),
    }),
    models: z.record(oracleModelName, modelPrice),
    heartbeat: z.strictObject({ interval_seconds: positiveInt.max(86_400), ttl_seconds: positiveInt.max(7 * 86_400) }),
  })
  .superRefine((policy, ctx) => {
    if (policy.retries.backoff_max_seconds < policy.retries.backoff_base_seconds) {
      ctx.addIssue({ code: 'custom', path: ['retries', 'backoff_max_seconds'], message: 'backoff_max_seconds must be at least backoff_base_seconds' });
    }
    if (policy.heartbeat.ttl_seconds < policy.heartbeat.interval_seconds) {
      ctx.addIssue({ code: 'custom', path: ['heartbeat', 'ttl_seconds'], message: 'a heartbeat must outlive its interval' });
    }
  });
export type ActorPolicy = z.infer<typeof actorPolicy>;
export type PolicyEdge = z.infer<typeof edge>;
