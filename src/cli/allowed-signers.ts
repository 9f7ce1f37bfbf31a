import type { Command } from 'commander';
import { allowedSigners } from '../audit/allowed-signers.js';
import { Ledger } from '../ledger/ledger.js';
import { ledgerOption, required } from './common.js';

export function allowedSignersVerb(program: Command): void {
  program
    .command('allowed-signers')
    .description('print the allowed-signers file for git verify-commit / git log --show-signature / ssh-keygen -Y verify')
    .addOption(ledgerOption())
    .action(async (opts: { ledger?: string }) => {
      const ledger = Ledger.open(required(opts.ledger, '--ledger', 'the ledger path or $COO_LEDGER'));
      try {
        process.stdout.write(allowedSigners(await ledger.state()));
      } finally {
        ledger.close();
      }
    });
}
