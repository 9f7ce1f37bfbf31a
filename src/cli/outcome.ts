/**
 * How a verb ended when it did not throw: `rejected` when it found problems it has already
 * printed (verify, the hook). cli/coo.ts turns this into the exit status.
 */
let outcome: 'ok' | 'rejected' = 'ok';

export function markRejected(): void {
  outcome = 'rejected';
}

export function currentOutcome(): 'ok' | 'rejected' {
  return outcome;
}
