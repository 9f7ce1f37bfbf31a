import type { Command } from 'commander';
import { readAsset } from '../assets.js';
import { CooError } from '../errors.js';
import { layGithubWorkflow } from '../ledger/forge-workflow.js';
import { emit, jsonOption, ledgerOption, loadPrivateKey, now, pinnedKeyId, required } from './common.js';
import { remoteJson, remoteOption, remoteText, writeLedger } from './remote-option.js';

/** This package at its own version: what the check installs unless told otherwise. */
function ownPackage(): string {
  const manifest = JSON.parse(readAsset('package.json').toString('utf8')) as { name: string; version: string };
  return `${manifest.name}@${manifest.version}`;
}

export function forgeVerb(program: Command): void {
  program
    .command('forge')
    .description("lay or replace the ledger's check on a forge with no pre-receive hook: for github, .github/workflows/coo-verify.yml, which runs coo verify from the pinned trust root on every push to main; signed by the CEO, the only one whose version the validator accepts")
    .argument('<forge>', 'github')
    .addOption(ledgerOption())
    .option('--ceo-key <file>', 'a private key of the trust root in force')
    .option('--package <spec>', 'what the check installs: NAME@X.Y.Z, or a .tgz by https:// URL or absolute path (default: this coo, NAME@VERSION)')
    .option('--trust-root <pub-or-fingerprint>', "the CEO key the ledger's first trust root must name, written into the check (default: the --ceo-key's)")
    .addOption(remoteOption())
    .addOption(jsonOption())
    .action(async (forge: string, opts: { ledger?: string; ceoKey?: string; package?: string; trustRoot?: string; remote?: string; json?: boolean }) => {
      if (forge !== 'github') throw new CooError('USAGE', `forge takes github, got ${JSON.stringify(forge)}`);
      const gitdir = required(opts.ledger, '--ledger', 'the ledger path or $COO_LEDGER');
      const key = loadPrivateKey(required(opts.ceoKey, '--ceo-key', 'a trust-root private key'));
      const pins = { packageSpec: opts.package ?? ownPackage(), trustRoot: opts.trustRoot === undefined ? key.publicKey.keyId : pinnedKeyId(opts.trustRoot).keyId };
      const { result, remote } = await writeLedger(gitdir, opts.remote, (ledger) => layGithubWorkflow(ledger, pins, key, now()));
      emit(
        opts.json,
        { path: result.path, changed: result.changed, commit: result.commit, seq: result.seq, package: pins.packageSpec, trust_root: pins.trustRoot, ...remoteJson(remote) },
        () =>
          result.changed
            ? `laid ${result.path} in ${result.commit} (Ledger-Seq ${result.seq}): installs ${pins.packageSpec}, verifies from ${pins.trustRoot}${remoteText(remote)}`
            : `${result.path} is already this version (head ${result.commit}, Ledger-Seq ${result.seq}); nothing written`,
      );
    });
}
