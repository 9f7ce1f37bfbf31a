import { CooError } from '../../errors.js';
import { messageFolder, type PathInfo } from '../../ledger/layout.js';
import { toMillis } from '../../schema/common.js';
import type { CooMessage } from '../../schema/message.js';
import { canonicalJson } from '../../util/hash.js';
import { checkMemberJoin, repeatedRequest, requestFingerprint } from '../idempotency.js';
import { checkEdge, checkForbiddenEdge, classOf, isCommandIntent } from '../policy-check.js';
import { isRunnerIntent, withinHopLimit } from '../runnable.js';
import { commandBudgetLeftUsd, correlationRemainingUsd, idempotencySlot, type MessageRecord } from '../state.js';
import type { CommitCheck, EntryFile } from '../commit-check.js';
import { checkFanout } from './fanout.js';
import { intentRules } from './intent.js';
import { checkAckKey } from './intents/ack.js';
import { checkCommandStands, takeUp } from './intents/ceo-command.js';
import { checkCommandNotRevoked } from './intents/ceo-authority.js';

/** How far a stated dollar figure may differ from the ledger's (floating-point sums of costs). */
const USD_TOLERANCE = 1e-9;

/**
 * Write-time authority for an envelope (coo_message.v0; review correction 3): signer, principal,
 * edge, intent, limits. The rules every intent shares are here, in the order they run; what one
 * intent adds runs at its fixed steps (rules/intents/).
 */
export function checkEnvelope(check: CommitCheck, entry: EntryFile, info: Extract<PathInfo, { kind: 'envelope' }>, keyId: string): void {
  const where = entry.path;
  const doc = check.read('coo_message.v0', entry);
  const { registry, policy } = check.requireTrust(where);
  if (doc.message_id !== info.messageId || messageFolder(doc.message_id, doc.created_at) !== info.folder) {
    throw new CooError('PATH_INVALID', `${where}: an envelope lives at ${messageFolder(doc.message_id, doc.created_at)}/envelope.yaml`, { where });
  }
  if (check.message(doc.message_id) !== undefined) {
    throw new CooError('MESSAGE_DUPLICATE', `${where}: message ${doc.message_id} already exists`, { where });
  }
  const rules = intentRules(doc.intent);
  const holder = check.signerHolder(keyId, where);
  // Signed by its source, or by the active COO on behalf of a source whose authority the parent chain proves (the intent's rules check the proof).
  if (holder.actor !== doc.source_actor && (holder.actor !== registry.active_coo || rules.onBehalf?.(doc) !== true)) {
    throw new CooError('SIGNER_WRONG_ACTOR', `${where}: source_actor is ${doc.source_actor} but the key belongs to ${holder.actor}`, { where });
  }
  // The CEO's word is the trust root's: a key the registry alone gives a human authority speaks for no one, as approvals and trust files hold it.
  if (classOf(registry, doc.source_actor) === 'human_authority' && !holder.rootAuthority) {
    throw new CooError('TRUST_AUTHORITY', `${where}: ${doc.intent} in the name of ${doc.source_actor} is signed by a trust-root authority in force, not ${keyId}, which only the registry gives ${holder.actor}: sign it with the CEO key the trust root names`, { where });
  }
  if (classOf(registry, doc.principal) === null) {
    throw new CooError('ACTOR_UNKNOWN', `${where}: principal ${doc.principal} is not in the registry`, { where });
  }
  checkForbiddenEdge(registry, doc.source_actor, doc.target_actor, doc.intent, where);
  if (isCommandIntent(doc.intent)) {
    // Who commands is who signs: the active COO, in its own name or on an agent's behalf.
    if (holder.actor !== registry.active_coo) {
      throw new CooError('NOT_ACTIVE_COO', `${where}: ${doc.intent} is command-class; only the active COO ${registry.active_coo} may send it, not ${doc.source_actor}`, { where });
    }
    if (doc.principal !== registry.active_coo) {
      throw new CooError('NOT_ACTIVE_COO', `${where}: a command-class envelope's principal must be the active COO ${registry.active_coo}`, { where });
    }
  } else if (doc.principal !== doc.source_actor) {
    // Any other envelope speaks for its signer, its sender, alone: an agent's blocker naming the COO as its principal would claim an authority no one gave it.
    throw new CooError('NOT_ACTIVE_COO', `${where}: principal ${doc.principal} is not ${doc.source_actor}, who sends and signs it: only a command-class envelope, which the active COO signs, names the COO as its principal`, { where });
  }
  checkEdge(registry, policy, doc.source_actor, doc.target_actor, doc.intent, where);
  rules.target(check, doc, registry, where);
  if (checkChain(check, doc, holder.actor, where)) rules.ancestry?.(check, doc, registry, where);
  checkLimits(check, doc, where);
  rules.envelope?.(check, doc, registry, policy, info.folder, where);
  checkAckKey(doc, where);
  if (check.clock !== null) checkMemberJoin(doc, where);
  const fingerprint = requestFingerprint(doc);
  const slot = idempotencySlot(doc.source_actor, doc.idempotency_key);
  const firstId = check.idempotency.get(slot) ?? check.state.idempotency.get(slot);
  const first = repeatedRequest(doc, fingerprint, firstId, firstId === undefined ? undefined : check.message(firstId), where);
  const duplicateOf = first === null ? null : (first.duplicateOf ?? first.id);
  if (first === null) check.idempotency.set(slot, doc.message_id);
  const record: MessageRecord = {
    id: doc.message_id,
    intent: doc.intent,
    source: doc.source_actor,
    target: doc.target_actor,
    correlation: doc.correlation_id,
    createdAt: doc.created_at,
    chain: doc.causality_chain,
    maxHops: doc.max_hops,
    idempotencyKey: doc.idempotency_key,
    fingerprint,
    payloadHash: 'payload_hash' in doc ? doc.payload_hash : null,
    manifestHash: 'context_pin' in doc && doc.context_pin !== null ? doc.context_pin.context_manifest_hash : null,
    maxCostUsd: doc.budget.max_cost_usd,
    expiresAt: doc.expires_at,
    deadlineAt: doc.deadline_at,
    seq: check.seq,
    duplicateOf,
    attempts: [],
    keyId,
    ...(doc.submitted_via === undefined ? {} : { submittedVia: doc.submitted_via }),
    ...(classOf(registry, doc.source_actor) === 'advisory_agent' || classOf(registry, doc.target_actor) === 'advisory_agent' ? { advisory: true as const } : {}),
    ...(doc.intent === 'aa_consult' && doc.panel !== undefined ? { panel: doc.panel.id } : {}),
    ...(doc.target_actor === registry.active_coo ? { toCoo: true as const } : doc.source_actor === registry.active_coo ? { fromCoo: true as const } : {}),
    ...rules.record?.(doc),
  };
  check.messages.set(doc.message_id, record);
  if (duplicateOf === null) rules.accepted?.(check, doc, record, where);
  // The active COO's work under the CEO's command takes it up: it stands past its expires_at from now on.
  // Another actor's message under it (an agent's blocker, the CEO's own) is no COO taking it up.
  if (duplicateOf === null && doc.parent_message_id !== null && doc.source_actor === registry.active_coo) takeUp(check, check.message(doc.parent_message_id)!);
}

/**
 * Causality: the parent exists, a sender other than the active COO and the CEO that signs in its
 * own name replies within its own exchanges (judged as new), the chain extends the parent's, the
 * correlation carries over, and hop limits only tighten. `signer`: the actor whose key signs it.
 * Whether the envelope is a reply, for its intent's `ancestry` rule.
 */
function checkChain(check: CommitCheck, doc: CooMessage, signer: string, where: string): boolean {
  if (doc.parent_message_id === null) return false;
  const parent = check.message(doc.parent_message_id);
  if (parent === undefined) throw new CooError('MESSAGE_UNKNOWN', `${where}: parent ${doc.parent_message_id} does not exist`, { where });
  // Only the active COO and the CEO reply under others' messages; any other sender in its own name, under a message it sent or
  // was sent. An agent's reply under another's (the CEO's command to the COO, the COO's consult of another agent) counted
  // toward that message's fan-out, and a few of them left the COO unable to work under the command or adopt the advice. What
  // the COO signs on an agent's behalf is held to its parent by its intent's rules (consult-in-dispatch.ts, cross-check.ts).
  const registry = check.registry!.doc;
  const free = doc.source_actor === registry.active_coo || classOf(registry, doc.source_actor) === 'human_authority';
  if (check.clock !== null && signer === doc.source_actor && !free && parent.source !== doc.source_actor && parent.target !== doc.source_actor) {
    throw new CooError('SCHEMA_INVALID', `${where}: ${doc.source_actor} replies under ${parent.intent} ${parent.id} (${parent.source} -> ${parent.target}), which it neither sent nor was sent: only the active COO and the CEO reply under others' messages`, { where: `${where}:parent_message_id` });
  }
  const expected = [...parent.chain, parent.id];
  if (canonicalJson(expected) !== canonicalJson(doc.causality_chain)) {
    throw new CooError('SCHEMA_INVALID', `${where}: causality_chain must be the parent's chain followed by the parent`, { where: `${where}:causality_chain` });
  }
  if (parent.correlation !== doc.correlation_id) {
    throw new CooError('SCHEMA_INVALID', `${where}: a reply keeps its parent's correlation_id ${parent.correlation}`, { where: `${where}:correlation_id` });
  }
  // Hop limits only tighten down a chain: max_hops counts from the chain's first message, so a reply leaves at most what its parent left.
  if (doc.max_hops > parent.maxHops) {
    throw new CooError('POLICY_LIMIT', `${where}: max_hops ${doc.max_hops} exceeds the ${parent.maxHops} its parent ${parent.id} leaves`, { where: `${where}:max_hops` });
  }
  // Work under a CEO command the COO never took up is refused once the command lapsed.
  checkCommandStands(check, parent, doc.created_at, `${doc.intent} ${doc.message_id} under it is`, where);
  // Nor under one whose key was revoked before the COO took it up.
  checkCommandNotRevoked(check, parent, `${doc.intent} ${doc.message_id} is`, where);
  return true;
}

function checkLimits(check: CommitCheck, doc: CooMessage, where: string): void {
  const policy = check.policy!.doc;
  const limit = (ok: boolean, what: string): void => {
    if (!ok) throw new CooError('POLICY_LIMIT', `${where}: ${what} (policy v${policy.version})`, { where });
  };
  limit(doc.max_hops <= policy.limits.max_hops, `max_hops ${doc.max_hops} exceeds ${policy.limits.max_hops}`);
  // The runner blocks a message at its hop limit; one it would never run is refused now, not queued.
  limit(!isRunnerIntent(doc.intent) || withinHopLimit(doc), `hop_count ${doc.hop_count} reaches max_hops ${doc.max_hops}: the runner would never run it`);
  limit((toMillis(doc.expires_at) - toMillis(doc.created_at)) / 1000 <= policy.limits.max_ttl_seconds, `time to live exceeds ${policy.limits.max_ttl_seconds} s`);
  checkFanout(check, doc, policy, where);
  limit(doc.budget.max_cost_usd <= policy.budgets.max_cost_usd_per_message, `max_cost_usd ${doc.budget.max_cost_usd} exceeds ${policy.budgets.max_cost_usd_per_message}`);
  limit(doc.budget.max_runtime_seconds <= policy.budgets.max_runtime_seconds, `max_runtime_seconds exceeds ${policy.budgets.max_runtime_seconds}`);
  const pin = 'context_pin' in doc ? doc.context_pin : null;
  if (pin !== null) limit(pin.files.length <= policy.limits.max_context_files, `${pin.files.length} context files exceed ${policy.limits.max_context_files}`);
  checkCorrelationBudget(check, doc, where);
  checkCommandBudget(check, doc, where);
}

/** Work that descends from a CEO command with a budget may cost at most what that budget has left. */
function checkCommandBudget(check: CommitCheck, doc: CooMessage, where: string): void {
  if (!isRunnerIntent(doc.intent)) return;
  const budget = commandBudgetLeftUsd(check.state, (id) => check.message(id), doc.causality_chain);
  if (budget !== null && doc.budget.max_cost_usd > budget.left + USD_TOLERANCE) {
    throw new CooError('BUDGET_EXCEEDED', `${where}: max_cost_usd ${doc.budget.max_cost_usd} exceeds the ${budget.left} that the CEO's command ${budget.command} has left`, { where: `${where}:budget.max_cost_usd` });
  }
}

/**
 * An envelope's correlation_budget_remaining_usd is the writer's claim about the ledger; when it
 * states one, it must be the ledger's own figure at this commit's parent (the policy in force less
 * what the correlation's receipts have cost). Null, or leaving the field out, states none.
 */
function checkCorrelationBudget(check: CommitCheck, doc: CooMessage, where: string): void {
  const claimed = doc.budget.correlation_budget_remaining_usd;
  if (claimed == null) return;
  const policy = check.policy!.doc;
  const actual = correlationRemainingUsd(policy, check.state.spendByCorrelation.get(doc.correlation_id) ?? 0);
  if (Math.abs(claimed - actual) > USD_TOLERANCE) {
    throw new CooError('POLICY_LIMIT', `${where}: correlation_budget_remaining_usd ${claimed} is not the ${actual} the ledger leaves ${doc.correlation_id} (policy v${policy.version})`, {
      where: `${where}:budget.correlation_budget_remaining_usd`,
    });
  }
}
