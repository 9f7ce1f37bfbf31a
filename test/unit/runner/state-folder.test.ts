import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { holdStateFolder } from '../../../src/runner/state-folder.js';
import { hostLabel } from '../../../src/util/process.js';
import { tempDir } from '../../helpers/tmp.js';

const dir = tempDir('state-folder-');
let folders = 0;

function stateDir(): string {
  folders += 1;
  return join(dir, `state-${folders}`);
}

/** A record another runner process left in the folder: `pid` names a live process (this one) or a gone one. */
function recordOf(state: string, pid: number, record: unknown): string {
  mkdirSync(join(state, 'holders'), { recursive: true });
  const path = join(state, 'holders', `${hostLabel()}.${pid}.-.0a1b2c.json`);
  writeFileSync(path, typeof record === 'string' ? record : JSON.stringify(record));
  return path;
}

/** A pid no process holds: above every pid_max Linux allows. */
const GONE = 99_999_999;

describe('holdStateFolder', () => {
  it('lets runners of one ledger without a remote share the folder, and forgets each record when its runner gives the folder up', () => {
    const state = stateDir();
    const first = holdStateFolder(state, '/ledgers/one.git', null);
    const second = holdStateFolder(state, '/ledgers/one.git', null);
    expect(readdirSync(join(state, 'holders'))).toHaveLength(2);
    first();
    second();
    expect(readdirSync(join(state, 'holders'))).toEqual([]);
  });

  it('refuses a runner through a remote beside a live runner of the folder, and any runner beside one through a remote, leaving no record of its own', () => {
    const state = stateDir();
    const local = holdStateFolder(state, '/ledgers/one.git', null);
    expect(() => holdStateFolder(state, '/clones/one.git', 'ssh://host/one.git')).toThrow(expect.objectContaining({ code: 'RUNNER_CONFIG', message: expect.stringMatching(/is in use by a runner of \/ledgers\/one\.git \(.*\), and a runner through a remote has its state folder to itself/) }));
    expect(readdirSync(join(state, 'holders'))).toHaveLength(1);
    local();
    const through = holdStateFolder(state, '/clones/one.git', 'ssh://host/one.git');
    expect(() => holdStateFolder(state, '/clones/one.git', 'ssh://host/one.git')).toThrow(expect.objectContaining({ code: 'RUNNER_CONFIG', message: expect.stringContaining('a runner of /clones/one.git through ssh://host/one.git') }));
    expect(() => holdStateFolder(state, '/ledgers/one.git', null)).toThrow(expect.objectContaining({ code: 'RUNNER_CONFIG' }));
    through();
  });

  it('refuses a runner of another ledger beside a live one, without a remote too', () => {
    const state = stateDir();
    const first = holdStateFolder(state, '/ledgers/one.git', null);
    expect(() => holdStateFolder(state, '/ledgers/two.git', null)).toThrow(expect.objectContaining({ code: 'RUNNER_CONFIG', message: expect.stringContaining('not of /ledgers/two.git: give each ledger a --state-dir of its own') }));
    first();
  });

  it('removes the record of a runner whose process is gone, whatever it used the folder for, and runs', () => {
    const state = stateDir();
    const stale = recordOf(state, GONE, { ledger: '/clones/one.git', remote: 'ssh://host/one.git' });
    const release = holdStateFolder(state, '/ledgers/one.git', null);
    expect(existsSync(stale)).toBe(false);
    release();
  });

  it('refuses beside a record of a live process it cannot read, naming it', () => {
    const state = stateDir();
    const torn = recordOf(state, process.pid, '{"ledger": ');
    expect(() => holdStateFolder(state, '/ledgers/one.git', null)).toThrow(expect.objectContaining({ code: 'RUNNER_CONFIG', message: expect.stringContaining(`a runner whose record ${torn} cannot be read: remove it if no runner uses the folder`) }));
    expect(readdirSync(join(state, 'holders'))).toEqual([torn.split('/').at(-1)]);
  });
});
