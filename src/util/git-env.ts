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

/**
 * What a git that reads a repository, and talks to no remote, is told besides: fetch nothing. A
 * repository's config may name a promisor remote (`remote.<name>.promisor`, `extensions.partialClone`);
 * git then fetches every object a read finds missing from it, through the transport the same config
 * names (`core.sshCommand`, `remote.<name>.uploadpack`), so `coo verify` of a ledger folder whose
 * commit named a missing tree ran the command its writer put there. GIT_NO_LAZY_FETCH says so to
 * git 2.44 and later; GIT_ALLOW_PROTOCOL naming no transport refuses every one in any git.
 */
export const GIT_NO_FETCH: Readonly<Record<string, string>> = { GIT_NO_LAZY_FETCH: '1', GIT_ALLOW_PROTOCOL: 'none' };

/**
 * What every git coo starts to talk to a remote over HTTP is told (as `-c` arguments, which win over
 * `http.followRedirects` in every config file and in GIT_CONFIG_COUNT; only a setting the operator
 * made for one URL, `http.<url>.followRedirects`, rules that URL): follow no redirect. git follows one on its first
 * request by default (`http.followRedirects=initial`) and then sends every later request to where it
 * led, with the headers `http.extraHeader` names and whatever a credential helper that is not scoped
 * to one host answers for the new one: the credentials the operator gave for the URL they trust
 * would reach a server they never named. A redirect is refused instead (HTTP 30x), and told apart
 * (remote/git-remote.ts, refusedAccess).
 */
export const GIT_NO_REDIRECTS: readonly string[] = ['-c', 'http.followRedirects=false'];

/** The environment of a git coo starts: this process's, told GIT_OWN_OBJECTS and GIT_NO_FETCH, then `extra`. */
export function gitEnvironment(extra: Readonly<Record<string, string | undefined>> = {}): NodeJS.ProcessEnv {
  return { ...process.env, ...GIT_OWN_OBJECTS, ...GIT_NO_FETCH, ...extra };
}

/**
 * The environment of a git coo starts to talk to a remote (fetch, push, clone, ls-remote): the
 * transports this process's environment allows, no lazy fetch, GIT_OWN_OBJECTS, git's messages in
 * its own words (LC_ALL=C: what the remote said is told apart by them, remote/git-remote.ts
 * refusedAccess, and git translates some under another locale), then `extra`.
 */
export function remoteGitEnvironment(extra: Readonly<Record<string, string | undefined>> = {}): NodeJS.ProcessEnv {
  return { ...process.env, ...GIT_OWN_OBJECTS, GIT_NO_LAZY_FETCH: '1', LC_ALL: 'C', ...extra };
}
