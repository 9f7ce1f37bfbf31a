import { CooError, toFinding, type Finding } from '../errors.js';
import { cloneState } from '../authority/state.js';
import { commitsSince, readCommitLinks } from './history.js';
import { Ledger } from './ledger.js';
import { MAIN_REF } from './ref-lock.js';

export interface RefUpdate {
  readonly oldOid: string;
  readonly newOid: string;
  readonly ref: string;
}

const ZERO = '0'.repeat(40);

/**
 * The hook writes the state cache of the head it checked against once it replayed this many commits
 * since the last one: nothing else opens a served ledger, so without it every push would replay the
 * history from the start (a cache only: never evidence, see checkpoint.ts).
 */
const HOOK_CHECKPOINT_COMMITS = 32;

/** Parses git's pre-receive input: one `<old> <new> <ref>` line per update. */
export function parseRefUpdates(text: string): RefUpdate[] {
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      const [oldOid, newOid, ref] = line.trim().split(' ');
      if (oldOid === undefined || newOid === undefined || ref === undefined) throw new CooError('USAGE', `bad ref update line: ${line}`);
      return { oldOid, newOid, ref };
    });
}

/**
 * Checks a push (the pre-receive hook): only `main` moves, only forward, and every new commit passes
 * the validator against the state at the old head. Runs inside git's quarantine, so objects are
 * read with `git cat-file`, which sees them.
 */
export async function checkPush(gitdir: string, updates: readonly RefUpdate[]): Promise<Finding[]> {
  const findings: Finding[] = [];
  const ledger = Ledger.open(gitdir);
  try {
    for (const update of updates) {
      if (update.ref !== MAIN_REF) {
        findings.push({ code: 'REF_FORBIDDEN', message: `${update.ref}: a ledger has one branch, ${MAIN_REF}` });
        continue;
      }
      if (update.newOid === ZERO) {
        findings.push({ code: 'REF_FORBIDDEN', message: `${MAIN_REF} cannot be deleted` });
        continue;
      }
      const oldHead = update.oldOid === ZERO ? null : update.oldOid;
      const base = await ledger.stateAt(oldHead);
      // Nothing builds on an invalid commit: a push on top of one is declined, as a local write is (Ledger.intactState).
      if (ledger.findings.length > 0) {
        const first = ledger.findings[0]!;
        findings.push({ ...first, message: `the ledger's history holds an invalid commit${first.commit === undefined ? '' : ` ${first.commit}`} (${first.message}): nothing builds on it; move main back to the last valid commit` });
        continue;
      }
      ledger.checkpoint(HOOK_CHECKPOINT_COMMITS);
      const commits = await commitsSince(ledger.reader, update.newOid, oldHead);
      if (commits === null) {
        findings.push({ code: 'HISTORY_FORK', message: `${update.newOid} does not descend from ${oldHead}: the ledger only moves forward` });
        continue;
      }
      const baseTree = oldHead === null ? null : (await readCommitLinks(ledger.reader, oldHead)).tree;
      // New commits, judged against the server's clock: an entry dated ahead of it is declined. A push of one commit lands
      // as its writer wrote it (every writer through a remote publishes so), and a claim in it dated behind is declined too;
      // a push of several is history moving (dropped commits put back, a main restored, a ledger moved), dated when written.
      // Any finding declines the push, so nothing past the first invalid commit is judged: a push of millions of forged
      // commits costs the server no more than its first.
      await ledger.replay({ state: cloneState(base), tree: baseTree }, commits, { clock: new Date(), landing: commits.length === 1, untilInvalid: true, onFinding: (finding) => findings.push(finding) });
    }
  } catch (error) {
    if (!(error instanceof CooError)) throw error;
    findings.push(toFinding(error));
  } finally {
    ledger.close();
  }
  return findings;
}
