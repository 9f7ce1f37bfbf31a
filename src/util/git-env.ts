/**
 * What every git the runner starts on a repository someone else may have written (a target, a
 * ledger) is told: an object id names that object's own bytes. With `refs/replace/*` honoured, git
 * hands its readers another object under an id (a base commit with another tree, a blob with other
 * bytes), so what the runner reads, diffs and checks out is not what the commit it signs or the
 * receipt it writes names. The same holds for a commit's parents: with `info/grafts` honoured, git
 * walks parents a file in the repository names instead of those the commit's bytes hold, so git's
 * answer on descent and ranges differs from the object reader's; the graft file is /dev/null.
 */
export const GIT_OWN_OBJECTS: Readonly<Record<string, string>> = { GIT_NO_REPLACE_OBJECTS: '1', GIT_GRAFT_FILE: '/dev/null' };

/** The environment of a git coo starts: this process's, told GIT_OWN_OBJECTS, then `extra`. */
export function gitEnvironment(extra: Readonly<Record<string, string | undefined>> = {}): NodeJS.ProcessEnv {
  return { ...process.env, ...GIT_OWN_OBJECTS, ...extra };
}
