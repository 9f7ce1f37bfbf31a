import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { withRefLock } from '../../src/ledger/ref-lock.js';
import { hostLabel, processStartTime, recordedProcessGone } from '../../src/util/process.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * A ledger shared by two users of one host, /proc mounted with hidepid: a coo holding the ledger
 * lock is alive (its pid answers a signal probe), but its /proc entry, and so its start time, is
 * hidden from the other user's coo. A start that cannot be read is no proof the holder went: the
 * lock stays its holder's, and the other writer waits and says LEDGER_LOCKED, never breaking it and
 * moving main beside a live writer.
 */

/** The pids whose /proc entry this test hides, as hidepid=2 hides another user's (ENOENT). */
const hidden = vi.hoisted(() => new Set<number>());

vi.mock('node:fs', async (importOriginal) => {
  const actual = await importOriginal<typeof fs>();
  const readFileSync = ((path: unknown, ...rest: unknown[]) => {
    const match = typeof path === 'string' ? /^\/proc\/(\d+)\/stat$/.exec(path) : null;
    if (match !== null && hidden.has(Number(match[1]))) throw Object.assign(new Error(`ENOENT: no such file or directory, open '${String(path)}'`), { code: 'ENOENT' });
    return (actual.readFileSync as (...args: unknown[]) => unknown)(path, ...rest);
  }) as typeof fs.readFileSync;
  return { ...actual, readFileSync, default: { ...actual, readFileSync } };
});

const dir = tempDir('lock-hidden-start-');
const children: ChildProcess[] = [];

afterEach(() => {
  hidden.clear();
  for (const child of children.splice(0)) child.kill('SIGKILL');
});

/** A live process of this host (the lock's holder) with its real start time, before it is hidden. */
function liveHolder(): { pid: number; start: string } {
  const child = spawn('sleep', ['600'], { stdio: 'ignore' });
  children.push(child);
  const pid = child.pid!;
  const start = processStartTime(pid);
  expect(start).not.toBeNull();
  return { pid, start: start! };
}

describe('a live holder of the ledger lock whose start time this coo cannot read (hidepid, another user)', () => {
  it('is not judged gone: its lock stays, the other writer ends LEDGER_LOCKED and never moves main beside it', async () => {
    const gitdir = fs.mkdtempSync(join(dir, 'ledger-'));
    const lock = join(gitdir, 'refs', 'heads', 'main.lock');
    fs.mkdirSync(join(gitdir, 'refs', 'heads'), { recursive: true });
    const holder = liveHolder();
    const held = JSON.stringify({ pid: holder.pid, host: hostLabel(), nonce: '0123456789abcdef', start: holder.start });
    fs.writeFileSync(lock, held);
    hidden.add(holder.pid);
    let updated = false;
    const attempt = withRefLock(
      gitdir,
      () => {
        updated = true;
        return Promise.resolve({ next: 'a'.repeat(40), result: null });
      },
      { waitMs: 50 },
    );
    await expect(attempt).rejects.toMatchObject({ code: 'LEDGER_LOCKED' });
    expect(updated).toBe(false);
    expect(fs.readFileSync(lock, 'utf8')).toBe(held);
    expect(fs.existsSync(join(gitdir, 'refs', 'heads', 'main'))).toBe(false);
  });

  it('is known gone once it has ended, and by a start that differs (its pid another program\'s): the rule holds both ways', async () => {
    const holder = liveHolder();
    expect(recordedProcessGone(hostLabel(), holder.pid, holder.start)).toBe(false);
    expect(recordedProcessGone(hostLabel(), holder.pid, String(Number(holder.start) + 1))).toBe(true);
    hidden.add(holder.pid);
    expect(recordedProcessGone(hostLabel(), holder.pid, holder.start)).toBe(false);
    expect(recordedProcessGone(`${hostLabel()}-other`, holder.pid, String(Number(holder.start) + 1))).toBe(false);
    const child = children[0]!;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
    expect(recordedProcessGone(hostLabel(), holder.pid, holder.start)).toBe(true);
  });
});
