import { ERROR_CODES, errorClassOf, type ErrorCode } from '../errors.js';
import type { RunnerEvent } from '../runner/runner.js';

/**
 * What stops the server's own runner (`coo mcp --run`) from starting a message, as the agent needs
 * to hear it: a dispatch whose executor is missing stays queued, and without this the agent sees
 * only `queued` while the reason goes to the operator's log. A configuration error the runner
 * reports for a message (a code of the usage class: EXECUTOR_CONFIG, ORACLE_CONFIG) is kept until
 * the message is claimed or receipted, and `wait` and `dispatch` return it as a coded tool error.
 */
export class RunnerProblems {
  private readonly problems = new Map<string, { readonly code: ErrorCode; readonly message: string }>();

  observe(event: RunnerEvent): void {
    if (event.type === 'error' && event.messageId !== null && isErrorCode(event.code) && errorClassOf(event.code) === 'usage') {
      this.problems.set(event.messageId, { code: event.code, message: event.message });
    } else if (event.type === 'claimed' || event.type === 'receipt' || event.type === 'executor_started' || event.type === 'oracle_started') {
      this.problems.delete(event.messageId);
    }
  }

  problemOf(messageId: string): { readonly code: ErrorCode; readonly message: string } | null {
    return this.problems.get(messageId) ?? null;
  }
}

function isErrorCode(code: string): code is ErrorCode {
  return (ERROR_CODES as readonly string[]).includes(code);
}
