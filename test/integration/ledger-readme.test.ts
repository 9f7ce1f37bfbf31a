import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, symlinkSync } from 'node:fs';
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
function toolFolder(cooBin: string): string {
  const bin = join(scratch, 'bin');
  mkdirSync(bin);
  for (const tool of ['git', 'ssh-keygen']) {
    symlinkSync(execFileSync('sh', ['-c', `command -v ${tool}`], { encoding: 'utf8' }).trim(), join(bin, tool));
  }
  symlinkSync(process.execPath, join(bin, 'node'));
  symlinkSync(cooBin, join(bin, 'coo'));
  return bin;
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

  it('runs every shell block as written against a demo ledger, with only git, ssh-keygen and the installed coo on the PATH', () => {
    const demo = join(scratch, 'demo');
    expect(coo(['demo', '--dir', demo]).status).toBe(0);
    const bin = toolFolder(join(scratch, 'prefix', 'bin', 'coo'));
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
  });
});
