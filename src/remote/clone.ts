import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { CooError, type Finding } from '../errors.js';
import { verifyLedger } from '../audit/verify.js';
import { installHook, LEDGER_CONFIG, requireNewLedgerPath } from '../ledger/init.js';
import { checkFetchBytes, checkTimeLimitMs, LIMITS } from '../limits.js';
import { displayUrl } from '../util/display-url.js';
import { runGit } from '../util/exec.js';
import { ownedPrefix, removeOrphans } from '../util/owned-folders.js';
import { CLONE_FETCH_REFSPEC, DEFAULT_LIMIT_NAME, dropUnnamed, exactRef, gitSaid, mainNotACommit, ORIGIN_REF, receivedAmiss, requireBareRemote, runRemoteGit, unnamedObjects, unreachable, VERIFIED_REF } from './git-remote.js';

export interface CloneOptions {
  /** Anything `git clone` takes: ssh://, https://, a path. */
  readonly url: string;
  readonly gitdir: string;
  /** The CEO key (its SHA256 fingerprint) the ledger's first trust root must name, pinned by the user. */
  readonly trustRoot: { readonly keyId: string };
  /** The genesis commit the ledger must have, pinned by the user: another ledger under the same keys is refused. */
  readonly genesis?: string;
  readonly now: Date;
  /** The time limit of the clone (and of the look that explains a failed one), in ms; LIMITS.remoteGitMs by default. */
  readonly timeoutMs?: number;
  /** The limit's name in messages (the flag that set it). */
  readonly limitName?: string;
  /** The most the clone may bring, in bytes (default LIMITS.remoteFetchBytes, the bound of one fetch). */
  readonly maxFetchBytes?: number;
}

export interface CloneResult {
  readonly gitdir: string;
  /** The ledger's genesis commit, as verified. */
  readonly genesis: string | null;
  readonly head: string | null;
  readonly seq: number;
  readonly commits: number;
  /** Findings that say nothing against the history (an expired heartbeat: the remote's runners are quiet). */
  readonly notes: readonly Finding[];
  /** What the pinned key is now, when it anchors the ledger but no longer holds (rotated out or revoked). */
  readonly trustRootNote: string | null;
}

/** Findings about liveness, not about what the history holds: reported, never a reason to refuse a clone. */
const LIVENESS = new Set(['HEARTBEAT_EXPIRED']);

/**
 * Makes a local working ledger of a remote one: stock git clones `main` alone into a folder beside
 * the target, the whole history is replayed through the validator from the pinned trust root, and
 * only then is the folder moved into place, configured as `coo init` configures a ledger and with
 * its pre-receive hook. A history that does not verify leaves nothing behind, nor does a remote that
 * sends more than one fetch takes: the clone is stopped there. The folder is named for this process
 * (util/owned-folders.ts): one a clone killed before it finished left is removed by the next clone
 * to that place.
 */
export async function cloneLedger(options: CloneOptions): Promise<CloneResult> {
  checkTimeLimitMs(options.timeoutMs, 'cloneLedger');
  checkFetchBytes(options.maxFetchBytes, 'cloneLedger');
  const gitdir = resolve(options.gitdir);
  requireNewLedgerPath(gitdir);
  requireBareRemote(options.url, 'a clone of it');
  fs.mkdirSync(dirname(gitdir), { recursive: true });
  const beside = `.${basename(gitdir)}.clone-`;
  removeOrphans(dirname(gitdir), beside);
  const temp = join(dirname(gitdir), `${ownedPrefix(beside)}${randomBytes(4).toString('hex')}`);
  try {
    await fetchClone(options, temp);
    // `git clone --branch main` takes a tag named main too: only the remote's branch main is a ledger to verify.
    // Exit 1 and no words: no such ref; any other failure is this machine's git, and is said as such.
    const head = (
      await runGit(['--git-dir', temp, 'rev-parse', '--verify', '--quiet', 'refs/heads/main']).catch((error: Error) => {
        if ((error.cause as { code?: unknown } | undefined)?.code === 1) return Buffer.alloc(0);
        throw error;
      })
    )
      .toString('utf8')
      .trim();
    if (head === '') {
      throw new CooError('REMOTE_MAIN_MISSING', `${displayUrl(options.url)} answers but has no main (refs/heads/main) to clone; nothing was cloned`);
    }
    // What it names is a commit, and what came is its history alone, whole: the sync's one check and its words.
    const amiss = await unnamedObjects({ gitdir: temp }, head);
    if (amiss?.kind === 'notACommit') throw mainNotACommit(displayUrl(options.url), head, amiss.type, 'nothing was cloned');
    if (amiss?.kind === 'unnamed') throw receivedAmiss(displayUrl(options.url), head, amiss.said, 'nothing was cloned');
    // The tags that came beside main's history (git's clone asks for them whatever --no-tags says) go before anything else.
    if (amiss?.kind === 'tags') {
      await dropUnnamed(temp).catch((error: unknown) => {
        throw new CooError('GIT_FAILED', `cannot drop the tags git fetched beside the history of ${displayUrl(options.url)}'s main (git repack: ${error instanceof Error ? error.message : String(error)}); nothing was cloned`);
      });
      // What git left (a pack it keeps, a loose object) is checked as what came was: nothing beside main's history.
      const left = await unnamedObjects({ gitdir: temp }, head);
      if (left !== null) throw receivedAmiss(displayUrl(options.url), head, left.kind === 'unnamed' ? left.said : `${left.kind === 'tags' ? left.count : 1} object(s) git kept after the tags beside the history were dropped`, 'nothing was cloned');
    }
    for (const [key, value] of LEDGER_CONFIG) await runGit(['--git-dir', temp, 'config', key, String(value)]);
    // Fetches keep the remote's main apart from the local one, which moves only after verification.
    await runGit(['--git-dir', temp, 'config', 'remote.origin.fetch', CLONE_FETCH_REFSPEC]);
    const report = await verifyLedger(temp, { full: true, untilInvalid: true, trustRoot: options.trustRoot, ...(options.genesis === undefined ? {} : { genesis: options.genesis }), now: options.now });
    const refusals = report.findings.filter((finding) => !LIVENESS.has(finding.code));
    if (refusals.length > 0) {
      const first = refusals[0]!;
      throw new CooError(first.code, `the history of ${displayUrl(options.url)} does not verify (${refusals.length} finding(s), first at ${first.commit?.slice(0, 12) ?? 'the history'}): ${first.message}; nothing was cloned`, { findings: refusals });
    }
    installHook(temp);
    // The remote's head as verified: a later fetch that finds main gone back from it is a rollback (publish.ts).
    if (report.head !== null) for (const ref of [ORIGIN_REF, VERIFIED_REF]) await runGit(['--git-dir', temp, 'update-ref', ref, report.head]);
    if (fs.existsSync(gitdir)) fs.rmdirSync(gitdir);
    fs.renameSync(temp, gitdir);
    return { gitdir, genesis: report.state.genesis, head: report.head, seq: report.seq, commits: report.commits, notes: report.findings.filter((finding) => LIVENESS.has(finding.code)), trustRootNote: report.notes[0] ?? null };
  } catch (error) {
    fs.rmSync(temp, { recursive: true, force: true });
    throw error;
  }
}

/**
 * Stock git's clone of `main` alone, within a time limit and without prompts (git-remote.ts). A
 * clone that fails is explained by a look at the remote: one that answers but has no main is a
 * finding about it (REMOTE_MAIN_MISSING), one that does not answer is REMOTE_UNREACHABLE. `--branch
 * main` names refs/heads/main exactly: a branch that merely ends in that name is never cloned. No
 * tag ref comes with it (`--no-tags`): tags point into main's history with words no actor need have
 * signed, and coo verify does not judge them. git 2.39's clone still fetches the annotated tag
 * objects (include-tag); cloneLedger drops them (git-remote.ts dropUnnamed).
 */
async function fetchClone(options: CloneOptions, temp: string): Promise<void> {
  const limits = { ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }), limitName: options.limitName ?? DEFAULT_LIMIT_NAME };
  const url = displayUrl(options.url);
  const cloned = await runRemoteGit(['clone', '--bare', '--quiet', '--no-local', '--no-tags', '--single-branch', '--branch', 'main', '--', options.url, temp], { ...limits, maxReceivedBytes: options.maxFetchBytes ?? LIMITS.remoteFetchBytes, into: temp });
  if (cloned.ok) return;
  if (cloned.tooLarge !== undefined) throw new CooError('REMOTE_UNVERIFIED', `${url} sent more for its main than one fetch takes: ${cloned.tooLarge}; nothing was cloned; a ledger that large is cloned with a higher --max-fetch (MiB)`);
  if (cloned.timedOut !== null) throw new CooError('REMOTE_UNREACHABLE', `cannot clone ${url}: ${gitSaid(cloned)}; nothing was cloned`);
  const looked = await runRemoteGit(['ls-remote', '--quiet', '--', options.url, 'refs/heads/main'], { ...limits, onlyRef: 'refs/heads/main' });
  if (!looked.ok) throw unreachable(cloned, (said) => `cannot clone ${url}: ${said}; nothing was cloned`);
  if (exactRef(looked.stdout, 'refs/heads/main') === null) throw new CooError('REMOTE_MAIN_MISSING', `${url} answers but has no main (refs/heads/main) to clone; nothing was cloned`);
  throw new CooError('GIT_FAILED', `cannot clone ${url}: ${gitSaid(cloned)}; nothing was cloned`);
}
