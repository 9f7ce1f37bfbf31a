import { keyStatus } from '../authority/keys.js';
import { terminalText } from '../util/invisible.js';
import { folderOf, laneStateOf, type LaneState, type LedgerState, type MessageRecord } from '../authority/state.js';
import type { Finding } from '../errors.js';
import { classifyPath } from '../ledger/layout.js';
import type { Timeline, TimelineCommit, TimelineDispatch, TimelineEntry } from './timeline.js';
import { comparePanel, type MemberAdvice } from './panel-comparison.js';
import { warningMeaning } from './warnings.js';

/**
 * One self-contained HTML page about a ledger. Pure: facts in, a string out; no script, no remote
 * resource. Every table stacks into labelled rows on a narrow screen, so a phone never scrolls sideways.
 */

export interface ReportInput {
  readonly ledger: string;
  readonly generatedAt: string;
  readonly head: string | null;
  readonly state: LedgerState;
  readonly findings: readonly Finding[];
  readonly timeline: Timeline;
  /** The CEO key the auditor pinned (`--trust-root`), or null when the page trusts whatever genesis the ledger holds. */
  readonly trustRoot: string | null;
  /** What `otherRefsNote` says of the refs beside main the page does not judge, or null when there are none. */
  readonly otherRefs: string | null;
}

/**
 * Text from the ledger as HTML: markup characters escaped, and every character that acts rather
 * than reads (a bidirectional override that reorders what the auditor sees, a zero-width character,
 * a control) shown as its code point, as the CLI shows it (`terminalText`).
 */
const escape = (text: string): string => terminalText(text).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&#39;');
const short = (oid: string | null | undefined): string => (oid == null ? '' : oid.slice(0, 10));
const usd = (value: number): string => `$${value.toFixed(value < 0.01 ? 5 : 2)}`;
/** A commit id as shown (its first ten digits) and as copied (all of it, on hover). */
const oid = (commit: string | null | undefined): string => (commit == null ? '' : `<code class="nowrap" title="${escape(commit)}">${escape(short(commit))}</code>`);
/** A key's whole fingerprint: the value an auditor copies into allowed-signers or ssh-keygen. */
const fingerprint = (keyId: string): string => `<code class="fp nowrap">${escape(keyId)}</code>`;
const messageId = (id: string): string => `<code class="nowrap">${escape(id)}</code>`;
const time = (iso: string | null): string => (iso === null ? '' : `<span class="nowrap">${escape(iso)}</span>`);

/** A table row: each cell carries its column's name, shown beside the value when the row is stacked. */
function row(attrs: string, cells: ReadonlyArray<readonly [label: string, html: string]>): string {
  return `<tr${attrs}>${cells.map(([label, html]) => `<td data-label="${escape(label)}">${html}</td>`).join('')}</tr>`;
}

function table(head: readonly string[], rows: readonly string[]): string {
  const thead = head.length === 0 ? '' : `<thead><tr>${head.map((name) => `<th>${escape(name)}</th>`).join('')}</tr></thead>`;
  return `<table>${thead}<tbody>${rows.join('')}</tbody></table>`;
}

const STATE_CLASS: Record<LaneState, string> = {
  queued: 'muted',
  claimed: 'muted',
  retry_wait: 'warn',
  succeeded: 'ok',
  failed: 'bad',
  blocked: 'warn',
  timed_out: 'bad',
  aa_unavailable: 'unavail',
  stale_context: 'warn',
  duplicate: 'muted',
  awaiting_ack: 'warn',
  acknowledged: 'ok',
  recorded: 'muted',
};

function costOf(record: MessageRecord): number {
  return record.attempts.reduce((sum, attempt) => sum + (attempt.receipt?.costUsd ?? 0), 0);
}

/** A spend bar and its share of the cap, in words as well as in width. */
function bar(value: number, limit: number): string {
  const ratio = limit <= 0 ? (value > 0 ? Infinity : 0) : value / limit;
  const cls = ratio >= 1 ? 'bad' : ratio > 0.8 ? 'warn' : 'ok';
  const percent = !Number.isFinite(ratio) ? 'over a $0 cap' : ratio > 0 && ratio < 0.0001 ? 'under 0.01%' : `${(ratio * 100).toFixed(ratio < 0.01 ? 2 : ratio < 0.1 ? 1 : 0)}%`;
  const width = Number.isFinite(ratio) ? Math.min(1, ratio) * 100 : 100;
  return `<div class="meter"><div class="bar" title="${usd(value)} of ${usd(limit)}"><span class="fill-${cls}" style="width:${width.toFixed(1)}%"></span></div><span class="pct ${cls}-text">${percent}</span></div>`;
}

function warningBadges(warnings: readonly string[]): string {
  return warnings.map((warning) => `<span class="badge warn" title="${escape(warningMeaning(warning))}">${escape(warning)}</span>`).join(' ');
}

/** Every receipt's warnings by its path, from the commits that added them. */
function warningsByReceipt(timeline: Timeline): ReadonlyMap<string, readonly string[]> {
  const out = new Map<string, readonly string[]>();
  for (const commit of timeline.commits) for (const entry of commit.entries) if (entry.warnings.length > 0) out.set(entry.path, entry.warnings);
  return out;
}

/** A finding's message without the path it starts with: the path has a column of its own. */
function findingText(finding: Finding): string {
  const path = finding.path;
  if (path === undefined || !finding.message.startsWith(path)) return finding.message;
  const rest = finding.message.slice(path.length);
  return rest.startsWith(': ') ? rest.slice(2) : rest.startsWith(' ') ? rest.slice(1) : finding.message;
}

function findingsSection(findings: readonly Finding[], otherRefs: string | null): string {
  const beside = otherRefs === null ? '' : `<p class="other-refs">${escape(otherRefs)}</p>`;
  if (findings.length === 0) return `<section id="findings"><h2>Verification</h2><p class="ok-text">No findings: every commit and entry signature, signer, path, sequence and hash checks out.</p>${beside}</section>`;
  const rows = findings.map((finding) =>
    row(' class="finding"', [
      ['code', `<code>${escape(finding.code)}</code>`],
      ['commit', oid(finding.commit)],
      ['path', `<code>${escape(finding.path ?? '')}</code>`],
      ['what', `<span class="text">${escape(findingText(finding))}</span>`],
    ]),
  );
  return `<section id="findings" class="alarm"><h2>Verification: ${findings.length} finding(s)</h2>${table(['code', 'commit', 'path', 'what'], rows)}${beside}</section>`;
}

function warningsSection(state: LedgerState, warnings: ReadonlyMap<string, readonly string[]>): string {
  const records = [...state.messages.values()].sort((a, b) => a.seq - b.seq);
  const rows = records.flatMap((record) =>
    record.attempts.flatMap((attempt) =>
      (attempt.receipt === null ? [] : warnings.get(attempt.receipt.path) ?? []).map((warning) =>
        row(' class="receipt-warning"', [
          ['warning', `<span class="badge warn nowrap">${escape(warning)}</span>`],
          ['message', `${messageId(record.id)} attempt ${attempt.number}`],
          ['receipt', `<code>${escape(attempt.receipt!.path)}</code>`],
          ['meaning', escape(warningMeaning(warning))],
        ]),
      ),
    ),
  );
  if (rows.length === 0) return '<section id="warnings"><h2>Receipt warnings</h2><p class="ok-text">No receipt carries a warning.</p></section>';
  return `<section id="warnings" class="caution"><h2>Receipt warnings (${rows.length})</h2><p>What held, but less strongly than it should have: each receipt says so itself.</p>${table(['warning', 'message', 'receipt', 'meaning'], rows)}</section>`;
}

/** What the timeline holds of each message: its question, the verdict of each attempt's answer, and the commits that added its envelope and receipts. */
interface MessageFacts {
  question?: string;
  envelopeSeq?: number;
  readonly receipts: Map<number, number>;
  readonly verdicts: Map<number, { readonly verdict: string; readonly summary: string }>;
  readonly advice: Map<number, MemberAdvice>;
}

function messageFacts(timeline: Timeline): ReadonlyMap<string, MessageFacts> {
  const out = new Map<string, MessageFacts>();
  for (const commit of timeline.commits) {
    if (commit.findings.length > 0) continue;
    for (const entry of commit.entries) {
      if (entry.messageId === null) continue;
      let facts = out.get(entry.messageId);
      if (facts === undefined) {
        facts = { receipts: new Map(), verdicts: new Map(), advice: new Map() };
        out.set(entry.messageId, facts);
      }
      const info = classifyPath(entry.path);
      if (entry.question !== undefined) facts.question = entry.question;
      if (info?.kind === 'envelope') facts.envelopeSeq = commit.seq;
      if (info?.kind === 'receipt') facts.receipts.set(info.attempt, commit.seq);
      if (info?.kind === 'attempt_artifact' && entry.verdict !== undefined) facts.verdicts.set(info.attempt, entry.verdict);
      if (info?.kind === 'attempt_artifact' && entry.advice !== undefined) facts.advice.set(info.attempt, entry.advice);
    }
  }
  return out;
}

/** A link to the timeline row of the commit that added something. */
const commitLink = (seq: number | undefined, label: string): string => (seq === undefined ? '' : `<a href="#seq-${seq}">${escape(label)} #${seq}</a>`);

function messagesSection(state: LedgerState, timeline: Timeline, findings: readonly Finding[], warnings: ReadonlyMap<string, readonly string[]>): string {
  const records = [...state.messages.values()].sort((a, b) => a.seq - b.seq);
  const known = messageFacts(timeline);
  const rows = records.map((record) => {
    const facts = known.get(record.id);
    const last = [...record.attempts].reverse().find((attempt) => attempt.receipt !== null);
    // Only an answer that passed judgement is advice: a refused one shows no verdict.
    const verdict = last?.receipt?.status === 'succeeded' ? facts?.verdicts.get(last.number) : undefined;
    const links = [commitLink(facts?.envelopeSeq, 'envelope'), last === undefined ? '' : commitLink(facts?.receipts.get(last.number), `receipt ${last.number}`)].filter((link) => link !== '').join(' ');
    const lane = laneStateOf(record, state.registry?.doc);
    const touched = findings.filter((finding) => finding.path?.startsWith(`${folderOf(record)}/`) === true).length;
    const blockers = [...new Set(record.attempts.flatMap((attempt) => attempt.receipt?.blockers ?? []))];
    const warned = [...new Set(record.attempts.flatMap((attempt) => (attempt.receipt === null ? [] : warnings.get(attempt.receipt.path) ?? [])))];
    return row(`${touched > 0 ? ' class="message tampered"' : ' class="message"'} data-state="${lane}" data-intent="${escape(record.intent)}"`, [
      [
        'message',
        `${messageId(record.id)}${touched > 0 ? ` <span class="badge bad">${touched} finding(s)</span>` : ''}${facts?.question === undefined ? '' : `<div class="question text">${escape(facts.question.split('\n')[0]!)}</div>`}${links === '' ? '' : `<div><small>${links}</small></div>`}`,
      ],
      ['intent', escape(record.intent)],
      ['edge', `${escape(record.source)} &rarr; ${escape(record.target)}${record.submittedVia === undefined ? '' : ` <span class="badge muted via">via ${escape(record.submittedVia)}</span>`}`],
      ['correlation', `<code>${escape(record.correlation)}</code>`],
      ['created', escape(record.createdAt)],
      [
        'state',
        `<span class="badge ${STATE_CLASS[lane]}">${lane}</span>${blockers.length > 0 ? ` <small>${blockers.map(escape).join(', ')}</small>` : ''}${warned.length > 0 ? ` ${warningBadges(warned)}` : ''}${verdict === undefined ? '' : `<div class="verdict" title="${escape(verdict.summary)}"><small>advice:</small> <span class="badge muted">${escape(verdict.verdict)}</span></div>`}`,
      ],
      ['attempts', String(record.attempts.length)],
      ['cost', usd(costOf(record))],
    ]);
  });
  return `<section id="messages"><h2>Messages (${records.length})</h2>${table(['message', 'intent', 'edge', 'correlation', 'created', 'state', 'attempts', 'cost'], rows)}</section>`;
}

/**
 * Every panel: its members side by side, compared by the runner's own code from their receipts and
 * the answers that passed judgement (audit/panel-comparison.ts), never by a model.
 */
function panelsSection(state: LedgerState, timeline: Timeline): string {
  if (state.panels.size === 0) return '';
  const known = messageFacts(timeline);
  const sections = [...state.panels].map(([id, panel]) => {
    const comparison = comparePanel(
      id,
      panel.name,
      panel.messages.map((messageId) => {
        const record = state.messages.get(messageId)!;
        const last = [...record.attempts].reverse().find((attempt) => attempt.receipt !== null);
        const advice = last?.receipt?.status === 'succeeded' ? known.get(messageId)?.advice.get(last.number) : undefined;
        return {
          actor: record.target,
          messageId,
          state: laneStateOf(record, state.registry?.doc),
          receipt: last?.receipt == null ? null : { path: last.receipt.path, attempt: last.number, status: last.receipt.status, blockers: last.receipt.blockers },
          spentUsd: costOf(record),
          advice: advice ?? null,
        };
      }),
    );
    const agreement = { unanimous: 'ok', split: 'warn', partial: 'muted', none: 'muted' }[comparison.agreement];
    const rows = comparison.members.map((member) =>
      row(' class="panel-member"', [
        ['member', `${escape(member.actor)}<div>${messageId(member.message_id)}</div>`],
        ['state', `<span class="badge ${STATE_CLASS[member.state]}">${member.state}</span>`],
        ['verdict', member.verdict === null ? `<small>no advice (${escape(member.no_advice ?? member.state)})</small>` : `<span class="badge muted">${escape(member.verdict)}</span> <small>confidence ${member.confidence}</small>`],
        ['objections', member.objections.length === 0 ? '<small>none</small>' : `<ul>${member.objections.map((objection) => `<li class="text">${escape(objection)}</li>`).join('')}</ul>`],
        ['receipt', member.receipt_path === null ? '' : `<code>${escape(member.receipt_path)}</code>`],
        ['cost', usd(member.cost_usd)],
      ]),
    );
    return `<h3>${messageId(id)} <small>${escape(comparison.name)}</small> <span class="badge ${agreement}">${comparison.agreement}</span></h3>${table(['member', 'state', 'verdict', 'objections', 'receipt', 'cost'], rows)}`;
  });
  return `<section id="panels"><h2>Panels (${state.panels.size})</h2><p>One question to several advisory agents; their answers compared by the runner, never by a model. Advice, not authority.</p>${sections.join('')}</section>`;
}

/** Every ea receipt's dispatch facts by its path, from the commits that added them. */
function dispatchesByReceipt(timeline: Timeline): ReadonlyMap<string, TimelineDispatch> {
  const out = new Map<string, TimelineDispatch>();
  for (const commit of timeline.commits) for (const entry of commit.entries) if (entry.dispatch !== undefined) out.set(entry.path, entry.dispatch);
  return out;
}

function verificationCell(dispatch: TimelineDispatch): string {
  if (dispatch.verification.length === 0) return '<span class="badge muted">not run</span>';
  return dispatch.verification
    .map((check) => `<span class="badge ${check.exitCode === 0 ? 'ok' : 'bad'}" title="exit ${check.exitCode}">exit ${check.exitCode}</span> <code>${escape(check.command)}</code>`)
    .join('<br>');
}

/** Every attempt of every dispatch: the branch the runner committed, its own verification, the cost. */
function dispatchesSection(state: LedgerState, timeline: Timeline, findings: readonly Finding[]): string {
  const facts = dispatchesByReceipt(timeline);
  const records = [...state.messages.values()].filter((record) => record.intent === 'ea_dispatch').sort((a, b) => a.seq - b.seq);
  if (records.length === 0) return '';
  const approvals = [...state.approvals.values()];
  const rows = records.flatMap((record) => {
    const touched = findings.some((finding) => finding.path?.startsWith(`${folderOf(record)}/`) === true);
    const approved = approvals.filter((approval) => approval.usedBy === record.id || (approval.approves === 'retry' && approval.messageId === record.id));
    const approvalCell = (attempt: number): string => {
      const approval = approved.find((item) => (item.approves === 'dispatch' ? attempt === 1 : item.attempt === attempt));
      return approval === undefined ? '<small>none needed</small>' : `<code class="nowrap">${escape(approval.id)}</code> <small>by ${escape(approval.approvedBy)}</small>`;
    };
    const pending = approved.filter((item) => item.approves === 'retry' && item.attempt !== null && !record.attempts.some((attempt) => attempt.number === item.attempt));
    const attempts = record.attempts.length === 0 ? [null] : record.attempts;
    const waiting = pending.map((approval) =>
      row(' class="dispatch" data-status="approved"', [
        ['message', `${messageId(record.id)} <small>attempt ${approval.attempt!}</small>`],
        ['executor', escape(record.target)],
        ['status', '<span class="badge muted">approved, not run yet</span>'],
        ['branch', ''],
        ['verification', ''],
        ['approval', approvalCell(approval.attempt!)],
        ['cost', usd(0)],
      ]),
    );
    return [...attempts.map((attempt) => {
      const dispatch = attempt?.receipt == null ? undefined : facts.get(attempt.receipt.path);
      const status = attempt?.receipt == null ? laneStateOf(record, state.registry?.doc) : attempt.receipt.status;
      const blockers = attempt?.receipt?.blockers ?? [];
      return row(`${touched ? ' class="dispatch tampered"' : ' class="dispatch"'} data-status="${escape(status)}"`, [
        ['message', `${messageId(record.id)}${attempt === null ? '' : ` <small>attempt ${attempt.number}</small>`}`],
        ['executor', `${escape(record.target)}${dispatch === undefined ? '' : ` <small>${escape(dispatch.executor)}</small>`}`],
        ['status', `<span class="badge ${STATE_CLASS[status as LaneState] ?? 'muted'}">${escape(status)}</span>${blockers.length > 0 ? ` <small>${blockers.map(escape).join(', ')}</small>` : ''}`],
        ['branch', dispatch?.branch == null ? '<small>nothing committed</small>' : `<code>${escape(dispatch.branch)}</code> at ${oid(dispatch.headSha)}<br><small>${dispatch.filesChanged} file(s) changed</small>`],
        ['verification', dispatch === undefined ? '' : verificationCell(dispatch)],
        ['approval', attempt === null ? approvalCell(1) : approvalCell(attempt.number)],
        ['cost', dispatch === undefined ? usd(attempt?.receipt?.costUsd ?? 0) : usd(dispatch.costUsd)],
      ]);
    }), ...waiting];
  });
  return `<section id="dispatches"><h2>Dispatches (${records.length})</h2><p>Work an execution agent did in a worktree of its own; the branch, its commit and the verification are the runner's, never the agent's word.</p>${table(['message', 'executor', 'status', 'branch', 'verification', 'approval', 'cost'], rows)}</section>`;
}

/** The CEO's approvals, from the commits that added them: who approved what, why, and what used it. */
function approvalsSection(state: LedgerState, timeline: Timeline): string {
  const rows = timeline.commits.flatMap((commit) =>
    commit.entries.flatMap((entry) => {
      const approval = entry.approval;
      if (approval === undefined) return [];
      const info = classifyPath(entry.path);
      const id = info?.kind === 'approval' ? info.approvalId : entry.path;
      const usedBy = state.approvals.get(id)?.usedBy ?? null;
      const what =
        approval.approves === 'dispatch'
          ? `a dispatch: request <code>${escape(approval.requestHash ?? '')}</code>${usedBy === null ? ' <small>not used</small>' : ` <small>used by</small> ${messageId(usedBy)}`}`
          : `a retry: ${messageId(approval.messageId ?? '')} attempt ${approval.attempt ?? ''}`;
      return [
        row(' class="approval"', [
          ['approval', `<code class="nowrap">${escape(id)}</code>`],
          ['approved by', escape(approval.approvedBy)],
          ['approves', what],
          ['reason', `<span class="text">${escape(approval.reason)}</span>`],
          ['Ledger-Seq', `#${commit.seq} ${oid(commit.commit)}`],
        ]),
      ];
    }),
  );
  if (rows.length === 0) return '';
  return `<section id="approvals"><h2>Approvals (${rows.length})</h2>${table(['approval', 'approved by', 'approves', 'reason', 'Ledger-Seq'], rows)}</section>`;
}

function spendSection(state: LedgerState): string {
  const budgets = state.policy?.doc.budgets;
  if (budgets === undefined) return '';
  const days = [...state.spendByDay].sort(([a], [b]) => (a < b ? -1 : 1));
  const correlations = [...state.spendByCorrelation].sort(([, a], [, b]) => b - a).slice(0, 50);
  const none = ['<tr><td>nothing spent</td></tr>'];
  const dayRows = days.map(([day, spent]) => row('', [['day', escape(day)], ['spent', usd(spent)], ['of the cap', bar(spent, budgets.daily_cost_cap_usd)]]));
  const corrRows = correlations.map(([id, spent]) => row('', [['correlation', `<code>${escape(id)}</code>`], ['spent', usd(spent)], ['of the cap', bar(spent, budgets.max_cost_usd_per_correlation)]]));
  return `<section id="spend"><h2>Spend against budgets</h2><div class="cols"><div><h3>Per day (cap ${usd(budgets.daily_cost_cap_usd)})</h3>${table([], dayRows.length > 0 ? dayRows : none)}</div><div><h3>Per correlation (cap ${usd(budgets.max_cost_usd_per_correlation)})</h3>${table([], corrRows.length > 0 ? corrRows : none)}</div></div></section>`;
}

/** Every key the trust files ever allowed: whose, whether it is in force now, and which commits it signed. */
function signersSection(state: LedgerState, timeline: Timeline): string {
  const rows = [...state.everKeys].map(([keyId, { actor }]) => {
    const signed = timeline.commits.filter((commit) => commit.signer?.keyId === keyId);
    const key = keyStatus(state, keyId);
    const status =
      key.status === 'active'
        ? `<span class="badge ok">active</span>${key.rootAuthority ? ' <small>trust root authority</small>' : ''}`
        : key.status === 'revoked'
          ? `<span class="badge bad">revoked</span> <small>at Ledger-Seq ${key.revocation.seq}: ${escape(key.revocation.reason)}</small>`
          : key.status === 'retired'
            ? `<span class="badge muted">retired</span> <small>at Ledger-Seq ${key.seq}</small>`
            : '<span class="badge muted">retired</span>';
    const span = signed.length === 0 ? 'none' : `${signed.length} commit(s), Ledger-Seq ${signed[0]!.seq}${signed.length > 1 ? ` to ${signed[signed.length - 1]!.seq}` : ''}`;
    return row(` class="signer" data-status="${key.status === 'unknown' ? 'retired' : key.status}"`, [
      ['actor', escape(actor)],
      ['key', fingerprint(keyId)],
      ['status', status],
      ['signed', span],
    ]);
  });
  return `<section id="signers"><h2>Signers (${rows.length})</h2>${table(['actor', 'key (SHA256 fingerprint)', 'status', 'signed'], rows)}</section>`;
}

/** What a file in a commit is: trust files by role and version, so genesis reads as its three trust files. */
function entryLabel(entry: TimelineEntry): string {
  const info = classifyPath(entry.path);
  if (info === null) return entry.path.split('/').pop() ?? entry.path;
  switch (info.kind) {
    case 'readme':
      return 'README.md';
    case 'trust':
      return `${info.role === 'root' ? 'trust root' : info.role === 'registry' ? 'actor registry' : 'actor policy'} v${info.version}`;
    case 'kill_switch':
      return `kill switch v${info.version}`;
    case 'approval': {
      const approval = entry.approval;
      if (approval === undefined) return `approval ${info.approvalId}`;
      const what = approval.approves === 'dispatch' ? `dispatch request ${(approval.requestHash ?? '').slice(0, 19)}…` : `retry of ${approval.messageId ?? ''} as attempt ${approval.attempt ?? ''}`;
      return `approval ${info.approvalId} by ${approval.approvedBy}: ${what}`;
    }
    case 'heartbeat':
      return 'heartbeat';
    case 'envelope':
      return 'envelope';
    case 'claim':
      return `claim ${info.attempt}`;
    case 'receipt':
      return `receipt ${info.attempt}`;
    case 'message_artifact':
    case 'attempt_artifact':
      return info.name;
    case 'forge_file':
      return `forge workflow ${info.name}`;
    case 'signature':
      return `signature of ${info.of}`;
  }
}

/** A commit's trust files in the order they depend on each other (authority/validate-commit.ts reads them so). */
const TRUST_ORDER = ['root', 'registry', 'policy', 'kill-switch'];

/** Genesis reads README, root, registry, policy; other entries keep the commit's order. */
function entryRank(entry: TimelineEntry): number {
  if (entry.kind === 'readme') return -1;
  return entry.kind === 'trust' || entry.kind === 'kill_switch' ? TRUST_ORDER.indexOf(entry.path.split('/')[1]!) : TRUST_ORDER.length;
}

function trustSection(timeline: Timeline): string {
  const rows = timeline.commits.flatMap((commit) =>
    commit.entries
      .filter((entry) => entry.kind === 'trust' || entry.kind === 'kill_switch')
      .sort((a, b) => entryRank(a) - entryRank(b))
      .map((entry) =>
        row(`${commit.findings.length > 0 ? ' class="trust-file tampered"' : ' class="trust-file"'}`, [
          ['file', `<code>${escape(entry.path)}</code>`],
          ['what', escape(entryLabel(entry))],
          ['Ledger-Seq', `#${commit.seq}${commit.seq === 1 ? ' <small>genesis</small>' : ''}`],
          ['commit', oid(commit.commit)],
          ['signed by', commit.signer === null ? '<span class="badge bad">unverified</span>' : escape(commit.signer.actor)],
        ]),
      ),
  );
  return `<section id="trust"><h2>Trust files</h2>${table(['file', 'what', 'Ledger-Seq', 'commit', 'signed by'], rows)}</section>`;
}

function commitRow(commit: TimelineCommit): string {
  const bad = commit.findings.length > 0;
  const entries = [...commit.entries]
    .sort((a, b) => entryRank(a) - entryRank(b))
    .map((entry) => `<span class="entry kind-${escape(entry.kind)}" title="${escape(entry.approval === undefined ? entry.path : `${entry.path}: ${entry.approval.reason}`)}">${escape(entryLabel(entry))}</span>${entry.warnings.length > 0 ? ` ${warningBadges(entry.warnings)}` : ''}`)
    .join(' ');
  const signer = commit.signer === null ? '<span class="badge bad">unverified</span>' : `${escape(commit.signer.actor)} ${fingerprint(commit.signer.keyId)}`;
  const problems = bad ? `<div class="problems text">${commit.findings.map((finding) => `<code>${escape(finding.code)}</code>${finding.path === undefined ? '' : ` <code>${escape(finding.path)}</code>`} ${escape(findingText(finding))}`).join('<br>')}</div>` : '';
  return row(` id="seq-${commit.seq}"${bad ? ' class="commit tampered"' : ' class="commit"'}`, [
    ['seq', `#${commit.seq}`],
    ['commit', oid(commit.commit)],
    ['time', time(commit.time)],
    ['signed by', signer],
    ['what it added', `<span class="text">${escape(commit.summary)}</span><div>${entries}</div>${problems}`],
  ]);
}

function timelineSection(timeline: Timeline): string {
  const rows = [...timeline.commits].reverse().map(commitRow);
  return `<section id="timeline"><h2>Timeline (newest first)</h2>${table(['seq', 'commit', 'time', 'signed by', 'what it added'], rows)}</section>`;
}

const STYLE = `
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1d2433;background:#f6f7f9}
header{background:#1d2433;color:#fff;padding:18px 28px}header h1{margin:0 0 4px;font-size:20px}header p{margin:2px 0;color:#c9d1e0;overflow-wrap:anywhere}
main{padding:8px 28px 40px}section{background:#fff;border:1px solid #e1e5eb;border-radius:8px;margin:16px 0;padding:12px 18px;min-width:0}
h2{font-size:16px;margin:4px 0 10px}h3{font-size:14px;margin:6px 0}table{border-collapse:collapse;width:100%}
th,td{text-align:left;padding:5px 8px;border-bottom:1px solid #eef0f3;vertical-align:top;overflow-wrap:break-word}th{font-size:12px;color:#5b6578;text-transform:uppercase}
code{font:12px ui-monospace,SFMono-Regular,Menlo,monospace;overflow-wrap:anywhere}small{color:#5b6578}
.fp{user-select:all}.text{overflow-wrap:anywhere}.nowrap{white-space:nowrap}
.badge{display:inline-block;max-width:100%;box-sizing:border-box;white-space:nowrap;padding:1px 8px;border-radius:10px;font-size:12px;font-weight:600}
.question{color:#33415c;margin-top:2px}.verdict{margin-top:2px}
.ok{background:#d6f5df;color:#146c2e}.bad{background:#fde0e0;color:#a11d1d}.warn{background:#fff1cc;color:#8a5a00}.unavail{background:#ece2fb;color:#5b2ca0}.muted{background:#eceff3;color:#4a5366}
.status{font-size:15px;font-weight:700;padding:4px 12px;border-radius:6px;display:inline-block;margin-top:6px}
.alarm{border:2px solid #d33;background:#fff6f6}.finding td{color:#7a1010}.ok-text{color:#146c2e}.caution{border:2px solid #e0a800}
.warn-text{color:#8a5a00}.bad-text{color:#a11d1d;font-weight:700}
tr.tampered{background:#ffe8e8;outline:2px solid #d33}.problems{margin-top:4px;color:#a11d1d;font-size:12px}
.entry{display:inline-block;margin:2px 3px 0 0;padding:0 6px;border-radius:4px;font-size:11px;background:#eef2f8;color:#33415c}
.kind-receipt{background:#e3f1ff}.kind-approval{background:#e6f7ea}.kind-claim{background:#f3ecff}.kind-envelope{background:#fff4dc}.kind-trust{background:#ffe9e9}
.meter{display:flex;align-items:center;gap:8px}.pct{font-size:12px;min-width:3.5em}
.bar{flex:1 1 auto;min-width:60px;max-width:220px;height:10px;background:#eef0f3;border-radius:5px;overflow:hidden}.bar span{display:block;height:100%}
.fill-ok{background:#3fae5f}.fill-warn{background:#e0a800}.fill-bad{background:#d33}
.cols{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1fr);gap:24px}
@media (max-width:1000px){
.nowrap{white-space:normal}.badge{white-space:normal;overflow-wrap:anywhere}
header{padding:14px 14px}main{padding:4px 8px 28px}section{padding:10px 12px;margin:12px 0}
.cols{grid-template-columns:minmax(0,1fr);gap:8px}
table,tbody,tr,td{display:block;width:auto}thead{display:none}
tr{padding:6px 0;border-bottom:1px solid #e1e5eb}td{border:0;padding:2px 0;position:relative}
td[data-label]{padding-left:104px;min-height:1.45em}
td[data-label]::before{content:attr(data-label);position:absolute;left:0;top:4px;width:96px;color:#5b6578;font-size:11px;line-height:1.3;text-transform:uppercase}
tr.tampered{outline-offset:-2px;padding:6px}
}`;

export function renderReport(input: ReportInput): string {
  const ok = input.findings.length === 0;
  const warnings = warningsByReceipt(input.timeline);
  const status = ok ? '<span class="status ok">verified: no findings</span>' : `<span class="status bad">${input.findings.length} verification finding(s)</span>`;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>coo-commons ledger report</title><style>${STYLE}</style></head>
<body><header><h1>coo-commons ledger report</h1>
<p><code>${escape(input.ledger)}</code> &middot; head ${oid(input.head)} at Ledger-Seq ${input.state.seq} &middot; generated ${escape(input.generatedAt)}</p>
<p>${input.trustRoot === null ? "trust root <strong>not pinned</strong>: read from the ledger's own genesis (pin the CEO key with --trust-root)" : `trust root pinned to ${fingerprint(input.trustRoot)}`}</p>
<p>trust root v${input.state.root?.version ?? '-'} &middot; registry v${input.state.registry?.version ?? '-'} (active COO ${escape(input.state.registry?.doc.active_coo ?? '-')}) &middot; policy v${input.state.policy?.version ?? '-'} &middot; kill switch ${escape(input.state.killSwitch?.doc.state ?? 'off')}</p>
${status}</header>
<main>${findingsSection(input.findings, input.otherRefs)}${warningsSection(input.state, warnings)}${messagesSection(input.state, input.timeline, input.findings, warnings)}${panelsSection(input.state, input.timeline)}${dispatchesSection(input.state, input.timeline, input.findings)}${approvalsSection(input.state, input.timeline)}${spendSection(input.state)}${signersSection(input.state, input.timeline)}${trustSection(input.timeline)}${timelineSection(input.timeline)}</main></body></html>
`;
}
