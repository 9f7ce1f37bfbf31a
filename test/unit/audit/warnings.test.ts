import { describe, expect, it } from 'vitest';
import { warningMeaning } from '../../../src/audit/warnings.js';

describe('warningMeaning', () => {
  it('words each warning the runner writes, and names an unknown one as unknown', () => {
    expect(warningMeaning('sandbox_unenforced')).toContain('without bubblewrap');
    expect(warningMeaning('context_injection_suspected')).toContain('instructions');
    expect(warningMeaning('usage_unreported')).toContain('estimate');
    expect(warningMeaning('usage_partial')).toContain("the attempt's cap");
    expect(warningMeaning('usage_implausible')).toContain('estimate');
    expect(warningMeaning('allowance_unstated')).toContain('bounded from the ledger');
    expect(warningMeaning('artifact_truncated')).toContain('cut');
    expect(warningMeaning('proposal_stripped')).toContain('stripped');
    expect(warningMeaning('bundle_unverified')).toContain('no bundle_hash is stated');
    expect(warningMeaning('constructor')).toContain('does not know');
    expect(warningMeaning('future_warning')).toContain('does not know');
  });
});
