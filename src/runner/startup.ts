import { accessSync, constants, existsSync, statSync } from 'node:fs';
import { createConnection } from 'node:net';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { CooError, isCooError } from '../errors.js';
import { LIMITS } from '../limits.js';
import { describeStatus, keyStatus } from '../authority/keys.js';
import { checkEdge } from '../authority/policy-check.js';
import { laneStateOf, type LedgerState } from '../authority/state.js';
import type { OracleCli } from '../consult/oracle.js';
import type { PrivateKey } from '../crypto/keys.js';
import type { ExecutorFactory } from '../dispatch/executor.js';
import type { Ledger } from '../ledger/ledger.js';
import { AccessRefused } from '../remote/git-remote.js';
import type { RemoteLedger } from '../remote/publish.js';
import { neverHidden, probeBubblewrap, resolveIsolation, type Isolation } from '../util/bubblewrap.js';
import { runGit } from '../util/exec.js';
import { readMessage } from '../lane/envelope.js';
import { pinnedCommitOf } from '../lane/context-pin.js';
import { ADVISORY_INTENTS } from '../schema/common.js';
import { privateSocketsDir } from '../util/private-sockets.js';
import { isLedgerCommit, isLedgerGitdir } from '../lane/work-repo.js';
import { keyFolders, requireExecutableFolder, requireOwnFolder, requireRoom, requireWritableFolder } from '../util/runner-folders.js';
import { LocalRunners } from './identity.js';
import { anotherLedgerProblem, holdStateFolder, readSeenHead } from './state-folder.js';
import { consultReadiness } from '../consult/runner-lane.js';
import { dispatchReadiness } from '../dispatch/runner-lane.js';
import { toProblem, type LaneReadiness, type LaneTarget, type LocalEndpoint, type Problem } from '../lane/runner-lane.js';
import type { LoopbackAddress } from '../lane/endpoint.js';
import { displayUrl } from '../util/display-url.js';
import { realPathOr } from '../util/real-path.js';
import { planStartup, type Lane, type TargetFacts } from './readiness.js';

/**
 * Fail closed at start: everything that can be checked before a claim is checked here, once, per
 * lane, before the runner claims anything (`coo watch`, `coo mcp --run` and `coo demo` alike). The
 * repository, the COO key and the sandbox serve every lane; Oracle and each advisory agent's
 * provider key serve consults; each execution agent's executor and key serve its dispatches.
 * What the checks found is decided in readiness.ts. Once they let the runner start, it holds its
 * state folder (state-folder.ts): a runner beside which it may not share the folder refuses it.
 */

export interface StartupOptions {
  readonly ledger: Ledger;
  readonly key: PrivateKey;
  /** How the key was given (a path), for the message that refuses it. */
  readonly keyLabel: string;
  /** The repository consults pin their context in and dispatches work in. */
  readonly repo: string;
  /** The runner's state folder, where every attempt's sandbox or worktree is made after its claim. */
  readonly stateDir: string;
  readonly isolation: Isolation;
  /**
   * The remote the runner works through: the clone is brought to its verified head before the key
   * is checked, so a key revoked or rotated out there is refused at start on a clone that had not
   * fetched the change yet. An unreachable remote leaves the clone as it is (the runner starts cut off);
   * one that answers and refuses this client refuses the start (syncForStartup).
   */
  readonly remote?: Pick<RemoteLedger, 'sync' | 'url'>;
  /** Makes the consult lane's transport once the sandbox is known; absent when no consult lane runs here. */
  readonly consult?: (isolation: 'bwrap' | 'none') => OracleCli;
  /** Makes the dispatch lane's executors once the sandbox is known; absent when no dispatch lane runs here. */
  readonly dispatch?: (isolation: 'bwrap' | 'none') => ExecutorFactory;
  /**
   * The runner keeps running (a watch, `coo mcp --run`): an endpoint on this machine where nothing
   * answers yet holds its target until it answers, looked at again each pass (StartedLanes.looks),
   * and refuses no start. Absent (a single pass, --once), it holds the target for the pass.
   */
  readonly looksAgain?: boolean;
}

export interface StartedLanes {
  readonly isolation: 'bwrap' | 'none';
  readonly transport: OracleCli | null;
  readonly executors: ExecutorFactory | null;
  /** Targets whose messages stay queued and unclaimed: actor -> why. */
  readonly waiting: ReadonlyMap<string, Problem>;
  /**
   * With `looksAgain`, for each target that calls an endpoint on this machine: why nothing answers
   * there now, or null when it answers; the runner asks while the target has a message to start.
   */
  readonly looks: ReadonlyMap<string, () => Promise<Problem | null>>;
  /** What to tell the operator once, at start (target null: about every lane). */
  readonly notes: ReadonlyArray<{ readonly target: string | null; readonly text: string }>;
  /** Gives up the state folder this runner holds (state-folder.ts): called when the runner stops. */
  readonly release: () => void;
}

/**
 * Why `key` may not act as the runner (sign claims and receipts), or null when it is the active
 * COO's key in the trust files in force. A retired or revoked key is named so, from the one record
 * of each key the validator also reads (authority/keys.ts keyStatus).
 */
export function runnerKeyProblem(state: LedgerState, key: PrivateKey, label: string): Problem | null {
  const registry = state.registry?.doc ?? null;
  if (registry === null) return null;
  const keyId = key.publicKey.keyId;
  const coo = registry.active_coo;
  const status = keyStatus(state, keyId);
  if (status.status === 'active' && status.actor === coo) return null;
  const not = `${label} (${keyId}) is not the active COO's key`;
  const fix = `give ${coo}'s key (--key or $COO_KEY)`;
  if (status.status === 'active') return { code: 'RUNNER_CONFIG', message: `${not}: it is the key of ${status.actor}, and claims and receipts are ${coo}'s to sign; ${fix}` };
  return { code: 'RUNNER_CONFIG', message: `${not}: it is ${describeStatus(status)}; ${fix}` };
}

/**
 * The repository the work is for: a git repository, and not the ledger itself. Given the ledger
 * (or a folder in it), dispatches would make their worktrees and branches in the ledger's git
 * folder, beside its main, and consults pin their context in the ledger's own commits. It holds a
 * commit, and its whole history: every message pins a commit of the repository it was written for,
 * and one that holds none of its history (an empty repository, a shallow clone) would hold each
 * queued message, unclaimed, until it expired (it ended each with a stale_context receipt before the
 * runner held such messages, a mistake of the runner's blamed on the work). It is no partial clone,
 * which lacks objects the runner never fetches. Its path holds no line end.
 */
async function repoProblem(repo: string, ledgerGitdir: string): Promise<Problem | null> {
  // A worktree names its repository's git folder on one line of its .git file (dispatch/worktree.ts reads it so).
  if (/[\n\r\u2028\u2029]/.test(repo)) {
    return { code: 'RUNNER_CONFIG', message: `--repo ${JSON.stringify(repo)} holds a line end: each dispatch's worktree names the repository's git folder on one line of its .git file, so every dispatch would be claimed and fail without a worktree; give a path without one (rename the folder, or link it from one); nothing was claimed` };
  }
  let common: string;
  try {
    // Relative to the folder git ran in (`.git`, `.` in a bare repository); --path-format needs git 2.31.
    common = resolve(repo, (await runGit(['-C', repo, 'rev-parse', '--git-common-dir'])).toString('utf8').trim());
  } catch (error) {
    const owner = foreignOwner(repo, error);
    if (owner !== null) {
      return { code: 'RUNNER_CONFIG', message: `--repo ${repo} is a git repository of another user${owner}, which git refuses to work in (safe.directory): its hooks and config would run as this runner; run the runner as the user who owns it, or give a clone of it this user owns (git clone ${repo}); nothing was claimed` };
    }
    return { code: 'RUNNER_CONFIG', message: `--repo ${repo} is not a git repository: consults pin their context in it and dispatches work in it; give the repository they were written for` };
  }
  if (isLedgerGitdir(common, ledgerGitdir)) {
    return { code: 'RUNNER_CONFIG', message: `--repo ${repo} is the ledger ${ledgerGitdir}, not a repository the work is for: dispatches would make their worktrees and branches in the ledger's git folder, and consults pin their context in its commits; give the repository the consults and dispatches were written for` };
  }
  const git = async (args: string[]): Promise<string> => (await runGit(['-C', repo, ...args])).toString('utf8').trim();
  // HEAD and the repository's own refs, never `--all`: that reads every worktree's HEAD too, and a neighbour runner adds and
  // removes dispatch worktrees meanwhile (a HEAD read as it goes failed this check with a bad object).
  const head = await git(['rev-parse', '--verify', '-q', 'HEAD^{commit}']).catch(() => '');
  // A copy of the ledger (git clone LEDGER, a checkout of it) is no repository the work is for either: no queued message pins a commit
  // of it, so each would wait there, unclaimed, told to fetch what no fetch brings, until it expired.
  let copy: boolean;
  try {
    copy = head !== '' && (await isLedgerCommit(ledgerGitdir, head));
  } catch (error) {
    return toProblem(error);
  }
  if (copy) {
    return { code: 'RUNNER_CONFIG', message: `--repo ${repo} is a copy of the ledger ${ledgerGitdir} (its HEAD ${head.slice(0, 12)} is the ledger's commit; git clone of it), not a repository the work is for: every queued message pins a commit of the repository it was written for, and would wait here, unclaimed, until it expired; give that repository; nothing was claimed` };
  }
  if (head === '' && (await git(['rev-list', '-n', '1', '--branches', '--tags', '--remotes'])) === '') {
    return { code: 'RUNNER_CONFIG', message: `--repo ${repo} holds no commit: every queued message pins a commit of the repository it was written for, and each would wait here, unclaimed, until it expired; give that repository (a clone of it), or fetch its history into this one; nothing was claimed` };
  }
  // A partial clone (git clone --filter) reads what it lacks from its promisor remote, which the runner never lets git do
  // (util/git-env.ts): a commit it holds with files it lacks would end each consult pinning them stale_context, and each
  // dispatch on it without a worktree, a lack of the runner's blamed on the work.
  const promisor = (await git(['config', '--get-regexp', '^(extensions\\.partialclone|remote\\..*\\.promisor)$']).catch(() => ''))
    .split('\n')
    .find((line) => /^extensions\.partialclone /.test(line) || /^remote\..*\.promisor( (true|yes|on|1))?$/i.test(line));
  if (promisor !== undefined) {
    return { code: 'RUNNER_CONFIG', message: `--repo ${repo} is a partial clone (git clone --filter; ${promisor.split(' ')[0]}): the runner never has git fetch the objects it lacks as it reads them, so every message pinning a file it lacks would end with a stale_context receipt, blamed on the work; give a full clone (git clone without --filter); nothing was claimed` };
  }
  return null;
}

/**
 * Who owns `repo` when git refused it as another user's (git 2.35.2 and later work in no repository
 * owned by another user unless safe.directory names it): said as such, not as no repository, which
 * sent the operator looking for a repository that is there. Told by git's own words, or, in a locale
 * that translates them, by the owner of the folder or its .git when one of them is not this user.
 */
function foreignOwner(repo: string, error: unknown): string | null {
  // '' when git said so and the owner could not be read; ' (uid N)' otherwise.
  const uid = process.geteuid?.();
  let owner: number | null = null;
  for (const path of [repo, join(repo, '.git')]) {
    try {
      const found = statSync(path).uid;
      if (uid !== undefined && found !== uid) owner = found;
    } catch {
      // A path that is not there tells nothing of its owner.
    }
  }
  const said = isCooError(error) && /dubious ownership/.test(error.message);
  const gitFolder = existsSync(join(repo, '.git')) || existsSync(join(repo, 'HEAD'));
  if (!said && (owner === null || !gitFolder)) return null;
  return owner === null ? '' : ` (uid ${owner})`;
}

/**
 * A shallow `--repo` (a CI checkout's fetch-depth) runs what it holds, as a full clone does: it is
 * refused only when it lacks a commit that queued or retrying work of a lane this runner runs pins (a
 * dispatch's base, a consult's pinned commit unless its files are a snapshot the ledger stores), which
 * the runner would hold, unclaimed, until it expired (Runner.heldFor): a depth that is the operator's
 * to fix before anything runs. A full clone that lacks one starts, and holds only that message: a
 * commit really gone must not stop the runner from ever starting.
 */
async function shallowProblem(repo: string, ledger: Ledger, state: LedgerState, lanes: ReadonlySet<Lane>): Promise<Problem | null> {
  if ((await runGit(['-C', repo, 'rev-parse', '--is-shallow-repository'])).toString('utf8').trim() !== 'true') return null;
  const pins = new Map<string, string>();
  for (const record of state.messages.values()) {
    const lane: Lane | null = record.intent === 'ea_dispatch' ? 'dispatch' : ADVISORY_INTENTS.has(record.intent) ? 'consult' : null;
    if (lane === null || !lanes.has(lane) || !PENDING.has(laneStateOf(record, state.registry?.doc))) continue;
    const message = await readMessage(ledger, record);
    const commit = pinnedCommitOf(message);
    if (commit !== null && !pins.has(commit)) pins.set(commit, record.id);
  }
  if (pins.size === 0) return null;
  // One git for them all; the names go on stdin, so none is read as an option.
  const answers = (await runGit(['-C', repo, 'cat-file', '--batch-check=%(objecttype)'], undefined, [...pins.keys()].map((commit) => `${commit}^{commit}\n`).join(''))).toString('utf8').split('\n');
  const missing = [...pins].find((_, index) => answers[index] !== 'commit');
  if (missing === undefined) return null;
  const [commit, messageId] = missing;
  return { code: 'RUNNER_CONFIG', message: `--repo ${repo} is a shallow clone without ${commit}, which queued message ${messageId} pins: it would wait here, unclaimed, until it expired; run git -C ${repo} fetch --unshallow, or give a full clone; nothing was claimed` };
}

/**
 * Why the state folder may not hold this runner's dispatches: it is the target repository's git
 * folder (`--state-dir REPO/.git`), which every dispatch's sandbox and verification binds back
 * read-only over what it hides (util/bubblewrap.ts), where the state folder is hidden from every
 * sandbox elsewhere, and there the agent read it whole (the other attempts' worktrees, the journal of
 * receipts, the kept results, the runners' records). Null for any other folder; one inside the git
 * folder is hidden as any other. Asked only with bubblewrap: under `--isolation none` nothing is
 * hidden from an agent, which every receipt says (`sandbox_unenforced`), and waiting would protect nothing.
 * A state folder no sandbox hides at all (the home folder, one holding it, the root) is refused for
 * every lane (folderProblems).
 */
async function stateInSightProblem(stateDir: string, repo: string): Promise<Problem | null> {
  const common = await gitFolderOf(repo);
  if (common === null || realPathOr(stateDir) !== common) return null;
  return { code: 'RUNNER_CONFIG', message: `the runner's state folder ${stateDir} is the git folder of --repo ${repo}, which every dispatch's sandbox reads: its agent would read the state folder whole (the other attempts' worktrees, the journal, the kept results); give a --state-dir outside it (the default is one per ledger)` };
}

/** The git folder of `repo` (its common one, shared by its worktrees), by where it really is; null when it is no repository (repoProblem says so). */
async function gitFolderOf(repo: string): Promise<string | null> {
  try {
    return realPathOr(resolve(repo, (await runGit(['-C', repo, 'rev-parse', '--git-common-dir'])).toString('utf8').trim()));
  } catch {
    return null;
  }
}

/**
 * What to tell the operator when the COO key lies in a folder a sandbox cannot hide whole: the home
 * folder (or one holding it), or the target repository's git folder itself, which each dispatch's
 * sandbox binds back read-only (a folder inside it, `.git/keys`, is hidden whole on top of that bind,
 * as any other). The sandbox hides the key file alone there (util/runner-folders.ts
 * keyFolders), by a mount on the file: a new key renamed over it while a sandbox runs (`coo keygen --force`
 * writes coo.key.PID.tmp beside it and renames it over the key) is the file that sandbox then reads, and the
 * temporary file is in its sight while it exists. Said at start, not refused: the key stays hidden until it
 * is replaced. Null for a key in a folder of its own, and without bubblewrap, where nothing is hidden.
 */
async function keyInSightNote(keyPath: string, repo: string): Promise<string | null> {
  const git = await gitFolderOf(repo);
  // The folders keyFolders hides for the key (not the files it hides too), by where they really are.
  const folders = keyFolders(keyPath).map((path) => realPathOr(path)).filter((path) => statSync(path, { throwIfNoEntry: false })?.isDirectory() === true);
  const open = folders.find((folder) => neverHidden(folder) || folder === git);
  if (open === undefined) return null;
  const what = neverHidden(open) ? 'the home folder or one holding it' : "the target repository's git folder, which every dispatch's sandbox reads";
  return `the COO key ${keyPath} is in ${open}, ${what}, which no sandbox hides whole: each sandbox hides the key file alone, and a key written over it while a sandbox runs (coo keygen --force renames its new key over the file, beside which its temporary file lies meanwhile) is read there; keep the key in a folder of its own (mkdir -m 700 ~/.coo && mv ${keyPath} ~/.coo/), and give that --key`;
}

/**
 * Refuses a state folder no sandbox hides (util/bubblewrap.ts neverHidden): the home folder, one that
 * holds it, the root. Every sandbox on this machine, of this runner and of every other (each hides the
 * state folders the runners register, except such a one), would read it whole: the attempts'
 * worktrees, the journal of receipts, the kept results, the runners' records. Refused for every lane,
 * whatever the isolation: another runner's agents read it too.
 */
function requireHiddenStateFolder(stateDir: string): void {
  if (!neverHidden(stateDir)) return;
  const state = realPathOr(stateDir);
  const home = realPathOr(homedir());
  const what = state === home ? 'the home folder' : state === '/' ? 'the root folder' : `a folder that holds the home folder ${home}`;
  throw new CooError('RUNNER_CONFIG', `the runner's state folder ${stateDir} is ${what}, which no sandbox on this machine hides: every agent of this runner and of every other would read it whole (the attempts' worktrees, the journal, the kept results, the runners' records); give a --state-dir of its own (the default is one per ledger); nothing was claimed`);
}

/** The lane states of work a runner may still start an attempt of. */
const PENDING: ReadonlySet<string> = new Set(['queued', 'retry_wait', 'claimed']);

/**
 * The folders a runner writes once it runs: the ledger's (where it says who it is, and commits its
 * claims and receipts), the state folder (each attempt's sandbox or worktree) and the private
 * folder of its sockets in the temporary folder (every sandbox hides it; a dispatch's consult
 * socket and a remote's ssh connection live there). A read-only ledger or state folder, a TMPDIR
 * that names no folder, a ledger every user may write, are found here, before a claim.
 */
const WRITABLE_LEDGER = 'the runner commits its claims and receipts in the ledger; run it where the ledger is writable (a clone of it with --remote, coo clone)';

/**
 * The least room a state folder's file system must have at start: a consult's question and answer
 * at the artifact limit, and a subprocess's captured output besides. A floor, not what every attempt
 * needs: a dispatch's worktree takes as much as the repository's files, known only once it is made.
 */
const ATTEMPT_ROOM_BYTES = 2 * LIMITS.artifactBytes + LIMITS.subprocessOutputBytes;

function folderProblems(ledger: Ledger, stateDir: string): Problem[] {
  return problemsOf([
    // One problem for one cause: a ledger read-only as a whole is said once, at its folder of runners.
    () => {
      requireWritableFolder(LocalRunners.folder(ledger.gitdir), "the ledger's folder of runners", WRITABLE_LEDGER);
      requireWritableLedger(ledger.gitdir, WRITABLE_LEDGER);
    },
    () => ledger.requireClosed('RUNNER_CONFIG'),
    () => requireHiddenStateFolder(stateDir),
    () => {
      requireWritableFolder(stateDir, "the runner's state folder", "every attempt's sandbox and worktree is made there; give a writable --state-dir on a file system with room");
      requireOwnFolder(stateDir, "the runner's state folder");
      requireRoom(stateDir, "the runner's state folder", ATTEMPT_ROOM_BYTES, "every attempt's sandbox and worktree is made there; make room on it, or give a --state-dir on a file system with room; nothing was claimed");
    },
    () => privateSocketsDir(),
  ]);
}

/** Each check's refusal as a problem, every check run: a start says all that is wrong at once. */
function problemsOf(checks: ReadonlyArray<() => void>): Problem[] {
  const problems: Problem[] = [];
  for (const check of checks) {
    try {
      check();
    } catch (error) {
      problems.push(toProblem(error));
    }
  }
  return problems;
}

/**
 * What a commit needs of the ledger's folder: each object is written through a temporary file in the
 * folder of objects (probed there, where a stray file is never read as a ref), and the branch moves
 * through a lock file beside it in the folder of branches (asked of the file system, never probed:
 * a file there is a ref to a git listing them at that moment). A ledger mounted read-only, or one
 * whose folder of branches alone is, started and failed its first commit after a claim's sync.
 */
function requireWritableLedger(gitdir: string, fix: string): void {
  requireWritableFolder(join(gitdir, 'objects'), "the ledger's folder of objects", fix);
  // git makes the folder of branches when it is gone (its refs all packed and pruned): then its parent is where it goes.
  const branches = [join(gitdir, 'refs', 'heads'), join(gitdir, 'refs'), gitdir].find((dir) => existsSync(dir)) ?? gitdir;
  try {
    accessSync(branches, constants.W_OK);
  } catch (error) {
    throw new CooError('RUNNER_CONFIG', `cannot write in ${branches}, the ledger's folder of branches (${(error as NodeJS.ErrnoException).code ?? 'EIO'}): ${fix}`);
  }
}

/**
 * What `coo mcp` serving without a runner needs of the ledger's folder: it commits the agent's
 * consults, adoptions and acknowledgements there (requireWritableLedger). A ledger it cannot write
 * (a read-only volume or bind), or one every user may write (requireLedgerClosed), is refused at
 * start, as the runner's is (folderProblems): before, the server started, and every call that wrote
 * failed after, or committed where the runner beside it refused to.
 */
export function writerFolderProblems(ledger: Ledger): Problem[] {
  return problemsOf([
    () => requireWritableLedger(ledger.gitdir, 'the server commits what the agent asks for in the ledger; run it where the ledger is writable (a clone of it with --remote, coo clone)'),
    // Its every write would be refused (Ledger.append): said at start, before a request is read, as the runner's start says it.
    () => ledger.requireClosed('RUNNER_CONFIG'),
  ]);
}

/** Every target the policy in force lets the active COO consult or dispatch to, with its lane. */
function targetsOf(state: LedgerState): Array<LaneTarget & { readonly lane: Lane }> {
  const registry = state.registry?.doc;
  const policy = state.policy?.doc;
  if (registry === undefined || policy === undefined) return [];
  return registry.actors.flatMap((actor): Array<LaneTarget & { readonly lane: Lane }> => {
    const lane = actor.transport !== undefined ? 'consult' : actor.executor !== undefined ? 'dispatch' : null;
    if (lane === null) return [];
    try {
      checkEdge(registry, policy, registry.active_coo, actor.id, lane === 'consult' ? 'aa_consult' : 'ea_dispatch', 'start');
    } catch (error) {
      if (isCooError(error)) return [];
      throw error;
    }
    if (actor.transport !== undefined) return [{ actor: actor.id, lane, providerKeyEnv: actor.transport.provider_key_env, transport: actor.transport }];
    const executor = actor.executor!;
    return [{ actor: actor.id, lane, providerKeyEnv: executor.provider_key_env, executor: { kind: executor.kind, model: executor.model } }];
  });
}

/**
 * What the COO's side needs of the ledger, the key and the repository, before it writes or claims
 * anything: a trust root in the ledger (an empty repository coo init never made holds no COO to act
 * as, and never will get one by itself), the active COO's key, and a repository the work is for
 * (repoProblem). The runner's start checks them (startLanes), and so does `coo mcp` serving without
 * a runner, which signs the agent's consults with that key and pins them in that repository: started
 * on an empty ledger or a mistyped --repo it served, and every call the agent made failed after.
 */
export async function servingProblems(state: LedgerState, options: Pick<StartupOptions, 'ledger' | 'key' | 'keyLabel' | 'repo'>): Promise<Problem[]> {
  const problems: Problem[] = [];
  if (state.registry === null) {
    problems.push({ code: 'RUNNER_CONFIG', message: `${options.ledger.gitdir} holds no trust root (no commit): it is not a ledger coo init made or coo clone verified, so no key may act as its runner; give the ledger's path (--ledger or $COO_LEDGER), or make one with coo init` });
  }
  const keyProblem = runnerKeyProblem(state, options.key, options.keyLabel);
  if (keyProblem !== null) problems.push(keyProblem);
  const repo = await repoProblem(options.repo, options.ledger.gitdir);
  if (repo !== null) problems.push(repo);
  return problems;
}

/**
 * Brings a clone to its remote's verified head before anything is judged on it (a COO key revoked or
 * rotated in on the remote counts at once); a remote that cannot be reached now leaves the clone as it
 * is (the runner starts cut off, and catches up when the network is back). A remote that answers and
 * refuses this client (remote/git-remote.ts, refusedAccess) is no network fault that passes: a wrong
 * key or token, an unknown host key or a wrong path, refused at start (exit 2) before anything is claimed.
 */
export async function syncForStartup(remote: Pick<RemoteLedger, 'sync' | 'url'> | undefined): Promise<void> {
  if (remote === undefined) return;
  await remote.sync().catch((error: unknown) => {
    if (!isCooError(error) || error.code !== 'REMOTE_UNREACHABLE') throw error;
    if (error.cause instanceof AccessRefused) {
      throw new CooError(
        'RUNNER_CONFIG',
        `${remote.url} refused this runner (${error.cause.said}): a remote that cannot be reached lets the runner start cut off, but this answer would come back on every look; give git the key or token the remote takes (GIT_SSH_COMMAND or ~/.ssh, the host's key in known_hosts, the credential helper or the token in the URL) and the URL of the ledger; nothing was claimed or written`,
      );
    }
  });
}

/** How long a connection to an endpoint on this machine may take at start before it counts as no answer. */
const LOOPBACK_PROBE_MS = 3000;

/**
 * Why nothing answers at `address`, or null when a connection is taken there (closed at once, nothing
 * sent): the model server is up. A refusal on this machine is no network fault that passes: nothing listens.
 */
function loopbackSilence(address: LoopbackAddress): Promise<string | null> {
  return new Promise((settle) => {
    const socket = createConnection({ host: address.host, port: address.port });
    const done = (why: string | null): void => {
      clearTimeout(timer);
      socket.destroy();
      settle(why);
    };
    const timer = setTimeout(() => done(`no connection within ${LOOPBACK_PROBE_MS / 1000} s`), LOOPBACK_PROBE_MS);
    socket.once('connect', () => done(null));
    socket.once('error', (error: NodeJS.ErrnoException) => done(error.code ?? error.message));
  });
}

/**
 * The endpoints on this machine a target calls (an offline model `coo model serve` prints, a gateway
 * on loopback) where nothing answers: a server not started yet, or a port mistyped. Each attempt
 * would be claimed and end `aa_unavailable` (retried until its attempts ran out) or a failed dispatch,
 * blamed on the work; a start once the server runs would run it. An endpoint elsewhere is not
 * probed: a network that is down there may come back, and the attempt's retries are for that.
 */
async function silentEndpoints(endpoints: readonly LocalEndpoint[], lane: Lane, probes: Map<string, Promise<string | null>>): Promise<Problem[]> {
  const problems: Problem[] = [];
  for (const endpoint of endpoints) {
    const key = `${endpoint.address.host} ${endpoint.address.port}`;
    if (!probes.has(key)) probes.set(key, loopbackSilence(endpoint.address));
    const why = await probes.get(key)!;
    if (why === null) continue;
    problems.push({
      code: lane === 'consult' ? 'ORACLE_CONFIG' : 'EXECUTOR_CONFIG',
      message: `nothing answers at ${displayUrl(endpoint.url)} on this machine (${why} at ${endpoint.address.host} port ${endpoint.address.port}): start the model server it names (coo model serve prints the URL to give), or give the URL it listens on`,
    });
  }
  return problems;
}

/** The problems of one target as one, coded as its first: null when there is none. */
function joined(problems: readonly Problem[]): Problem | null {
  return problems.length === 0 ? null : { code: problems[0]!.code, message: problems.map((problem) => problem.message).join('; ') };
}

/**
 * Runs every start-up check and returns the lanes ready to run, or throws the one coded line that
 * refuses the start (exit 2): nothing has been claimed then.
 */
export async function startLanes(options: StartupOptions): Promise<StartedLanes> {
  // git reads the ledger and the repository for every check below: without it nothing else can be judged.
  await runGit(['--version']).catch(() => {
    throw new CooError('RUNNER_CONFIG', 'git cannot be run (not on PATH?): the runner reads and writes the ledger and the repository with it; install git, or put the folder that holds it on PATH; nothing was claimed');
  });
  // Folders first: a clone this runner cannot write is said as such, not as the sync's failure to write it.
  const folders = folderProblems(options.ledger, options.stateDir);
  if (folders.length === 0) await syncForStartup(options.remote);
  // A ledger holding an invalid commit, rolled back or forked, stops everything first (exit 3), as the runner's first pass would.
  const state = await options.ledger.intactState();
  const shared: Problem[] = await servingProblems(state, options);
  shared.push(...folders);
  if (folders.length === 0) {
    try {
      const other = anotherLedgerProblem(options.stateDir, readSeenHead(options.stateDir), options.ledger.gitdir, state.genesis);
      if (other !== null) shared.push(toProblem(other));
    } catch (error) {
      shared.push(toProblem(error));
    }
  }
  let isolation: 'bwrap' | 'none' = 'none';
  try {
    isolation = resolveIsolation(options.isolation);
    if (isolation === 'bwrap') probeBubblewrap(process.execPath, 'the lanes');
  } catch (error) {
    shared.push(toProblem(error));
  }
  const refuse = (code: Problem['code'], message: string): never => {
    throw new CooError(code, message);
  };
  if (shared.length > 0) {
    const plan = planStartup({ shared, isolation, targets: [] });
    if (plan.kind === 'refuse') refuse(plan.code, plan.message);
  }
  const transport = options.consult?.(isolation) ?? null;
  const executors = options.dispatch?.(isolation) ?? null;
  const shallow = await shallowProblem(options.repo, options.ledger, state, new Set<Lane>([...(transport === null ? [] : ['consult' as const]), ...(executors === null ? [] : ['dispatch' as const])]));
  if (shallow !== null) refuse(shallow.code, shallow.message);
  // Each lane reports its own readiness; a lane that does not run here reports nothing.
  const lanes: Partial<Record<Lane, LaneReadiness>> = {
    ...(transport === null ? {} : { consult: consultReadiness(transport) }),
    ...(executors === null ? {} : { dispatch: dispatchReadiness(executors) }),
  };
  const targets: TargetFacts[] = [];
  const looks = new Map<string, () => Promise<Problem | null>>();
  const probes = new Map<string, Promise<string | null>>();
  // Each dispatch's worktree is made in the state folder: on a file system that runs no program, one that runs a program from it
  // (./check.sh, a repository script) is claimed, paid for and failed (exit 126), blamed on the work. Which dispatch would is not
  // known before it runs (npm test runs the repository's scripts), so every dispatch target waits, including those that run none.
  const inSight = folders.length === 0 && executors !== null && isolation === 'bwrap' ? await stateInSightProblem(options.stateDir, options.repo) : null;
  const noPrograms = folders.length === 0 && executors !== null ? (problemsOf([() => requireExecutableFolder(options.stateDir, "the runner's state folder", "each dispatch's worktree is made there, and one that runs a program from it (a verification command such as ./check.sh, a repository script a test or the agent runs) fails there with exit 126, blamed on the work; which would cannot be known before it runs, so every dispatch waits, those that would run none too; give a --state-dir on a file system mounted without noexec")])[0] ?? null) : null;
  for (const target of targetsOf(state)) {
    const readiness = lanes[target.lane];
    if (readiness === undefined) continue;
    const problems = readiness.problems(target);
    if (target.lane === 'dispatch' && inSight !== null) problems.push(inSight);
    if (target.lane === 'dispatch' && noPrograms !== null) problems.push(noPrograms);
    // A target that can run as configured: is the model on this machine it calls there? A runner that keeps running asks again later.
    const endpoints = problems.length === 0 ? readiness.localEndpoints(target) : [];
    const passing = await silentEndpoints(endpoints, target.lane, probes);
    if (options.looksAgain === true && endpoints.length > 0) looks.set(target.actor, async () => joined(await silentEndpoints(endpoints, target.lane, new Map())));
    targets.push({ actor: target.actor, lane: target.lane, problems, passing });
  }
  const plan = planStartup({ shared, isolation, targets, looksAgain: options.looksAgain === true });
  if (plan.kind === 'refuse') return refuse(plan.code, plan.message);
  const keyNote = isolation === 'bwrap' ? await keyInSightNote(options.keyLabel, options.repo) : null;
  // Last, once nothing else refuses the start: a folder held and then refused would only need giving up again.
  const release = holdStateFolder(options.stateDir, options.ledger.gitdir, options.remote?.url ?? null);
  return { isolation, transport, executors, waiting: plan.waiting, looks, notes: keyNote === null ? plan.notes : [{ target: null, text: keyNote }, ...plan.notes], release };
}
