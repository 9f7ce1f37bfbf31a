import * as fs from 'node:fs';
import { resolve } from 'node:path';
import type { Command } from 'commander';
import { renderReport } from '../audit/report.js';
import { verifyLedger } from '../audit/verify.js';
import { emit, jsonOption, ledgerOption, required } from './common.js';

export function reportVerb(program: Command): void {
  program
    .command('report')
    .description('write one self-contained HTML page: timeline, message states, spend against budgets, signers, every verification finding')
    .addOption(ledgerOption())
    .option('--html <file>', 'where to write the page')
    .addOption(jsonOption())
    .action(async (opts: { ledger?: string; html?: string; json?: boolean }) => {
      const gitdir = required(opts.ledger, '--ledger', 'the ledger path or $COO_LEDGER');
      const out = required(opts.html, '--html', 'the HTML file to write');
      const now = new Date();
      const report = await verifyLedger(gitdir, { timeline: true, now });
      const html = renderReport({ ledger: resolve(gitdir), generatedAt: now.toISOString(), head: report.head, state: report.state, findings: report.findings, timeline: report.timeline! });
      const temp = `${out}.${process.pid}.tmp`;
      fs.writeFileSync(temp, html);
      fs.renameSync(temp, out);
      emit(opts.json, { html: resolve(out), commits: report.commits, findings: report.findings.length }, () => `wrote ${out}: ${report.commits} commits, ${report.findings.length} finding(s)`);
    });
}
