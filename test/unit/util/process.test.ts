import { spawn, spawnSync } from 'node:child_process';
import { readFileSync, readlinkSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { bootId, endRecordedGroup, formatProcessRecord, parseProcessRecord, processStartTime, recordedBoot, startTimeOf } from '../../../src/util/process.js';

const children: number[] = [];
afterAll(() => {
  for (const pid of children) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // ended by the test
    }
  }
});

/** A process in a group of its own, as the runner starts an executor. */
function leader(): number {
  const child = spawn('sleep', ['300'], { detached: true, stdio: 'ignore' });
  children.push(child.pid!);
  return child.pid!;
}

const ended = (pid: number): boolean => {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.startsWith('Z');
  } catch {
    return true;
  }
};

describe('a process the runner recorded', () => {
  it('reads the start time after the command name, whatever the name holds', () => {
    const fields = Array.from({ length: 50 }, (_, i) => String(i + 3));
    expect(startTimeOf(`1234 (a) (b c) ${fields.join(' ')}`)).toBe('22');
    expect(startTimeOf('1234 (x)')).toBeNull();
  });

  it('writes and reads a record, and takes no record without its start time', () => {
    expect(parseProcessRecord(formatProcessRecord({ pid: 4242, start: '987' }))).toEqual({ pid: 4242, start: '987' });
    expect(parseProcessRecord(formatProcessRecord({ pid: 4242, start: null }))).toEqual({ pid: 4242, start: null });
    for (const text of ['4242\n', '4242', 'x 1', '1 2', '-5 3', '']) expect(parseProcessRecord(text), text).toBeNull();
  });

  it('ends the group of a process that still has its recorded start time, and nothing with another start time', () => {
    const stranger = leader();
    expect(endRecordedGroup({ pid: stranger, start: String(Number(processStartTime(stranger)) + 1) })).toBe('reused');
    expect(endRecordedGroup({ pid: stranger, start: null })).toBe('reused');
    expect(ended(stranger)).toBe(false);
    const own = leader();
    expect(endRecordedGroup({ pid: own, start: processStartTime(own) })).toBe('killed');
    // The kernel ends it: a zombie until this test's process reaps it.
    for (let i = 0; i < 200 && !ended(own); i += 1) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10);
    expect(ended(own)).toBe(true);
  });

  it("never signals a record of another boot (a state folder copied or restored onto another machine), even one whose pid and start time name a live process here", () => {
    const elsewhere = '00000000-0000-4000-8000-000000000000';
    expect(parseProcessRecord(formatProcessRecord({ pid: 4242, start: '987', mark: 'a'.repeat(24), boot: elsewhere }))).toEqual({ pid: 4242, start: '987', mark: 'a'.repeat(24), boot: elsewhere });
    const stranger = leader();
    expect(endRecordedGroup({ pid: stranger, start: processStartTime(stranger), boot: elsewhere })).toBe('gone');
    expect(ended(stranger)).toBe(false);
  });

  it('states the pid namespace it was written in beside the boot, and reads a record without one as before', () => {
    const here = /^pid:\[(\d+)\]$/.exec(readlinkSync('/proc/self/ns/pid'))?.[1];
    expect(here).toBeDefined();
    expect(recordedBoot()).toEqual({ boot: bootId(), pidns: here });
    const record = { pid: 4242, start: '987', mark: 'a'.repeat(24), boot: '00000000-0000-4000-8000-000000000000', pidns: '4026531836' };
    expect(formatProcessRecord(record)).toBe(`4242 987 ${'a'.repeat(24)} boot=${record.boot} pidns=4026531836\n`);
    expect(parseProcessRecord(formatProcessRecord(record))).toEqual(record);
    expect(parseProcessRecord(`4242 987 boot=${record.boot}\n`)).toEqual({ pid: 4242, start: '987', boot: record.boot });
    expect(parseProcessRecord('4242 987 pidns=4026531836\n')).toEqual({ pid: 4242, start: '987', pidns: '4026531836' });
  });

  it("never signals a record of this boot and another pid namespace (a container recreated on this machine), though its pid and start time name a live process here", () => {
    const stranger = leader();
    expect(endRecordedGroup({ pid: stranger, start: processStartTime(stranger), ...recordedBoot(), pidns: '1' })).toBe('gone');
    expect(ended(stranger)).toBe(false);
  });

  it("never signals a record of this boot and another pid namespace whose pid is free here and numbers a stranger's leaderless group", async () => {
    // The leader exits at once and leaves its child in the group: no process holds the group's number as its pid.
    const shell = spawn('sh', ['-c', 'sleep 300 & exit 0'], { detached: true, stdio: 'ignore' });
    children.push(shell.pid!);
    await new Promise((resolve) => shell.on('exit', resolve));
    const members = (): number => spawnSync('ps', ['-o', 'pid=', '-g', String(shell.pid)], { encoding: 'utf8' }).stdout.trim().split('\n').filter(Boolean).filter((pid) => !ended(Number(pid))).length;
    expect(members()).toBe(1);
    expect(endRecordedGroup({ pid: shell.pid!, start: '1', ...recordedBoot(), pidns: '1' })).toBe('gone');
    expect(members()).toBe(1);
    // A record of this namespace is the runner's: the group is its leftover, and it is ended (a guard).
    expect(endRecordedGroup({ pid: shell.pid!, start: '1', ...recordedBoot() })).toBe('killed');
  });
});
