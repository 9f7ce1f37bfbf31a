import { CooError } from '../../errors.js';
import type { AaConsultMessage, AdvisoryMessage } from '../../schema/message.js';
import type { ActorPolicy } from '../../schema/policy.js';
import type { ActorRegistry } from '../../schema/registry.js';
import type { CommitCheck } from '../commit-check.js';
import type { LedgerState } from '../state.js';
import { modelIdentity } from '../../consult/providers/oracle-models.js';
import { matchesPattern } from '../policy-check.js';
import { priceOf } from '../../lane/budget.js';

/**
 * Panels: one question to several advisory agents, each member its own aa_consult message with its
 * own attempts and receipts, all written in one commit. A fan-out exists only where a policy panel
 * allows it (the sender matches its `from`, and every member is one of its members), within the
 * policy's max_fanout; every member puts the same question with the same context in the same place
 * of one correlation, and a panel, once written, takes no further members. Its members are
 * independent: no two of them are one model under two names (the model the registry's transport
 * names, as Oracle sends it, whatever route, gateway or key reaches it: sameModel), or their
 * agreement would be one answer counted twice.
 */
export function notePanelMember(check: CommitCheck, doc: AaConsultMessage, registry: ActorRegistry, policy: ActorPolicy, where: string): void {
  const membership = doc.panel;
  if (membership === undefined) return;
  const refused = panelRefusal(membership, doc.source_actor, registry, policy, where);
  if (refused !== null) throw refused;
  if (check.state.panels.has(membership.id)) {
    throw new CooError('PANEL_INVALID', `${where}: panel ${membership.id} was written before; a panel takes all its members in one commit`, { where: `${where}:panel.id` });
  }
  const request = { payloadHash: doc.payload_hash, manifestHash: doc.context_pin.context_manifest_hash, correlation: doc.correlation_id, parent: doc.parent_message_id, source: doc.source_actor };
  let written = check.panels.get(membership.id);
  if (written === undefined) {
    written = { name: membership.name, members: membership.members, request, seen: new Map(), where };
    check.panels.set(membership.id, written);
  }
  if (written.name !== membership.name || written.members.join(' ') !== membership.members.join(' ')) {
    throw new CooError('PANEL_INVALID', `${where}: the members of panel ${membership.id} name another panel or other members than ${written.where}`, { where: `${where}:panel` });
  }
  const differs = (Object.keys(request) as Array<keyof typeof request>).find((field) => request[field] !== written.request[field]);
  if (differs !== undefined) {
    throw new CooError('PANEL_INVALID', `${where}: a panel's members put one question (the same prompt and context, correlation, parent and sender); this one's ${differs} differs from ${written.where}`, { where: `${where}:panel` });
  }
  if (written.seen.has(doc.target_actor)) {
    throw new CooError('PANEL_INVALID', `${where}: panel ${membership.id} already has a message to ${doc.target_actor} (${written.seen.get(doc.target_actor)})`, { where: `${where}:target_actor` });
  }
  written.seen.set(doc.target_actor, doc.message_id);
}

/**
 * Why the trust files given do not allow a panel, or null: a policy panel the sender may ask that
 * holds every member, no two members one model, within max_fanout. The validator asks it when the
 * members are written, and the consult lane again before a member is claimed: a policy or registry
 * changed since holds what is queued too.
 */
export function panelRefusal(membership: { readonly name: string; readonly members: readonly string[] }, source: string, registry: ActorRegistry, policy: ActorPolicy, where: string, answered?: ReadonlyMap<string, string>): CooError | null {
  const allowed = (policy.panels ?? []).find((panel) => panel.name === membership.name);
  if (allowed === undefined || !matchesPattern(allowed.from, source)) {
    return new CooError('POLICY_PANEL_NOT_ALLOWED', `${where}: policy v${policy.version} has no panel ${membership.name} that ${source} may ask: no fan-out is allowed there`, { where: `${where}:panel` });
  }
  const outside = membership.members.filter((member) => !allowed.members.includes(member));
  if (outside.length > 0) {
    return new CooError('POLICY_PANEL_NOT_ALLOWED', `${where}: panel ${membership.name} of policy v${policy.version} does not have ${outside.join(', ')} among its members`, { where: `${where}:panel.members` });
  }
  const twin = sameModel(registry, membership.members, answered);
  if (twin !== null) {
    return new CooError('PANEL_INVALID', `${where}: panel members ${twin.members.join(' and ')} are one model (${twin.model}) under two names: a panel's members are independent, so ask one of them`, { where: `${where}:panel.members` });
  }
  const limit = policy.limits.max_fanout;
  if (limit !== undefined && membership.members.length > limit) {
    return new CooError('POLICY_LIMIT', `${where}: a panel of ${membership.members.length} members is over the policy's max_fanout ${limit} (policy v${policy.version})`, { where: `${where}:panel.members` });
  }
  return null;
}

/**
 * Two of `members` that are one model, or null: a panel's members, a cross-check's author and
 * challenger. Each member is the model the registry reaches it through now and, where `answered`
 * names one, the model that gave its answer (its receipt's): an answer stays that model's whatever
 * the registry says of its agent since. One model is one identity (modelIdentity): the name each
 * route gives it differs (OpenRouter's anthropic/claude-sonnet-4.6 is Oracle's claude-4.6-sonnet),
 * and two of Oracle's keys may send one model.
 */
export function sameModel(registry: ActorRegistry, members: readonly string[], answered: ReadonlyMap<string, string> = new Map()): { members: [string, string]; model: string } | null {
  const seen = new Map<string, { readonly member: string; readonly model: string }>();
  for (const member of members) {
    const models = [registry.actors.find((actor) => actor.id === member)?.transport?.model, answered.get(member)].filter((model) => model !== undefined);
    for (const model of models) {
      const first = seen.get(modelIdentity(model));
      if (first !== undefined) return { members: [first.member, member], model: first.model };
    }
    for (const model of models) seen.set(modelIdentity(model), { member, model });
  }
  return null;
}

/**
 * The models that gave the answers an advisory message is to be told apart from, by the agent that
 * gave each, as their receipts name them: a cross-check's challenged answer, by its author; a panel
 * member's siblings' succeeded answers, and for a sibling whose attempt is still open (claimed, its
 * receipt not landed) the model the registry gave it when that attempt was claimed. Empty for a
 * receipt that names no model.
 */
export function answeredModels(message: AdvisoryMessage, state: Pick<LedgerState, 'messages' | 'panels'>): ReadonlyMap<string, string> {
  const answered = new Map<string, string>();
  if (message.intent === 'cross_check') {
    const model = state.messages.get(message.parent_message_id)?.attempts.find((attempt) => attempt.receipt?.path === message.challenge.receipt_ref)?.receipt?.model;
    if (model !== undefined) answered.set(message.source_actor, model);
  } else if (message.panel !== undefined) {
    for (const id of state.panels.get(message.panel.id)?.messages ?? []) {
      const sibling = state.messages.get(id);
      const open = sibling?.attempts.at(-1);
      const model = sibling?.attempts.findLast((attempt) => attempt.receipt?.status === 'succeeded')?.receipt?.model ?? (open?.receipt === null ? open.claim?.model : undefined);
      if (sibling !== undefined && sibling.id !== message.message_id && model !== undefined) answered.set(sibling.target, model);
    }
  }
  return answered;
}

/**
 * What makes a policy's panel one that can never be asked, with the registry in force, or null, in
 * this order: a member the registry does not list, a member that is no advisory agent, two members
 * that are one model (sameModel), a member no sender the panel allows may consult by an edge of the
 * same policy, a member on a model the same policy gives no price (its consult could not be
 * budgeted). Judged when the policy is written (and when a registry would newly make a panel so),
 * not first found when the panel is asked.
 */
export function panelContradiction(policy: ActorPolicy, registry: ActorRegistry, where: string): CooError | null {
  for (const [index, panel] of (policy.panels ?? []).entries()) {
    const at = `${where}:panels[${index}]`;
    const fix = `; correct the panel (or the registry) and write the policy again`;
    for (const member of panel.members) {
      const actor = registry.actors.find((entry) => entry.id === member);
      if (actor === undefined) return new CooError('ACTOR_UNKNOWN', `${at}: panel ${panel.name} names ${member}, which registry v${registry.version} does not list${fix}`, { where: at });
      if (actor.transport === undefined) return new CooError('PANEL_INVALID', `${at}: panel ${panel.name} names ${member}, of class ${actor.class}: a panel's members are advisory agents${fix}`, { where: at });
    }
    const twin = sameModel(registry, panel.members);
    if (twin !== null) {
      return new CooError('PANEL_INVALID', `${at}: panel ${panel.name} members ${twin.members.join(' and ')} are one model (${twin.model}) under two names: a panel's members are independent, so list one of them${fix}`, { where: at });
    }
    for (const member of panel.members) {
      const asks = registry.actors.some((sender) => matchesPattern(panel.from, sender.id) && policy.edges.some((edge) => matchesPattern(edge.from, sender.id) && matchesPattern(edge.to, member) && edge.intents.includes('aa_consult')));
      if (!asks) return new CooError('PANEL_INVALID', `${at}: panel ${panel.name} names ${member}, but no edge of this policy lets a sender its from (${panel.from}) matches consult it (aa_consult): add that edge or drop the member${fix}`, { where: at });
      const model = registry.actors.find((entry) => entry.id === member)!.transport!.model;
      if (priceOf(policy.models, model) === undefined) {
        return new CooError('PANEL_INVALID', `${at}: panel ${panel.name} names ${member}, whose model ${model} this policy gives no price (models): its consult could not be budgeted${fix}`, { where: at });
      }
    }
  }
  return null;
}

/** After every entry of the commit: each panel it writes has a message to every member it names. */
export function checkPanels(check: CommitCheck): void {
  for (const [id, written] of check.panels) {
    const missing = written.members.filter((member) => !written.seen.has(member));
    if (missing.length > 0) {
      check.report(new CooError('PANEL_INVALID', `${written.where}: panel ${id} names ${missing.join(', ')} but this commit has no message to ${missing.length === 1 ? 'it' : 'them'}: a panel's members are written together`, { where: written.where }));
    }
  }
}
