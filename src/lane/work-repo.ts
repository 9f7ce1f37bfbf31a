import { CooError } from '../errors.js';
import type { ArgumentNames } from '../util/argument-names.js';
import { runGit } from '../util/exec.js';
import { realPathOr } from '../util/real-path.js';
import { resolveCommit, type ResolvedCommit } from './pins.js';

/**
 * The repository the work is for is never the ledger. Given the ledger (or a folder in it, or a
 * worktree made from it) as `--repo`, a consult pins the ledger's own files and a dispatch takes a
 * ledger commit for its base: no runner's `--repo` holds those commits (the runner refuses the ledger
 * as its repository at start), so the message would wait, unclaimed, until it expired. One rule for
 * the runner's start (runner/startup.ts) and for every writer that pins a commit (consult, dispatch,
 * adopt, and their MCP tools).
 */
export function isLedgerGitdir(repoGitdir: string, ledgerGitdir: string): boolean {
  const [repo, ledger] = [realPathOr(repoGitdir), realPathOr(ledgerGitdir)];
  return repo === ledger || repo.startsWith(`${ledger}/`);
}

/**
 * Whether `commit`, of a repository given as the one the work is for, is a commit the ledger holds:
 * that repository is then a copy of the ledger (`git clone LEDGER`, a checkout of it), whose commits
 * no runner's repository holds, and a message pinning one waits unclaimed until it expires. The
 * ledger holds its own commits alone (its hook takes nothing else), so a repository's commit found
 * there is one of the ledger's. Part of the rule above, for a copy at a path of its own. A git that
 * cannot answer fails closed (GIT_FAILED), never taken for "not the ledger's".
 */
export async function isLedgerCommit(ledgerGitdir: string, commit: string): Promise<boolean> {
  try {
    await runGit(['--git-dir', ledgerGitdir, 'rev-parse', '--verify', '-q', `${commit}^{commit}`]);
    return true;
  } catch (error) {
    // Exit 1 is git's "no such commit" (quietly); anything else is git failing to answer, which lets nothing through.
    if ((error as { cause?: { code?: unknown } }).cause?.code === 1) return false;
    throw new CooError('GIT_FAILED', `cannot tell whether ${commit.slice(0, 12)} is a commit of the ledger ${ledgerGitdir}, so whether the repository given is a copy of the ledger: ${error instanceof Error ? error.message : String(error)}; nothing was written or claimed`, { cause: error });
  }
}

/** The commit `rev` names in `repo`, as resolveCommit gives it, refused (USAGE) when `repo` is the ledger at `ledgerGitdir`, or a copy of it. */
export async function resolveWorkCommit(ledgerGitdir: string, repo: string, rev: string, names?: ArgumentNames): Promise<ResolvedCommit> {
  const resolved = await resolveCommit(repo, rev, names);
  if (isLedgerGitdir(resolved.gitdir, ledgerGitdir)) {
    throw new CooError(
      'USAGE',
      `--repo ${repo} is the ledger ${ledgerGitdir}, not a repository the work is for: the message would pin the ledger's own commit, which no runner's repository holds, and wait unclaimed until it expired; give the repository the work is for; nothing was written`,
    );
  }
  if (await isLedgerCommit(ledgerGitdir, resolved.commit)) {
    throw new CooError(
      'USAGE',
      `--repo ${repo} is a copy of the ledger ${ledgerGitdir} (its commit ${resolved.commit.slice(0, 12)} is the ledger's), not a repository the work is for: the message would pin the ledger's own commit, which no runner's repository holds, and wait unclaimed until it expired; give the repository the work is for; nothing was written`,
    );
  }
  return resolved;
}
