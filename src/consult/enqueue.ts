import { randomBytes } from 'node:crypto';
import { CooError } from '../errors.js';
import { activeKeys } from '../authority/keys.js';
import { correlationRemainingUsd, idempotencySlot, type LedgerState } from '../authority/state.js';
import type { PrivateKey } from '../crypto/keys.js';
import { appendEnvelope, type EnvelopeAppendResult } from '../ledger/append-envelope.js';
import { manifestPath, messageFolder, promptPath } from '../ledger/layout.js';
import type { Ledger } from '../ledger/ledger.js';
import { parseDocument, readDocument } from '../schema/documents.js';
import type { AaConsultMessage } from '../schema/message.js';
import { toYaml } from '../schema/strict-yaml.js';
import { sha256Ref } from '../util/hash.js';
import { newCorrelationId, newMessageId } from '../util/ids.js';
import { addSeconds, isoSeconds } from '../util/time.js';
import { isOracleSafePath } from './oracle.js';
import { pinFiles, resolveCommit } from './pins.js';
import { PROMPT_TEMPLATE_VERSION } from './prompt.js';

export interface ConsultRequest {
  readonly ledger: Ledger;
  readonly key: PrivateKey;
  readonly now: Date;
  readonly target: string;
  readonly repo: string;
  readonly rev?: string;
  readonly patterns: readonly string[];
  readonly question: string;
  readonly maxCostUsd?: number;
  readonly maxRuntimeSeconds?: number;
  readonly ttlSeconds?: number;
  readonly idempotencyKey?: string;
  /** Default: the parent's, else the correlation of the first request under this idempotency key, else a new one. */
  readonly correlationId?: string;
  readonly parentMessageId?: string;
  /** How many hops a chain through this message may take: at most what the parent leaves (its own max_hops) and the policy's; that by default. */
  readonly maxHops?: number;
  /** How the request reached the ledger when not typed at the CLI; recorded as the envelope's submitted_via. */
  readonly submittedVia?: 'mcp';
}

export interface ConsultEnqueued extends EnvelopeAppendResult {
  readonly envelope: AaConsultMessage;
}

/** Defaults when the caller gives none: the policy's caps, an hour to start, a runtime of ten minutes at most. */
const DEFAULT_TTL_SECONDS = 3600;
const DEFAULT_RUNTIME_SECONDS = 600;

/**
 * Builds, signs and appends an aa_consult envelope whose context is pinned to immutable state: the
 * commit SHA that `rev` resolves to, the sha256 of every file as stored in that commit (read from
 * git objects, never the working tree), the context manifest's hash, the prompt's hash and the
 * prompt template version. The write-time validator runs before anything lands.
 */
export async function enqueueConsult(request: ConsultRequest): Promise<ConsultEnqueued> {
  const { ledger, key, now } = request;
  const state = await ledger.state();
  const registry = state.registry?.doc;
  const policy = state.policy?.doc;
  if (registry === undefined || policy === undefined) throw new CooError('TRUST_VERSION', 'the ledger has no registry and policy');
  const holder = activeKeys(state.root?.doc ?? null, registry).get(key.publicKey.keyId);
  if (holder === undefined) throw new CooError('SIGNER_UNKNOWN', `key ${key.publicKey.keyId} is not in the registry: consults are sent by the active COO ${registry.active_coo}`);
  if (request.question.trim() === '') throw new CooError('USAGE', 'the prompt is empty');
  if (request.patterns.length === 0) throw new CooError('USAGE', 'give at least one --file to pin as context');

  const resolved = await resolveCommit(request.repo, request.rev ?? 'HEAD');
  const { commit } = resolved;
  const files = await pinFiles(request.repo, resolved, request.patterns);
  for (const file of files) {
    if (!isOracleSafePath(file.path)) throw new CooError('CONTEXT_INVALID', `${file.path}: the AA transport would read this name as a pattern (characters * ? [ ] { } ( ) , ! or a leading -)`);
  }
  const contextBytes = files.reduce((sum, file) => sum + file.bytes.length, 0);
  if (files.length > policy.limits.max_context_files) throw new CooError('POLICY_LIMIT', `${files.length} context files exceed the policy's ${policy.limits.max_context_files}`);
  if (contextBytes > policy.limits.max_context_bytes) throw new CooError('POLICY_LIMIT', `${contextBytes} bytes of context exceed the policy's ${policy.limits.max_context_bytes}`);

  const parent = request.parentMessageId === undefined ? undefined : state.messages.get(request.parentMessageId);
  if (request.parentMessageId !== undefined && parent === undefined) throw new CooError('MESSAGE_UNKNOWN', `parent ${request.parentMessageId} is not in the ledger`);
  const idempotencyKey = request.idempotencyKey ?? `consult-${randomBytes(8).toString('hex')}`;
  // A retry under the same key names the same request in the same correlation: reuse the original's.
  const original = state.messages.get(state.idempotency.get(idempotencySlot(holder.actor, idempotencyKey)) ?? '');
  const correlation = parent?.correlation ?? request.correlationId ?? original?.correlation ?? newCorrelationId();
  const chain = parent === undefined ? [] : [...parent.chain, parent.id];
  const maxHops = request.maxHops ?? Math.min(parent?.maxHops ?? policy.limits.max_hops, policy.limits.max_hops);
  const messageId = newMessageId(now.getTime());
  const createdAt = isoSeconds(now);
  const folder = messageFolder(messageId, createdAt);
  const ttl = request.ttlSeconds ?? Math.min(DEFAULT_TTL_SECONDS, policy.limits.max_ttl_seconds);
  const runtime = request.maxRuntimeSeconds ?? Math.min(DEFAULT_RUNTIME_SECONDS, policy.budgets.max_runtime_seconds);
  const expires = addSeconds(now, ttl);

  const prompt = Buffer.from(request.question.endsWith('\n') ? request.question : `${request.question}\n`, 'utf8');
  const manifest = Buffer.from(
    toYaml(
      parseDocument(
        'context_manifest.v0',
        { schema_version: 'context_manifest.v0', repo_commit_sha: commit, files: files.map((file) => ({ path: file.path, sha256: file.sha256, bytes: file.bytes.length })) },
        'context manifest',
      ),
    ),
  );
  // The correlation's remaining budget is stated as the ledger has it at the head the envelope lands on.
  const envelopeAt = (head: LedgerState): AaConsultMessage =>
    parseDocument(
      'coo_message.v0',
      {
        schema_version: 'coo_message.v0',
        message_id: messageId,
        correlation_id: correlation,
        parent_message_id: parent?.id ?? null,
        causality_chain: chain,
        hop_count: chain.length,
        max_hops: maxHops,
        expires_at: isoSeconds(expires),
        deadline_at: isoSeconds(addSeconds(expires, runtime)),
        principal: holder.actor,
        source_actor: holder.actor,
        target_actor: request.target,
        intent: 'aa_consult',
        authority_class: 'advisory_only',
        idempotency_key: idempotencyKey,
        budget: {
          max_cost_usd: request.maxCostUsd ?? policy.budgets.max_cost_usd_per_message,
          max_runtime_seconds: runtime,
          correlation_budget_remaining_usd: correlationRemainingUsd(head.policy?.doc ?? policy, head.spendByCorrelation.get(correlation) ?? 0),
        },
        prompt_template_version: PROMPT_TEMPLATE_VERSION,
        payload_ref: promptPath(folder),
        payload_hash: sha256Ref(prompt),
        context_pin: {
          repo_commit_sha: commit,
          context_manifest_ref: manifestPath(folder),
          context_manifest_hash: sha256Ref(manifest),
          files: files.map((file) => ({ path: file.path, sha256: file.sha256 })),
        },
        expected_receipt_schema: 'aa_receipt.v0',
        status: 'queued',
        created_at: createdAt,
        ...(request.submittedVia === undefined ? {} : { submitted_via: request.submittedVia }),
      },
      'envelope',
    ) as AaConsultMessage;
  let envelope = envelopeAt(state);
  const result = await appendEnvelope(
    ledger,
    (head) => {
      envelope = envelopeAt(head);
      return Buffer.from(toYaml(envelope));
    },
    new Map([
      ['prompt.md', prompt],
      ['context-manifest.yaml', manifest],
    ]),
    key,
    now,
  );
  if (!result.existing) return { ...result, envelope };
  // A repeated request: what the caller gets is the envelope the ledger holds, not the one not written.
  const stored = await ledger.readFile(result.path);
  if (stored === null) throw new CooError('NOT_FOUND', `${result.path} is missing`);
  return { ...result, envelope: readDocument('coo_message.v0', stored, result.path) as AaConsultMessage };
}
