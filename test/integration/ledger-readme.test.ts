import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { coo } from '../helpers/cli.js';
import { tempDir } from '../helpers/tmp.js';

const REPO = join(import.meta.dirname, '..', '..');
const scratch = tempDir('coo-readme-');

/** The ```sh blocks of a Markdown file, in order, as written. */
function shellBlocks(markdown: string): string[] {
  return [...markdown.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((match) => match[1]!);
}

/** A PATH of one folder holding only the tools the README names, plus node for coo's own shebang. */
function toolFolder(cooBin: string, tools: readonly string[] = ['git', 'ssh-keygen'], name = 'bin'): string {
  const bin = join(scratch, name);
  mkdirSync(bin);
  for (const tool of tools) {
    symlinkSync(execFileSync('sh', ['-c', `command -v ${tool}`], { encoding: 'utf8' }).trim(), join(bin, tool));
  }
  symlinkSync(process.execPath, join(bin, 'node'));
  symlinkSync(cooBin, join(bin, 'coo'));
  return bin;
}

/** The ```sh blocks of the part of a Markdown file under the heading `title`, up to the next heading of its level. */
function sectionBlocks(markdown: string, title: string): string[] {
  const start = markdown.indexOf(`\n## ${title}\n`);
  expect(start).toBeGreaterThan(0);
  const end = markdown.indexOf('\n## ', start + 1);
  return shellBlocks(markdown.slice(start, end < 0 ? undefined : end));
}

describe('ledger/README.md, followed literally', () => {
  it('installs coo with npm install -g, and the installed bin runs from another folder', () => {
    const prefix = join(scratch, 'prefix');
    const install = spawnSync('npm', ['install', '-g', '--prefix', prefix, REPO, '--no-audit', '--no-fund', '--offline'], { encoding: 'utf8' });
    expect(install.stderr).not.toMatch(/ERR!/);
    expect(install.status).toBe(0);
    const version = spawnSync(join(prefix, 'bin', 'coo'), ['--version'], { cwd: scratch, encoding: 'utf8' });
    expect(version.stdout.trim()).toBe(JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')).version);
  });

  it('runs every shell block as written against a demo ledger, with only git, ssh-keygen, the POSIX tools it names and the installed coo on the PATH, the envelope written by hand included', () => {
    const demo = join(scratch, 'demo');
    expect(coo(['demo', '--dir', demo]).status).toBe(0);
    // git, ssh-keygen and coo, and the POSIX tools the hand-written envelope's recipe names.
    const bin = toolFolder(join(scratch, 'prefix', 'bin', 'coo'), ['git', 'ssh-keygen', 'date', 'sha256sum', 'sed', 'cut', 'mkdir', 'cat']);
    const blocks = shellBlocks(readFileSync(join(REPO, 'ledger', 'README.md'), 'utf8'));
    expect(blocks.length).toBeGreaterThanOrEqual(4);
    // One shell, so a variable set by one block is there for the next, as for a reader at a terminal.
    const script = ['set -eu', ...blocks].join('\n');
    const result = spawnSync('/bin/sh', ['-c', script], {
      cwd: demo,
      encoding: 'utf8',
      env: { PATH: bin, HOME: scratch, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null', XDG_STATE_HOME: join(scratch, 'state') },
    });
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    expect(result.stdout).toMatch(/^Good "coo-commons.entry.v0" signature for coo.hermes /m);
    const logLines = result.stdout.split('\n').filter((line) => /^[0-9a-f]{40} /.test(line));
    expect(logLines.length).toBeGreaterThan(3);
    for (const line of logLines) expect(line).toMatch(/^[0-9a-f]{40} G (ceo|coo\.hermes) /);
    expect(result.stdout).toMatch(/^ok: \d+ commits from genesis/m);
    // The envelope written by hand, signed with ssh-keygen, committed with git commit -S and pushed, is queued.
    expect(result.stdout, result.stdout.slice(-2000)).toMatch(/^remote: coo: push accepted: every commit passes the ledger validator\s*$/m);
    expect(result.stdout).toMatch(/^msg_01\d{14}HAND000000 ea_dispatch coo\.hermes -> ea\.codex: queued$/m);
  });
});

/** The ```sh block of a Markdown file that follows `heading`. */
function blockAfter(markdown: string, heading: string): string {
  return shellBlocks(markdown.slice(markdown.indexOf(heading)))[0]!;
}

describe("README.md's dispatch, followed as written", () => {
  it('dispatches, runs the agent, and shows the signed work with stock git on the branch named by the id coo dispatch printed', () => {
    const root = join(scratch, 'readme-dispatch');
    const [work, calc, bin] = ['work', 'calc', 'bin'].map((name) => join(root, name)) as [string, string, string];
    for (const folder of [work, join(calc, 'src'), join(calc, 'test'), bin, join(root, 'home')]) mkdirSync(folder, { recursive: true });
    writeFileSync(join(calc, 'package.json'), '{ "name": "calc", "private": true, "type": "module", "scripts": { "test": "node test/add.test.js" } }\n');
    writeFileSync(join(calc, 'src', 'add.js'), 'export const add = (a, b) => (Number.isNaN(a) ? 0 : a + b);\n');
    writeFileSync(join(calc, 'test', 'add.test.js'), "import { add } from '../src/add.js';\nif (!Number.isNaN(add(NaN, 1)) || add(1, 2) !== 3) process.exit(1);\n");
    execFileSync('git', ['init', '-q', '-b', 'main', calc]);
    execFileSync('git', ['-C', calc, 'add', '-A']);
    execFileSync('git', ['-C', calc, '-c', 'user.name=calc', '-c', 'user.email=calc@example.invalid', 'commit', '-q', '-m', 'calc']);
    // `codex` on PATH, as the README asks: an agent that fixes add() and ends its turn as Codex does.
    const turn = [{ type: 'thread.started', thread_id: 'readme' }, { type: 'item.completed', item: { id: 'm', type: 'agent_message', text: 'Fixed.' } }, { type: 'turn.completed', usage: { input_tokens: 10, output_tokens: 5 } }];
    writeFileSync(join(bin, 'codex'), `#!/bin/sh\nprintf 'export const add = (a, b) => a + b;\\n' > src/add.js\n${turn.map((event) => `printf '%s\\n' '${JSON.stringify(event)}'`).join('\n')}\n`, { mode: 0o755 });
    writeFileSync(join(bin, 'coo'), `#!/bin/sh\nexec "${process.execPath}" "${join(REPO, 'dist', 'cli', 'main.js')}" "$@"\n`, { mode: 0o755 });
    const env = { PATH: `${bin}:/usr/bin:/bin`, HOME: join(root, 'home'), OPENAI_API_KEY: 'sk-readme-test', GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null', XDG_STATE_HOME: join(root, 'state') };
    const readme = readFileSync(join(REPO, 'README.md'), 'utf8');
    // The consult section's first lines make the keys and the ledger and point COO_LEDGER and COO_KEY at them.
    const setup = sectionBlocks(readme, 'What happens in one consult').find((block) => block.includes('coo keygen'))!.split('\n').filter((line) => /^(coo keygen|coo init|export) /.test(line));
    const lines = blockAfter(readme, '## What happens in one dispatch').trimEnd().split('\n');
    // One shell for all of it, as a reader at a terminal: the id coo dispatch printed is in $id for the lines after it.
    const ran = spawnSync('/bin/sh', ['-c', ['set -eu', ...setup, ...lines].join('\n')], { cwd: work, env, encoding: 'utf8' });
    expect(ran.status, ran.stderr).toBe(0);
    const printed = /^coo dispatch: (msg_[0-9A-Z]{26}) \(base [0-9a-f]{12}, branch (\S+)\)$/m.exec(ran.stderr);
    expect(printed, ran.stderr).not.toBeNull();
    const [, id, branch] = printed!;
    // The branch coo dispatch prints is the README's coo/$id.
    expect(branch).toBe(`coo/${id}`);
    // git log's last two lines: the COO's commit of the work, Good, then the base, unsigned.
    const [workLine, baseLine] = ran.stdout.trim().split('\n').slice(-2);
    expect(workLine).toMatch(new RegExp(`^[0-9a-f]{7,} G ${id} attempt 1: work of ea.codex$`));
    expect(baseLine).toMatch(/^[0-9a-f]{7,} N calc$/);
  });
});

describe('README.md, followed literally', () => {
  it('runs the walk-throughs "What happens in one consult" and "What happens in one dispatch" as written, offline, on the built-in model', () => {
    const readme = readFileSync(join(REPO, 'README.md'), 'utf8');
    const bin = toolFolder(join(scratch, 'prefix', 'bin', 'coo'), ['git', 'ssh-keygen', 'bwrap'], 'bin-readme');
    const work = join(scratch, 'walk', 'work');
    mkdirSync(work, { recursive: true });
    const blocks = [...sectionBlocks(readme, 'What happens in one consult'), ...sectionBlocks(readme, 'What happens in one dispatch')];
    expect(blocks).toHaveLength(3);
    // The harness's own line: the built-in model is stopped even if a block fails.
    const script = ['set -eu', 'trap \'[ -n "${COO_MODEL_PID:-}" ] && kill "$COO_MODEL_PID" 2>/dev/null; true\' EXIT', ...blocks].join('\n');
    const result = spawnSync('/bin/sh', ['-c', script], {
      cwd: work,
      encoding: 'utf8',
      env: { PATH: bin, HOME: scratch, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null', XDG_STATE_HOME: join(scratch, 'walk-state') },
    });
    expect(result.status, `${result.stderr}\n${result.stdout}`).toBe(0);
    expect(result.stdout).toMatch(/^msg_\S+ aa_consult coo\.hermes -> aa\.chatgpt: succeeded$/m);
    expect(result.stdout).toMatch(/^msg_\S+ ea_dispatch coo\.hermes -> ea\.codex: succeeded$/m);
    expect(result.stdout).toMatch(/^ok: \d+ commits from genesis/m);
    // Stock git, with the allowed-signers file coo printed, shows the COO's commit of the work on the branch as Good.
    expect(result.stdout).toMatch(/^[0-9a-f]{7,} G msg_[0-9A-Z]{26} attempt 1: work of ea\.codex$/m);
    expect(result.stderr).not.toMatch(/^coo: /m);
  });
});
