import { CooError } from '../../../errors.js';
import { ADVISORY_INTENTS } from '../../../schema/common.js';
import type { ActorRegistry } from '../../../schema/registry.js';
import { classOf } from '../../policy-check.js';
import type { IntentRules } from '../intent.js';
import { checkManifest, checkTask } from '../message-artifacts.js';
import { consultRules } from './consult.js';
import type { AttemptRecord, LedgerState, MessageRecord, Revocation } from '../../state.js';
import type { RevokedWord } from '../../runnable.js';
import type { CrossCheckMessage } from '../../../schema/message.js';
import { sameModel } from '../panel.js';
import { requireTargetClass } from './target-class.js';

/**
 * Why `challenger` may not challenge `author`'s answer under `registry`, or null: the registry
 * reaches both through one model, or the challenger through the model that gave the answer
 * (`answeredBy`, the model its receipt names), wherever the registry has moved the author since.
 * The validator asks it when the cross-check is written, and the consult lane again before it is
 * claimed: a registry changed since holds what is queued too.
 */
export function challengerTwin(registry: ActorRegistry, author: string, challenger: string, where: string, answeredBy?: string): CooError | null {
  const twin = sameModel(registry, [author, challenger], new Map(answeredBy === undefined ? [] : [[author, answeredBy]]));
  return twin === null ? null : new CooError('POLICY_INTENT_NOT_ALLOWED', `${where}: ${challenger} is ${author}'s model (${twin.model}) under another name: an answer is challenged by another model, never by its own`, { where: `${where}:target_actor` });
}

/** The answer a cross-check challenges: the succeeded receipt of its parent it names, or undefined. */
export function challengedReceipt(parent: MessageRecord, receiptRef: string): NonNullable<AttemptRecord['receipt']> | undefined {
  const receipt = parent.attempts.map((attempt) => attempt.receipt).find((item) => item !== null && item.path === receiptRef);
  return receipt === null || receipt === undefined || receipt.status !== 'succeeded' || receipt.output === undefined ? undefined : receipt;
}

/**
 * The key that signed the receipt vouching for the answer a cross-check challenges, and its
 * revocation, when that key was revoked: a revoked key's receipt vouches for no answer (what it names
 * may be a thief's), and no model is paid to judge it. One rule for the validator, which refuses a
 * cross-check written after the revocation (`ledger` is the commit judged), and the consult lane,
 * which starts no attempt, first or retry, of one written before (`ledger` is the state it read).
 */
export function challengeRevocation(
  ledger: { message(id: string): MessageRecord | undefined; revocation(keyId: string): Revocation | undefined },
  doc: { readonly parent_message_id: string | null; readonly challenge: Pick<CrossCheckMessage['challenge'], 'receipt_ref'> },
): { readonly keyId: string; readonly revocation: Revocation } | null {
  const parent = doc.parent_message_id === null ? undefined : ledger.message(doc.parent_message_id);
  const keyId = parent === undefined ? undefined : challengedReceipt(parent, doc.challenge.receipt_ref)?.keyId;
  const revocation = keyId === undefined ? undefined : ledger.revocation(keyId);
  return keyId === undefined || revocation === undefined ? null : { keyId, revocation };
}

/**
 * The revoked key a cross-check's next attempt would stand on (challengeRevocation), from its record
 * (its parent is the last of its chain), or null for any other message: runnable.ts revokedWord asks
 * it, for the runner's gate (blocked, `policy_denied`; what ran stands) and the claim rule.
 */
export function revokedChallengeOf(state: Pick<LedgerState, 'messages' | 'revocations'>, record: Pick<MessageRecord, 'chain' | 'challenges'>): RevokedWord | null {
  if (record.challenges === undefined) return null;
  const doc = { parent_message_id: record.chain.at(-1) ?? null, challenge: { receipt_ref: record.challenges } };
  const revoked = challengeRevocation({ message: (id) => state.messages.get(id), revocation: (keyId) => state.revocations.get(keyId) }, doc);
  return revoked === null ? null : { what: `the key of the challenged receipt ${record.challenges}`, revocation: revoked.revocation };
}

/**
 * cross_check: the COO puts advisory agent A's answer to advisory agent B to challenge. A holds no
 * key, so the COO signs on A's behalf; what proves A's part is the parent: the message A answered,
 * its succeeded receipt (signed by a key not revoked since) and that receipt's answer, named by path and hash. B judges it against the
 * context A was given, and answers with a consult's receipt.
 */
export const crossCheckRules: IntentRules<'cross_check'> = {
  onBehalf: () => true,
  target(_check, doc, registry, where) {
    if (classOf(registry, doc.source_actor) !== 'advisory_agent') {
      throw new CooError('POLICY_INTENT_NOT_ALLOWED', `${where}: a cross-check is written on behalf of the advisory agent whose answer it challenges, not ${doc.source_actor}`, { where });
    }
    requireTargetClass(registry, doc, 'advisory_agent', 'an advisory agent', where);
  },
  ancestry(check, doc, registry, where) {
    const parent = check.message(doc.parent_message_id)!;
    if (!ADVISORY_INTENTS.has(parent.intent) || parent.target !== doc.source_actor) {
      throw new CooError('SCHEMA_INVALID', `${where}: a cross-check's parent is a question ${doc.source_actor} answered, not ${parent.intent} ${parent.id} to ${parent.target}`, { where: `${where}:parent_message_id` });
    }
    const receipt = challengedReceipt(parent, doc.challenge.receipt_ref);
    if (receipt?.output === undefined) {
      throw new CooError('SCHEMA_INVALID', `${where}: ${doc.challenge.receipt_ref} is no succeeded receipt of ${parent.id} with an answer to challenge`, { where: `${where}:challenge.receipt_ref` });
    }
    // A revoked key's receipt vouches for no answer: what it names may be a thief's, and no model is paid to judge it.
    const revoked = challengeRevocation(check, doc);
    if (revoked !== null) {
      const { keyId, revocation } = revoked;
      throw new CooError('SIGNER_REVOKED', `${where}: ${doc.challenge.receipt_ref} was signed by ${keyId}, revoked at Ledger-Seq ${revocation.seq} by ${revocation.by} (${JSON.stringify(revocation.reason)}): a revoked key's receipt vouches for no answer to challenge; ask the question again and cross-check that answer`, { where: `${where}:challenge.receipt_ref` });
    }
    if (receipt.output.path !== doc.challenge.answer_ref || receipt.output.sha256 !== doc.challenge.answer_hash) {
      throw new CooError('ARTIFACT_HASH_MISMATCH', `${where}: the challenged answer is ${receipt.output.path} (${receipt.output.sha256}), as its receipt says`, { where: `${where}:challenge` });
    }
    const twin = challengerTwin(registry, doc.source_actor, doc.target_actor, where, receipt.model);
    if (twin !== null) throw twin;
    // The challenger judges against the exact context the challenged answer was given.
    if (parent.manifestHash !== doc.context_pin.context_manifest_hash) {
      throw new CooError('CONTEXT_INVALID', `${where}: a cross-check pins the context of the answer it challenges (${parent.manifestHash ?? 'none'})`, { where: `${where}:context_pin` });
    }
  },
  envelope(check, doc, _registry, _policy, folder, where) {
    // A snapshot's bytes stand beside the consult an execution agent asked, not beside a cross-check: only a commit pin is carried over.
    if (doc.context_pin.snapshot_of !== undefined) {
      throw new CooError('CONTEXT_INVALID', `${where}: a cross-check pins a repository commit, not a snapshot of a dispatch's worktree`, { where: `${where}:context_pin` });
    }
    checkTask(check, doc.payload_ref, doc.payload_hash, folder, where);
    checkManifest(check, doc.context_pin, folder, where);
  },
  record(doc) {
    return { challenges: doc.challenge.receipt_ref };
  },
  receipt: consultRules.receipt!,
};
