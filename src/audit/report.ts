import { folderOf, laneStateOf, type LaneState, type LedgerState, type MessageRecord } from '../authority/state.js';
import type { Finding } from '../errors.js';
import type { Timeline, TimelineCommit } from './timeline.js';

/** One self-contained HTML page about a ledger. Pure: facts in, a string out; no script, no remote resource. */

export interface ReportInput {
  readonly ledger: string;
  readonly generatedAt: string;
  readonly head: string | null;
  readonly state: LedgerState;
  readonly findings: readonly Finding[];
  readonly timeline: Timeline;
}

const escape = (text: string): string => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
const short = (oid: string | null | undefined): string => (oid == null ? '' : oid.slice(0, 10));
const usd = (value: number): string => `$${value.toFixed(value < 0.01 ? 5 : 2)}`;

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
};

function costOf(record: MessageRecord): number {
  return record.attempts.reduce((sum, attempt) => sum + (attempt.receipt?.costUsd ?? 0), 0);
}

function bar(value: number, limit: number): string {
  const ratio = limit <= 0 ? 1 : Math.min(1, value / limit);
  const cls = ratio >= 1 ? 'bad' : ratio > 0.8 ? 'warn' : 'ok';
  return `<div class="bar" title="${usd(value)} of ${usd(limit)}"><span class="${cls}" style="width:${(ratio * 100).toFixed(1)}%"></span></div>`;
}

function findingsSection(findings: readonly Finding[]): string {
  if (findings.length === 0) return '<section id="findings"><h2>Verification</h2><p class="ok-text">No findings: every commit and entry signature, signer, path, sequence and hash checks out.</p></section>';
  const rows = findings
    .map((finding) => `<tr class="finding"><td><code>${escape(finding.code)}</code></td><td><code>${escape(short(finding.commit))}</code></td><td><code>${escape(finding.path ?? '')}</code></td><td>${escape(finding.message)}</td></tr>`)
    .join('');
  return `<section id="findings" class="alarm"><h2>Verification: ${findings.length} finding(s)</h2><table><thead><tr><th>code</th><th>commit</th><th>path</th><th>what</th></tr></thead><tbody>${rows}</tbody></table></section>`;
}

function messagesSection(state: LedgerState, findings: readonly Finding[]): string {
  const records = [...state.messages.values()].sort((a, b) => a.seq - b.seq);
  const rows = records
    .map((record) => {
      const lane = laneStateOf(record);
      const touched = findings.filter((finding) => finding.path?.startsWith(`${folderOf(record)}/`) === true).length;
      const blockers = [...new Set(record.attempts.flatMap((attempt) => attempt.receipt?.blockers ?? []))];
      return `<tr class="message${touched > 0 ? ' tampered' : ''}" data-state="${lane}"><td><code>${escape(record.id)}</code>${touched > 0 ? ` <span class="badge bad">${touched} finding(s)</span>` : ''}</td><td>${escape(record.intent)}</td><td>${escape(record.source)} &rarr; ${escape(record.target)}${record.submittedVia === undefined ? '' : ` <span class="badge muted via">via ${escape(record.submittedVia)}</span>`}</td><td><code>${escape(record.correlation)}</code></td><td>${escape(record.createdAt)}</td><td><span class="badge ${STATE_CLASS[lane]}">${lane}</span>${blockers.length > 0 ? ` <small>${blockers.map(escape).join(', ')}</small>` : ''}</td><td>${record.attempts.length}</td><td>${usd(costOf(record))}</td></tr>`;
    })
    .join('');
  return `<section id="messages"><h2>Messages (${records.length})</h2><table><thead><tr><th>message</th><th>intent</th><th>edge</th><th>correlation</th><th>created</th><th>state</th><th>attempts</th><th>cost</th></tr></thead><tbody>${rows}</tbody></table></section>`;
}

function spendSection(state: LedgerState): string {
  const budgets = state.policy?.doc.budgets;
  if (budgets === undefined) return '';
  const days = [...state.spendByDay].sort(([a], [b]) => (a < b ? -1 : 1));
  const correlations = [...state.spendByCorrelation].sort(([, a], [, b]) => b - a).slice(0, 50);
  const dayRows = days.map(([day, spent]) => `<tr><td>${escape(day)}</td><td>${usd(spent)}</td><td>${bar(spent, budgets.daily_cost_cap_usd)}</td></tr>`).join('');
  const corrRows = correlations.map(([id, spent]) => `<tr><td><code>${escape(id)}</code></td><td>${usd(spent)}</td><td>${bar(spent, budgets.max_cost_usd_per_correlation)}</td></tr>`).join('');
  return `<section id="spend"><h2>Spend against budgets</h2><div class="cols"><div><h3>Per day (cap ${usd(budgets.daily_cost_cap_usd)})</h3><table><tbody>${dayRows || '<tr><td>nothing spent</td></tr>'}</tbody></table></div><div><h3>Per correlation (cap ${usd(budgets.max_cost_usd_per_correlation)})</h3><table><tbody>${corrRows || '<tr><td>nothing spent</td></tr>'}</tbody></table></div></div></section>`;
}

function commitRow(commit: TimelineCommit): string {
  const bad = commit.findings.length > 0;
  const entries = commit.entries
    .map((entry) => {
      const label = entry.kind === 'message_artifact' || entry.kind === 'attempt_artifact' || entry.kind === 'unknown' ? entry.path.split('/').pop() ?? entry.path : entry.kind.replace('_', ' ');
      return `<span class="entry kind-${escape(entry.kind)}" title="${escape(entry.path)}">${escape(label)}</span>`;
    })
    .join(' ');
  const signer = commit.signer === null ? '<span class="badge bad">unverified</span>' : `${escape(commit.signer.actor)} <small><code>${escape(commit.signer.keyId.slice(0, 19))}&hellip;</code></small>`;
  const problems = bad ? `<div class="problems">${commit.findings.map((finding) => `<code>${escape(finding.code)}</code> ${escape(finding.message)}`).join('<br>')}</div>` : '';
  return `<tr class="commit${bad ? ' tampered' : ''}"><td>#${commit.seq}</td><td><code>${escape(short(commit.commit))}</code></td><td>${escape(commit.time ?? '')}</td><td>${signer}</td><td>${escape(commit.summary)}<div>${entries}</div>${problems}</td></tr>`;
}

function timelineSection(timeline: Timeline): string {
  const rows = [...timeline.commits].reverse().map(commitRow).join('');
  return `<section id="timeline"><h2>Timeline (newest first)</h2><table><thead><tr><th>seq</th><th>commit</th><th>time</th><th>signed by</th><th>what it added</th></tr></thead><tbody>${rows}</tbody></table></section>`;
}

const STYLE = `
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1d2433;background:#f6f7f9}
header{background:#1d2433;color:#fff;padding:18px 28px}header h1{margin:0 0 4px;font-size:20px}header p{margin:2px 0;color:#c9d1e0}
main{padding:8px 28px 40px}section{background:#fff;border:1px solid #e1e5eb;border-radius:8px;margin:16px 0;padding:12px 18px}
h2{font-size:16px;margin:4px 0 10px}h3{font-size:14px;margin:6px 0}table{border-collapse:collapse;width:100%}
th,td{text-align:left;padding:5px 8px;border-bottom:1px solid #eef0f3;vertical-align:top}th{font-size:12px;color:#5b6578;text-transform:uppercase}
code{font:12px ui-monospace,SFMono-Regular,Menlo,monospace}small{color:#5b6578}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;font-weight:600}
.ok{background:#d6f5df;color:#146c2e}.bad{background:#fde0e0;color:#a11d1d}.warn{background:#fff1cc;color:#8a5a00}.unavail{background:#ece2fb;color:#5b2ca0}.muted{background:#eceff3;color:#4a5366}
.status{font-size:15px;font-weight:700;padding:4px 12px;border-radius:6px;display:inline-block;margin-top:6px}
.alarm{border:2px solid #d33;background:#fff6f6}.finding td{color:#7a1010}.ok-text{color:#146c2e}
tr.tampered{background:#ffe8e8;outline:2px solid #d33}.problems{margin-top:4px;color:#a11d1d;font-size:12px}
.entry{display:inline-block;margin:2px 3px 0 0;padding:0 6px;border-radius:4px;font-size:11px;background:#eef2f8;color:#33415c}
.kind-receipt{background:#e3f1ff}.kind-claim{background:#f3ecff}.kind-envelope{background:#fff4dc}.kind-trust{background:#ffe9e9}
.bar{width:220px;height:10px;background:#eef0f3;border-radius:5px;overflow:hidden}.bar span{display:block;height:100%}
.cols{display:grid;grid-template-columns:1fr 1fr;gap:24px}`;

export function renderReport(input: ReportInput): string {
  const ok = input.findings.length === 0;
  const status = ok ? '<span class="status ok">verified: no findings</span>' : `<span class="status bad">${input.findings.length} verification finding(s)</span>`;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>coo-commons ledger report</title><style>${STYLE}</style></head>
<body><header><h1>coo-commons ledger report</h1>
<p><code>${escape(input.ledger)}</code> &middot; head <code>${escape(short(input.head))}</code> at Ledger-Seq ${input.state.seq} &middot; generated ${escape(input.generatedAt)}</p>
<p>trust root v${input.state.root?.version ?? '-'} &middot; registry v${input.state.registry?.version ?? '-'} (active COO ${escape(input.state.registry?.doc.active_coo ?? '-')}) &middot; policy v${input.state.policy?.version ?? '-'} &middot; kill switch ${escape(input.state.killSwitch?.doc.state ?? 'off')}</p>
${status}</header>
<main>${findingsSection(input.findings)}${messagesSection(input.state, input.findings)}${spendSection(input.state)}${timelineSection(input.timeline)}</main></body></html>
`;
}
