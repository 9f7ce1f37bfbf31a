import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bwrapArgs } from '../../src/util/bubblewrap.js';
import { registerPrivateFolders, registeredPrivateFolders, stateRoot } from '../../src/util/runner-folders.js';
import { requireBubblewrap } from '../helpers/bubblewrap.js';
import { outsideTempDir } from '../helpers/tmp.js';

/** Two runners on one machine, each with its own state folder and key folder; the sandbox is runner A's. */
describe("a sandbox and the folders of another runner on the same machine", () => {
  // Outside the shared temporary folders, which every sandbox empties as a whole.
  const base = outsideTempDir('neighbours-');
  const previous = process.env['XDG_STATE_HOME'];
  const folder = (...parts: string[]): string => {
    const path = join(base, ...parts);
    mkdirSync(path, { recursive: true });
    return path;
  };
  beforeAll(() => {
    process.env['XDG_STATE_HOME'] = folder('xdg-state');
  });
  afterAll(() => {
    if (previous === undefined) delete process.env['XDG_STATE_HOME'];
    else process.env['XDG_STATE_HOME'] = previous;
  });

  function inSandboxOfA(stateA: string, keysA: string, script: string): string {
    const bwrap = requireBubblewrap('the neighbour runners test');
    const worktree = folder(stateA.slice(base.length + 1), 'worktrees', 'attempt-a');
    const args = bwrapArgs(bwrap, { writable: [worktree], hide: [stateA, keysA], chdir: worktree, ownPids: true });
    const result = spawnSync(args[0]!, [...args.slice(1), '/bin/sh', '-c', script], { encoding: 'utf8' });
    return result.stdout;
  }

  it("hides runner B's worktrees and COO key folder, given as --state-dir and --key anywhere, from runner A's agent", () => {
    const stateA = folder('a', 'state');
    const keysA = folder('a', 'keys');
    const stateB = folder('elsewhere', 'b-state');
    const keysB = folder('keys-of-b');
    writeFileSync(join(folder('elsewhere', 'b-state', 'worktrees', 'attempt-b'), 'plan.txt'), 'worktree of runner B\n');
    writeFileSync(join(keysB, 'coo.key'), 'COO key of runner B\n');
    const script = `cat ${join(stateB, 'worktrees', 'attempt-b', 'plan.txt')} ${join(keysB, 'coo.key')} 2>/dev/null; echo made > made.txt; cat made.txt`;
    // Before runner B records its folders, its files are in plain sight: the test can fail.
    expect(inSandboxOfA(stateA, keysA, script)).toContain('COO key of runner B');
    registerPrivateFolders([stateB, keysB]);
    registerPrivateFolders([stateB]);
    expect(registeredPrivateFolders()).toEqual([stateB, keysB]);
    const seen = inSandboxOfA(stateA, keysA, script);
    expect(seen).not.toContain('runner B');
    expect(seen.trim()).toBe('made');
  });

  it("hides the default state root whole, where every runner's state folder lives unless told otherwise, and binds back only this attempt's folder", () => {
    const root = stateRoot();
    const stateA = folder('xdg-state', 'coo-commons', 'runner', 'aaaa');
    const keysA = folder('a2', 'keys');
    // Runner C never recorded anything: its default state folder sits in the same root.
    writeFileSync(join(folder('xdg-state', 'coo-commons', 'runner', 'cccc', 'worktrees', 'attempt-c'), 'plan.txt'), 'worktree of runner C\n');
    const seen = inSandboxOfA(stateA, keysA, `cat ${join(root, 'runner', 'cccc', 'worktrees', 'attempt-c', 'plan.txt')} ${join(root, 'private-folders')} 2>/dev/null; ls ${join(root, 'runner')}; echo made > made.txt`);
    expect(seen).not.toContain('runner C');
    expect(seen).not.toContain('b-state');
    expect(seen.trim().split('\n')).toEqual(['aaaa']);
    expect(readFileSync(join(stateA, 'worktrees', 'attempt-a', 'made.txt'), 'utf8')).toBe('made\n');
  });

  it('never hides the home folder, though a runner keeps its key there', () => {
    const home = process.env['HOME'] ?? '/root';
    registerPrivateFolders([home]);
    const args = bwrapArgs(requireBubblewrap('the neighbour runners test'), { writable: [folder('h', 'work')], hide: [], chdir: folder('h', 'work') });
    expect(args.join(' ')).not.toContain(`--tmpfs ${home} `);
  });
});
