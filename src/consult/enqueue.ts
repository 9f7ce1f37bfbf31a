import { CooError } from '../errors.js';
import { CLI_ARGUMENTS } from '../util/argument-names.js';
import { requireHolder } from '../authority/keys.js';
import { matchesPattern } from '../authority/policy-check.js';
import type { LedgerState } from '../authority/state.js';
import { appendPanel, appendRequest, type EnvelopeAppendResult } from '../ledger/append-envelope.js';
import { budgetAt, keyOrigin, planEnvelope, type EnvelopePlan, type LaneRequest } from '../ledger/envelope-plan.js';
import { manifestPath, promptPath } from '../ledger/layout.js';
import { parseDocument } from '../schema/documents.js';
import { contextManifestBytes } from '../lane/context-manifest.js';
import type { AaConsultMessage } from '../schema/message.js';
import { sha256Ref } from '../util/hash.js';
import { oraclePathProblem } from '../lane/oracle-inputs.js';
import { contextBounds, pinFiles, type PinnedFile } from '../lane/pins.js';
import { resolveWorkCommit } from '../lane/work-repo.js';
import type { ActorPolicy, PolicyPanel } from '../schema/policy.js';
import { newPanelId } from '../util/ids.js';
import { PROMPT_TEMPLATE_VERSION } from './prompt.js';

export interface ConsultRequest extends LaneRequest {
  readonly patterns: readonly string[];
  readonly question: string;
}

export interface ConsultEnqueued extends EnvelopeAppendResult {
  readonly envelope: AaConsultMessage;
}

interface PinnedQuestion {
  readonly commit: string;
  readonly files: readonly PinnedFile[];
  readonly prompt: Buffer;
  readonly manifest: Buffer;
}

/**
 * The question and its context as the envelope pins them: the commit `rev` resolves to, every
 * matching file as stored in that commit (read from git objects, never the working tree), within
 * the policy's limits and each a name Oracle may be handed; the prompt and the context manifest.
 */
async function pinQuestion(request: ConsultRequest, policy: ActorPolicy): Promise<PinnedQuestion> {
  if (request.question.trim() === '') throw new CooError('USAGE', 'the prompt is empty');
  const names = request.names ?? CLI_ARGUMENTS;
  if (request.patterns.length === 0) throw new CooError('USAGE', `give at least one ${names.file} to pin as context`);
  const resolved = await resolveWorkCommit(request.ledger.gitdir, request.repo, request.rev ?? 'HEAD', names);
  const files = await pinFiles(request.repo, resolved, request.patterns, contextBounds(policy.limits), names);
  for (const file of files) {
    const problem = oraclePathProblem(file.path);
    if (problem !== null) throw new CooError('CONTEXT_INVALID', `${file.path}: ${problem}; rename it, or leave it out, to pin the rest`);
  }
  const prompt = Buffer.from(request.question.endsWith('\n') ? request.question : `${request.question}\n`, 'utf8');
  return { commit: resolved.commit, files, prompt, manifest: contextManifestBytes(resolved.commit, files) };
}

/** The aa_consult envelope of `plan` asking `question`, as it is written at `head`. */
function consultEnvelope(plan: EnvelopePlan, head: LedgerState, question: PinnedQuestion, maxCostUsd: number | undefined, panel?: { readonly membership: Record<string, unknown>; readonly first: EnvelopePlan }): AaConsultMessage {
  // A panel member is written in the first member's correlation, and states that correlation's remaining budget.
  const header = panel === undefined ? plan.headerAt(head) : { ...plan.headerAt(head), correlation_id: panel.first.correlationAt(head) };
  return parseDocument(
    'coo_message.v0',
    {
      ...header,
      intent: 'aa_consult',
      authority_class: 'advisory_only',
      ...(panel === undefined ? {} : { panel: panel.membership }),
      budget: budgetAt(panel?.first ?? plan, head, maxCostUsd),
      prompt_template_version: PROMPT_TEMPLATE_VERSION,
      payload_ref: promptPath(plan.folder),
      payload_hash: sha256Ref(question.prompt),
      context_pin: {
        repo_commit_sha: question.commit,
        context_manifest_ref: manifestPath(plan.folder),
        context_manifest_hash: sha256Ref(question.manifest),
        files: question.files.map((file) => ({ path: file.path, sha256: file.sha256 })),
      },
      expected_receipt_schema: 'aa_receipt.v0',
    },
    'envelope',
  ) as AaConsultMessage;
}

function artifactsOf(question: PinnedQuestion): ReadonlyMap<string, Buffer> {
  return new Map([
    ['prompt.md', question.prompt],
    ['context-manifest.yaml', question.manifest],
  ]);
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
  const question = await pinQuestion(request, plan.policy);
  // The correlation's remaining budget is stated as the ledger has it at the head the envelope lands on.
  return appendRequest(ledger, (head) => consultEnvelope(plan, head, question, request.maxCostUsd), artifactsOf(question), key, now, keyOrigin(request));
}

export interface PanelRequest extends Omit<ConsultRequest, 'target'> {
  /** The members to ask (two or more), each an advisory agent of one policy panel; all of the panel's by default. */
  readonly members?: readonly string[];
  /** The policy panel that allows the fan-out; by default the first whose sender and members fit. */
  readonly panel?: string;
}

export interface PanelEnqueued {
  readonly panelId: string;
  readonly name: string;
  readonly members: ReadonlyArray<{ readonly target: string; readonly messageId: string }>;
  readonly commit: string | null;
  readonly existing: boolean;
}

/** The policy panel a request names, or the first that allows its members from this sender; the refusal says why none does. */
export function choosePanel(policy: ActorPolicy, sender: string, panel: string | undefined, members: readonly string[] | undefined): PolicyPanel {
  const panels = policy.panels ?? [];
  if (panel !== undefined) {
    const named = panels.find((item) => item.name === panel);
    if (named === undefined || !matchesPattern(named.from, sender)) throw new CooError('POLICY_PANEL_NOT_ALLOWED', `policy v${policy.version} has no panel ${panel} that ${sender} may ask`);
    const outside = (members ?? []).filter((member) => !named.members.includes(member));
    if (outside.length > 0) throw new CooError('POLICY_PANEL_NOT_ALLOWED', `panel ${panel} of policy v${policy.version} does not have ${outside.join(', ')} among its members`);
    return named;
  }
  const fits = panels.find((item) => matchesPattern(item.from, sender) && (members ?? []).every((member) => item.members.includes(member)));
  if (fits === undefined) {
    throw new CooError('POLICY_PANEL_NOT_ALLOWED', `policy v${policy.version} names no panel with ${(members ?? []).join(', ')} among its members: one question goes to several advisory agents only where a policy panel allows it`);
  }
  return fits;
}

/**
 * One question to several advisory agents: a panel the policy allows, each member an aa_consult of
 * its own (its own attempts and receipts) pinning the same context, all written in one commit in
 * one correlation. `maxCostUsd` is each member's budget; the panel's is their sum. The same
 * idempotency key and request returns the panel already there.
 */
export async function enqueuePanel(request: PanelRequest): Promise<PanelEnqueued> {
  const { ledger, key, now } = request;
  const state = await ledger.state();
  const policy = state.policy?.doc;
  if (policy === undefined) throw new CooError('TRUST_VERSION', 'the ledger has no policy');
  const sender = requireHolder(state, key.publicKey.keyId, 'the sender\'s key').actor;
  if (request.members !== undefined && new Set(request.members).size !== request.members.length) throw new CooError('USAGE', 'a panel names each member once');
  if (request.members !== undefined && request.members.length < 2) throw new CooError('USAGE', 'a panel has two members or more; give one --to for a single consult');
  const chosen = choosePanel(policy, sender, request.panel, request.members);
  const members = request.members ?? chosen.members;
  const id = newPanelId(now.getTime());
  const baseKey = request.idempotencyKey ?? `panel-${id.slice(4).toLowerCase()}`;
  const plans = members.map((target) => planEnvelope(state, key, target, request, now, 'consult', baseKey));
  const first = plans[0]!;
  const question = await pinQuestion({ ...request, target: members[0]! }, first.policy);
  const membership = { id, name: chosen.name, members: [...members] };
  // Every member in the first member's correlation, decided at the head the panel lands on (a repeated request reuses the original's).
  const result = await appendPanel(
    ledger,
    (head) => plans.map((plan) => ({ envelope: consultEnvelope(plan, head, question, request.maxCostUsd, { membership, first }), artifacts: artifactsOf(question) })),
    key,
    now,
    keyOrigin(request),
  );
  const after = await ledger.state();
  const panelId = result.existing ? (after.messages.get(result.messages[0]!.messageId)?.panel ?? id) : id;
  return { panelId, name: chosen.name, members: result.messages.map((message) => ({ target: message.target, messageId: message.messageId })), commit: result.commit, existing: result.existing };
}
