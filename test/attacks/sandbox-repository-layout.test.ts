import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { codexStreamState } from '../../src/dispatch/codex-events.js';
import { runExecutorProcess } from '../../src/dispatch/process.js';
import { writeSandboxConfig } from '../../src/dispatch/worktree.js';
import { bwrapArgs, commandFiles, type BwrapLayout } from '../../src/util/bubblewrap.js';
import { requireBubblewrap } from '../helpers/bubblewrap.js';
import { git, outsideTempDir } from '../helpers/tmp.js';

/**
 * What a sandbox around an attempt sees of its target repository (util/bubblewrap.ts repositoryLayout),
 * laid out where an operator's checkout and state folder may be: the work tree hidden, the git folder
 * read-only, and what the sandbox is given to write still writable.
 */

const root = outsideTempDir('sandbox-repository-layout-');

/** A repository with one commit and an untracked .env in its work tree, and the sandbox's configuration file. */
function repositoryAt(name: string): { readonly folder: string; readonly gitdir: string; readonly config: string; readonly env: string } {
  const folder = join(root, name);
  mkdirSync(folder, { recursive: true });
  git(['init', '-q', '-b', 'main'], { cwd: folder });
  writeFileSync(join(folder, 'README'), 'tracked\n');
  git(['add', '-A'], { cwd: folder });
  git(['commit', '-q', '-m', 'base'], { cwd: folder });
  const env = join(folder, '.env');
  writeFileSync(env, 'SECRET=repository-env\n');
  const config = join(root, `${name}-config`);
  writeFileSync(config, '[core]\n\trepositoryformatversion = 0\n');
  return { folder, gitdir: join(folder, '.git'), config, env };
}

/** Runs `check` under bubblewrap laid out as `layout`; its exit, what it printed and what bubblewrap said. */
function inSandbox(layout: BwrapLayout, check: string): { status: number | null; stdout: string; stderr: string } {
  const argv = [...bwrapArgs(requireBubblewrap('a sandbox test'), layout), '/bin/sh', '-c', check];
  const run = spawnSync(argv[0]!, argv.slice(1), { encoding: 'utf8' });
  return { status: run.status, stdout: run.stdout, stderr: run.stderr };
}

describe("a sandbox around an attempt on a repository", () => {
  it("keeps its worktree and scratch writable when the runner's state folder is inside the repository's git folder, and the work tree hidden", () => {
    const repository = repositoryAt('state-in-gitdir');
    const attempt = join(repository.gitdir, 'coo-state', 'dispatch', 'a1');
    const worktree = join(attempt, 'worktree');
    const scratch = join(attempt, 'scratch');
    for (const dir of [worktree, scratch]) mkdirSync(dir, { recursive: true });
    const run = inSandbox(
      { writable: [worktree, scratch], hide: [], chdir: worktree, ownPids: true, repository },
      `touch '${join(worktree, 'written')}' && touch '${join(scratch, 'written')}' && test ! -e '${repository.env}' && test -f '${join(repository.gitdir, 'HEAD')}' && ! touch '${join(repository.gitdir, 'written')}' 2>/dev/null`,
    );
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    expect(existsSync(join(worktree, 'written'))).toBe(true);
    expect(existsSync(join(scratch, 'written'))).toBe(true);
    expect(existsSync(join(repository.gitdir, 'written'))).toBe(false);
  });

  it('runs a command whose files are inside the repository (a script of its tools, a package in its node_modules launched by node) and still hides the work tree', () => {
    const repository = repositoryAt('command-inside');
    const worktree = join(root, 'command-inside-worktree');
    mkdirSync(worktree);
    // A script that runs what lies beside it.
    const tools = join(repository.folder, 'tools');
    mkdirSync(tools);
    writeFileSync(join(tools, 'helper.txt'), 'beside\n');
    const script = join(tools, 'agent.sh');
    writeFileSync(script, `#!/bin/sh\ncat '${join(tools, 'helper.txt')}'\n`);
    chmodSync(script, 0o755);
    // A package in node_modules, launched as [node, file], that requires a dependency installed beside it.
    const modules = join(repository.folder, 'node_modules');
    for (const name of ['agent', 'dep']) {
      mkdirSync(join(modules, name, 'bin'), { recursive: true });
      writeFileSync(join(modules, name, 'package.json'), JSON.stringify({ name, version: '1.0.0', main: 'index.js' }));
    }
    writeFileSync(join(modules, 'dep', 'index.js'), "module.exports = 'dependency';\n");
    const entry = join(modules, 'agent', 'bin', 'agent.js');
    writeFileSync(entry, "process.stdout.write(require('dep') + '\\n');\n");
    const keep = commandFiles([[script], [process.execPath, entry]]);
    expect(keep).toEqual([script, process.execPath, entry]);
    const run = inSandbox(
      { writable: [worktree], hide: [], keep, chdir: worktree, ownPids: true, repository },
      `'${script}' && '${process.execPath}' '${entry}' && if test -e '${repository.env}'; then echo 'env: visible'; else echo 'env: hidden'; fi && test -f '${join(repository.gitdir, 'HEAD')}'`,
    );
    expect(run.stderr).toBe('');
    expect(run.stdout).toBe('beside\ndependency\nenv: hidden\n');
    expect(run.status).toBe(0);
  });

  it('hides a file of the repository that the command names directly in its work tree, binding back that file alone', () => {
    const repository = repositoryAt('command-at-top');
    const worktree = join(root, 'command-at-top-worktree');
    mkdirSync(worktree);
    const script = join(repository.folder, 'agent.sh');
    writeFileSync(script, '#!/bin/sh\necho ran\n');
    chmodSync(script, 0o755);
    const run = inSandbox({ writable: [worktree], hide: [], keep: commandFiles([[script]]), chdir: worktree, ownPids: true, repository }, `'${script}' && test ! -e '${repository.env}' && echo hidden`);
    expect(run.stderr).toBe('');
    expect(run.stdout).toBe('ran\nhidden\n');
  });

  it("hides its other linked worktrees' work trees, the work tree its core.worktree names, its submodules' configuration and config.worktree files; its own worktree stays", async () => {
    const repository = repositoryAt('around');
    const token = 'ghp_SubmoduleRemote5Tk8Qw';
    // A linked worktree of the operator's, with an .env of its own; and the attempt's.
    const other = join(root, 'around-other');
    git(['worktree', 'add', '-q', '-b', 'other', other], { cwd: repository.folder });
    writeFileSync(join(other, '.env'), 'SECRET=other-worktree\n');
    const attempt = join(root, 'around-attempt');
    git(['worktree', 'add', '-q', '-b', 'attempt', attempt], { cwd: repository.folder });
    // A submodule's git folder and per-worktree configuration, each holding a remote's token.
    mkdirSync(join(repository.gitdir, 'modules', 'lib'), { recursive: true });
    writeFileSync(join(repository.gitdir, 'modules', 'lib', 'config'), `[remote "origin"]\n\turl = https://x:${token}@127.0.0.1/lib.git\n`);
    writeFileSync(join(repository.gitdir, 'config.worktree'), `[http]\n\textraHeader = Authorization: ${token}\n`);
    // A work tree named by core.worktree elsewhere.
    const elsewhere = join(root, 'around-elsewhere');
    mkdirSync(elsewhere);
    writeFileSync(join(elsewhere, '.env'), 'SECRET=core-worktree\n');
    git(['config', 'core.worktree', elsewhere], { cwd: repository.folder });
    const { coreWorktree } = await writeSandboxConfig(repository.gitdir, repository.config);
    git(['config', '--unset', 'core.worktree'], { cwd: repository.folder });
    expect(coreWorktree).toBe(elsewhere);
    const seen = [join(other, '.env'), join(elsewhere, '.env'), join(repository.gitdir, 'modules', 'lib', 'config'), join(repository.gitdir, 'config.worktree')];
    const run = inSandbox(
      { writable: [attempt], hide: [], chdir: attempt, ownPids: true, repository: { ...repository, coreWorktree: coreWorktree! } },
      `for f in ${seen.map((path) => `'${path}'`).join(' ')}; do printf '%s ' "$(cat "$f" 2>/dev/null | wc -c)"; done; HOME=. GIT_CONFIG_NOSYSTEM=1 git log -1 --format=%s; touch written`,
    );
    expect(run.stderr).toBe('');
    expect(run.stdout).toBe('0 0 0 0 base\n');
    expect(existsSync(join(attempt, 'written'))).toBe(true);
  });

  it('never hides the home folder or a folder holding it, even named through a link (a key linked to a file directly in $HOME)', () => {
    const home = join(root, 'home');
    mkdirSync(home);
    writeFileSync(join(home, 'profile'), 'home\n');
    const link = join(root, 'home-link');
    symlinkSync(home, link);
    const worktree = join(root, 'home-worktree');
    mkdirSync(worktree);
    const previous = process.env['HOME'];
    process.env['HOME'] = home;
    try {
      const layout = { writable: [worktree], hide: [link, join(link, '..')], chdir: worktree, ownPids: true };
      const argv = bwrapArgs(requireBubblewrap('a sandbox test'), layout);
      expect(argv.filter((part, at) => argv[at - 1] === '--tmpfs' && (part === home || part === root))).toEqual([]);
      expect(inSandbox(layout, `cat '${join(home, 'profile')}'`).stdout).toBe('home\n');
    } finally {
      if (previous === undefined) delete process.env['HOME'];
      else process.env['HOME'] = previous;
    }
  });

  it("keeps the files of every command an executor runs, its consult tool's too, when the repository holds them: a relay in its node_modules starts, its .env stays hidden", async () => {
    const repository = repositoryAt('relay-inside');
    const worktree = join(root, 'relay-inside-worktree');
    const scratch = join(root, 'relay-inside-scratch');
    for (const dir of [worktree, scratch]) mkdirSync(dir);
    // The consult relay as coo installed as the repository's devDependency would be: a node script in its node_modules.
    const relay = join(repository.folder, 'node_modules', 'coo-commons', 'dist', 'main.js');
    mkdirSync(join(relay, '..'), { recursive: true });
    writeFileSync(join(repository.folder, 'node_modules', 'coo-commons', 'package.json'), '{"name":"coo-commons"}');
    writeFileSync(relay, "process.stderr.write('relay started\\n');\n");
    // The executor, outside the repository, starts the relay as Codex starts its MCP server.
    const agent = join(root, 'relay-inside-agent.sh');
    writeFileSync(agent, `#!/bin/sh\n"$1" "$2" consult-relay\nif test -e '${repository.env}'; then echo 'env: visible' >&2; else echo 'env: hidden' >&2; fi\n`);
    chmodSync(agent, 0o755);
    const run = await runExecutorProcess({
      executor: 'codex', attemptId: 'att_relay_inside', argv: [agent, process.execPath, relay], programs: [[agent], [process.execPath, relay, 'consult-relay']],
      cwd: worktree, env: { PATH: process.env['PATH'] }, isolation: 'bwrap', writable: [worktree, scratch], readOnly: [], hide: [], repository, timeoutSeconds: 30, state: codexStreamState(),
    });
    expect(run.stderrTail).toBe('relay started\nenv: hidden\n');
    expect(run.exitCode).toBe(0);
  });
});
