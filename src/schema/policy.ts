import { z } from 'zod';
import { intent, MAX_HOPS, MAX_RUNTIME_SECONDS, oracleModelName, positiveInt, usd, version } from './common.js';

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

/**
 * A panel: one question the COO may put to several advisory agents at once, each a member with an
 * attempt and a receipt of its own. A fan-out exists only where a panel allows it: a consult may
 * name any of a panel's members, from a sender `from` matches.
 */
export const panel = z.strictObject({
  name: z.string().regex(/^[a-z][a-z0-9_-]{0,31}$/, 'a panel name such as review'),
  from: actorPattern,
  members: z
    .array(z.string().regex(/^[a-z][a-z0-9_]*(\.[a-z0-9_]+)*$/, 'an actor id'))
    .min(2)
    .max(16)
    .refine((members) => new Set(members).size === members.length, 'a panel names each member once'),
});
export type PolicyPanel = z.infer<typeof panel>;

/** The longest wait between attempts any policy may set (retries.backoff_max_seconds): a receipt's next_attempt_at is never later after its created_at. */
export const BACKOFF_CEILING_SECONDS = 86_400;

/** actor_policy.v0: edges, intents, limits, budgets, retries and model prices. Signed by the CEO. */
export const actorPolicy = z
  .strictObject({
    schema_version: z.literal(POLICY_SCHEMA),
    version,
    edges: z.array(edge).max(200),
    limits: z.strictObject({
      max_hops: positiveInt.max(MAX_HOPS),
      max_ttl_seconds: positiveInt.max(30 * 86_400),
      max_context_files: positiveInt.max(1000),
      max_context_bytes: positiveInt.max(64 * 1024 * 1024),
      max_prompt_bytes: positiveInt.max(4 * 1024 * 1024),
      /**
       * The largest fan-out of one message: the members of a panel, and the work (consults,
       * dispatches, cross-checks) naming one parent. Absent in policies written before panels: then
       * no limit is stated.
       */
      max_fanout: positiveInt.max(64).optional(),
      /** How many messages of one correlation the runner may have in flight (not yet ended) at once; absent: no limit stated. */
      max_in_flight_per_correlation: positiveInt.max(10_000).optional(),
    }),
    budgets: z.strictObject({
      max_cost_usd_per_message: usd,
      max_cost_usd_per_correlation: usd,
      daily_cost_cap_usd: usd,
      max_runtime_seconds: positiveInt.max(MAX_RUNTIME_SECONDS),
    }),
    retries: z.strictObject({
      transient_max_attempts: positiveInt.max(10),
      malformed_output_max_attempts: positiveInt.max(10),
      backoff_base_seconds: z.number().finite().nonnegative().max(3600),
      backoff_max_seconds: z.number().finite().nonnegative().max(BACKOFF_CEILING_SECONDS),
    }),
    models: z.record(oracleModelName, modelPrice),
    heartbeat: z.strictObject({ interval_seconds: positiveInt.max(86_400), ttl_seconds: positiveInt.max(7 * 86_400) }),
    /** Where the COO may put one question to several advisory agents; none, absent or empty: no fan-out. */
    panels: z.array(panel).max(50).optional(),
    // --- AA proposals adopted through the COO's gate (`coo adopt`).
    /** Whether a dispatch that adopts an advisory agent's proposal needs the CEO's approval of its exact request; absent: it does. */
    adoptions: z.strictObject({ ceo_approval: z.boolean() }).optional(),
  })
  .superRefine((policy, ctx) => {
    if (policy.retries.backoff_max_seconds < policy.retries.backoff_base_seconds) {
      ctx.addIssue({ code: 'custom', path: ['retries', 'backoff_max_seconds'], message: 'backoff_max_seconds must be at least backoff_base_seconds' });
    }
    const names = new Set<string>();
    (policy.panels ?? []).forEach((item, index) => {
      if (names.has(item.name)) ctx.addIssue({ code: 'custom', path: ['panels', index, 'name'], message: `panel ${item.name} is named twice` });
      names.add(item.name);
      if (policy.limits.max_fanout !== undefined && item.members.length > policy.limits.max_fanout) {
        ctx.addIssue({ code: 'custom', path: ['panels', index, 'members'], message: `panel ${item.name} has ${item.members.length} members, over max_fanout ${policy.limits.max_fanout}` });
      }
    });
    if (policy.heartbeat.ttl_seconds < policy.heartbeat.interval_seconds) {
      ctx.addIssue({ code: 'custom', path: ['heartbeat', 'ttl_seconds'], message: 'a heartbeat must outlive its interval' });
    }
  });
export type ActorPolicy = z.infer<typeof actorPolicy>;
export type PolicyEdge = z.infer<typeof edge>;
