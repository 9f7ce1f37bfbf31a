import type { Command } from 'commander';
import { CooError } from '../errors.js';
import type { ConsultAttemptView, ConsultView } from '../audit/consult-view.js';
import { viewApproval, viewMessage, type ApprovalView, type DispatchAttemptView, type DispatchView, type SignerView } from '../audit/message-view.js';
import type { PanelComparison } from '../audit/panel-comparison.js';
import { viewPanel } from '../audit/panel-view.js';
import { warningMeaning } from '../audit/warnings.js';
import { Ledger } from '../ledger/ledger.js';
import { ADVISORY_INTENTS } from '../schema/common.js';
import { emit, jsonOption, ledgerOption, now, required } from './common.js';
import { codePointText, invisibleCharacters, pathText, terminalText } from '../util/invisible.js';

export function showVerb(program: Command): void {
  program
    .command('show')
    .description('show a message (its envelope, lane state, claims and receipts; a dispatch\'s request, approval and evidence; a panel member\'s panel), a panel (its members\' answers compared by the runner, never by a model), an approval, or print one ledger file')
    .argument('<target>', 'a message id (msg_...), a panel id (pnl_...: its members side by side), an approval id (apr_...) or a path inside the ledger')
    .addOption(ledgerOption())
    .option('--answer', "a consult's answer: the answer of its attempt that succeeded, as text (advice, not authority; control characters shown escaped); an answer the judge refused is no advice, and is not printed as one")
    .addOption(jsonOption())
    .action(async (target: string, opts: { ledger?: string; json?: boolean; answer?: boolean }) => {
      const ledger = Ledger.open(required(opts.ledger, '--ledger', 'the ledger path or $COO_LEDGER'));
      try {
        const state = await ledger.state();
        if (state.panels.has(target)) {
          const comparison = await viewPanel(ledger, state, target);
          emit(opts.json, comparison, () => panelLines(comparison).join('\n'));
          return;
        }
        const record = state.messages.get(target);
        const approval = state.approvals.get(target);
        if (record === undefined && approval !== undefined) {
          const view = await viewApproval(ledger, approval);
          emit(opts.json, view, () => approvalLine(view, ''));
          return;
        }
        if (record === undefined) {
          const bytes = await ledger.readFile(target);
          if (bytes === null) throw new CooError('NOT_FOUND', `${target} is neither a message id nor a file in the ledger`);
          if (opts.json === true) emit(true, { path: target, content: bytes.toString('utf8') }, () => '');
          // A file goes out as its bytes, for a pipe or a file to hash; a terminal is shown its acting characters as code points, as every other line the CLI prints.
          else process.stdout.write(process.stdout.isTTY === true ? terminalText(bytes.toString('utf8')) : bytes);
          return;
        }
        const view = await viewMessage(ledger, state, record, now());
        if (opts.answer === true) {
          // Only an answer that passed judgement is advice, as the panel comparison, the citation and the MCP show tool hold.
          const ref = view.attempts.find((attempt) => attempt.consult?.status === 'succeeded')?.consult?.answer_ref ?? null;
          if (ref === null) throw new CooError('NOT_FOUND', `${record.id} has no answer${ADVISORY_INTENTS.has(record.intent) ? ` that passed judgement (${view.lane_state})` : ': it is not a consult'}`);
          const answer = (await ledger.readFile(ref))?.toString('utf8') ?? '';
          if (opts.json === true) emit(true, { message_id: record.id, answer_ref: ref, answer }, () => '');
          else process.stdout.write(`${answer.split('\n').map((line) => printable(line, Number.POSITIVE_INFINITY)).join('\n').trimEnd()}\n`);
          return;
        }
        emit(opts.json, view, () => {
          const lines = [`${record.id} ${record.intent} ${record.source} -> ${record.target}: ${view.lane_state}`];
          if (view.envelope_signer?.revoked != null) lines.push(`  envelope ${revokedLine(view.envelope_signer)}`);
          if (view.submitted_via !== null) lines.push(`  submitted via ${view.submitted_via}`);
          if (view.acknowledged_by !== undefined) lines.push(`  acknowledged by the COO in ${view.acknowledged_by}`);
          if (view.lapsed_at !== undefined) lines.push(`  lapsed at ${view.lapsed_at}: the COO never took it up; no ack of it and no work under it is taken, the CEO sends it again (coo command)`);
          if (record.duplicateOf !== null) lines.push(`  repeats ${record.duplicateOf} (same idempotency key and request): its receipts answer this message`);
          if (view.dispatch !== undefined) lines.push(...dispatchLines(view.dispatch));
          if (view.consult !== undefined) lines.push(...consultLines(view.consult));
          if (view.panel !== undefined) lines.push(`  a member of panel ${view.panel.panel_id} (${view.panel.name}): coo show ${view.panel.panel_id} sets the members side by side`, ...panelLines(view.panel).slice(1).map((line) => `  ${line}`));
          record.attempts.forEach((attempt, index) => {
            const attemptView = view.attempts[index];
            if (attemptView?.approval !== undefined) lines.push(approvalLine(attemptView.approval, '  '));
            lines.push(`  attempt ${attempt.number} ${attempt.attemptId}: ${attempt.claim === null ? 'unclaimed' : `claimed by ${attempt.claim.runner}`}, ${attempt.receipt === null ? 'no receipt yet' : `${attempt.receipt.status}${attempt.receipt.blockers.length > 0 ? ` (${attempt.receipt.blockers.join(', ')})` : ''} ${attempt.receipt.path}`}`);
            if (attemptView?.receipt?.signer?.revoked != null) lines.push(`    receipt ${revokedLine(attemptView.receipt.signer)}`);
            if (attemptView?.dispatch !== undefined) lines.push(...evidenceLines(attemptView.dispatch));
            if (attemptView?.consult !== undefined) lines.push(...consultAttemptLines(attemptView.consult));
            for (const warning of receiptWarnings(attemptView?.receipt?.document)) lines.push(`    warning ${warning}: ${warningMeaning(warning)}`);
          });
          for (const approval of view.dispatch?.retry_approvals ?? []) {
            if (!record.attempts.some((attempt) => attempt.number === approval.attempt_number)) lines.push(approvalLine(approval, '  '), `  attempt ${approval.attempt_number ?? ''}: approved, not run yet`);
          }
          return lines.join('\n');
        });
      } finally {
        ledger.close();
      }
    });
}

/** The warnings a receipt document carries (both receipt kinds have the field; anything else has none). */
function receiptWarnings(document: unknown): string[] {
  const warnings = (document as { warnings?: unknown } | null)?.warnings;
  return Array.isArray(warnings) ? warnings.filter((item): item is string => typeof item === 'string') : [];
}

const UNPRINTABLE = invisibleCharacters();

/**
 * A blocker's detail is shown whole (a receipt holds at most 2,000 characters of it, schema
 * shortText): the paths a scope check names beyond the first 200 characters say which files broke it.
 */
const BLOCKER_DETAIL_CHARS = 2000;

/**
 * Text from the ledger as one terminal line: control characters (a terminal's escape sequences
 * among them) are shown as `\uNNNN` and never reach the terminal; long text is cut with `…`.
 */
export function printable(text: string, max = 200): string {
  const line = text.replace(/\r?\n/g, ' ⏎ ').replace(UNPRINTABLE, codePointText);
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

/**
 * A path from the ledger (a file of a dispatch's work, a consult's pinned file) as one terminal line
 * that names one file: never cut (a path is at most 512 characters, schema/common.ts relativePath),
 * as two names cut at one length read alike and a cut name hides which file it is; and each acting
 * character, the line break too, as its code point, which no path spells itself (a path holds no
 * backslash), where `printable`'s ` ⏎ ` is also the name of a file.
 */
export function printablePath(path: string): string {
  return pathText(path);
}

function approvalLine(approval: ApprovalView, indent: string): string {
  const what = approval.approves === 'dispatch' ? `dispatch request ${approval.request_hash ?? ''}${approval.used_by === null ? ' (not used yet)' : ` (used by ${approval.used_by})`}` : `retry of ${approval.message_id ?? ''} as attempt ${approval.attempt_number ?? ''}`;
  return `${indent}approval ${approval.approval_id} by ${approval.approved_by} at ${approval.created_at} (expires ${approval.expires_at}): ${what}; reason: ${printable(approval.reason)}`;
}

function dispatchLines(dispatch: DispatchView): string[] {
  const lines = ['  task:'];
  for (const line of (dispatch.task ?? '(not in the ledger)').trimEnd().split('\n')) lines.push(`    ${printable(line)}`);
  lines.push(`  repo ${dispatch.repo}, base ${dispatch.base_sha}, branch ${dispatch.branch_name}, executor ${dispatch.executor}, timeout ${dispatch.timeout_seconds} s${dispatch.open_pr ? ', opens a pull request' : ''}`);
  lines.push(`  scope: ${dispatch.scope_paths.map((path) => printable(path)).join(' ')}`);
  for (const criterion of dispatch.acceptance_criteria) lines.push(`  accept: ${printable(criterion)}`);
  for (const command of dispatch.verification_commands) lines.push(`  verify: ${printable(command)}`);
  if (dispatch.approval !== null) lines.push(approvalLine(dispatch.approval, '  '));
  return lines;
}

function consultLines(consult: ConsultView): string[] {
  const lines = ['  question:'];
  for (const line of (consult.question ?? '(not in the ledger)').trimEnd().split('\n')) lines.push(`    ${printable(line)}`);
  // The names on one line, apart at each space: a space inside a name is shown as its code point.
  lines.push(`  context: ${consult.files.length} file(s) pinned at ${consult.repo_commit}: ${consult.files.map((file) => printablePath(file.path).replaceAll(' ', '\\u0020')).join(' ')}`);
  lines.push(`  budget: at most $${consult.max_cost_usd} and ${consult.max_runtime_seconds} s; starts by ${consult.expires_at}, ends by ${consult.deadline_at}`);
  if (consult.challenges !== undefined) {
    const challenged = consult.challenges;
    lines.push(`  challenges: the answer of ${challenged.author} (${printable(challenged.answer_ref)}, ${challenged.answer_hash}), sent quoted as untrusted data; its receipt ${printable(challenged.receipt_ref)}`);
  }
  return lines;
}

function consultAttemptLines(attempt: ConsultAttemptView): string[] {
  const route = attempt.route === null ? '' : ` (${attempt.route.provider}${attempt.route.offline ? ', offline' : ''})`;
  const lines = [`    model ${attempt.model ?? 'none'}${route}, cost $${attempt.cost_usd}, $${attempt.budget_remaining_usd} of the budget left`];
  for (const blocker of attempt.blockers) lines.push(`    blocker ${blocker.code}: ${printable(blocker.detail, BLOCKER_DETAIL_CHARS)}`);
  if (attempt.validation.status === 'fail') for (const error of attempt.validation.errors) lines.push(`    answer refused: ${printable(error)}`);
  if (attempt.answer_ref !== null) {
    lines.push(`    answer ${attempt.answer_ref} ${attempt.answer_hash ?? ''} (${attempt.status === 'succeeded' ? 'coo show --answer prints it' : `no advice: the attempt ${attempt.status}; coo show ${attempt.answer_ref} prints its bytes`})`);
  }
  // Findings on an answer that passed: the proposals stripped because they tried to carry authority.
  if (attempt.validation.status === 'pass') for (const error of attempt.validation.errors) lines.push(`    ${printable(error)}`);
  attempt.proposals.forEach((item, index) => lines.push(`    proposal ${index + 1} ${item.path} ${item.sha256} (coo adopt --proposal ${index + 1} turns it into work)`));
  if (attempt.next_attempt_at !== null) lines.push(`    next attempt from ${attempt.next_attempt_at}`);
  return lines;
}

function evidenceLines(evidence: DispatchAttemptView): string[] {
  const lines = [`    executor ${evidence.executor}, model ${evidence.model ?? 'unknown'}${evidence.executor_session_id === null ? '' : `, session ${printable(evidence.executor_session_id)}`}`];
  lines.push(evidence.branch === null ? `    nothing committed (base ${evidence.base_sha})` : `    branch ${evidence.branch} at ${evidence.head_sha ?? '-'} (base ${evidence.base_sha}), committed and signed by the runner`);
  for (const blocker of evidence.blockers) lines.push(`    blocker ${blocker.code}: ${printable(blocker.detail, BLOCKER_DETAIL_CHARS)}`);
  for (const file of evidence.files) lines.push(`    changed ${printablePath(file.path)} ${file.sha256 ?? '(deleted)'}`);
  for (const command of evidence.commands) lines.push(`    ${command.by === 'executor' ? 'ran' : 'verified'} \`${printable(command.command, 120)}\` exit ${command.exit_code}`);
  const tokens = evidence.usage === null ? 'no usage reported' : `${evidence.usage.total_tokens} tokens`;
  lines.push(`    cost $${evidence.cost_usd} (${tokens})`);
  for (const attachment of evidence.attachments) lines.push(`    attachment ${attachment.path} ${attachment.sha256}`);
  return lines;
}

/** A panel's comparison as lines: the verdicts and where they agree, then each member with its verdict, objections and findings, or why it gave no advice. */
export function panelLines(panel: PanelComparison): string[] {
  const verdicts = panel.verdicts.map((item) => `${item.verdict} (${item.members.join(', ')})`).join('; ');
  const agreement = { unanimous: 'unanimous', split: 'split', partial: 'agree so far', none: 'no advice yet' }[panel.agreement];
  const lines = [`${panel.panel_id} panel ${panel.name}: ${panel.members.length} members, ${panel.answered.length} answered; verdicts ${agreement}${verdicts === '' ? '' : `: ${verdicts}`}; $${panel.total_cost_usd} in all (advice, not authority: compared by the runner, never by a model)`];
  for (const member of panel.members) {
    const findings = Object.entries(member.findings).map(([severity, count]) => `${count} ${severity}`).join(', ');
    lines.push(
      member.verdict === null
        ? `  ${member.actor} ${member.message_id}: no advice (${member.no_advice ?? member.state}), $${member.cost_usd}`
        : `  ${member.actor} ${member.message_id}: ${member.verdict} (confidence ${member.confidence}), $${member.cost_usd}${findings === '' ? '' : `; findings: ${findings}`}`,
    );
    if (member.summary !== null) lines.push(`    summary: ${printable(member.summary)}`);
    for (const objection of member.objections) lines.push(`    objection: ${printable(objection)}`);
    if (member.receipt_path !== null) lines.push(`    receipt ${member.receipt_path} (attempt ${member.attempt})`);
  }
  return lines;
}

/** An entry signed by a key a registry revoked since, said as `coo cite` says it: what it signed may be a thief's (--json names every entry's signer). */
export function revokedLine(signer: SignerView): string {
  return `SIGNED BY A REVOKED KEY: ${signer.actor ?? 'a key no trust file names'} (key ${signer.key_id}), revoked at Ledger-Seq ${signer.revoked?.seq ?? ''} (${printable(signer.revoked?.reason ?? '', 200)}); what it signed may not be its actor's`;
}
