import type { Command } from 'commander';
import { verifyLedger } from '../audit/verify.js';
import type { Finding } from '../errors.js';
import { emit, jsonOption, ledgerOption, required } from './common.js';
import { markRejected } from './outcome.js';

export function formatFinding(finding: Finding): string {
  const at = [finding.commit === undefined ? null : finding.commit.slice(0, 12), finding.path].filter((part) => part != null).join(' ');
  return `  ${finding.code}${at === '' ? '' : ` [${at}]`}: ${finding.message}`;
}

export function verifyVerb(program: Command): void {
  program
    .command('verify')
    .description('replay the whole ledger from its trust root and report every finding (exit 3 if any)')
    .addOption(ledgerOption())
    .addOption(jsonOption())
    .action(async (opts: { ledger?: string; json?: boolean }) => {
      const gitdir = required(opts.ledger, '--ledger', 'the ledger path or $COO_LEDGER');
      const report = await verifyLedger(gitdir);
      if (report.findings.length > 0) markRejected();
      emit(opts.json, { ok: report.findings.length === 0, head: report.head, seq: report.seq, commits: report.commits, findings: report.findings }, () => {
        const head = `${report.commits} commits, head ${report.head ?? '(none)'} at Ledger-Seq ${report.seq}`;
        if (report.findings.length === 0) return `ok: ${head}; every signature, signer, path and sequence checks out`;
        return [`FAILED: ${report.findings.length} finding(s) in ${head}`, ...report.findings.map(formatFinding)].join('\n');
      });
    });
}
