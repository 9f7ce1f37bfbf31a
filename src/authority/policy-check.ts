import { CooError } from '../errors.js';
import { COMMAND_INTENTS, type ActorClass, type Intent } from '../schema/common.js';
import type { ActorPolicy, PolicyEdge } from '../schema/policy.js';
import type { ActorRegistry } from '../schema/registry.js';

/**
 * Edges forbidden whatever a policy says: an advisory agent never reaches an execution agent. An
 * execution agent reaches an advisory agent only with a consult, which the COO signs on its behalf
 * inside one of its dispatch attempts (rules/intents/consult-in-dispatch.ts), and an advisory agent
 * reaches another only with a cross-check, which the COO writes on its behalf
 * (rules/intents/cross-check.ts); no other intent.
 */
const FORBIDDEN: ReadonlyArray<{ from: ActorClass; to: ActorClass; why: string; except?: readonly Intent[] }> = [
  { from: 'advisory_agent', to: 'execution_agent', why: 'AA->EA is forbidden: advice reaches execution only through a COO decision' },
  { from: 'execution_agent', to: 'advisory_agent', why: 'an execution agent reaches an advisory agent only with a consult asked inside its dispatch', except: ['aa_consult'] },
  { from: 'advisory_agent', to: 'advisory_agent', why: 'an advisory agent reaches another only with a cross-check the COO writes', except: ['cross_check'] },
];

export function matchesPattern(pattern: string, actorId: string): boolean {
  if (pattern === '*') return true;
  if (pattern.endsWith('.*')) return actorId.startsWith(pattern.slice(0, -1));
  return pattern === actorId;
}

export function classOf(registry: ActorRegistry, actorId: string): ActorClass | null {
  return registry.actors.find((actor) => actor.id === actorId)?.class ?? null;
}

/** Why `intent` (any intent, when not given) may never pass from one class to the other, or null. */
export function forbiddenEdge(fromClass: ActorClass, toClass: ActorClass, intent?: Intent): string | null {
  const rule = FORBIDDEN.find((item) => item.from === fromClass && item.to === toClass);
  if (rule === undefined) return null;
  return intent !== undefined && rule.except?.includes(intent) === true ? null : rule.why;
}

export function isCommandIntent(intent: Intent): boolean {
  return COMMAND_INTENTS.has(intent);
}

/** Throws when `intent` may never pass from `source` to `target`, whatever a policy says. */
export function checkForbiddenEdge(registry: ActorRegistry, source: string, target: string, intent: Intent, where: string): void {
  const sourceClass = classOf(registry, source);
  const targetClass = classOf(registry, target);
  if (sourceClass === null) throw new CooError('ACTOR_UNKNOWN', `${where}: source_actor ${source} is not in the registry`, { where });
  if (targetClass === null) throw new CooError('ACTOR_UNKNOWN', `${where}: target_actor ${target} is not in the registry`, { where });
  const why = forbiddenEdge(sourceClass, targetClass, intent);
  if (why !== null) throw new CooError('POLICY_EDGE_FORBIDDEN', `${where}: ${source} -> ${target}: ${why}`, { where });
}

/** Throws the coded reason when `intent` from `source` to `target` is not allowed. */
export function checkEdge(registry: ActorRegistry, policy: ActorPolicy, source: string, target: string, intent: Intent, where: string): void {
  checkForbiddenEdge(registry, source, target, intent, where);
  const edges = policy.edges.filter((edge) => matchesPattern(edge.from, source) && matchesPattern(edge.to, target));
  if (edges.length === 0) {
    throw new CooError('POLICY_EDGE_NOT_ALLOWED', `${where}: policy v${policy.version} has no edge ${source} -> ${target}`, { where });
  }
  if (!edges.some((edge) => edge.intents.includes(intent))) {
    throw new CooError('POLICY_INTENT_NOT_ALLOWED', `${where}: policy v${policy.version} does not allow ${intent} on ${source} -> ${target}`, { where });
  }
}

/** Whether any policy edge carrying `intent` from `source` to `target` requires `requirement`: a laxer twin edge does not lift it. */
export function edgeRequires(policy: ActorPolicy, source: string, target: string, intent: Intent, requirement: PolicyEdge['requires'][number]): boolean {
  return policy.edges.some((edge) => matchesPattern(edge.from, source) && matchesPattern(edge.to, target) && edge.intents.includes(intent) && edge.requires.includes(requirement));
}

/** A policy may not open an edge forbidden whatever it says, for any pair of registered actors and any intent it lists. */
export function checkPolicyAgainstRegistry(policy: ActorPolicy, registry: ActorRegistry, where: string): void {
  policy.edges.forEach((edge, index) => {
    for (const from of registry.actors) {
      if (!matchesPattern(edge.from, from.id)) continue;
      for (const to of registry.actors) {
        if (!matchesPattern(edge.to, to.id)) continue;
        const why = edge.intents.map((intent) => forbiddenEdge(from.class, to.class, intent)).find((reason) => reason !== null) ?? null;
        if (why !== null) {
          throw new CooError('POLICY_EDGE_FORBIDDEN', `${where}:edges[${index}]: ${edge.from} -> ${edge.to} would allow ${from.id} -> ${to.id}; ${why}`, {
            where: `${where}:edges[${index}]`,
          });
        }
      }
    }
  });
}
