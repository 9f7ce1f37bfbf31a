import { CooError, type ErrorCode } from '../errors.js';
import type { Scrubber } from './scrub.js';

/** Something a writer is about to sign: what to call it in an error, and its bytes or text. */
export interface Signable {
  readonly name: string;
  readonly content: string | Buffer;
}

/**
 * Refuses, before anything is written, what holds a secret `secrets` knows: what is signed into the
 * ledger stays there for good, so a secret in it is refused, never redacted into a request its
 * writer did not write. `holder` says whose secrets they are, `why` what would have happened; the
 * code is USAGE for what an operator or a client typed, CONTEXT_INVALID for an agent's request.
 */
export function refuseHeldSecrets(secrets: Scrubber, items: readonly Signable[], holder: string, why: string, code: Extract<ErrorCode, 'USAGE' | 'CONTEXT_INVALID'> = 'USAGE'): void {
  const holding = [...new Set(items.filter(({ content }) => (typeof content === 'string' ? secrets.text(content) !== content : !secrets.bytes(content).equals(content))).map((item) => item.name))];
  if (holding.length === 0) return;
  throw new CooError(code, `${holding.join(', ')} hold${holding.length === 1 ? 's' : ''} a secret ${holder}: ${why}; leave the secret out`);
}
