import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { makeServedLedger, type ServedLedger } from '../helpers/remote-ledger.js';
import { git, gitEnv, tempDir } from '../helpers/tmp.js';

const COUNT = 100_000;
const dir = tempDir('coo-hook-deep-');
let served: ServedLedger;
let work: string;
let first: string;
let before: string;

/** `count` commits on top of the clone's main, made with stock git (fast-import): each keeps the tree, says the next Ledger-Seq and is signed by no one. Returns the first. */
function deepForgery(clone: string, count: number): string {
  const head = git(['rev-parse', 'main'], { cwd: clone }).trim();
  const tree = git(['rev-parse', `${head}^{tree}`], { cwd: clone }).trim();
  const seq = served.seq();
  const parts: string[] = [];
  for (let i = 1; i <= count; i += 1) {
    const message = `forged ${i}\n\nLedger-Seq: ${seq + i}\n`;
    parts.push(`commit refs/heads/main\nmark :${i}\ncommitter forger <forger> ${1_700_000_000 + i} +0000\ndata ${Buffer.byteLength(message)}\n${message}${i === 1 ? `from ${head}\n` : ''}M 040000 ${tree} \n\n`);
  }
  const imported = spawnSync('git', ['fast-import', '--quiet'], { cwd: clone, input: parts.join(''), encoding: 'utf8' });
  expect(imported.status, imported.stderr).toBe(0);
  return git(['rev-parse', `main~${count - 1}`], { cwd: clone }).trim();
}

beforeAll(async () => {
  served = await makeServedLedger(join(dir, 'remote'));
  before = served.head();
  work = join(dir, 'work');
  git(['clone', '-q', served.gitdir, work]);
  first = deepForgery(work, COUNT);
}, 300_000);

describe(`a push of ${COUNT.toLocaleString('en')} commits no one signed to a ledger whose pre-receive hook runs`, { timeout: 300_000 }, () => {
  it('the hook declines it at the first forged commit, with that commit\'s finding alone (it judges nothing past it), in a small heap; main stays where it was', () => {
    // A small heap: judging up to the first invalid commit needs little of it. The count of findings says how far the hook judged (all 100,000 before).
    const pushed = spawnSync('git', ['push', 'origin', 'main'], { cwd: work, encoding: 'utf8', env: { ...gitEnv(), NODE_OPTIONS: '--max-old-space-size=96' } });
    expect(pushed.status).not.toBe(0);
    // git pads each line of the remote's with spaces.
    expect(pushed.stderr).toMatch(new RegExp(`^remote: coo: push declined: 1 finding\\(s\\) *\nremote:   COMMIT_UNSIGNED \\[${first.slice(0, 12)}\\]: commit carries no gpgsig signature *\n`, 'm'));
    expect(pushed.stderr.match(/COMMIT_UNSIGNED/g)).toHaveLength(1);
    expect(pushed.stderr).toMatch(/\[remote rejected\] +main -> main \(pre-receive hook declined\)/);
    expect(served.head()).toBe(before);
  });
});
