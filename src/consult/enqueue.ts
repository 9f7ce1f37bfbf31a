import { CooError } from '../errors.js';
import { CLI_ARGUMENTS } from '../util/argument-names.js';
import type { LedgerState } from '../authority/state.js';
import { appendRequest, type EnvelopeAppendResult } from '../ledger/append-envelope.js';
import { budgetAt, planEnvelope, type LaneRequest } from '../ledger/envelope-plan.js';
import { manifestPath, promptPath } from '../ledger/layout.js';
import { parseDocument } from '../schema/documents.js';
import { contextManifestBytes } from '../lane/context-manifest.js';
import type { AaConsultMessage } from '../schema/message.js';
import { sha256Ref } from '../util/hash.js';
import { oraclePathProblem } from './oracle-inputs.js';
import { pinFiles, resolveCommit } from '../lane/pins.js';
import { PROMPT_TEMPLATE_VERSION } from './prompt.js';

export interface ConsultRequest extends LaneRequest {
  readonly patterns: readonly string[];
  readonly question: string;
}

export interface ConsultEnqueued extends EnvelopeAppendResult {
  readonly envelope: AaConsultMessage;
}

/**
 * Builds, signs and appends an aa_consult envelope whose context is pinned to immutable state: the
 * commit SHA that `rev` resolves to, the sha256 of every file as stored in that commit (read from
 * git objects, never the working tree), the context manifest's hash, the prompt's hash and the
 * prompt template version. The write-time validator runs before anything lands.
 */
export async function enqueueConsult(request: ConsultRequest): Promise<ConsultEnqueued> {
  const { ledger, key, now } = request;
  const state = await ledger.state();
  const plan = planEnvelope(state, key, request.target, request, now, 'consult');
  const policy = plan.policy;
  if (request.question.trim() === '') throw new CooError('USAGE', 'the prompt is empty');
  const names = request.names ?? CLI_ARGUMENTS;
  if (request.patterns.length === 0) throw new CooError('USAGE', `give at least one ${names.file} to pin as context`);

  const resolved = await resolveCommit(request.repo, request.rev ?? 'HEAD', names);
  const { commit } = resolved;
  const files = await pinFiles(request.repo, resolved, request.patterns, names);
  for (const file of files) {
    const problem = oraclePathProblem(file.path);
    if (problem !== null) throw new CooError('CONTEXT_INVALID', `${file.path}: ${problem}; rename it, or leave it out, to pin the rest`);
  }
  const contextBytes = files.reduce((sum, file) => sum + file.bytes.length, 0);
  if (files.length > policy.limits.max_context_files) throw new CooError('POLICY_LIMIT', `${files.length} context files exceed the policy's ${policy.limits.max_context_files}`);
  if (contextBytes > policy.limits.max_context_bytes) throw new CooError('POLICY_LIMIT', `${contextBytes} bytes of context exceed the policy's ${policy.limits.max_context_bytes}`);

  const folder = plan.folder;

  const prompt = Buffer.from(request.question.endsWith('\n') ? request.question : `${request.question}\n`, 'utf8');
  const manifest = contextManifestBytes(commit, files);
  // The correlation's remaining budget is stated as the ledger has it at the head the envelope lands on.
  const envelopeAt = (head: LedgerState): AaConsultMessage =>
    parseDocument(
      'coo_message.v0',
      {
        ...plan.headerAt(head),
        intent: 'aa_consult',
        authority_class: 'advisory_only',
        budget: budgetAt(plan, head, request.maxCostUsd),
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
      },
      'envelope',
    ) as AaConsultMessage;
  return appendRequest(
    ledger,
    envelopeAt,
    new Map([
      ['prompt.md', prompt],
      ['context-manifest.yaml', manifest],
    ]),
    key,
    now,
  );
}
