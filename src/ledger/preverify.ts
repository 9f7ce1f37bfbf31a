import { ENTRY_NAMESPACE, GIT_NAMESPACE, parseSshsig } from '../crypto/sshsig.js';
import type { CommitFacts, PreverifiedSignature } from './commit-facts.js';
import { parseCommit, type ParsedCommit } from './commit-format.js';
import { SIG_SUFFIX } from './layout.js';
import type { SignaturePool } from './signature-pool.js';

/**
 * Verifies a commit's signatures on the pool before the validator needs them, and hands on the
 * parsed commit and signatures with their verdicts. Anything that does not parse is left out, so
 * the validator reaches it and names the problem itself.
 */
export async function preverify(pool: SignaturePool, facts: CommitFacts): Promise<CommitFacts> {
  const jobs: Array<Promise<[string, PreverifiedSignature]>> = [];
  let parsed: ParsedCommit | undefined;
  try {
    parsed = parseCommit(facts.raw);
    const sig = parseSshsig(parsed.gpgsig);
    if (sig.namespace === GIT_NAMESPACE) {
      jobs.push(pool.verify(sig.publicKey.bytes, GIT_NAMESPACE, parsed.payload, sig.signature).then((valid) => ['commit', { sig, valid }]));
    }
  } catch {
    // the validator reports it
  }
  for (const [path, bytes] of facts.blobs) {
    if (!path.endsWith(SIG_SUFFIX)) continue;
    const entry = path.slice(0, -SIG_SUFFIX.length);
    const message = facts.blobs.get(entry);
    if (message === undefined) continue;
    try {
      const sig = parseSshsig(bytes.toString('utf8'));
      if (sig.namespace !== ENTRY_NAMESPACE) continue;
      jobs.push(pool.verify(sig.publicKey.bytes, ENTRY_NAMESPACE, message, sig.signature).then((valid) => [entry, { sig, valid }]));
    } catch {
      // the validator reports it
    }
  }
  const preverified = new Map(await Promise.all(jobs));
  return parsed === undefined ? { ...facts, preverified } : { ...facts, preverified, parsed };
}
