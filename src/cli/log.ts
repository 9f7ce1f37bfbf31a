import type { Command } from 'commander';
import { Ledger } from '../ledger/ledger.js';
import { readLog } from '../ledger/log.js';
import { emit, jsonOption, ledgerOption, required, wholeNumber } from './common.js';

export function logVerb(program: Command): void {
  program
    .command('log')
    .description('list the newest ledger commits: sequence, signer, summary and the files each added')
    .addOption(ledgerOption())
    .option('-n, --limit <n>', 'how many commits', '20')
    .addOption(jsonOption())
    .action(async (opts: { ledger?: string; limit: string; json?: boolean }) => {
      const limit = wholeNumber(opts.limit, '--limit', 'a whole number of commits')!;
      const ledger = Ledger.open(required(opts.ledger, '--ledger', 'the ledger path or $COO_LEDGER'));
      try {
        const entries = await readLog(ledger.reader, ledger.trees, ledger.head(), await ledger.state(), limit);
        emit(opts.json, entries, () =>
          entries
            .map((entry) =>
              [`#${entry.seq ?? '?'} ${entry.commit.slice(0, 12)} ${entry.time} ${entry.signer?.actor ?? entry.signer?.keyId ?? 'unsigned'}: ${entry.summary}`, ...entry.files.map((file) => `    ${file}`)].join('\n'),
            )
            .join('\n'),
        );
      } finally {
        ledger.close();
      }
    });
}
