import type { PrivateKey } from '../crypto/keys.js';
import { credentialFileSecrets, gitRemoteSecrets } from '../util/credential-files.js';
import { refuseHeldSecrets } from '../util/held-secrets.js';
import { environmentSecrets, privateKeySecrets, Scrubber } from '../util/scrub.js';

/** The last signer's secrets, compiled once: a process signs with one key in one environment (about 10 ms a scrubber to build). */
let compiled: { readonly fingerprint: string; readonly scrubber: Scrubber } | null = null;

/**
 * Refuses what an actor is about to sign into the ledger (an envelope and its artifacts, an
 * approval, a kill switch and its commit message, a trust document) when it holds a secret the
 * writing process holds: a provider key or token of its environment or of the machine's credential
 * files, a token in the URL of a remote of the ledger (`gitdir`), or the signing key itself, in any
 * form the scrubber finds (util/scrub.ts). What is signed
 * cannot be taken back, so nothing is written. One check for every writer of what an actor says:
 * the CLI's verbs, the MCP server's tools, the consults an execution agent asks for. (A runner's
 * receipts are scrubbed instead: every failure must end in one.)
 */
export function refuseSignerSecrets(files: ReadonlyArray<{ readonly path: string; readonly bytes: Buffer }>, key: PrivateKey, gitdir: string): void {
  const held = [...environmentSecrets(process.env), ...credentialFileSecrets(process.env), ...gitRemoteSecrets([gitdir], { helpers: false })];
  const fingerprint = JSON.stringify([key.publicKey.keyId, held]);
  if (compiled?.fingerprint !== fingerprint) compiled = { fingerprint, scrubber: new Scrubber([...held, ...privateKeySecrets(key)]) };
  refuseHeldSecrets(
    compiled.scrubber,
    files.map((file) => ({ name: file.path.split('/').at(-1)!, content: file.bytes })),
    "this process holds (a provider key or token of its environment or credential files, a ledger remote's token, the signing key) or a private key in its armor",
    'what is signed into the ledger stays there for good, so nothing was written',
  );
}
