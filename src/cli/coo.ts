import { run, type RunOutcome } from './program.js';

/** The one place exit statuses are decided: 0 ok, 1 error, 2 usage, 3 verification failed or rejected. */
const EXIT: Record<RunOutcome, number> = { ok: 0, error: 1, usage: 2, rejected: 3 };

run(process.argv.slice(2)).then(
  (outcome) => {
    process.exitCode = EXIT[outcome];
  },
  () => {
    process.exitCode = EXIT.error;
  },
);
