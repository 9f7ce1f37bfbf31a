import type { Command } from 'commander';
import { CooError } from '../errors.js';
import { viewMessage } from '../audit/message-view.js';
import { warningMeaning } from '../audit/warnings.js';
import { Ledger } from '../ledger/ledger.js';
import { emit, jsonOption, ledgerOption, required } from './common.js';

export function showVerb(program: Command): void {
  program
    .command('show')
    .description('show a message (its envelope, lane state, claims and receipts) or print one ledger file')
    .argument('<target>', 'a message id (msg_...) or a path inside the ledger')
    .addOption(ledgerOption())
    .addOption(jsonOption())
    .action(async (target: string, opts: { ledger?: string; json?: boolean }) => {
      const ledger = Ledger.open(required(opts.ledger, '--ledger', 'the ledger path or $COO_LEDGER'));
      try {
        const state = await ledger.state();
        const record = state.messages.get(target);
        if (record === undefined) {
          const bytes = await ledger.readFile(target);
          if (bytes === null) throw new CooError('NOT_FOUND', `${target} is neither a message id nor a file in the ledger`);
          if (opts.json === true) emit(true, { path: target, content: bytes.toString('utf8') }, () => '');
          else process.stdout.write(bytes);
          return;
        }
        const view = await viewMessage(ledger, state, record);
        emit(opts.json, view, () => {
          const lines = [`${record.id} ${record.intent} ${record.source} -> ${record.target}: ${view.lane_state}`];
          if (view.submitted_via !== null) lines.push(`  submitted via ${view.submitted_via}`);
          if (record.duplicateOf !== null) lines.push(`  repeats ${record.duplicateOf} (same idempotency key and request): its receipts answer this message`);
          record.attempts.forEach((attempt, index) => {
            lines.push(`  attempt ${attempt.number} ${attempt.attemptId}: ${attempt.claim === null ? 'unclaimed' : `claimed by ${attempt.claim.runner}`}, ${attempt.receipt === null ? 'no receipt yet' : `${attempt.receipt.status}${attempt.receipt.blockers.length > 0 ? ` (${attempt.receipt.blockers.join(', ')})` : ''} ${attempt.receipt.path}`}`);
            for (const warning of receiptWarnings(view.attempts[index]?.receipt?.document)) lines.push(`    warning ${warning}: ${warningMeaning(warning)}`);
          });
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
