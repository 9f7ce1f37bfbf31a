import { resolve } from 'node:path';
import type { Command } from 'commander';
import { renderReport } from '../audit/report.js';
import { otherRefsNote, verifyLedger } from '../audit/verify.js';
import { emit, GENESIS_HELP, genesisFlag, jsonOption, ledgerOption, loadPublicKey, required, writeOutput } from './common.js';
import { markRejected } from './outcome.js';
import { createProgress } from './progress.js';
import { writeErr } from './terminal.js';

export function reportVerb(program: Command): void {
  program
    .command('report')
    .description('write one self-contained HTML page: timeline, message states, receipt warnings, spend against budgets, signers, every verification finding (exit 3 if any)')
    .addOption(ledgerOption())
    .option('--html <file>', 'where to write the page')
    .option('--trust-root <pubfile>', "the CEO public key the ledger's first trust root must name (from the CEO, not the ledger): without it the page trusts whatever genesis the ledger holds, and says so")
    .option('--genesis <commit>', GENESIS_HELP)
    .addOption(jsonOption())
    .action(async (opts: { ledger?: string; html?: string; json?: boolean; trustRoot?: string; genesis?: string }) => {
      const gitdir = required(opts.ledger, '--ledger', 'the ledger path or $COO_LEDGER');
      const genesis = genesisFlag(opts.genesis);
      const out = required(opts.html, '--html', 'the HTML file to write');
      const now = new Date();
      const progress = createProgress('verifying', 'commits', opts.json === true);
      const trustRoot = opts.trustRoot === undefined ? undefined : loadPublicKey(opts.trustRoot);
      const report = await progress.until(verifyLedger(gitdir, { timeline: true, now, onProgress: progress.update, ...(trustRoot === undefined ? {} : { trustRoot }), ...(genesis === undefined ? {} : { genesis }) }));
      // An empty ledger has no timeline: no commit was replayed.
      const timeline = report.timeline ?? { commits: [] };
      const otherRefs = otherRefsNote(report.otherRefs, 'this report');
      writeOutput(out, renderReport({ ledger: resolve(gitdir), generatedAt: now.toISOString(), head: report.head, state: report.state, findings: report.findings, timeline, trustRoot: trustRoot?.keyId ?? null, otherRefs }), '--html', 'the report');
      // The page is written either way: with findings, it is the evidence of what is wrong.
      if (report.findings.length > 0) markRejected();
      if (otherRefs !== null && opts.json !== true) writeErr(`note: ${otherRefs}\n`);
      emit(
        opts.json,
        { ok: report.findings.length === 0, html: resolve(out), commits: report.commits, findings: report.findings.length, trust_root: trustRoot?.keyId ?? null, other_refs: report.otherRefs },
        () => `${report.findings.length === 0 ? 'ok' : 'FAILED'}: wrote ${out}: ${report.commits} commits, ${report.findings.length} finding(s)`,
      );
    });
}
