import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { coo } from '../helpers/cli.js';
import { makeTargetRepo } from '../helpers/lane.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * Every writer of an envelope refuses one holding a secret its process holds, before anything is
 * written: `coo mcp` refused its clients' arguments, but the CLI signed an operator's pasted key
 * into the ledger for good (the refusal lived in the MCP server, not where envelopes are written).
 */

const dir = tempDir('coo-secrets-writers-');
const keys = join(dir, 'keys');
const ledger = join(dir, 'ledger.git');
const target = join(dir, 'target');
const KEY = 'sk-proj-OperatorPasted0123456789abcdefKEY';
const env = { COO_LEDGER: ledger, COO_KEY: join(keys, 'coo.hermes.key'), OPENAI_API_KEY: KEY };

beforeAll(() => {
  for (const actor of ['ceo', 'coo.hermes']) expect(coo(['keygen', '--actor', actor, '--out', keys]).status).toBe(0);
  expect(coo(['init', '--ledger', ledger, '--ceo-key', join(keys, 'ceo.key'), '--actor', `coo.hermes=${join(keys, 'coo.hermes.pub')}`]).status).toBe(0);
  makeTargetRepo(target);
});

const head = (): string => git(['--git-dir', ledger, 'rev-parse', 'main']).trim();
const ledgerText = (): string => git(['--git-dir', ledger, 'log', '-p', '--all', '--format=%B']);

describe('an envelope holding a secret of its writer', () => {
  it('coo consult, coo dispatch and coo command refuse a provider key of their environment in the prompt, the task or the text (USAGE, exit 2), name no secret, and write nothing; the same without it is written', () => {
    const before = head();
    const seed = readFileSync(join(keys, 'ceo.key'), 'utf8').split('\n').slice(1, -2).join('').slice(-60);
    const refused = [
      coo(['consult', '--to', 'aa.chatgpt', '--repo', target, '--file', 'src/**', '--prompt', `Is ${KEY} still valid?`], { env }),
      coo(['dispatch', '--to', 'ea.codex', '--repo', target, '--task', `Call the API with ${KEY}.`, '--scope', 'src/**', '--accept', 'it works', '--verify', 'true'], { env }),
      coo(['command', '--ledger', ledger, '--ceo-key', join(keys, 'ceo.key'), '--text', `Rotate ${KEY} today.`], { env }),
      coo(['command', '--ledger', ledger, '--ceo-key', join(keys, 'ceo.key'), '--text', `My key ends ${seed}`], { env }),
    ];
    for (const result of refused) {
      expect([result.status, result.stderr.split(':').slice(0, 2).join(':')]).toEqual([2, 'coo: USAGE']);
      expect(result.stderr).toMatch(/hold(s)? a secret this process holds .* nothing was written; leave the secret out/);
      expect(result.stderr).not.toContain(KEY.slice(8));
    }
    expect(head()).toBe(before);
    expect(ledgerText()).not.toContain(KEY.slice(8));
    expect(coo(['consult', '--to', 'aa.chatgpt', '--repo', target, '--file', 'src/**', '--prompt', 'Is the key still valid?'], { env }).status).toBe(0);
    expect(coo(['command', '--ledger', ledger, '--ceo-key', join(keys, 'ceo.key'), '--text', 'Rotate the key today.'], { env }).status).toBe(0);
    expect(head()).not.toBe(before);
  });
});
