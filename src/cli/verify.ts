import { lstatSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { Command } from 'commander';
import { checkpointFile, defaultAuditDir } from '../audit/checkpoint.js';
import { otherRefsNote, verifyLedger } from '../audit/verify.js';
import { CooError, type Finding } from '../errors.js';
import { emit, GENESIS_HELP, genesisFlag, jsonOption, ledgerOption, packingNote, pinnedKeyId, required } from './common.js';
import { markRejected } from './outcome.js';
import { createProgress } from './progress.js';
import { writeErr } from './terminal.js';

/** Findings printed for a human; --json prints every one. */
const SHOWN = 50;

export function formatFinding(finding: Finding): string {
  const at = [finding.commit === undefined ? null : finding.commit.slice(0, 12), finding.path].filter((part) => part != null).join(' ');
  return `  ${finding.code}${at === '' ? '' : ` [${at}]`}: ${finding.message}`;
}

/** What to do about a damaged ledger, in commands an operator can paste: where it was last whole, and how to go back there. */
function repairAdvice(gitdir: string, head: string, last: { readonly commit: string; readonly seq: number } | null, headSeq: number): string {
  if (last === null) return 'no commit of this history replays clean, not even the first: it is not a ledger of this trust root; start again from a copy you trust';
  return [
    `the last valid commit is ${last.commit} (Ledger-Seq ${last.seq}); the ${headSeq - last.seq} commit(s) after it are not the ledger's, and no coo writer builds on them.`,
    `To repair: keep them for review (git --git-dir ${gitdir} branch damaged ${head}), move main back (git --git-dir ${gitdir} update-ref refs/heads/main ${last.commit} ${head}), then run coo verify again`,
  ].join(' ');
}

export function verifyVerb(program: Command): void {
  program
    .command('verify')
    .description('replay the ledger from its trust root and report every finding (exit 3 if any); incremental from the last verified head')
    .addOption(ledgerOption())
    .option('--full', 'replay everything from genesis, ignoring the last verified head')
    .option('--state-dir <dir>', 'where the last verified head is kept (default ~/.local/state/coo-commons/verified)')
    .option('--no-checkpoint', 'neither read nor write the last verified head')
    .option('--trust-root <pub-or-fingerprint>', "the CEO public key file, or its SHA256:... fingerprint, that the ledger's first trust root must name (a later root's key is refused, with the key to pin; a first-root key since rotated out or revoked is named as such)")
    .option('--genesis <commit>', GENESIS_HELP)
    .addOption(jsonOption())
    .action(async (opts: { ledger?: string; full?: boolean; stateDir?: string; checkpoint: boolean; trustRoot?: string; genesis?: string; json?: boolean }) => {
      const gitdir = resolve(required(opts.ledger, '--ledger', 'the ledger path or $COO_LEDGER'));
      const genesis = genesisFlag(opts.genesis);
      if (opts.checkpoint && opts.stateDir !== undefined) refuseNonFolder(opts.stateDir);
      const progress = createProgress('verifying', 'commits', opts.json === true);
      const report = await progress.until(verifyLedger(gitdir, {
        ...(opts.checkpoint ? { checkpointFile: checkpointFile(opts.stateDir ?? defaultAuditDir(), gitdir) } : {}),
        ...(opts.full === true ? { full: true } : {}),
        ...(opts.trustRoot === undefined ? {} : { trustRoot: pinnedKeyId(opts.trustRoot) }),
        ...(genesis === undefined ? {} : { genesis }),
        now: new Date(),
        onProgress: progress.update,
      }));
      if (report.findings.length > 0) markRejected();
      const repair = report.firstInvalid === null || report.head === null ? null : repairAdvice(gitdir, report.head, report.firstInvalid.lastValid, report.seq);
      const notes = [...report.notes, otherRefsNote(report.otherRefs), packingNote(gitdir)].filter((note) => note !== null);
      if (opts.json !== true) for (const note of notes) writeErr(`note: ${note}\n`);
      emit(
        opts.json,
        { ok: report.findings.length === 0, genesis: report.state.genesis, head: report.head, seq: report.seq, commits: report.commits, replayed: report.replayed, incremental: report.incremental, findings: report.findings, notes, other_refs: report.otherRefs, last_valid: report.firstInvalid?.lastValid ?? null, repair },
        () => {
          const scope = report.incremental ? `${report.replayed} new commit(s) since the last verified head` : `${report.commits} commits from genesis`;
          const head = `head ${report.head ?? '(none)'} at Ledger-Seq ${report.seq}`;
          if (report.findings.length === 0) return `ok: ${scope}, ${head}; every signature, signer, path, sequence and hash checks out`;
          const shown = report.findings.slice(0, SHOWN).map(formatFinding);
          const more = report.findings.length > SHOWN ? [`  ... and ${report.findings.length - SHOWN} more (all of them with --json)`] : [];
          return [`FAILED: ${report.findings.length} finding(s); ${scope}, ${head}`, ...shown, ...more, ...(repair === null ? [] : [repair])].join('\n');
        },
      );
    });
}

/**
 * `--state-dir` names a folder (made when missing): a file there, or at a folder above it, is the
 * operator's path gone wrong (USAGE, exit 2), not a checkpoint to put back or remove.
 */
function refuseNonFolder(stateDir: string): void {
  for (let at = resolve(stateDir); ; at = dirname(at)) {
    let there;
    try {
      there = lstatSync(at, { throwIfNoEntry: false });
    } catch {
      // ENOTDIR: a file at a folder above it, found as the walk goes up
      there = undefined;
    }
    if (there !== undefined) {
      if (there.isDirectory() || (there.isSymbolicLink() && statSync(at, { throwIfNoEntry: false })?.isDirectory() === true)) return;
      throw new CooError('USAGE', `--state-dir ${stateDir}: ${at} is not a folder: give the folder where coo verify keeps the head it last verified (made when missing), or --no-checkpoint`);
    }
    if (dirname(at) === at) return;
  }
}
