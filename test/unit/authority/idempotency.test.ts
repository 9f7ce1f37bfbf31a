import { describe, expect, it } from 'vitest';
import { repeatedRequest, requestFingerprint } from '../../../src/authority/idempotency.js';
import type { MessageRecord } from '../../../src/authority/state.js';
import { codeOf } from '../../helpers/codes.js';
import { dispatchEnvelope } from '../../helpers/ledger.js';

const first = dispatchEnvelope({ idempotency_key: 'k' });
const record = { id: first.message_id, correlation: first.correlation_id, fingerprint: requestFingerprint(first), duplicateOf: null } as unknown as MessageRecord;
const again = (overrides: Record<string, unknown>) => dispatchEnvelope({ idempotency_key: 'k', ...overrides });

describe('an idempotency key names one request in one correlation', () => {
  it('is new when nothing used the key', () => {
    expect(repeatedRequest(first, requestFingerprint(first), undefined, undefined, 'e')).toBeNull();
  });

  it('repeats the first message for the same request in the same correlation, whatever its id, times and budget', () => {
    const repeat = again({ correlation_id: first.correlation_id, budget: { max_cost_usd: 0.5, max_runtime_seconds: 60, correlation_budget_remaining_usd: null } });
    expect(repeatedRequest(repeat, requestFingerprint(repeat), first.message_id, record, 'e')).toBe(record);
  });

  it('conflicts for another request, or for the same request under another correlation', () => {
    const other = dispatchEnvelope({ idempotency_key: 'k', correlation_id: first.correlation_id, max_hops: 2 });
    expect(codeOf(() => repeatedRequest(other, requestFingerprint(other), first.message_id, record, 'e'))).toBe('IDEMPOTENCY_CONFLICT');
    const moved = again({ correlation_id: 'corr_moved' });
    expect(requestFingerprint(moved)).toBe(record.fingerprint);
    expect(codeOf(() => repeatedRequest(moved, requestFingerprint(moved), first.message_id, record, 'e'))).toBe('IDEMPOTENCY_CONFLICT');
  });
});
