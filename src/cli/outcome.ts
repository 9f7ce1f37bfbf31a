/**
 * How a verb ended when it did not throw: `rejected` when it found problems it has already
 * printed (verify, the hook), `interrupted` when the operator stopped a runner mid-attempt. cli/coo.ts
 * turns this into the exit status.
 */
let outcome: 'ok' | 'rejected' | 'interrupted' = 'ok';

export function markRejected(): void {
  outcome = 'rejected';
}

/** The operator stopped a runner (Ctrl-C) while an attempt was in flight; it has said what became of it. */
export function markInterrupted(): void {
  outcome = 'interrupted';
}

export function currentOutcome(): 'ok' | 'rejected' | 'interrupted' {
  return outcome;
}
