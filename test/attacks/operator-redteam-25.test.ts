import { describe, expect, it } from 'vitest';
import { derivedIdempotencyKey } from '../../src/lane/request-key.js';
import { cooBounded } from '../helpers/damage.js';
import { worlds } from '../helpers/lane.js';
import { call, rawSession, refusal } from '../helpers/mcp-raw.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * A careless operator, round 25: `--json` given to a verb that has no such flag; an MCP client's
 * idempotency_key that is the key derived for another request; ...
 */

const fresh = worlds(tempDir('operator-redteam-25-'));

describe('--json given to a verb that has no --json of its own', () => {
  it('coo model --json, coo mcp --json and a misspelt command of coo model print the JSON error object too (USAGE, exit 2); before, only the text line', () => {
    const cases: Array<[string[], string]> = [
      [['model', '--json'], "unknown option '--json'"],
      [['mcp', '--json'], "unknown option '--json'"],
      [['mcp', '--bogus', '--json'], "unknown option '--bogus'"],
      [['model', 'nope', '--json'], "unknown command 'nope'"],
    ];
    for (const [args, message] of cases) {
      const result = cooBounded(args);
      expect(result.status, args.join(' ')).toBe(2);
      expect(JSON.parse(result.stdout), args.join(' ')).toEqual({ ok: false, error: { code: 'USAGE', message, where: null, findings: [] } });
      expect(result.stderr, args.join(' ')).toContain(`coo: USAGE: ${message}`);
    }
  });

  it('--json given as another flag\'s value or after -- is not asked for: the error stays text alone', () => {
    for (const args of [['mcp', '--remote', '--json'], ['mcp', '--', '--json'], ['model', '--bogus']]) {
      const result = cooBounded(args);
      expect(result.status, args.join(' ')).toBe(2);
      expect(result.stdout, args.join(' ')).toBe('');
      expect(result.stderr, args.join(' ')).toMatch(/^coo: USAGE: /);
    }
  });
});

describe('coo mcp given an idempotency_key of the derived form', () => {
  it("refuses a key that is the one derived for another request, and that request, sent without a key, is answered with its own message; before, it was told IDEMPOTENCY_CONFLICT", async () => {
    const w = await fresh();
    const commit = git(['-C', w.target, 'rev-parse', 'HEAD']).trim();
    const asked = { to: 'aa.chatgpt', files: ['src/add.ts'], prompt: 'Is add() right?' };
    const theirs = derivedIdempotencyKey({ target: asked.to, commit, patterns: asked.files, question: asked.prompt });
    const session = await rawSession(w);
    try {
      const head = w.ledger.head();
      const squat = await session.ask(call(1, 'consult', { ...asked, prompt: 'Something else entirely?', idempotency_key: theirs }), 1);
      expect(refusal(squat)).toBe('tool error IDEMPOTENCY_CONFLICT');
      expect(squat.result?.content?.[0]?.text).toContain(`"${theirs}" has the form of a key derived from a request`);
      // A panel member's key is made from a derived one: that form is refused too.
      const member = await session.ask(call(2, 'dispatch', { to: 'ea.codex', task: 'Fix add().', scope: ['src/**'], accept: ['add(1, 2) is 3'], verify: ['true'], idempotency_key: `${theirs}~aa.chatgpt` }), 2);
      expect(refusal(member)).toBe('tool error IDEMPOTENCY_CONFLICT');
      expect(w.ledger.head()).toBe(head);
      const own = await session.ask(call(3, 'consult', asked), 3);
      expect([refusal(own), own.result?.structuredContent?.['existing']]).toEqual(['answered', false]);
      const id = own.result?.structuredContent?.['message_id'];
      expect((await w.ledger.state()).messages.get(String(id))?.idempotencyKey).toBe(theirs);
      // The guards: a client that sends back the key it was shown for the same request finds its message,
      // and keys of any other form, even ones that start alike, are the client's own as before.
      const echoed = await session.ask(call(4, 'consult', { ...asked, idempotency_key: theirs }), 4);
      expect([refusal(echoed), echoed.result?.structuredContent?.['message_id'], echoed.result?.structuredContent?.['existing']]).toEqual(['answered', id, true]);
      for (const [index, key] of [[5, 'my-review-1'], [6, 'req-later'], [7, theirs.toUpperCase()]] as const) {
        const mine = await session.ask(call(index, 'consult', { ...asked, prompt: `Another question ${index}?`, idempotency_key: key }), index);
        expect([key, refusal(mine), mine.result?.structuredContent?.['existing']]).toEqual([key, 'answered', false]);
      }
    } finally {
      await session.close();
    }
  });
});
