import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { verifyLedger } from '../../src/audit/verify.js';
import { T0, dispatchEnvelope, messageFiles, makeLedger } from '../helpers/ledger.js';
import { tally } from '../helpers/tally.js';
import { git, gitEnv, tempDir } from '../helpers/tmp.js';

/** `COO_RELIABILITY=full`: 600 commits against the packers. The normal suite runs 40. */
const FULL = process.env['COO_RELIABILITY'] === 'full';
const COMMITS = FULL ? 600 : 40;
/** A full verify, from a handle of its own, every this many commits, while the packers run. */
const VERIFY_EVERY = FULL ? 100 : 20;

/**
 * Stock git packing the ledger in two loops until told to stop: a full `git gc` (which packs the
 * refs too, and prunes), `git pack-refs` and `git repack -a -d` (which deletes the packs readers
 * have open); and beside it `git repack -d` and `git prune-packed`, which empty and remove fan-out
 * folders as fast as the writer makes them. Each line of output is a pass of either loop.
 */
const PACKERS = [
  'while [ ! -e "$STOP" ]; do',
  '  git gc --quiet',
  '  git pack-refs --all',
  '  git repack -a -d -q',
  // What gc runs. A bare `git prune` (or `--expire=now`) removes a commit's objects before its ref
  // moves, for git's own writers as for this one: git documents it as unsafe beside a writer.
  '  git prune --expire=2.weeks.ago',
  '  echo pass',
  'done &',
  'while [ ! -e "$STOP" ]; do',
  '  git repack -d -q',
  '  git prune-packed',
  '  echo pass',
  'done',
  'wait',
].join('\n');

const dir = tempDir();

describe('git packing the ledger under a writer', () => {
  it(`lands every one of ${COMMITS} commits while git gc, repack -d, prune-packed and pack-refs run in a loop against the writer, and the history verifies`, async () => {
    const { gitdir, actors, ledger } = await makeLedger(dir);
    const stop = join(dir, 'stop');
    const packers = spawn('sh', ['-c', PACKERS], { env: { ...gitEnv(), GIT_DIR: gitdir, STOP: stop }, stdio: ['ignore', 'pipe', 'pipe'] });
    let passes = 0;
    let complaints = '';
    packers.stdout.on('data', (chunk: Buffer) => {
      passes += chunk.toString('utf8').split('\n').filter((line) => line === 'pass').length;
    });
    packers.stderr.on('data', (chunk: Buffer) => {
      complaints += chunk.toString('utf8');
    });
    const done = new Promise<void>((resolve) => packers.on('exit', () => resolve()));
    const errors: string[] = [];
    const findings: unknown[] = [];
    let landed = 0;
    try {
      // Start writing only once the packers have been through the ledger at least once.
      while (passes === 0 && packers.exitCode === null) await new Promise((resolve) => setTimeout(resolve, 20));
      for (let i = 0; i < COMMITS; i += 1) {
        try {
          const result = await ledger.append({ files: [...messageFiles(dispatchEnvelope())], key: actors.coo, summary: 'dispatch', now: T0 });
          if ('seq' in result) landed += 1;
        } catch (error) {
          errors.push((error as Error).message);
        }
        if ((i + 1) % VERIFY_EVERY === 0) findings.push(...(await verifyLedger(gitdir, { full: true })).findings);
      }
    } finally {
      writeFileSync(stop, '');
      await done;
      ledger.close();
    }
    expect(errors).toEqual([]);
    expect(landed).toBe(COMMITS);
    expect(findings).toEqual([]);
    expect(passes).toBeGreaterThan(0);
    // git's own complaints about files it does not know in the object store ("bad sha1 file", "garbage").
    expect(complaints).not.toMatch(/bad sha1 file|garbage/);
    expect(git(['--git-dir', gitdir, 'for-each-ref', '--format=%(refname)']).trim()).toBe('refs/heads/main');
    expect(git(['--git-dir', gitdir, 'fsck', '--strict', '--no-dangling'])).toBe('');
    const report = await verifyLedger(gitdir, { full: true });
    expect(report.findings).toEqual([]);
    expect(report.seq).toBe(COMMITS + 1);
    tally('load', { test: 'packing under the writer', commits: COMMITS, landed, errors: errors.length, packing_passes: passes });
  }, 20 * 60_000);
});
