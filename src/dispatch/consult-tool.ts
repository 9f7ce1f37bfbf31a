import { z } from 'zod';
import { CooError } from '../errors.js';
import type { AskedConsults, LaneContext } from '../lane/runner-lane.js';
import { numberArg } from '../mcp/schemas.js';
import { quoteUntrusted, untrustedNotice } from '../mcp/untrusted.js';
import { actorId, MAX_USD } from '../schema/common.js';
import { readDocument } from '../schema/documents.js';
import type { EaDispatchMessage } from '../schema/message.js';
import { enqueueAskedConsult, snapshotFiles } from './asked-consult.js';
import type { AttemptSpend } from './attempt-spend.js';
import type { BridgeReply } from './consult-bridge.js';
import { contextBounds, type PinnedFile } from '../lane/pins.js';
import { refuseHeldSecrets } from '../util/held-secrets.js';
import type { Scrubber } from '../util/scrub.js';
import { isTerminal } from '../authority/state.js';

/**
 * What a dispatch attempt's `consult` tool does with one call, in the runner: the agent names an
 * advisory agent, a question and files of its worktree; the runner snapshots the files, writes the
 * consult (the validator decides whether it may land: edge, scope, budget, hops, the attempt still
 * open), runs it through the consult lane, and hands the answer back quoted as untrusted data. A
 * call refused before it lands costs nothing: it comes back as a coded tool error.
 */

/** The tool's arguments, as the agent gives them (the relay's input schema says the same). */
export const consultToolArgs = z.strictObject({
  to: actorId.describe('the advisory agent to ask, e.g. aa.chatgpt'),
  question: z.string().min(1).max(100_000).describe('what to ask'),
  files: z.array(z.string().min(1).max(512)).min(1).max(200).describe("files of your worktree, relative to its root and inside the task's scope, sent as they are now"),
  max_cost_usd: numberArg({ above: 0, max: MAX_USD }).optional().describe("at most this much for the answer (default: what your attempt may still spend)"),
});

export interface ConsultToolCall {
  readonly ctx: Pick<LaneContext<unknown>, 'ledger' | 'key' | 'clock' | 'write'>;
  readonly consults: AskedConsults;
  readonly dispatch: EaDispatchMessage;
  readonly attempt: number;
  readonly attemptId: string;
  readonly worktree: string;
  /** The attempt's live spend: its executor's cost so far bounds the consult, and the consult's hold bounds the executor. */
  readonly spend?: AttemptSpend;
  /**
   * The secrets the runner holds and those it handed the executor (its provider key): the agent
   * may have read one, and a consult is signed into the ledger and sent to a provider, for good.
   */
  readonly secrets: Scrubber;
}

/**
 * Refuses a question, a file's name or a snapshotted file that holds a secret the runner knows,
 * before anything is written: the names are signed into the envelope and its manifest and sent
 * with the files, as the question is.
 */
function refuseSecrets(secrets: Scrubber, question: string, files: readonly PinnedFile[]): void {
  refuseHeldSecrets(
    secrets,
    [{ name: 'the question', content: question }, ...files.map((file) => ({ name: `the name of ${secrets.text(file.path)}`, content: file.path })), ...files.map((file) => ({ name: secrets.text(file.path), content: file.bytes }))],
    'the runner holds or handed the agent (a provider key, a token, the COO key) or a private key in its armor',
    'a consult is signed into the ledger and sent to a provider; nothing was written or sent',
    'CONTEXT_INVALID',
  );
}

/** Answers one call of the consult tool; every refusal is a coded reply, never a throw. */
export async function answerConsultCall(call: ConsultToolCall, request: unknown): Promise<BridgeReply> {
  const parsed = consultToolArgs.safeParse(request);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new CooError('USAGE', `${issue?.path.join('.') || 'arguments'}: ${issue?.message ?? 'invalid'}`);
  }
  const args = parsed.data;
  const { ctx, dispatch } = call;
  const policy = (await ctx.ledger.state()).policy?.doc;
  if (policy === undefined) throw new CooError('TRUST_VERSION', 'the ledger has no policy');
  const files = snapshotFiles(call.worktree, args.files, dispatch.dispatch.scope_paths, contextBounds(policy.limits));
  refuseSecrets(call.secrets, args.question, files);
  const queued = await ctx.write((ledger) =>
    enqueueAskedConsult({
      ledger,
      key: ctx.key,
      now: ctx.clock(),
      dispatch,
      attempt: call.attempt,
      attemptId: call.attemptId,
      target: args.to,
      question: args.question,
      files,
      ...(args.max_cost_usd === undefined ? {} : { maxCostUsd: args.max_cost_usd }),
      ...(call.spend === undefined ? {} : { executorSpentUsd: call.spend.executorSpentUsd() }),
    }),
  );
  call.spend?.holdConsult(queued.messageId, queued.envelope.budget.max_cost_usd);
  await call.consults.run(queued.messageId);
  const record = (await ctx.ledger.state()).messages.get(queued.messageId);
  const latest = record?.attempts[record.attempts.length - 1]?.receipt ?? null;
  if (latest !== null && record !== undefined && isTerminal(record)) call.spend?.holdConsult(queued.messageId, latest.costUsd);
  const receiptPath = latest?.path ?? null;
  if (record === undefined || receiptPath === null) {
    return { ok: true, text: `consult ${queued.messageId} to ${args.to} has no receipt yet; its answer will not reach this attempt`, result: { message_id: queued.messageId, status: 'queued', blockers: [], cost_usd: 0, answer: null } };
  }
  const bytes = await ctx.ledger.readFile(receiptPath);
  if (bytes === null) throw new CooError('NOT_FOUND', `${receiptPath} is missing`);
  const receipt = readDocument('aa_receipt.v0', bytes, receiptPath);
  const answer = receipt.output_ref === null || receipt.status !== 'succeeded' ? null : await ctx.ledger.readFile(receipt.output_ref);
  const quoted = answer === null ? null : quoteUntrusted(answer.toString('utf8'));
  const blockers = receipt.blockers.map((blocker) => blocker.code);
  const head = `consult ${queued.messageId} to ${args.to}: ${receipt.status}${blockers.length === 0 ? '' : ` (${blockers.join(', ')})`}, cost ${receipt.actual_cost_usd.toFixed(6)} USD, charged to dispatch ${dispatch.message_id}`;
  return {
    ok: true,
    text: quoted === null ? head : `${head}\n\n${untrustedNotice(quoted.boundary)}\n\n${quoted.text}\n`,
    result: {
      message_id: queued.messageId,
      status: receipt.status,
      blockers,
      cost_usd: receipt.actual_cost_usd,
      answer: quoted === null ? null : { advisory: true, untrusted: true, boundary: quoted.boundary, path: receipt.output_ref, text: quoted.text },
    },
  };
}
