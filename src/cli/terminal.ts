import { credentialFileSecrets } from '../util/credential-files.js';
import { terminalText } from '../util/invisible.js';
import { urlCredentials } from '../util/display-url.js';
import { environmentSecrets, Scrubber, type Secret } from '../util/scrub.js';

/** The secrets of this process, compiled once per environment: a CLI process has one. */
let held: { readonly fingerprint: string; readonly scrubber: Scrubber } | null = null;

/**
 * The secrets this process holds, to remove from what the CLI says: the provider keys and tokens of
 * its environment, of its command line (commandLineSecrets) and of the machine's credential files
 * (util/scrub.ts, util/credential-files.ts), as the runner's scrubber removes them. An operator who gives a key where a path or an id goes (`--key
 * "$OPENAI_API_KEY"`, `coo show <key>`) is told of the mistake, and the key is not printed back into a
 * terminal, a CI log or a script's `--json`.
 */
export function heldSecrets(): Scrubber {
  const secrets = [...environmentSecrets(process.env), ...commandLineSecrets(process.argv, process.env)];
  const fingerprint = JSON.stringify(secrets);
  if (held?.fingerprint !== fingerprint) held = { fingerprint, scrubber: new Scrubber([...secrets, ...credentialFileSecrets(process.env)]) };
  return held.scrubber;
}

/**
 * The secrets the command line carries or names, which the environment's rule cannot see: the
 * credentials of a URL given as a flag's value (`--remote https://user:TOKEN@host/ledger.git`, whose
 * server may quote it back in a refusal) and the token in the variable `--github-token-env` names
 * when that name does not say secret.
 */
export function commandLineSecrets(argv: readonly string[], env: NodeJS.ProcessEnv): Secret[] {
  const secrets: Secret[] = [];
  argv.forEach((arg, index) => {
    const value = /^--[^=]+=/.test(arg) ? arg.slice(arg.indexOf('=') + 1) : arg;
    if (/^[a-z][a-z0-9+.-]*:\/\//i.test(value)) for (const credential of urlCredentials(value)) secrets.push({ name: 'a URL on the command line', value: credential });
    const named = arg === '--github-token-env' ? argv[index + 1] : arg.startsWith('--github-token-env=') ? value : undefined;
    const token = named === undefined ? undefined : env[named];
    if (token !== undefined && token !== '') secrets.push({ name: named!, value: token });
  });
  return secrets;
}

/**
 * Every line the CLI writes to stderr for a person: errors, notes, progress lines and the runner's
 * events carry text from the ledger, a remote or an agent, so each goes through `terminalText` and no
 * escape sequence in it reaches the operator's terminal, and without the secrets of `heldSecrets`. (Progress
 * bars draw with their own escapes and write to the terminal themselves.)
 */
export function writeErr(text: string): void {
  process.stderr.write(terminalText(heldSecrets().text(text)));
}
