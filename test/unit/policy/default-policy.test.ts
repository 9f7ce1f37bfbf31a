import { describe, expect, it } from 'vitest';
import { isRunnerIntent } from '../../../src/authority/runnable.js';
import { defaultPolicy } from '../../../src/ledger/init.js';

/** Intents the default policy may list without a runner executing them: what the COO reads in its inbox (coo inbox), and its acknowledgements. */
const READ_BY_THE_COO = new Set(['receipt_notice', 'blocker', 'ceo_command', 'ceo_reject', 'ack']);

describe('the default policy', () => {
  it('lists no intent that nothing executes or reads', () => {
    const intents = new Set(defaultPolicy().edges.flatMap((edge) => edge.intents));
    for (const intent of intents) expect(isRunnerIntent(intent) || READ_BY_THE_COO.has(intent), intent).toBe(true);
    expect(intents.has('status_query')).toBe(false);
    expect(intents.has('retry')).toBe(false);
  });
});
