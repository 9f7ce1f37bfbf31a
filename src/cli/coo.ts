import { run, type RunOutcome } from './program.js';
import { closeUmask } from '../util/umask.js';

/**
 * The one place exit statuses are decided: 0 ok, 1 error, 2 usage, 3 verification failed or
 * rejected, 130 a runner the operator stopped (Ctrl-C) while an attempt was in flight, as a shell
 * reports a command SIGINT ended.
 */
const EXIT: Record<RunOutcome, number> = { ok: 0, error: 1, usage: 2, rejected: 3, interrupted: 130 };

/**
 * Ends the process once the verb's outcome is known and what it printed is written. Whatever a verb
 * left running by mistake (a git child, a worker, a watcher, a timer) cannot keep the command from
 * ending with its status.
 */
function exit(code: number): void {
  process.exitCode = code;
  let open = 2;
  const written = (): void => {
    open -= 1;
    if (open === 0) process.exit(code);
  };
  process.stdout.write('', written);
  process.stderr.write('', written);
}

/**
 * A stderr whose reader went away (a log piped to a pager the operator quit, a closed descriptor)
 * leaves nowhere to say anything more: the lines written to it are dropped, and the verb goes on to
 * its own status. Unlistened, the first EPIPE was an uncaught error that ended `coo mcp` or
 * `coo watch` with status 1 in the middle of serving.
 */
process.stderr.on('error', () => undefined);

/**
 * A standard output whose reader went away (`coo watch --json | jq` with jq quit, `| head -1`, a
 * terminal closed) is the same: what is printed to it is dropped and the verb goes on. Unlistened,
 * the EPIPE of the first line after was an uncaught error with a stack trace that ended `coo watch
 * --json` between its claim and its attempt, the message left claimed with no receipt.
 */
process.stdout.on('error', () => undefined);

closeUmask();

run(process.argv.slice(2)).then(
  (outcome) => exit(EXIT[outcome]),
  () => exit(EXIT.error),
);
