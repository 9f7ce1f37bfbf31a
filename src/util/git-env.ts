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

/**
 * The variables git itself sets, or a shell exports, that tell a git which repository it works on and
 * what it reads there, instead of the `--git-dir` coo names: a git hook of the ledger or a target (or
 * an alias `!coo watch`, or an operator's shell) hands coo GIT_DIR, GIT_WORK_TREE, GIT_INDEX_FILE,
 * GIT_PREFIX, GIT_COMMON_DIR; a pre-receive hook GIT_OBJECT_DIRECTORY, GIT_ALTERNATE_OBJECT_DIRECTORIES
 * and GIT_QUARANTINE_PATH. Passed on, a git coo started in the target's folder worked on GIT_DIR's
 * repository instead (the attempt's branch and worktree made there), `read-tree` wrote GIT_INDEX_FILE
 * (another repository's index), objects a ledger lacks came from another object folder (coo verify
 * said every hash checked out), a remote on this machine served the refs under GIT_NAMESPACE, and
 * GIT_SHALLOW_FILE cut a history short so a walk of the ledger skipped its first commits. GIT_CONFIG
 * had `git config` read one file in place of every configuration git reads, so the credential helpers
 * and included files a sandbox hides went unlisted. None reaches a git coo starts; the pre-receive
 * hook's own quarantine is handed on only where the hook says so (useReceivedObjects).
 *
 * The operator's settings for every git (GIT_CONFIG_COUNT/KEY/VALUE, `git -c`'s GIT_CONFIG_PARAMETERS)
 * stay, as the user's configuration does: they are how a credential helper is given to a remote ledger's
 * git, a sandbox hides what they include and the scrubber learns their secrets (util/credential-files.ts),
 * a remote's route is read through them (remote/git-remote.ts originRoute); what coo needs of git it says
 * on the command line (`-c`, which wins over them), and the gits that judge a dispatch's work by git's own
 * rules (its fsck and check-attr) run without them (isolatedGitEnvironment).
 */
const INHERITED_GIT_VARIABLES = /^GIT_(?:DIR|WORK_TREE|INDEX_FILE|PREFIX|COMMON_DIR|OBJECT_DIRECTORY|ALTERNATE_OBJECT_DIRECTORIES|QUARANTINE_PATH|NAMESPACE|REPLACE_REF_BASE|SHALLOW_FILE|DISCOVERY_ACROSS_FILESYSTEM|CONFIG|IMPLICIT_WORK_TREE|INTERNAL_SUPER_PREFIX)$/;

/** This process's environment without INHERITED_GIT_VARIABLES. */
function ownEnvironment(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([name]) => !INHERITED_GIT_VARIABLES.test(name)));
}

/** The quarantine of a push git runs the pre-receive hook in, once the hook took it (useReceivedObjects). */
let receivedObjects: Readonly<Record<string, string>> = {};

/**
 * For the pre-receive hook alone (cli/hook.ts): the objects a push brings are in git's quarantine,
 * which git names to the hook in GIT_OBJECT_DIRECTORY and GIT_ALTERNATE_OBJECT_DIRECTORIES (and
 * GIT_QUARANTINE_PATH); every git the hook's process starts from now on reads them there.
 */
export function useReceivedObjects(env: NodeJS.ProcessEnv = process.env): void {
  receivedObjects = Object.fromEntries(
    ['GIT_OBJECT_DIRECTORY', 'GIT_ALTERNATE_OBJECT_DIRECTORIES', 'GIT_QUARANTINE_PATH'].flatMap((name) => (env[name] === undefined ? [] : [[name, env[name]!]])),
  );
}

/**
 * The environment of a git that judges the work by git's own rules as git ships them (dispatch/git-fsck.ts,
 * dispatch/checkout-attributes.ts): this process's without any GIT_* variable, the operator's settings
 * (GIT_CONFIG_COUNT's or GIT_CONFIG_PARAMETERS' `fsck.<id>=ignore`, `attr.tree`) and GIT_ATTR_SOURCE among
 * them, told GIT_OWN_OBJECTS and GIT_NO_FETCH, then `extra`.
 */
export function isolatedGitEnvironment(extra: Readonly<Record<string, string | undefined>> = {}): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('GIT_')));
  return { ...env, ...GIT_OWN_OBJECTS, ...GIT_NO_FETCH, ...extra };
}

/** The environment of a git coo starts: this process's without INHERITED_GIT_VARIABLES, told GIT_OWN_OBJECTS and GIT_NO_FETCH, then `extra`. */
export function gitEnvironment(extra: Readonly<Record<string, string | undefined>> = {}): NodeJS.ProcessEnv {
  return { ...ownEnvironment(), ...receivedObjects, ...GIT_OWN_OBJECTS, ...GIT_NO_FETCH, ...extra };
}

/**
 * The environment of a git coo starts to talk to a remote (fetch, push, clone, ls-remote): the
 * transports this process's environment allows (without INHERITED_GIT_VARIABLES), no lazy fetch,
 * GIT_OWN_OBJECTS, git's messages in its own words (LC_ALL=C: what the remote said is told apart by
 * them, remote/git-remote.ts refusedAccess, and git translates some under another locale), then `extra`.
 */
export function remoteGitEnvironment(extra: Readonly<Record<string, string | undefined>> = {}): NodeJS.ProcessEnv {
  return { ...ownEnvironment(), ...GIT_OWN_OBJECTS, GIT_NO_LAZY_FETCH: '1', LC_ALL: 'C', ...extra };
}
