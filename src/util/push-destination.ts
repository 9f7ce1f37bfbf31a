/**
 * How git reads a push's destination. Pure. git matches `<src>:refs/heads/x` against every ref the
 * remote shows by the rules it reads a short name by, so `refs/heads/x` also names the remote's
 * `refs/refs/heads/x`, `refs/tags/refs/heads/x`, `refs/heads/refs/heads/x` and
 * `refs/remotes/refs/heads/x`. Beside the real ref, such a ref makes git refuse every push to it
 * before sending anything; alone, git pushes to that ref instead of creating the one named.
 */

/** The refs other than `ref` itself that git may take for it as a push's destination. */
export function refsTakenFor(ref: string): string[] {
  return [`refs/${ref}`, `refs/tags/${ref}`, `refs/heads/${ref}`, `refs/remotes/${ref}`];
}

/** git's refusal of a push whose destination names more than one of the remote's refs, or null. */
export function ambiguousDestination(pushed: { readonly stderr: string }): string | null {
  return /dst refspec \S+ matches more than one\.?/.exec(pushed.stderr)?.[0] ?? null;
}

/**
 * The ref git pushed `from` to in place of `ref`, read from `git push --porcelain` (one line per ref,
 * "<flag>\t<from>:<to>\t<summary>"), or null when it took `ref` itself or said nothing of `from`.
 */
export function takenDestination(pushed: { readonly stdout: string }, from: string, ref: string): string | null {
  for (const line of pushed.stdout.split('\n')) {
    const spec = line.split('\t')[1];
    if (spec === undefined || !spec.startsWith(`${from}:`)) continue;
    const to = spec.slice(from.length + 1);
    if (to !== ref) return to;
  }
  return null;
}
