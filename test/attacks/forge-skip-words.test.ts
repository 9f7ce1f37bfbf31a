import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { forgeSkipWords, ledgerMessage } from '../../src/ledger/commit-format.js';
import { coo } from '../helpers/cli.js';
import { makeServedLedger, removeHook, type ServedLedger } from '../helpers/remote-ledger.js';
import { fixtureFiles, stockCommit } from '../helpers/stock.js';
import { git, gitEnv, tempDir } from '../helpers/tmp.js';

/**
 * GitHub runs no push workflow for a push whose commit message holds one of these (its documented
 * forms, in any case): a runner's key could force main back to an older commit plus one valid commit
 * saying so, and the forge's check would never run on that push.
 */
const SKIP_FORMS = ['[skip ci]', '[ci skip]', '[no ci]', '[skip actions]', '[actions skip]', '[SKIP CI]', '[Ci Skip]', '[No CI]', '[Skip Actions]', '[ACTIONS SKIP]'];
/** The trailer form: a paragraph of its own before the Ledger-Seq trailer. */
const SKIP_TRAILERS = ['skip-checks: true', 'skip-checks:true', 'Skip-Checks: TRUE'];

const dir = tempDir('coo-skip-words-');

let made = 0;

/** A commit the COO's key signs in a stock clone of `served` (a dispatch the COO may write), valid but for its message; returns the clone. */
function skipCommit(served: ServedLedger, message: string): string {
  made += 1;
  const work = join(dir, `work-${made}`);
  git(['clone', '-q', served.gitdir, work]);
  const id = `msg_01M8NQFJ01J7CG66HWNDDJ85${String(made).padStart(2, '0')}`;
  stockCommit(work, fixtureFiles(id, `skip-${made}`), { key: served.keys.coo, seq: served.seq() + 1, message });
  return work;
}

function push(work: string): { status: number | null; stderr: string } {
  const pushed = spawnSync('git', ['push', 'origin', 'main'], { cwd: work, encoding: 'utf8', env: gitEnv() });
  return { status: pushed.status, stderr: pushed.stderr };
}

describe("a ledger commit whose message holds a forge's skip words, signed by a valid actor key", { timeout: 180_000 }, () => {
  let hooked: ServedLedger;
  let forge: ServedLedger;

  beforeAll(async () => {
    hooked = await makeServedLedger(join(dir, 'hooked'));
    forge = await makeServedLedger(join(dir, 'forge'));
    removeHook(forge);
  }, 120_000);

  it.each([...SKIP_FORMS.map((form) => [form, `routine ${form}`]), ...SKIP_TRAILERS.map((form) => [form, `routine\n\n${form}`])])('%s: the pre-receive hook declines it, naming the words (COMMIT_MALFORMED)', (form, message) => {
    const head = hooked.head();
    const work = skipCommit(hooked, message);
    const commit = git(['rev-parse', 'HEAD'], { cwd: work }).trim();
    const pushed = push(work);
    expect(pushed.status).not.toBe(0);
    expect(pushed.stderr).toMatch(new RegExp(`^remote: coo: push declined: 1 finding\\(s\\) *\nremote:   COMMIT_MALFORMED \\[${commit.slice(0, 12)}\\]: commit message holds "${form.replace(/[[\]]/g, '\\$&')}", for which a forge runs no check`, 'm'));
    expect(hooked.head()).toBe(head);
  });

  it('the same commit with a message that holds none of them is taken (the words alone were refused)', () => {
    const head = hooked.head();
    const work = skipCommit(hooked, 'routine skip ci');
    const pushed = push(work);
    expect(pushed.status, pushed.stderr).toBe(0);
    expect(hooked.head()).not.toBe(head);
    expect(hooked.head()).toBe(git(['rev-parse', 'HEAD'], { cwd: work }).trim());
  });

  it('on a forge with no hook, where it lands: coo verify finds it (what the daily check runs), naming the commit', () => {
    const work = skipCommit(forge, 'rollback [skip ci]');
    const pushed = push(work);
    expect(pushed.status, pushed.stderr).toBe(0);
    const commit = forge.head();
    const verified = coo(['verify', '--ledger', forge.gitdir, '--trust-root', forge.ceoKeyId, '--no-checkpoint']);
    expect(verified.status).toBe(3);
    expect(verified.stdout).toMatch(/^FAILED: 1 finding\(s\)/);
    expect(verified.stdout).toContain(`COMMIT_MALFORMED [${commit.slice(0, 12)}]: commit message holds "[skip ci]"`);
  });
});

describe("coo's own commit messages", () => {
  it("never hold the skip words, whatever a summary says: ledgerMessage takes their brackets and colon away, and the message still ends with its Ledger-Seq trailer", () => {
    // Nested brackets too: taking the inner ones away leaves the outer ones around the words again.
    for (const form of [...SKIP_FORMS, ...SKIP_TRAILERS, '[ skip  ci ]', '[skipci]', '[[skip ci]]', '[[[no ci]]]', '[ [skip actions] ]']) {
      const message = ledgerMessage(`receipt ${form} done`, 7);
      expect(forgeSkipWords(`x ${form}`)).not.toBeNull();
      expect(forgeSkipWords(message)).toBeNull();
      expect(message).toMatch(/^receipt .* done\n\nLedger-Seq: 7\n$/);
    }
    expect(ledgerMessage('claim msg_01 attempt 1', 3)).toBe('claim msg_01 attempt 1\n\nLedger-Seq: 3\n');
  });
});
