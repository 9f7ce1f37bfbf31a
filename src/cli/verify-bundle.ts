import type { Command } from 'commander';
import { verifyBundle } from '../audit/bundle.js';
import { emit, jsonOption, loadPublicKey, readInput } from './common.js';

export function verifyBundleVerb(program: Command): void {
  program
    .command('verify-bundle')
    .description('check an evidence bundle (coo cite --bundle) with no access to the ledger; exit 3 if any byte of it fails')
    .argument('<file>', 'the bundle (a tar archive)')
    .option('--trust-root <pub>', 'the CEO public key you trust: the bundle\'s trust root version 1 must list it')
    .addOption(jsonOption())
    .action((file: string, opts: { trustRoot?: string; json?: boolean }) => {
      const pinned = opts.trustRoot === undefined ? undefined : loadPublicKey(opts.trustRoot);
      const report = verifyBundle(readInput(file, 'bundle'), pinned === undefined ? {} : { trustRoot: pinned });
      emit(opts.json, { ok: true, ...report }, () =>
        [
          `ok: ${report.receiptPath} (${report.status}) of ${report.messageId}, in commit ${report.commit} at Ledger-Seq ${report.seq}, signed by ${report.signer.actor} ${report.signer.keyId}`,
          report.pinned
            ? `trust root pinned: ${report.rootKeys.join(', ')}`
            : `trust root NOT pinned: it lists ${report.rootKeys.join(', ')}; compare with the CEO key you know, or pass --trust-root`,
        ].join('\n'),
      );
    });
}
