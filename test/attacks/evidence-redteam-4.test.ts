import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { renderCitation } from '../../src/audit/cite.js';
import { gatherEvidence } from '../../src/audit/evidence.js';
import { makeWorld, receiptsOf, type World } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * What a consult's evidence tells an auditor (coo cite, coo attest, the envelope's context pin)
 * against what the runner judged and what the target repository holds, when the answer, the
 * repository or a second ledger under the same COO key is shaped to make them differ.
 */
const dir = tempDir();
let count = 0;
const open: World[] = [];
afterEach(async () => {
  for (const world of open.splice(0)) await world.close();
});

async function world(options: Parameters<typeof makeWorld>[1] = {}): Promise<World> {
  count += 1;
  const made = await makeWorld(join(dir, `w${count}`), options);
  open.push(made);
  return made;
}

describe('the advice coo cite shows is the advice the runner judged', () => {
  it('a succeeded answer whose proposals carried authority (stripped by the judge) is cited with its verdict and summary, not as no advice', async () => {
    const w = await world({ modes: ['propose-authority'] });
    const { messageId } = await w.consult({ idempotencyKey: 'stripped-proposal' });
    await w.runner().runOnce();
    const [receipt] = await receiptsOf(w, messageId);
    expect(receipt).toMatchObject({ status: 'succeeded' });
    expect(receipt!['warnings']).toContain('proposal_stripped');
    const evidence = await gatherEvidence(w.gitdir, messageId);
    expect(evidence.answer?.verdict).toBe('approve_with_changes');
    const citation = renderCitation(evidence);
    expect(citation).toContain('**Verdict:** approve_with_changes');
    expect(citation).toContain('one edge case needs a test');
    // Its warning is worded as what it is, not as a code this version of coo does not know.
    expect(citation).toContain('`proposal_stripped`: the answer passed, but proposals in it carried authority');
    expect(citation).not.toContain('does not know');
  }, 60_000);
});
