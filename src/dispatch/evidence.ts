import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import { join } from 'node:path';
import picomatch from 'picomatch';
import type { PrivateKey } from '../crypto/keys.js';
import { GIT_NAMESPACE, signSshsig } from '../crypto/sshsig.js';
import { CooError } from '../errors.js';
import { formatIdent, renderCommitPayload, renderSignedCommit } from '../ledger/commit-format.js';
import { LIMITS } from '../limits.js';
import { bwrapArgs, findBwrap, killGroup } from '../util/bubblewrap.js';
import type { EvidenceSummary } from './outcome.js';
import { worktreeGit, type AttemptWorktree } from './worktree.js';

/**
 * Evidence the COO gathers itself after the EA exits: the changed files from git (each with its
 * sha256), their check against the dispatch's scope, the verification commands run by the COO in
 * the worktree, and the work committed on the attempt's branch with a COO-signed commit.
 */

export interface ChangedFile {
  readonly path: string;
  readonly status: 'added' | 'modified' | 'deleted' | 'type_changed';
  /** The git mode after the change (`000000` when deleted). */
  readonly mode: string;
  /** sha256 of the new content; null when deleted. */
  readonly sha256: string | null;
}

export interface WorkSnapshot {
  /** The tree of everything the EA left in the work tree, ignored files included. */
  readonly tree: string;
  readonly changes: readonly ChangedFile[];
  /** The work tree's `.git` link was changed or removed. */
  readonly gitLinkTampered: boolean;
}

const STATUS: Record<string, ChangedFile['status']> = { A: 'added', M: 'modified', D: 'deleted', T: 'type_changed' };

async function blobHashes(worktree: AttemptWorktree, oids: readonly string[]): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  if (oids.length === 0) return out;
  const raw = await worktreeGit(worktree, ['cat-file', '--batch'], { input: `${oids.join('\n')}\n` });
  let offset = 0;
  while (offset < raw.length) {
    const newline = raw.indexOf(0x0a, offset);
    const [oid, , size] = raw.subarray(offset, newline).toString('utf8').split(' ');
    const length = Number(size);
    out.set(oid!, `sha256:${createHash('sha256').update(raw.subarray(newline + 1, newline + 1 + length)).digest('hex')}`);
    offset = newline + 1 + length + 1;
  }
  return out;
}

/**
 * Everything in the work tree as a tree object, through a private index: git's ignore rules do
 * not apply (`--force`), so a file the EA hid behind a `.gitignore` is still evidence, and what is
 * verified is what is committed.
 */
export async function snapshotWork(worktree: AttemptWorktree, scratch: string): Promise<WorkSnapshot> {
  const index = join(scratch, 'evidence.index');
  fs.rmSync(index, { force: true });
  // An empty index: every file is hashed from the disk, nothing is taken from stat data.
  const env = { GIT_INDEX_FILE: index };
  await worktreeGit(worktree, ['add', '--all', '--force', '--', '.'], { env });
  const tree = (await worktreeGit(worktree, ['write-tree'], { env })).toString('utf8').trim();
  fs.rmSync(index, { force: true });
  const diff = (await worktreeGit(worktree, ['diff-tree', '-r', '-z', '--no-renames', worktree.base, tree])).toString('utf8');
  const fields = diff.split('\0');
  const entries: Array<{ path: string; status: ChangedFile['status']; mode: string; oid: string }> = [];
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const [, mode, , oid, letter] = fields[i]!.split(' ');
    const status = STATUS[letter ?? ''];
    if (status === undefined || mode === undefined || oid === undefined) throw new CooError('GIT_FAILED', `git diff-tree: unexpected entry ${JSON.stringify(fields[i])}`);
    entries.push({ path: fields[i + 1]!, status, mode, oid });
  }
  const hashes = await blobHashes(worktree, entries.filter((entry) => entry.status !== 'deleted' && entry.mode !== '160000').map((entry) => entry.oid));
  let link: string | null;
  try {
    link = fs.readFileSync(join(worktree.path, '.git'), 'utf8');
  } catch {
    link = null;
  }
  return {
    tree,
    changes: entries.map((entry) => ({ path: entry.path, status: entry.status, mode: entry.mode, sha256: entry.status === 'deleted' ? null : (hashes.get(entry.oid) ?? null) })),
    gitLinkTampered: link !== worktree.gitLink,
  };
}

export interface ScopeCheck {
  readonly outOfScope: readonly string[];
  /** Symbolic links and nested repositories: never accepted as work. */
  readonly notRegular: readonly string[];
}

/** Which changes fall outside the scope globs (picomatch, dot files included), and which are not regular files. */
export function checkScope(changes: readonly ChangedFile[], scope: readonly string[]): ScopeCheck {
  const matchers = scope.map((pattern) => picomatch(pattern, { dot: true }));
  return {
    outOfScope: changes.filter((change) => !matchers.some((match) => match(change.path))).map((change) => change.path),
    notRegular: changes.filter((change) => change.status !== 'deleted' && change.mode !== '100644' && change.mode !== '100755').map((change) => change.path),
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
  /** Under bubblewrap: the worktree and a scratch folder writable, these hidden. */
  readonly isolation: 'bwrap' | 'none';
  readonly scratch: string;
  readonly hide: readonly string[];
}

/** Runs one verification command with `sh -c` in the worktree, in its own process group, under our timer. */
export function runVerification(worktree: AttemptWorktree, command: string, options: VerificationOptions): Promise<VerificationResult> {
  const home = join(options.scratch, 'verify-home');
  fs.mkdirSync(home, { recursive: true, mode: 0o700 });
  const bwrap = options.isolation === 'bwrap' ? findBwrap() : null;
  const argv = [
    ...(bwrap === null ? [] : bwrapArgs(bwrap, { writable: [worktree.path, options.scratch], hide: options.hide, chdir: worktree.path, ownPids: true })),
    '/bin/sh', '-c', command,
  ];
  const env = { PATH: [process.execPath.replace(/\/[^/]+$/, ''), '/usr/local/bin', '/usr/bin', '/bin'].join(':'), HOME: home, TMPDIR: home, LANG: 'C.UTF-8', NO_COLOR: '1', GIT_CONFIG_NOSYSTEM: '1' };
  const bound = options.maxOutputBytes ?? LIMITS.subprocessOutputBytes;
  const started = Date.now();
  return new Promise((resolvePromise) => {
    const chunks: Buffer[] = [];
    let kept = 0;
    let overflow = false;
    let killedByTimer = false;
    const child = spawn(argv[0]!, argv.slice(1), { cwd: worktree.path, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    const timer = setTimeout(() => {
      killedByTimer = true;
      if (child.pid !== undefined) killGroup(child.pid);
    }, options.timeoutSeconds * 1000);
    const take = (chunk: Buffer): void => {
      const room = bound - kept;
      if (chunk.length > room) overflow = true;
      if (room <= 0) return;
      const part = chunk.subarray(0, room);
      chunks.push(part);
      kept += part.length;
    };
    child.stdout.on('data', take);
    child.stderr.on('data', take);
    child.on('exit', () => {
      if (child.pid !== undefined) killGroup(child.pid);
    });
    let settled = false;
    const finish = (exitCode: number | null, startError?: string): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (startError !== undefined) take(Buffer.from(startError));
      resolvePromise({ command, exitCode: killedByTimer ? null : exitCode, killedByTimer, output: Buffer.concat(chunks), outputOverflow: overflow, elapsedMs: Date.now() - started });
    };
    child.on('error', (error) => finish(null, `cannot start the verification: ${error.message}`));
    child.on('close', (code) => finish(code));
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

export interface AttemptCommit {
  readonly branch: string;
  readonly headSha: string;
}

/** A git object id, as git computes it. */
function gitObjectId(type: string, content: Buffer): string {
  return createHash('sha1').update(`${type} ${content.length}\0`).update(content).digest('hex');
}

/**
 * Commits `tree` on the attempt's branch, parent the base, signed by the COO in git's SSH format
 * (the ledger's rendering and signer), and moves the branch only if it still points at the base.
 */
export async function commitAttempt(worktree: AttemptWorktree, tree: string, options: AttemptCommitOptions): Promise<AttemptCommit> {
  const ident = formatIdent(options.actor.replace(/[<>\n]/g, ''), options.key.publicKey.keyId, Math.floor(options.now.getTime() / 1000));
  const summary = options.summary.replace(/[\r\n]+/g, ' ').trim().slice(0, 200) || 'Work of the attempt';
  const fields = { tree, parents: [worktree.base], author: ident, committer: ident, message: `${summary}\n\nCoo-Attempt: ${options.attemptId}\n` };
  const raw = renderSignedCommit(fields, signSshsig(options.key, renderCommitPayload(fields), GIT_NAMESPACE));
  const oid = (await worktreeGit(worktree, ['hash-object', '-t', 'commit', '-w', '--stdin'], { input: raw })).toString('utf8').trim();
  if (oid !== gitObjectId('commit', raw)) throw new CooError('INTERNAL', 'commit id mismatch');
  await worktreeGit(worktree, ['update-ref', '-m', `coo: ${options.attemptId}`, `refs/heads/${worktree.branch}`, oid, worktree.base]);
  // The worktree's own index follows the branch, so its status compares against the commit.
  await worktreeGit(worktree, ['reset', '--quiet']);
  return { branch: worktree.branch, headSha: oid };
}

/**
 * After the commit: the branch holds exactly the commit made, and the work tree has nothing the
 * commit lacks (a verification that changed files, a partial commit). Paths of what differs.
 */
export async function checkCommitted(worktree: AttemptWorktree, expected: string): Promise<{ readonly headMatches: boolean; readonly dirty: readonly string[] }> {
  // porcelain v2 with --branch names the head commit and the branch: one process for both checks.
  const status = (await worktreeGit(worktree, ['status', '--porcelain=v2', '--branch', '-z', '--untracked-files=all'])).toString('utf8').split('\0');
  const head = status.find((entry) => entry.startsWith('# branch.oid '))?.slice('# branch.oid '.length);
  const branch = status.find((entry) => entry.startsWith('# branch.head '))?.slice('# branch.head '.length);
  const dirty: string[] = [];
  for (let i = 0; i < status.length; i += 1) {
    const entry = status[i]!;
    if (entry.startsWith('1 ') || entry.startsWith('u ')) dirty.push(entry.split(' ').slice(entry.startsWith('1 ') ? 8 : 10).join(' '));
    else if (entry.startsWith('2 ')) {
      dirty.push(entry.split(' ').slice(9).join(' '));
      i += 1; // the original path follows
    } else if (entry.startsWith('? ')) dirty.push(entry.slice(2));
  }
  return { headMatches: head === expected && branch === worktree.branch, dirty };
}

export interface GatherOptions {
  readonly scratch: string;
  readonly scope: readonly string[];
  readonly verify: readonly string[];
  /** The time box of each verification command. */
  readonly verifyTimeoutSeconds: number;
  readonly isolation: 'bwrap' | 'none';
  readonly hide: readonly string[];
  readonly commit: AttemptCommitOptions;
}

export interface GatheredEvidence {
  readonly snapshot: WorkSnapshot;
  readonly verification: readonly VerificationResult[];
  readonly commit: AttemptCommit | null;
  /** What the decision reads (outcome.ts). */
  readonly summary: EvidenceSummary;
}

/**
 * All of the COO's evidence for one attempt, after the EA has exited: the snapshot and its scope
 * check, then the verification commands in order while the snapshot is committed (the commit
 * touches the index and refs, never the work tree), then the check that the work tree holds
 * nothing the commit lacks. An attempt without changes commits nothing; its head is the base.
 */
export async function gatherEvidence(worktree: AttemptWorktree, options: GatherOptions): Promise<GatheredEvidence> {
  const snapshot = await snapshotWork(worktree, options.scratch);
  const scope = checkScope(snapshot.changes, options.scope);
  const verifying = (async () => {
    const results: VerificationResult[] = [];
    for (const command of options.verify) {
      results.push(await runVerification(worktree, command, { timeoutSeconds: options.verifyTimeoutSeconds, isolation: options.isolation, scratch: options.scratch, hide: options.hide }));
    }
    return results;
  })();
  const committing = snapshot.changes.length === 0 ? Promise.resolve(null) : commitAttempt(worktree, snapshot.tree, options.commit);
  const [verification, commit] = await Promise.all([verifying, committing]);
  const committed = await checkCommitted(worktree, commit?.headSha ?? worktree.base);
  return {
    snapshot,
    verification,
    commit,
    summary: {
      changes: snapshot.changes,
      outOfScope: scope.outOfScope,
      notRegular: scope.notRegular,
      gitLinkTampered: snapshot.gitLinkTampered,
      verification,
      commit: commit === null ? null : { headSha: commit.headSha, ...committed },
      ...(commit === null ? { dirtyWithoutCommit: committed.dirty } : {}),
    },
  };
}
