import { stopCount } from './children.js';

/**
 * Starting a process in a sandbox until the sandbox stands. Under bubblewrap the process started is
 * bubblewrap: a shell inside says on a pipe of its own (fd 3), once the sandbox stands and the
 * command is there, that it is about to become the command, and closes that pipe first. A start
 * that never said so ran nothing: most often a folder the sandbox hides (another runner's, listed
 * when the start was planned) was removed by its runner in the milliseconds before bubblewrap
 * mounted over it. Such a start is planned again (the folders listed again: one that vanished is
 * simply not hidden any more) and begun again, a bounded number of times. A start that said so, was
 * killed, could not be spawned, or met the operator's stop is never begun again: the command runs at
 * most once.
 */

/** How many times a sandbox that did not stand is set up before its attempt fails. */
export const SANDBOX_TRIES = 3;

/** Inside the sandbox: once the command is there to run, say so on fd 3, close it, and become the command. */
export const SANDBOX_STOOD = 'command -v "$1" >/dev/null || { echo "coo: $1 cannot be run inside the sandbox" >&2; exit 127; }; (printf 1 >&3) 2>/dev/null; exec 3>&-; exec "$@"';

/** The shell that says the sandbox stands, then runs `command`: what follows bubblewrap's arguments. */
export function standingCommand(command: readonly string[]): string[] {
  return ['/bin/sh', '-c', SANDBOX_STOOD, 'sh', ...command];
}

/** How one start ended, as far as whether to begin it again. */
export interface SandboxStart {
  /** The shell inside said the sandbox stood: the command may have run. */
  readonly stood: boolean;
  /** bubblewrap exited by itself (an exit code, no signal, no kill of ours, no spawn error). */
  readonly exitedByItself: boolean;
}

/**
 * Runs `start` until its sandbox stands, at most SANDBOX_TRIES times; `start` plans the sandbox afresh
 * each time. Returns the last start and how many were made; `fell` is true when the last one's sandbox
 * did not stand though bubblewrap exited by itself: nothing ran, and the sandbox could not be set up.
 */
export async function untilSandboxStands<T>(start: () => Promise<T>, ended: (run: T) => SandboxStart): Promise<{ readonly run: T; readonly tries: number; readonly fell: boolean }> {
  const stops = stopCount();
  for (let tries = 1; ; tries += 1) {
    const run = await start();
    const how = ended(run);
    const fell = !how.stood && how.exitedByItself;
    if (!fell || tries >= SANDBOX_TRIES || stopCount() !== stops) return { run, tries, fell };
  }
}

/** What an attempt whose sandbox never stood says: nothing ran, with bubblewrap's own first words. */
export function sandboxFellText(tries: number, said: string): string {
  const first = said.split('\n').find((line) => line.startsWith('bwrap: ') || line.startsWith('coo: ')) ?? said.trim().split('\n', 1)[0] ?? '';
  return `the sandbox could not be set up (${tries} ${tries === 1 ? 'try' : 'tries'}), so nothing ran: ${first === '' ? 'bubblewrap said nothing' : first}; a folder it hides may have been removed as it started, or bubblewrap cannot mount here`;
}
