import { credentialFileSecrets } from '../util/credential-files.js';
import { terminalText } from '../util/invisible.js';
import { environmentSecrets, Scrubber } from '../util/scrub.js';

/** The secrets of this process, compiled once per environment: a CLI process has one. */
let held: { readonly fingerprint: string; readonly scrubber: Scrubber } | null = null;

/**
 * The secrets this process holds, to remove from what the CLI says: the provider keys and tokens of
 * its environment and of the machine's credential files (util/scrub.ts, util/credential-files.ts), as
 * the runner's scrubber removes them. An operator who gives a key where a path or an id goes (`--key
 * "$OPENAI_API_KEY"`, `coo show <key>`) is told of the mistake, and the key is not printed back into a
 * terminal, a CI log or a script's `--json`.
 */
export function heldSecrets(): Scrubber {
  const secrets = environmentSecrets(process.env);
  const fingerprint = JSON.stringify(secrets);
  if (held?.fingerprint !== fingerprint) held = { fingerprint, scrubber: new Scrubber([...secrets, ...credentialFileSecrets(process.env)]) };
  return held.scrubber;
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
