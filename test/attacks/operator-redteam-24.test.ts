import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cooBounded, headOf, refusal, writeKey } from '../helpers/damage.js';
import { worlds } from '../helpers/lane.js';
import { agentScript, dispatchTo, hostilePlaces, receiptsFor, watchOnce } from '../helpers/hostile-agent.js';
import { laneState } from '../helpers/startup.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * A careless operator, round 24: the ledger given where the repository the work is for goes;
 * `coo mcp` (serving without a runner) started on a ledger or a repository the runner would refuse;
 * a command line that names no verb to run; an executor or Oracle script that cannot start (its
 * interpreter missing, or named with Windows line ends). Each is said before anything is written,
 * served or claimed, never a message written that no runner can start, a server whose every call
 * fails after it started, a status 0 for nothing done, or a dispatch claimed and failed as the work's.
 */

const dir = tempDir('operator-redteam-24-');
const fresh = worlds(join(dir, 'worlds'));

describe('the ledger given as --repo to a writer', () => {
  it('coo consult and coo dispatch --repo <the ledger> write nothing (USAGE, exit 2, in JSON too); before, the dispatch was written on a ledger commit no runner holds', async () => {
    const world = await fresh();
    const key = writeKey(world.dir, 'coo', world.actors.coo);
    const before = headOf(world.gitdir);
    const ledgerFile = git(['--git-dir', world.gitdir, 'ls-tree', '-r', '--name-only', 'main']).split('\n')[0]!;
    const said = `coo: USAGE: --repo ${world.gitdir} is the ledger ${world.gitdir}, not a repository the work is for: the message would pin the ledger's own commit, which no runner's repository holds, and wait unclaimed until it expired; give the repository the work is for; nothing was written`;
    const consult = ['consult', '--ledger', world.gitdir, '--key', key, '--to', 'aa.chatgpt', '--repo', world.gitdir, '--file', ledgerFile, '--prompt', 'Is this right?'];
    const dispatch = ['dispatch', '--ledger', world.gitdir, '--key', key, '--to', 'ea.codex', '--repo', world.gitdir, '--task', 'Fix add().', '--scope', 'src', '--accept', 'add works', '--verify', 'true'];
    for (const args of [consult, dispatch]) {
      expect(refusal(cooBounded(args)), args[0]).toBe(said);
      const asJson = cooBounded([...args, '--json']);
      expect(asJson.status).toBe(2);
      expect(JSON.parse(asJson.stdout)).toMatchObject({ ok: false, error: { code: 'USAGE', message: said.replace('coo: USAGE: ', '') } });
    }
    // A worktree made from the ledger is the ledger too.
    const worktree = join(world.dir, 'ledger-worktree');
    git(['--git-dir', world.gitdir, 'worktree', 'add', '-q', '--detach', worktree, 'main']);
    expect(refusal(cooBounded(dispatch.map((arg, index) => (index === 8 ? worktree : arg))))).toMatch(/^coo: USAGE: --repo \S+ledger-worktree is the ledger /);
    git(['--git-dir', world.gitdir, 'worktree', 'remove', '--force', worktree]);
    expect(headOf(world.gitdir)).toBe(before);
    // The repository the work is for is taken as ever.
    expect(cooBounded(dispatch.map((arg, index) => (index === 8 ? world.target : arg))).status).toBe(0);
  });
});

describe('coo mcp serving without a runner, started on what the runner refuses', () => {
  it('an empty repository for --ledger, or a --repo that is no git repository, the ledger or holds no commit, is refused before it serves (RUNNER_CONFIG, exit 2)', async () => {
    const world = await fresh();
    const key = writeKey(world.dir, 'coo', world.actors.coo);
    const empty = join(world.dir, 'empty.git');
    git(['init', '-q', '--bare', empty]);
    const plain = join(world.dir, 'plain');
    mkdirSync(plain);
    const unborn = join(world.dir, 'unborn');
    git(['init', '-q', unborn]);
    const before = headOf(world.gitdir);
    const cases: Array<[string, string, RegExp]> = [
      [empty, world.target, new RegExp(`^coo: RUNNER_CONFIG: ${empty} holds no trust root \\(no commit\\): .*give the ledger's path`)],
      [world.gitdir, plain, new RegExp(`^coo: RUNNER_CONFIG: --repo ${plain} is not a git repository: `)],
      [world.gitdir, world.gitdir, new RegExp(`^coo: RUNNER_CONFIG: --repo ${world.gitdir} is the ledger ${world.gitdir}, not a repository the work is for`)],
      [world.gitdir, unborn, new RegExp(`^coo: RUNNER_CONFIG: --repo ${unborn} holds no commit: `)],
    ];
    for (const [ledger, repo, said] of cases) {
      // Standard input ends at once: a server that started would say it serves, and end with status 0.
      const served = cooBounded(['mcp', '--ledger', ledger, '--key', key, '--repo', repo]);
      expect(refusal(served), `${ledger} ${repo}`).toMatch(said);
    }
    expect(headOf(world.gitdir)).toBe(before);
    // The ledger and its repository: it serves, as ever.
    const served = cooBounded(['mcp', '--ledger', world.gitdir, '--key', key, '--repo', world.target]);
    expect({ status: served.status, stderr: served.stderr }).toEqual({ status: 0, stderr: 'coo mcp: serving without a runner (run coo watch beside it) on stdio\n' });
  });
});

describe('a command line that names no verb to run', () => {
  it('coo alone, coo model without its command and coo help <a misspelt verb> print the help and end USAGE (exit 2), never status 0; --help and coo help <verb> still end 0', () => {
    const cases: Array<[string[], string]> = [
      [[], 'coo: USAGE: name one of the verbs listed above'],
      [['model'], 'coo: USAGE: coo model takes one of its commands: serve'],
      [['help', 'wacth'], "coo: USAGE: unknown command 'wacth': coo help takes one of the verbs listed above"],
    ];
    for (const [args, said] of cases) {
      const ended = cooBounded(args);
      expect({ status: ended.status, stdout: ended.stdout }, args.join(' ')).toEqual({ status: 2, stdout: '' });
      // The help the parser printed in the verb's place, on standard error, then the one coded line.
      expect(ended.stderr).toMatch(/^Usage: coo /);
      expect(ended.stderr.trimEnd().split('\n').at(-1)).toBe(said);
    }
    for (const args of [['--help'], ['help'], ['help', 'watch'], ['watch', '--help'], ['model', 'serve', '--help']]) {
      const ended = cooBounded(args);
      expect({ status: ended.status, stderr: ended.stderr }, args.join(' ')).toEqual({ status: 0, stderr: '' });
      expect(ended.stdout).toMatch(/^Usage: coo /);
    }
  });
});

describe('an --ea-command script that cannot be started', () => {
  const places = hostilePlaces(join(dir, 'places'), 'script');
  it('one whose #! interpreter is missing, names with env a program not on the PATH it runs with, or ends in a carriage return (CRLF), leaves the dispatch queued and unclaimed, said at start (it was claimed and receipted timed_out, tests_failed, blamed on the work)', async () => {
    const place = await places('start');
    const { messageId } = await dispatchTo(place, 'script-start');
    const before = headOf(place.world.gitdir);
    const foreign = join(place.world.dir, 'agent-foreign.sh');
    writeFileSync(foreign, '#!/nonexistent/bin/sh\necho never\n', { mode: 0o755 });
    const envName = join(place.world.dir, 'agent-env.sh');
    writeFileSync(envName, '#!/usr/bin/env no-such-interpreter-here\necho never\n', { mode: 0o755 });
    const windows = join(place.world.dir, 'agent-windows.sh');
    writeFileSync(windows, '#!/bin/sh\r\necho never\r\n', { mode: 0o755 });
    const cases: Array<[string, RegExp]> = [
      [windows, /has Windows line ends \(CRLF\): its first line names "\/bin\/sh\\r", carriage return included, which cannot be started; convert the script to Unix line ends/],
      [foreign, /is a script for #!\/nonexistent\/bin\/sh, which is missing or not executable here: install it, or correct the script's first line/],
      [envName, /is a script for #!\/usr\/bin\/env no-such-interpreter-here, and no-such-interpreter-here is not on the PATH it runs with/],
    ];
    for (const [agent, said] of cases) {
      const run = watchOnce(place, agent, { isolation: 'none' });
      expect(run.status, run.stderr).toBe(0);
      expect(run.stderr).toMatch(new RegExp(`dispatches to ea\\.codex wait, queued and unclaimed: .*${said.source}`));
      expect(run.stdout).not.toContain('"claimed"');
      expect(laneState(place.world, messageId)).toBe('queued');
      expect(await receiptsFor(place, messageId)).toEqual([]);
    }
    expect(headOf(place.world.gitdir)).toBe(before);
    // Oracle's command is judged by the same rule: with no executor either, no lane can run, and the start is refused.
    const oracle = join(place.world.dir, 'oracle-foreign.sh');
    writeFileSync(oracle, '#!/nonexistent/bin/node\nrequire("oracle")\n', { mode: 0o755 });
    const refused = refusal(cooBounded(['watch', '--once', '--ledger', place.world.gitdir, '--key', place.keyFile, '--repo', place.repo, '--state-dir', place.stateDir, '--isolation', 'none', '--oracle-command', oracle, '--ea-command', foreign], { env: { OPENAI_API_KEY: 'sk-test-key' } }));
    expect(refused).toMatch(/^coo: ORACLE_CONFIG: no lane can run here, so nothing is claimed: consults to aa\.chatgpt: Oracle cannot be started: \S+oracle-foreign\.sh is a script for #!\/nonexistent\/bin\/node, which is missing or not executable here/);
    // A script that can start is run as ever.
    const run = watchOnce(place, agentScript(place.world.dir, 'true'), { isolation: 'none' });
    expect(run.stdout, run.stderr).toContain('"claimed"');
  });
});
