import { execFile } from 'node:child_process';
import { CooError } from '../errors.js';
import { LIMITS } from '../limits.js';
import { gitEnvironment } from './git-env.js';

/** Runs git with arguments (never a shell), `input` on its standard input, and returns stdout as a buffer. */
export function runGit(args: readonly string[], cwd?: string, input?: string): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const child = execFile('git', args as string[], { cwd, env: gitEnvironment(), encoding: 'buffer', maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) => {
      if (error !== null) {
        // git's own line, not a hint before it (GIT_GRAFT_FILE=/dev/null has every git that reads commits say one: util/git-env.ts).
        const message = Buffer.from(stderr).toString('utf8').trim().split('\n').find((line) => !line.startsWith('hint:')) ?? error.message;
        reject(new CooError('GIT_FAILED', `git ${args.slice(0, 2).join(' ')}: ${message.slice(0, LIMITS.pathChars)}`, { cause: error }));
        return;
      }
      resolve(Buffer.from(stdout));
    });
    // A git that exits before reading all of it (a repository gone meanwhile) says why through its exit; the broken pipe is not an error of ours.
    child.stdin?.on('error', () => undefined);
    if (input !== undefined) child.stdin?.end(input);
  });
}
