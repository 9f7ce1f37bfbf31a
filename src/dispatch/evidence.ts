import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import { join } from 'node:path';
import type { PrivateKey } from '../crypto/keys.js';
import { GIT_NAMESPACE, signSshsig } from '../crypto/sshsig.js';
import { formatIdent, renderCommitPayload, renderSignedCommit } from '../ledger/commit-format.js';
import { CatFileReader, ObjectWriter } from '../ledger/object-store.js';
import { LIMITS } from '../limits.js';
import { bwrapArgs, findBwrap, killGroup, resolveIsolation, type Repository } from '../util/bubblewrap.js';
import { trackGroup } from '../util/children.js';
import { machineMonotonic } from '../util/process.js';
import { endMarked, newRunMarks, notePipes, RUN_MARK_VARIABLE } from '../util/leftovers.js';
import { readBlobs } from './checkout.js';
import { baseIgnoreRules, type IgnoreRules } from './ignore-rules.js';
import { fsckRefusals } from './git-fsck.js';
import { attributesFiles, attributesRefusals, checkoutAttributeChanges, filteredChanges } from './checkout-attributes.js';
import type { EvidenceSummary } from './outcome.js';
import { outOfScope } from '../authority/scope.js';
import { snapshotWork, trackedOf, type WorkSnapshot } from './snapshot.js';
import type { TreeFile } from './git-tree.js';
import { keyOf, shownPath, walkWork } from './work-walk.js';
import { checkoutCommit, gitLinkChanged, listTree, removeWorktree, safeGit, type AttemptWorktree } from './worktree.js';
import { sandboxFellText, standingCommand, untilSandboxStands, type SandboxStart } from '../util/sandbox-start.js';

/**
 * Evidence the COO gathers itself after the EA exits: the work read from the worktree by the
 * runner (snapshot.ts), its check against the dispatch's scope, a COO-signed commit of exactly
 * those bytes, and the verification commands run by the COO on a fresh checkout of that commit,
 * each in a home made for it then. Nothing here runs in, or reads through git from, the folder
 * the EA had.
 */

export type { ChangedFile, WorkSnapshot } from './snapshot.js';

export interface ScopeCheck {
  readonly outOfScope: readonly string[];
  /** Links, special files, `.git` entries, names the ledger cannot record: never accepted as work. */
  readonly notRegular: readonly string[];
}

/** Which changes fall outside the scope (scope.ts), and which entries are not work at all. */
export function checkScope(snapshot: Pick<WorkSnapshot, 'changes' | 'refused'>, scope: readonly string[]): ScopeCheck {
  return {
    outOfScope: outOfScope(snapshot.changes.map((change) => change.path), scope),
    notRegular: snapshot.refused.filter((entry) => entry.why !== 'too_large').map((entry) => entry.path),
  };
}

export interface VerificationResult {
  readonly command: string;
  readonly exitCode: number | null;
  readonly killedByTimer: boolean;
  /** stdout and stderr as they came, up to the bound. */
  readonly output: Buffer;
  readonly outputOverflow: boolean;
  readonly elapsedMs: number;
}

export interface VerificationOptions {
  readonly timeoutSeconds: number;
  readonly maxOutputBytes?: number;
  /** Under bubblewrap: the checkout and the home writable, these hidden, and no network but a loopback of its own. */
  readonly isolation: 'bwrap' | 'none';
  /** A folder made for this command alone, after the agent exited: its HOME and TMPDIR. */
  readonly home: string;
  readonly hide: readonly string[];
  readonly repository?: Repository;
}

/**
 * Runs one verification command with `sh -c` in `cwd`, in its own process group, under our timer.
 * Under bubblewrap it has no network: a loopback of its own, and neither the host's ports nor the
 * internet (`--isolation none` gives no such guarantee). A sandbox that did not stand ran nothing and
 * is set up again (util/sandbox-start.ts); one that never stands is a failed command that says so.
 */
export async function runVerification(cwd: string, command: string, options: VerificationOptions): Promise<VerificationResult> {
  // Asked for bubblewrap, a verification never runs without it (it was checked at start; this is a bubblewrap that went away).
  const bwrap = options.isolation === 'bwrap' ? findBwrap() : null;
  if (options.isolation === 'bwrap' && bwrap === null) resolveIsolation('bwrap');
  if (bwrap === null) return (await startVerification(cwd, command, options, null)).result;
  const { run, tries, fell } = await untilSandboxStands(() => startVerification(cwd, command, options, bwrap), (one) => one);
  if (!fell) return run.result;
  return { ...run.result, output: Buffer.concat([Buffer.from(`${sandboxFellText(tries, run.result.output.toString('utf8'))}\n`), run.result.output]) };
}

/** One start of a verification command: under bubblewrap, its sandbox planned now (the folders it hides listed now). */
function startVerification(cwd: string, command: string, options: VerificationOptions, bwrap: string | null): Promise<SandboxStart & { readonly result: VerificationResult }> {
  const home = options.home;
  const argv = bwrap === null ? ['/bin/sh', '-c', command] : [...bwrapArgs(bwrap, { writable: [cwd, home], hide: options.hide, chdir: cwd, ownPids: true, noNetwork: true, ...(options.repository === undefined ? {} : { repository: options.repository }) }), ...standingCommand(['/bin/sh', '-c', command])];
  // Marked, so that what the command left running out of its group is ended with it (util/leftovers.ts).
  const marks = newRunMarks();
  const env = { PATH: [process.execPath.replace(/\/[^/]+$/, ''), '/usr/local/bin', '/usr/bin', '/bin'].join(':'), HOME: home, TMPDIR: home, LANG: 'C.UTF-8', NO_COLOR: '1', GIT_CONFIG_NOSYSTEM: '1', [RUN_MARK_VARIABLE]: marks.mark };
  const bound = options.maxOutputBytes ?? LIMITS.subprocessOutputBytes;
  const started = machineMonotonic();
  return new Promise((resolvePromise) => {
    const chunks: Buffer[] = [];
    let kept = 0;
    let overflow = false;
    let killedByTimer = false;
    // Under bubblewrap, fd 3 is the pipe the shell inside says on that the sandbox stands.
    const child = spawn(argv[0]!, argv.slice(1), { cwd, env, detached: true, stdio: ['ignore', 'pipe', 'pipe', bwrap === null ? 'ignore' : 'pipe'] });
    notePipes(marks, child);
    let stood = bwrap === null;
    child.stdio[3]?.on('data', () => (stood = true));
    const untrack = trackGroup(child.pid);
    const timer = setTimeout(() => {
      killedByTimer = true;
      if (child.pid !== undefined) killGroup(child.pid);
      endMarked(marks);
    }, options.timeoutSeconds * 1000);
    const take = (chunk: Buffer): void => {
      const room = bound - kept;
      if (chunk.length > room) overflow = true;
      if (room <= 0) return;
      const part = chunk.subarray(0, room);
      chunks.push(part);
      kept += part.length;
    };
    child.stdout!.on('data', take);
    child.stderr!.on('data', take);
    child.on('exit', () => {
      if (child.pid !== undefined) killGroup(child.pid);
      endMarked(marks);
    });
    let settled = false;
    const finish = (exitCode: number | null, signal: string | null, startError?: string): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      endMarked(marks);
      untrack();
      if (startError !== undefined) take(Buffer.from(startError));
      const result = { command, exitCode: killedByTimer ? null : exitCode, killedByTimer, output: Buffer.concat(chunks), outputOverflow: overflow, elapsedMs: Math.round(machineMonotonic() - started) };
      resolvePromise({ result, stood, exitedByItself: exitCode !== null && signal === null && !killedByTimer && startError === undefined });
    };
    child.on('error', (error) => finish(null, null, `cannot start the verification: ${error.message}`));
    child.on('close', (code, signal) => finish(code, signal));
  });
}

export interface AttemptCommitOptions {
  readonly key: PrivateKey;
  /** The signer's name in the commit's identity (the COO actor). */
  readonly actor: string;
  readonly attemptId: string;
  readonly summary: string;
  readonly now: Date;
}

/**
 * Writes the commit of `tree` over the base, signed by the COO in git's SSH format (the ledger's
 * rendering and signer), into the target's objects. No branch moves here: the branch gets it only
 * once a receipt names it (landAttemptCommit).
 */
export async function commitAttempt(worktree: Pick<AttemptWorktree, 'gitdir' | 'base'>, tree: string, options: AttemptCommitOptions): Promise<string> {
  const ident = formatIdent(options.actor.replace(/[<>\n]/g, ''), options.key.publicKey.keyId, Math.floor(options.now.getTime() / 1000));
  const summary = options.summary.replace(/[\r\n]+/g, ' ').trim().slice(0, 200) || 'Work of the attempt';
  const fields = { tree, parents: [worktree.base], author: ident, committer: ident, message: `${summary}\n\nCoo-Attempt: ${options.attemptId}\n` };
  const raw = renderSignedCommit(fields, signSshsig(options.key, renderCommitPayload(fields), GIT_NAMESPACE));
  return new ObjectWriter(worktree.gitdir, -1).write('commit', raw);
}

/** What the attempt's branch points at now, or null when it is gone. */
export async function branchHead(worktree: Pick<AttemptWorktree, 'gitdir' | 'branch'>): Promise<string | null> {
  const out = await safeGit([`--git-dir=${worktree.gitdir}`, 'for-each-ref', '--format=%(objectname)', `refs/heads/${worktree.branch}`]);
  return out.toString('utf8').trim() || null;
}

/**
 * Moves the attempt's branch from the base to the commit a receipt names: a compare-and-swap, so a
 * branch someone else moved meanwhile is left as it is (GIT_FAILED).
 */
export async function landAttemptCommit(worktree: Pick<AttemptWorktree, 'gitdir' | 'branch' | 'base'>, head: string, attemptId: string): Promise<void> {
  await safeGit([`--git-dir=${worktree.gitdir}`, 'update-ref', '-m', `coo: ${attemptId}`, `refs/heads/${worktree.branch}`, head, worktree.base]);
}

/**
 * After a verification command: the paths where the checkout no longer holds the commit's files (a
 * command that wrote a file, removed one, or left something that is not a file), by the same
 * reading and the same ignore rules as the work itself; and `.git` when its link is not the one git
 * made (`gitLink`): a command that put another repository there had every git a later command ran
 * in the checkout (`git ls-files`, `git grep`) read that one.
 */
export async function checkoutDifferences(root: string, files: readonly TreeFile[], rules: IgnoreRules, gitLink: string): Promise<string[]> {
  const tracked = trackedOf(files);
  const walk = await walkWork({ root, rules, tracked });
  const found = new Map(walk.files.map((file) => [keyOf(file.path), file]));
  const dirty = new Set<string>();
  for (const file of walk.files) {
    const before = tracked.oids.get(keyOf(file.path));
    if (before === undefined || before.oid !== file.oid || before.mode !== file.mode) dirty.add(file.path.toString('utf8'));
  }
  for (const file of files) if (file.mode !== '160000' && !found.has(keyOf(file.path))) dirty.add(file.path.toString('utf8'));
  for (const entry of [...walk.refused, ...walk.tooLarge]) dirty.add(shownPath(entry.path));
  if (walk.overflow) dirty.add('(more than the runner reads)');
  if (gitLinkChanged(root, gitLink)) dirty.add('.git');
  return [...dirty].sort();
}

export interface GatherOptions {
  /**
   * The runner's own folder for this attempt's evidence, made after the EA exited and outside
   * anything the EA could write: the ignore rules, the checkout and each verification's home.
   */
  readonly runnerDir: string;
  readonly scope: readonly string[];
  readonly verify: readonly string[];
  /** The time box of each verification command. */
  readonly verifyTimeoutSeconds: number;
  readonly isolation: 'bwrap' | 'none';
  readonly hide: readonly string[];
  /** The repository the worktree is of: under bubblewrap its work tree is hidden from each verification, its git folder read-only. */
  readonly repository?: Repository;
  readonly commit: AttemptCommitOptions;
  /**
   * Leave the verification's checkout (`runnerDir/checkout`) in place: the runner removes it with
   * the attempt's folders once the receipt is committed, and keeps it when asked to keep sandboxes.
   */
  readonly keepCheckout?: boolean;
  /** Whether a file of the work holds a secret the runner holds or handed the agent (snapshot.ts). */
  readonly holdsSecret?: (bytes: Buffer) => boolean;
  /** Whether the runner was stopped (its operator, the kill switch): no further verification command starts. */
  readonly stopped?: () => boolean;
}

export interface GatheredEvidence {
  readonly snapshot: WorkSnapshot;
  readonly verification: readonly VerificationResult[];
  /** The commit made of the work (in the target's objects, not yet on the branch); null when there is none. */
  readonly commit: { readonly branch: string; readonly headSha: string } | null;
  /** What the decision reads (outcome.ts). */
  readonly summary: EvidenceSummary;
}

/**
 * All of the COO's evidence for one attempt, after the EA has exited: the snapshot and its scope
 * check; the commit of the snapshot; then each verification command on a fresh checkout of that
 * commit (of the base when nothing changed), each followed by the check that it left the checkout
 * as the commit has it: after one that did not, no further command runs. Work that cannot be read
 * whole is neither committed nor verified.
 */
export async function gatherEvidence(worktree: AttemptWorktree, options: GatherOptions): Promise<GatheredEvidence> {
  fs.mkdirSync(options.runnerDir, { recursive: true, mode: 0o700 });
  const reader = new CatFileReader(worktree.gitdir);
  let rules: IgnoreRules | null = null;
  try {
    const baseFiles = await listTree(worktree.gitdir, worktree.base);
    rules = await baseIgnoreRules(baseFiles, join(options.runnerDir, 'ignore'), (oids) => readBlobs(reader, oids));
    const read = await snapshotWork(worktree, {
      baseFiles,
      rules,
      objects: new ObjectWriter(worktree.gitdir, -1),
      gitRefuses: (files, folders) => fsckRefusals(worktree.gitdir, join(options.runnerDir, 'fsck'), files, folders),
      ...(options.holdsSecret === undefined ? {} : { holdsSecret: options.holdsSecret }),
    });
    const commonOf = (read: WorkSnapshot) => {
      const scope = checkScope(read, options.scope);
      return {
        changes: read.changes,
        outOfScope: scope.outOfScope,
        notRegular: read.refused.filter((entry) => entry.why !== 'too_large'),
        tooLarge: read.refused.filter((entry) => entry.why === 'too_large').map((entry) => entry.path),
        overflow: read.overflow,
        gitLinkTampered: read.gitLinkTampered,
        // Named after a secret or holding one, the work has no tree: the decision reads both alike (outcome.ts).
        holdingSecrets: [...read.holdingSecrets, ...read.namingSecrets],
      };
    };
    if (read.tree === null) {
      return { snapshot: read, verification: [], commit: null, summary: { ...commonOf(read), verification: [], commit: null, dirtyWithoutCommit: [] } };
    }
    const head = read.changes.length === 0 ? null : await commitAttempt(worktree, read.tree, options.commit);
    const checkout = await checkoutCommit({ gitdir: worktree.gitdir, commit: head ?? worktree.base, path: join(options.runnerDir, 'checkout') });
    try {
      // The verification runs on the blobs as stored; a `.gitattributes` of the work that has a stock checkout of the commit
      // write its files in a new way (checkout-attributes.ts) is not work: what passed would not be what a checkout holds.
      // One a macOS or Windows checkout or another git reads otherwise than git here is refused unjudged; so is a file of the work the
      // commit's rules give a filter: what was verified is its stored form, never what a checkout writes.
      const { judged, unjudged } = await attributesFiles(read.changes.map((change) => Buffer.from(change.path, 'utf8')), checkout.files, (oids) => readBlobs(reader, oids));
      const converted = judged.length === 0 ? [] : await checkoutAttributeChanges(baseFiles, checkout.files, judged, join(options.runnerDir, 'attributes'), (oids) => readBlobs(reader, oids));
      const written = read.changes.filter((change) => change.status !== 'deleted').map((change) => Buffer.from(change.path, 'utf8'));
      const filtered = await filteredChanges(checkout.files, written, join(options.runnerDir, 'attributes', 'filters'), (oids) => readBlobs(reader, oids));
      const refused = [
        ...[...attributesRefusals(judged, converted), ...unjudged].map((entry) => ({ path: entry.path.toString('utf8'), why: 'checkout_attributes' as const, detail: entry.detail })),
        ...filtered.map((path) => ({ path: path.toString('utf8'), why: 'filtered' as const })),
      ];
      const snapshot: WorkSnapshot = refused.length === 0 ? read : { ...read, refused: [...read.refused, ...refused] };
      const common = commonOf(snapshot);
      const verification: VerificationResult[] = [];
      let dirty: string[] = [];
      for (const [index, command] of options.verify.entries()) {
        if (options.stopped?.() === true) break;
        const home = join(options.runnerDir, `home-${index + 1}`);
        fs.mkdirSync(home, { mode: 0o700 });
        verification.push(await runVerification(checkout.path, command, { timeoutSeconds: options.verifyTimeoutSeconds, isolation: options.isolation, home, hide: options.hide, ...(options.repository === undefined ? {} : { repository: options.repository }) }));
        // Checked after each command, not once at the end: a command that changed the checkout (the agent's
        // build step rewriting the base's test script) and a later one that put it back would have had the
        // commands between run on another tree than the commit's. None runs after a change.
        dirty = await checkoutDifferences(checkout.path, checkout.files, rules, checkout.gitLink);
        if (dirty.length > 0) break;
      }
      const branchAtBase = head === null || (await branchHead(worktree)) === worktree.base;
      return {
        snapshot,
        verification,
        commit: head === null ? null : { branch: worktree.branch, headSha: head },
        summary: { ...common, verification, commit: head === null ? null : { headSha: head, branchAtBase, dirty }, ...(head === null ? { dirtyWithoutCommit: dirty } : {}) },
      };
    } finally {
      if (options.keepCheckout !== true) await removeWorktree(worktree.gitdir, checkout.path);
    }
  } finally {
    rules?.close();
    reader.close();
  }
}
