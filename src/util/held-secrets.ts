import type { PrivateKey } from '../crypto/keys.js';
import { CooError, type ErrorCode } from '../errors.js';
import { privateKeySecrets, Scrubber, type Secret } from './scrub.js';

/**
 * The one place that says what "holds a secret" means before something leaves the runner for good.
 * There are two meanings, by who wrote the text judged:
 *
 * - Text an agent or a client wrote (a dispatch's changed files, landed on a branch; the question and
 *   files of an agent's consult tool; an MCP tool's arguments; what an operator types): holdsHeldSecret.
 *   Every secret the runner holds or handed the agent, in every form its scrubber reads, cut-off
 *   text of one and any private key in its armor included. The writer held the key or read the
 *   machine and may have written it out as it liked, so whatever the scrubber would remove is refused.
 * - A repository's own committed files a consult pins, sent to a provider as they are: sentSecretIn.
 *   Every secret the runner was given as one, from a named source, of credential length, each found
 *   whole: its signing key (its bytes in the forms privateKeySecrets lists), the provider keys of its
 *   routes and executors, the forge token it opens pull requests with, the credentials of its --remote
 *   and of the repository's and the ledger's git remotes, the secrets of its credential files, an
 *   endpoint's credentials, a proxy's credentials. Left out are only values guessed secret
 *   (Secret.guessed: by a variable's name alone, a URL's credentials in a variable the runner does not use): those files were written by the
 *   repository's people, not by anyone who held the runner's keys, and a value of the environment that
 *   happens to be a word the files say (PGPASSWORD=postgres beside `image: postgres:16`, a Docker
 *   image's GPG_KEY fingerprint its Dockerfile quotes), a repository's test key (armored or
 *   base64-encoded), or text that ends as a key begins (`OPENAI_API_KEY=sk-proj-`) is no secret of the
 *   runner's, and the consult is sent. Masking what comes back stays as wide as the
 *   scrubber is: masking is not refusing.
 *
 * test/attacks/operator-redteam-57.test.ts holds the difference.
 */

/** Something a writer is about to sign: what to call it in an error, and its bytes or text. */
export interface Signable {
  readonly name: string;
  readonly content: string | Buffer;
}

/** Whether text an agent or a client wrote holds a secret `secrets` knows, in any form it reads, or a private key in its armor (see above). */
export function holdsHeldSecret(secrets: Scrubber, content: string | Uint8Array): boolean {
  if (typeof content === 'string') return secrets.text(content) !== content;
  return !secrets.bytes(content).equals(content);
}

/**
 * Refuses, before anything is written, what holds a secret `secrets` knows (holdsHeldSecret): what is
 * signed into the ledger stays there for good, so a secret in it is refused, never redacted into a
 * request its writer did not write. `holder` says whose secrets they are, `why` what would have
 * happened; the code is USAGE for what an operator or a client typed, CONTEXT_INVALID for an agent's request.
 */
export function refuseHeldSecrets(secrets: Scrubber, items: readonly Signable[], holder: string, why: string, code: Extract<ErrorCode, 'USAGE' | 'CONTEXT_INVALID'> = 'USAGE'): void {
  const holding = [...new Set(items.filter(({ content }) => holdsHeldSecret(secrets, content)).map((item) => item.name))];
  if (holding.length === 0) return;
  throw new CooError(code, `${holding.join(', ')} hold${holding.length === 1 ? 's' : ''} a secret ${holder}: ${why}; leave the secret out`);
}

/** The shortest provider key or endpoint credential a consult's files are refused for: a shorter value (a local gateway's `sk-local`) is a word, not a credential. */
export const MIN_CREDENTIAL_CHARS = 16;

/** The name sentSecretIn gives the runner's signing key. */
export const SIGNING_KEY_NAME = 'coo key';

/** Whether a secret counts for sentSecrets: given as one (not guessed, Secret.guessed), of MIN_CREDENTIAL_CHARS or more characters without a space. */
function givenCredential(secret: Secret): boolean {
  if (secret.guessed === true) return false;
  const value = secret.value.trim();
  return value.length >= MIN_CREDENTIAL_CHARS && !/\s/.test(value);
}

/**
 * The scrubber of what a consult's pinned files are refused for (see above): the runner's signing key,
 * and of `known` (the runner's scrubber's secrets, what its routes send) each givenCredential.
 */
export function sentSecrets(key: PrivateKey, known: readonly Secret[]): Scrubber {
  const credentials = known.filter(givenCredential).map((secret) => ({ name: secret.name, value: secret.value.trim() }));
  return new Scrubber([...privateKeySecrets(key, SIGNING_KEY_NAME), ...credentials]);
}

/**
 * The name of the first secret of `sent` (sentSecrets) a repository's file holds whole, in any form the
 * scrubber reads, or null: not a text cut inside one (`sk-proj-` at a file's end is no key), nor a
 * private key found by its armor alone (a repository's test key is no secret of the runner's).
 */
export function sentSecretIn(sent: Scrubber, bytes: Uint8Array): string | null {
  return sent.secretsIn(bytes).find((found) => found.form !== 'cut')?.name ?? null;
}

/**
 * What a receipt says of the secret sentSecretIn named (never its value), and what to do: a key
 * committed to a repository is no longer the runner's alone, so it is replaced, not only taken out.
 */
export function heldSecretWords(name: string): string {
  if (name === SIGNING_KEY_NAME) {
    return "this runner's COO signing key (its --key): committed, it is no longer the COO's alone; make a new key and have the trust retire this one, and take the file out of the repository, or pin other files";
  }
  return `the credential this runner holds as ${name}: committed, it is no longer this runner's alone; revoke it where it was issued and give the runner a new one, and take it out of the repository, or pin other files`;
}
