import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseCodexStream } from '../../src/dispatch/codex-events.js';
import { Scrubber } from '../../src/util/scrub.js';
import { LIMITS } from '../../src/limits.js';
import { readMessage } from '../../src/lane/envelope.js';
import { agentScript, dispatchTo, hostilePlace, receiptsFor, watchOnce } from '../helpers/hostile-agent.js';
import { receiptsOf, worlds } from '../helpers/lane.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * "No secret ever enters the ledger", attacked with forms a reader decodes without thinking: a key
 * JSON-escaped character by character, with a zero-width character or a line break inside it, and
 * the runner's own folders quoted by an error it writes into a receipt.
 */
const KEY = 'sk-proj-Red/Team+0123456789abcdefSECRET';
const scrub = new Scrubber([{ name: 'OPENAI_API_KEY', value: KEY }], [{ name: 'runner-state', path: '/home/op/.coo/state' }]);
const MARKER = '[removed: OPENAI_API_KEY]';

/** Every character as a JSON `\uXXXX` escape, as an encoder that escapes everything writes it. */
const allEscaped = (text: string): string => [...text].map((char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`).join('');

describe('a secret written as a reader decodes it', () => {
  it('is found with its JSON escapes decoded: every character as \\uXXXX, one of them, in upper-case hex, its slashes as \\/', () => {
    const forms = [allEscaped(KEY), `\\u0073${KEY.slice(1)}`, allEscaped(KEY).toUpperCase().replace(/\\U/g, '\\u'), KEY.replace(/\//g, '\\/')];
    for (const form of forms) {
      const event = `{"type":"item.completed","text":"the key is ${form}."}`;
      expect(scrub.text(event), form).toBe(`{"type":"item.completed","text":"the key is ${MARKER}."}`);
      expect(scrub.bytes(Buffer.from(event)).toString('utf8'), form).toBe(`{"type":"item.completed","text":"the key is ${MARKER}."}`);
    }
  });

  it('is found with an invisible character inside it: zero-width, soft hyphen, bidirectional mark, tag character, raw or JSON-escaped', () => {
    for (const hidden of ['\u200b', '\u00ad', '\u2060', '\ufeff', '\u202e', '\u{e0041}']) {
      const text = `key=${KEY.slice(0, 6)}${hidden}${KEY.slice(6, 20)}${hidden}${KEY.slice(20)} end`;
      expect(scrub.text(text), JSON.stringify(hidden)).toBe(`key=${MARKER} end`);
      expect(scrub.bytes(Buffer.from(text)).toString('utf8'), JSON.stringify(hidden)).toBe(`key=${MARKER} end`);
      expect(JSON.parse(scrub.text(JSON.stringify({ text })))).toEqual({ text: `key=${MARKER} end` });
    }
  });

  it('is found broken by a line break, LF or CRLF, raw or JSON-escaped', () => {
    for (const lineBreak of ['\n', '\r\n']) {
      const text = `${KEY.slice(0, 12)}${lineBreak}${KEY.slice(12)}`;
      expect(scrub.text(`out: ${text}!`)).toBe(`out: ${MARKER}!`);
      expect(JSON.parse(scrub.text(JSON.stringify({ output: text })))).toEqual({ output: MARKER });
    }
  });

  it("finds a runner's folder with its slashes JSON-escaped, whole only", () => {
    expect(scrub.text('{"cwd":"\\/home\\/op\\/.coo\\/state\\/journal","other":"\\/home\\/op\\/.coo\\/state2"}')).toBe('{"cwd":"[runner-state]\\/journal","other":"\\/home\\/op\\/.coo\\/state2"}');
  });

  it('leaves text that only looks near it as it was, and the same buffer when nothing was found', () => {
    const near = `${KEY.slice(0, 10)}\u200b${KEY.slice(10, -1)}X`;
    expect(scrub.text(near)).toBe(near);
    const clean = Buffer.from(`line\r\n\\u0041\u200b ${near}`);
    expect(scrub.bytes(clean)).toBe(clean);
  });
});

const dir = tempDir('coo-secrets-redteam-');
const world = worlds(dir);

describe("a receipt's error detail", () => {
  it("does not name the runner's repository when a consult's pinned commit is gone (held, then receipted expired)", async () => {
    const w = await world();
    writeFileSync(join(w.target, 'gone.md'), 'soon gone\n');
    git(['add', '-A'], { cwd: w.target });
    git(['commit', '-q', '-m', 'temporary'], { cwd: w.target });
    const { messageId } = await w.consult({ idempotencyKey: 'gone', patterns: ['gone.md'] });
    git(['reset', '-q', '--hard', 'HEAD~1'], { cwd: w.target });
    git(['reflog', 'expire', '--expire=now', '--all'], { cwd: w.target });
    git(['gc', '-q', '--prune=now'], { cwd: w.target });
    const expires = Date.parse((await readMessage(w.ledger, (await w.ledger.state()).messages.get(messageId)!)).expires_at);
    await w.runner({ transport: w.fakeOracle('ok'), clock: () => new Date(expires + (LIMITS.clockSkewSeconds + 60) * 1000) }).runOnce();
    const [receipt] = await receiptsOf(w, messageId);
    const text = JSON.stringify(receipt);
    expect(text).toContain('expired');
    expect(text).not.toContain(w.target);
  });
});

describe('a text cut inside a secret before it reached the scrubber', () => {
  /** Every run of 8 characters of KEY: none may be left. */
  const pieces = (text: string): string[] => Array.from({ length: KEY.length - 7 }, (_, at) => KEY.slice(at, at + 8)).filter((piece) => text.includes(piece));

  it("has the secret's first characters at its end, or its last at its start, replaced", () => {
    for (let at = 8; at < KEY.length; at += 5) {
      expect(pieces(scrub.text(`error: ${KEY.slice(0, at)}`)), `head ${at}`).toEqual([]);
      expect(pieces(scrub.text(`${KEY.slice(at - 8)} and on`)), `tail ${at}`).toEqual([]);
    }
    expect(scrub.text(`error: ${KEY.slice(0, 20)}`)).toBe('error: [removed: OPENAI_API_KEY (cut)]');
    expect(scrub.bytes(Buffer.from(`${KEY.slice(-12)}\n`)).toString()).toBe('[removed: OPENAI_API_KEY (cut)]\n');
    // Fewer than 8 of its characters, or its start inside a text, are no cut.
    expect(scrub.text(`ends with ${KEY.slice(0, 7)}`)).toBe(`ends with ${KEY.slice(0, 7)}`);
    expect(scrub.text(`${KEY.slice(0, 12)} then more`)).toBe(`${KEY.slice(0, 12)} then more`);
  });

  it("a provider's error echoed in the executor's stream, which the stream's reader holds to 2000 characters, leaves no part of the key in what is receipted", () => {
    const body = `unexpected status 401 Unauthorized: ${'x'.repeat(1990 - 36)}${KEY} is not a valid key`;
    const stream = [JSON.stringify({ type: 'thread.started', thread_id: 't' }), JSON.stringify({ type: 'turn.failed', error: { message: body } })].join('\n');
    const facts = scrub.value(parseCodexStream(stream));
    expect(facts.errors).toHaveLength(1);
    expect(facts.errors[0]!.length).toBeGreaterThan(1900);
    expect(pieces(facts.errors.join('\n'))).toEqual([]);
  });
});

describe('a hostile execution agent that writes the key it was handed as a reader decodes it', () => {
  /** A key without a slash, so that it can stand in a file name. */
  const AGENT_KEY = 'sk-proj-HostileAgent0123456789abcdefSECRET';

  it('leaves no part of it in the ledger: JSON-escaped in its final message, a zero-width character inside it in a command output, in a file name of its work', async () => {
    const place = await hostilePlace(join(dir, 'hostile-agent'));
    const { messageId } = await dispatchTo(place, 'hidden-key');
    const zw = `${AGENT_KEY.slice(0, 9)}\u200b${AGENT_KEY.slice(9)}`;
    const lines = [
      '{"type":"thread.started","thread_id":"thread-hidden"}',
      `{"type":"item.completed","item":{"id":"i1","type":"command_execution","command":"env","aggregated_output":"OPENAI_API_KEY=${zw}\\n","exit_code":0,"status":"completed"}}`,
      `{"type":"item.completed","item":{"id":"i2","type":"agent_message","text":"Done. ${allEscaped(AGENT_KEY)}"}}`,
      '{"type":"turn.completed","usage":{"input_tokens":100,"cached_input_tokens":0,"output_tokens":10}}',
    ];
    const stream = lines.map((text) => `printf '%s\\n' '${text}'`).join('\n');
    const watch = watchOnce(place, agentScript(place.world.dir, `printf 'x\\n' > "src/note-$(printf '${AGENT_KEY.slice(0, 9)}\\342\\200\\213${AGENT_KEY.slice(9)}').txt"`, stream), { env: { OPENAI_API_KEY: AGENT_KEY } });
    const [receipt] = await receiptsFor(place, messageId);
    expect(receipt, watch.stderr).toBeDefined();
    // As a reader takes the ledger in: JSON escapes decoded, zero-width characters taken out.
    const read = git(['--git-dir', place.world.gitdir, 'cat-file', '--batch-all-objects', '--batch'])
      .replace(/\\u([0-9a-fA-F]{4})/g, (_match, hex: string) => String.fromCharCode(parseInt(hex, 16)))
      .replace(/\u200b/g, '');
    expect(read).toContain('[removed: OPENAI_API_KEY]');
    expect(Array.from({ length: AGENT_KEY.length - 7 }, (_, at) => AGENT_KEY.slice(at, at + 8)).filter((piece) => read.includes(piece))).toEqual([]);
    expect(JSON.stringify(receipt)).toContain('scope_violation');
  }, 120_000);
});
