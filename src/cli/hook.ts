import { resolve } from 'node:path';
import { LIMITS } from '../limits.js';
import type { Command } from 'commander';
import { checkPush, parseRefUpdates } from '../ledger/receive.js';
import { readInput } from './common.js';
import { markRejected } from './outcome.js';
import { formatFinding } from './verify.js';
import { writeErr } from './terminal.js';
import { useReceivedObjects } from '../util/git-env.js';

export function hookVerb(program: Command): void {
  program
    // Git runs it from the hook coo init installs; it is not a verb for people, so help does not list it.
    .command('hook', { hidden: true })
    .description('git hooks of a ledger (installed by coo init)')
    .argument('<name>', 'pre-receive')
    .action(async (name: string) => {
      if (name !== 'pre-receive') throw new Error(`unknown hook ${name}`);
      const gitdir = resolve(process.env['GIT_DIR'] ?? '.');
      // The pushed objects are in git's quarantine: the gits the check starts read them there (no other coo verb's do).
      useReceivedObjects();
      const findings = await checkPush(gitdir, parseRefUpdates(readInput('-', 'ref updates', LIMITS.refUpdatesBytes).toString('utf8')));
      if (findings.length === 0) {
        writeErr('coo: push accepted: every commit passes the ledger validator\n');
        return;
      }
      markRejected();
      writeErr(`coo: push declined: ${findings.length} finding(s)\n${findings.map(formatFinding).join('\n')}\n`);
    });
}
