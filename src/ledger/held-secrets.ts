import { CooError } from '../errors.js';
import type { PrivateKey } from '../crypto/keys.js';
import { credentialFileSecrets } from '../util/credential-files.js';
import { environmentSecrets, privateKeySecrets, Scrubber } from '../util/scrub.js';

/**
 * Refuses what an actor is about to sign into the ledger (an envelope and its artifacts, an
 * approval, a kill switch and its commit message, a trust document) when it holds a secret the
 * writing process holds: a provider key or token of its environment or of the machine's credential
 * files, or the signing key itself, in any form the scrubber finds (util/scrub.ts). What is signed
 * cannot be taken back, so nothing is written. One check for every writer of what an actor says:
 * the CLI's verbs, the MCP server's tools, the consults an execution agent asks for. (A runner's
 * receipts are scrubbed instead: every failure must end in one.)
 */
export function refuseHeldSecrets(files: ReadonlyArray<{ readonly path: string; readonly bytes: Buffer }>, key: PrivateKey): void {
  const secrets = new Scrubber([...environmentSecrets(process.env), ...credentialFileSecrets(process.env), ...privateKeySecrets(key)]);
  const holding = [...new Set(files.filter((file) => secrets.bytes(file.bytes) !== file.bytes).map((file) => file.path.split('/').at(-1)!))];
  if (holding.length > 0) {
    throw new CooError(
      'USAGE',
      `${holding.join(', ')} hold${holding.length === 1 ? 's' : ''} a secret this process holds (a provider key or token of its environment or credential files, the COO key); what is signed into the ledger stays there for good, so nothing was written: leave the secret out`,
    );
  }
}
