import { mkdirSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { AGENT_CLIS, defaultAgentCommand, givenAgentCommand, installedAgentCommand } from '../../../src/dispatch/agent-cli.js';
import { CooError } from '../../../src/errors.js';

const pkg = JSON.parse(readFileSync(join(import.meta.dirname, '..', '..', '..', 'package.json'), 'utf8')) as {
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
  peerDependencies: Record<string, string>;
  peerDependenciesMeta: Record<string, { optional?: boolean }>;
};

describe('the agent CLIs', () => {
  it('are optional peers of the version coo names, installed for the checkout only', () => {
    for (const cli of Object.values(AGENT_CLIS)) {
      expect(pkg.peerDependencies[cli.packageName]).toBe(cli.version);
      expect(pkg.peerDependenciesMeta[cli.packageName]).toEqual({ optional: true });
      expect(pkg.devDependencies[cli.packageName]).toBe(cli.version);
      expect(pkg.dependencies[cli.packageName]).toBeUndefined();
    }
  });

  it('are found on PATH first, then as the installed package', () => {
    expect(installedAgentCommand('codex')).toEqual([process.execPath, expect.stringMatching(/@openai\/codex\/bin\/codex\.js$/)]);
    expect(defaultAgentCommand('codex', '/nowhere', 'ea.codex')).toEqual(installedAgentCommand('codex'));
    expect(defaultAgentCommand('codex', join(import.meta.dirname, 'no-such-dir'), 'ea.codex')[1]).toMatch(/codex\.js$/);
  });

  it('found on PATH as a launcher script whose #! interpreter is missing is EXECUTOR_CONFIG, said before any claim; one that can start is taken', () => {
    const root = mkdtempSync(join(tmpdir(), 'coo-agent-cli-'));
    const broken = join(root, 'broken');
    const working = join(root, 'working');
    mkdirSync(broken);
    mkdirSync(working);
    writeFileSync(join(broken, 'codex'), '#!/nonexistent/bin/node\n', { mode: 0o755 });
    writeFileSync(join(working, 'codex'), '#!/bin/sh\necho codex\n', { mode: 0o755 });
    expect(() => defaultAgentCommand('codex', broken, 'ea.codex')).toThrow(/^ea\.codex: \S+\/broken\/codex is a script for #!\/nonexistent\/bin\/node, which is missing or not executable here/);
    expect(() => defaultAgentCommand('codex', broken, 'ea.codex')).toThrow(expect.objectContaining({ code: 'EXECUTOR_CONFIG' }));
    expect(defaultAgentCommand('codex', working, 'ea.codex')).toEqual([join(working, 'codex')]);
  });

  it('asked for by name and version when neither is there', () => {
    // A kind whose package is not installed anywhere: the message says how to get it.
    const missing = { ...AGENT_CLIS.codex, program: 'coo-no-such-agent', packageName: '@coo-test/no-such-agent' };
    const saved = AGENT_CLIS.codex;
    (AGENT_CLIS as Record<string, typeof saved>)['codex'] = missing;
    try {
      expect(() => defaultAgentCommand('codex', '/usr/bin:/bin', 'ea.codex')).toThrow(
        new CooError('EXECUTOR_CONFIG', 'ea.codex: coo-no-such-agent is not on PATH and @coo-test/no-such-agent is not installed: install it (npm install -g @coo-test/no-such-agent@0.169.0), or give its path with --ea-command'),
      );
    } finally {
      (AGENT_CLIS as Record<string, typeof saved>)['codex'] = saved;
    }
  });
});

describe('an --ea-command that is a link into an agent\'s package', () => {
  it('is the CLI its package proves, whatever the link is named: a link named codex into Claude Code\'s package is Claude Code\'s, taken for it and refused for Codex', () => {
    const root = mkdtempSync(join(tmpdir(), 'coo-agent-link-'));
    const bin = join(root, 'node_modules', '@anthropic-ai', 'claude-code', 'bin');
    mkdirSync(bin, { recursive: true });
    writeFileSync(join(bin, 'claude.exe'), '#!/bin/sh\necho claude\n', { mode: 0o755 });
    const links = join(root, 'links');
    mkdirSync(links);
    symlinkSync(join(bin, 'claude.exe'), join(links, 'codex'));
    expect(givenAgentCommand('claude_code', [join(links, 'codex')], '', 'ea.claude_code')).toEqual([join(links, 'codex')]);
    expect(() => givenAgentCommand('codex', [join(links, 'codex')], '', 'ea.codex')).toThrow(/^ea\.codex: --ea-command \S+\/links\/codex is Claude Code's CLI \(claude\), not Codex's/);
    // A program in no agent's package is judged by its name.
    writeFileSync(join(links, 'plain'), '#!/bin/sh\n', { mode: 0o755 });
    symlinkSync(join(links, 'plain'), join(links, 'claude'));
    expect(() => givenAgentCommand('codex', [join(links, 'claude')], '', 'ea.codex')).toThrow(expect.objectContaining({ code: 'EXECUTOR_CONFIG' }));
    expect(givenAgentCommand('codex', [join(links, 'plain')], '', 'ea.codex')).toEqual([join(links, 'plain')]);
  });
});
