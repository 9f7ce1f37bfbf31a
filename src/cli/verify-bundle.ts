import type { Command } from 'commander';
import { LIMITS } from '../limits.js';
import { verifyBundle } from '../audit/bundle-verify.js';
import { emit, genesisFlag, jsonOption, loadPublicKey, readInput } from './common.js';

export function verifyBundleVerb(program: Command): void {
  program
    .command('verify-bundle')
    .description('check an evidence bundle (coo cite --bundle) with no access to the ledger; exit 3 if any byte of it fails')
    .argument('<file>', 'the bundle (a tar archive)')
    .option('--trust-root <pub>', 'the CEO public key you trust: the bundle\'s trust root version 1 must list it')
    .option('--genesis <commit>', "the ledger the evidence must come from: its genesis commit (git rev-list --max-parents=0 main, or genesis in coo verify --json)")
    .addOption(jsonOption())
    .action((file: string, opts: { trustRoot?: string; genesis?: string; json?: boolean }) => {
      const pinned = opts.trustRoot === undefined ? undefined : loadPublicKey(opts.trustRoot);
      const genesis = genesisFlag(opts.genesis);
      const report = verifyBundle(readInput(file, 'bundle', LIMITS.bundleBytes), { ...(pinned === undefined ? {} : { trustRoot: pinned }), ...(genesis === undefined ? {} : { genesis }) });
      emit(opts.json, { ok: true, ...report }, () =>
        [
          `ok: ${report.receiptPath} (${report.status}) of ${report.messageId}, in commit ${report.commit} at Ledger-Seq ${report.seq}, signed by ${report.signer.actor} ${report.signer.keyId}`,
          report.pinned
            ? `trust root pinned: ${report.rootKeys.join(', ')}`
            : `trust root NOT pinned: it lists ${report.rootKeys.join(', ')}; compare with the CEO key you know, or pass --trust-root`,
          report.ledger === null
            ? 'ledger NOT named: an older bundle, which does not say which ledger it comes from'
            : report.ledgerPinned
              ? `ledger pinned: genesis ${report.ledger}`
              : `ledger NOT pinned: genesis ${report.ledger}; compare with the ledger you expect, or pass --genesis`,
          report.attachments === null
            ? "attachments NOT checked: an older bundle, which does not carry what the receipt names by hash; cite the message again from the ledger (coo cite --bundle) to check them"
            : `attachments: ${report.attachments} file(s) the receipt names by hash, each matching it`,
        ].join('\n'),
      );
    });
}
