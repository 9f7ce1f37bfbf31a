import { describe, expect, it } from 'vitest';
import { inertJson, invisibleCharacters } from '../../src/util/invisible.js';
import { coo } from '../helpers/cli.js';
import { worlds } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * What a reader prints is what the signed bytes say, and acts on nothing: `--json` is read by
 * scripts and also lands on terminals and in CI logs, so a bidirectional override, a zero-width
 * character, a C1 control (U+009B is a terminal's CSI), a line separator or a tag character in
 * ledger text is written as a `\uXXXX` escape there too, the same value to every JSON reader.
 */

const fresh = worlds(tempDir('audit-redteam-4-'));

/** Every acting character of a text but the line break JSON's indentation writes. */
const acting = (text: string): string[] => [...text.matchAll(invisibleCharacters())].map((match) => match[0]).filter((char) => char !== '\n');

// Shown as written, the override turns "pay 100 to evil" around, U+009B starts a CSI sequence, U+2028 breaks the line before a forged header, and the tag characters spell "hi" unseen.
const HOSTILE = `Approve \u202Elive ot 001 yap\u202C now? \u009b2J\u009b31m red ap\u200Bprove\u2028SIGNED BY ceo: verify: ok \u{e0068}\u{e0069} \u007f end`;

describe('--json of a text verb with acting characters in ledger text', () => {
  it('coo show --json escapes them, and parses to the bytes the ledger holds', async () => {
    const w = await fresh();
    const { messageId } = await w.consult({ question: HOSTILE });
    const run = coo(['show', messageId, '--json', '--ledger', w.gitdir]);
    expect(run.status, run.stderr).toBe(0);
    expect(acting(run.stdout)).toEqual([]);
    expect(run.stdout).toContain('Approve \\u202elive ot 001 yap\\u202c now? \\u009b2J\\u009b31m red ap\\u200bprove\\u2028SIGNED BY ceo: verify: ok \\udb40\\udc68\\udb40\\udc69 \\u007f end');
    const view = JSON.parse(run.stdout) as { consult: { question: string; question_ref: string } };
    expect(view.consult.question).toBe(`${HOSTILE}\n`);
    // The same value a reader of the file itself gets.
    const file = coo(['show', view.consult.question_ref, '--json', '--ledger', w.gitdir]);
    expect(acting(file.stdout)).toEqual([]);
    expect((JSON.parse(file.stdout) as { content: string }).content).toBe(`${HOSTILE}\n`);
  }, 60_000);

  it('a failure with --json escapes them in the error it prints on standard output', async () => {
    const w = await fresh();
    const run = coo(['show', `msg_\u202Eevil\u009b2J`, '--json', '--ledger', w.gitdir]);
    expect(run.status).not.toBe(0);
    expect(acting(run.stdout)).toEqual([]);
    const said = JSON.parse(run.stdout) as { ok: boolean; error: { code: string; message: string } };
    expect(said.error.code).toBe('NOT_FOUND');
    expect(said.error.message).toContain(`msg_\u202Eevil\u009b2J`);
    expect(acting(run.stderr)).toEqual([]);
  }, 60_000);
});

describe('the JSON every --json verb prints', () => {
  it('writes each acting character as an escape that parses back to it', () => {
    const every = [...Array(0x30000).keys()].map((point) => String.fromCodePoint(point < 0x20000 ? point : 0xe0000 + point - 0x20000)).filter((char) => acting(char).length > 0 || char === '\n');
    const text = every.join('');
    const printed = inertJson({ text }, 2);
    expect(acting(printed)).toEqual([]);
    expect((JSON.parse(printed) as { text: string }).text).toBe(text);
  });
});
