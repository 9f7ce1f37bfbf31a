import { describe, expect, it } from 'vitest';
import { enqueuePanel } from '../../src/consult/enqueue.js';
import { appendEnvelope } from '../../src/ledger/append-envelope.js';
import { planEnvelope } from '../../src/ledger/envelope-plan.js';
import type { ActorPolicy } from '../../src/schema/policy.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { coo } from '../helpers/cli.js';
import { codeOfAsync } from '../helpers/codes.js';
import { writeKey } from '../helpers/damage.js';
import { worlds } from '../helpers/lane.js';
import { type Answer, call, rawSession, refusal } from '../helpers/mcp-raw.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * Idempotency keys a client gives, and the numbers its arguments carry. A panel's member is written
 * under `<key>~<member>`, and a key given with a `~` could spell it: a consult under `k~aa.chatgpt`
 * left the panel asked later under `k` refused for that member as a key reused. And a number JSON
 * can write but a double cannot hold (1e400, 1e-400) was refused in zod's words for what it was
 * read as ("expected number, received Infinity"; "expected number to be >0" of 1e-400).
 */
const fresh = worlds(tempDir('mcp-redteam-37-'));
const review = (policy: ActorPolicy): ActorPolicy => ({ ...policy, panels: [{ name: 'review', from: 'coo.*', members: ['aa.chatgpt', 'aa.claude'] }] });
const ASK = { files: ['src/add.ts'], prompt: 'Is add() correct for NaN?' };

/** The text of a tool's answer: its error or its result. */
const textOf = (answer: Answer): string => answer.result?.content?.[0]?.text ?? answer.error?.message ?? '';
const messagesOf = async (w: Awaited<ReturnType<typeof fresh>>): Promise<number> => (await w.ledger.state()).messages.size;

describe('an idempotency key given with the character that joins a panel member key', () => {
  it("refuses a consult under k~aa.chatgpt, writing nothing, and the panel asked under k then queues both members", async () => {
    const w = await fresh({ policy: review });
    const session = await rawSession(w);
    try {
      const before = await messagesOf(w);
      const single = await session.ask(call(1, 'consult', { ...ASK, to: 'aa.chatgpt', idempotency_key: 'k~aa.chatgpt' }), 1);
      expect(refusal(single)).toBe('tool error USAGE');
      expect(textOf(single)).toContain('Give a key without "~"');
      expect(await messagesOf(w)).toBe(before);
      const panel = await session.ask(call(2, 'consult', { ...ASK, to: ['aa.chatgpt', 'aa.claude'], idempotency_key: 'k' }), 2);
      expect(refusal(panel)).toBe('answered');
      const members = (panel.result?.structuredContent?.['panel'] as { members: Array<{ target: string }> }).members;
      expect(members.map((member) => member.target)).toEqual(['aa.chatgpt', 'aa.claude']);
      const again = await session.ask(call(3, 'consult', { ...ASK, to: ['aa.chatgpt', 'aa.claude'], idempotency_key: 'k' }), 3);
      expect([refusal(again), again.result?.structuredContent?.['existing']]).toEqual(['answered', true]);
      expect(await messagesOf(w)).toBe(before + 2);
    } finally {
      await session.close();
    }
  });

  it('refuses the same key from a dispatch over MCP, a panel asked under a~b, and an envelope written by hand', async () => {
    const w = await fresh({ policy: review });
    const session = await rawSession(w);
    try {
      const before = await messagesOf(w);
      const dispatch = await session.ask(call(1, 'dispatch', { to: 'ea.codex', task: 'fix add', scope: ['src/**'], accept: ['add works'], verify: ['true'], idempotency_key: 'k~aa.chatgpt' }), 1);
      expect([refusal(dispatch), textOf(dispatch).includes('Give a key without "~"')]).toEqual(['tool error USAGE', true]);
      const panel = codeOfAsync(() => enqueuePanel({ ledger: w.ledger, key: w.actors.coo, now: new Date(), repo: w.target, patterns: ASK.files, question: ASK.prompt, members: ['aa.chatgpt', 'aa.claude'], idempotencyKey: 'a~b' }));
      expect(await panel).toBe('USAGE');
      const now = new Date();
      const plan = planEnvelope(await w.ledger.state(), w.actors.codex, 'coo.hermes', { maxRuntimeSeconds: 1 }, now, 'blocker');
      const blocker = { ...plan.header, idempotency_key: 'k~aa.chatgpt', intent: 'blocker', authority_class: 'evidence', budget: { max_cost_usd: 0, max_runtime_seconds: 1 }, about_message_id: null, blocker: { code: 'needs_decision', detail: 'stuck' }, expected_receipt_schema: null };
      expect(await codeOfAsync(() => appendEnvelope(w.ledger, Buffer.from(toYaml(blocker)), new Map(), w.actors.codex, now))).toBe('USAGE');
      expect(await messagesOf(w)).toBe(before);
    } finally {
      await session.close();
    }
  });
});

/** A tools/call line whose `field` is the JSON number `literal` as written, which JSON.stringify could not write. */
const rawCall = (id: number, tool: string, args: Record<string, unknown>, field: string, literal: string): string =>
  call(id, tool, { ...args, [field]: '@@number@@' }).replace('"@@number@@"', literal);

const MSG = 'msg_01M97FKA5AW30G4RB262QVZD72';
const DISPATCH = { to: 'ea.codex', task: 'Fix add().', scope: ['src/**'], accept: ['add(1, 2) is 3'], verify: ['true'] };

/** Every number argument of every tool, with arguments that are otherwise whole. */
const NUMBER_ARGUMENTS: ReadonlyArray<readonly [string, Record<string, unknown>, readonly string[]]> = [
  ['consult', { ...ASK, to: 'aa.chatgpt' }, ['max_cost_usd', 'max_runtime_seconds', 'ttl_seconds', 'max_hops', 'wait_seconds']],
  ['cross_check', { answer: MSG, to: 'aa.claude' }, ['max_cost_usd', 'max_runtime_seconds', 'ttl_seconds', 'wait_seconds']],
  ['dispatch', DISPATCH, ['timeout_seconds', 'max_cost_usd', 'ttl_seconds', 'wait_seconds']],
  ['adopt', { message_id: MSG, proposal: 1, to: 'ea.codex' }, ['proposal', 'attempt', 'timeout_seconds', 'max_cost_usd', 'wait_seconds']],
  ['wait', { message_id: MSG, timeout_seconds: 0 }, ['timeout_seconds']],
  ['sessions', {}, ['before', 'limit']],
];

describe('a panel member list a client could spell twice', () => {
  it('refuses a member named twice, or once more in capitals, and writes nothing (guards: these held)', async () => {
    const w = await fresh({ policy: review });
    const session = await rawSession(w);
    try {
      const head = w.ledger.head();
      const twice = await session.ask(call(1, 'consult', { ...ASK, to: ['aa.chatgpt', 'aa.chatgpt'] }), 1);
      expect([refusal(twice), textOf(twice)]).toEqual(['tool error USAGE', expect.stringContaining('a panel names each member once')]);
      const capitals = await session.ask(call(2, 'consult', { ...ASK, to: ['aa.chatgpt', 'AA.chatgpt'] }), 2);
      expect([refusal(capitals), textOf(capitals)]).toEqual(['tool error USAGE', expect.stringContaining('actor ids are dotted lowercase names')]);
      expect(w.ledger.head()).toBe(head);
    } finally {
      await session.close();
    }
  });
});

describe('a number argument a double cannot hold as sent', () => {
  it('refuses 1e400 in every number argument of every tool as a number too large, saying what to send, and writes nothing', async () => {
    const w = await fresh();
    const session = await rawSession(w);
    try {
      const head = w.ledger.head();
      let id = 10;
      const said: string[] = [];
      for (const [tool, args, fields] of NUMBER_ARGUMENTS) {
        for (const field of fields) {
          id += 1;
          const answer = await session.ask(rawCall(id, tool, args, field, '1e400'), id);
          said.push(`${tool}.${field} ${refusal(answer)} ${/received a number too large in size for a double \(such as 1e400\), read as Infinity: send a (whole )?number (above|at least) \d+( and at most \d+)? at /.test(textOf(answer))}`);
        }
      }
      expect(said).toEqual(NUMBER_ARGUMENTS.flatMap(([tool, , fields]) => fields.map((field) => `${tool}.${field} tool error USAGE true`)));
      expect(w.ledger.head()).toBe(head);
    } finally {
      await session.close();
    }
  });

  it('says what -1e400, 1e-400, -0, a whole number past 2^53 and a number in a string were read as', async () => {
    const w = await fresh();
    const session = await rawSession(w);
    try {
      const cases: ReadonlyArray<readonly [string, string, Record<string, unknown>, string, string]> = [
        ['wait', 'timeout_seconds', { message_id: MSG }, '-1e400', 'received a number too large in size for a double (such as 1e400), read as -Infinity: send a number at least 0 and at most 900'],
        ['consult', 'max_cost_usd', { ...ASK, to: 'aa.chatgpt' }, '1e-400', 'received 0 (a number nearer 0 than a double holds, such as 1e-400, is read as 0): send a number above 0 and at most 1000000'],
        ['dispatch', 'ttl_seconds', DISPATCH, '-0', 'received 0 (a number nearer 0 than a double holds, such as 1e-400, is read as 0): send a whole number above 0 and at most 604800'],
        ['sessions', 'before', {}, '9007199254740993', 'received 9007199254740992, past 2^53 - 1, where a double no longer holds every whole number: send a whole number above 0'],
        ['sessions', 'limit', {}, '"5"', 'received the string "5": send a whole number at least 1 and at most'],
        ['adopt', 'proposal', { message_id: MSG, to: 'ea.codex' }, '2.5', 'received 2.5: send a whole number at least 1 and at most 5'],
      ];
      let id = 50;
      for (const [tool, field, args, literal, words] of cases) {
        id += 1;
        const answer = await session.ask(rawCall(id, tool, args, field, literal), id);
        expect([literal, refusal(answer), textOf(answer)]).toEqual([literal, 'tool error USAGE', expect.stringContaining(words)]);
      }
      // The guards: numbers inside the bounds are taken as before.
      const page = await session.ask(rawCall(70, 'sessions', {}, 'limit', '5'), 70);
      expect(refusal(page)).toBe('answered');
    } finally {
      await session.close();
    }
  });
});

describe('the CLI flags that carry the same numbers and keys', () => {
  it('refuses a --ttl past any date, 1e400 and 1e-400 as what they were read as, a whole-number flag given a fraction or more than 2^53, and a key with a "~", writing nothing', async () => {
    const w = await fresh({ policy: review });
    const env = { ...process.env, COO_LEDGER: w.gitdir, COO_KEY: writeKey(w.dir, 'coo', w.actors.coo) };
    const consult = (prompt: string, ...extra: string[]) => coo(['consult', '--to', 'aa.chatgpt', '--repo', w.target, '--file', 'src/add.ts', '--prompt', prompt, ...extra], { env });
    const head = w.ledger.head();
    const cases: ReadonlyArray<readonly [readonly string[], string]> = [
      [['--ttl', '9007199254740993'], 'coo: USAGE: --ttl takes a duration of at most 366d (no policy allows more than 30d), got "9007199254740993"'],
      [['--max-cost', '1e400'], 'coo: USAGE: --max-cost takes a positive number, got "1e400", a number too large to hold (read as Infinity)'],
      [['--max-cost', '-1e400'], 'coo: USAGE: --max-cost takes a positive number, got "-1e400", a number too large to hold (read as -Infinity)'],
      [['--max-cost', '1e-400'], 'coo: USAGE: --max-cost takes a positive number, got "1e-400", a number too near 0 to hold (read as 0)'],
      [['--max-cost', '-0'], 'coo: USAGE: --max-cost takes a positive number, got "-0"'],
      [['--max-cost', 'Infinity'], 'coo: USAGE: --max-cost takes a positive number, got "Infinity"'],
      [['--idempotency-key', 'x~aa.chatgpt'], 'coo: USAGE: --idempotency-key "x~aa.chatgpt" has a "~"'],
      // Whole-number flags: 0.4 was rounded to 0 and refused by the envelope's schema as "expected >0", 2^53 + 1 in zod's words.
      [['--max-hops', '0.4'], 'coo: USAGE: --max-hops takes a whole number of hops from 1 to 64, got "0.4"'],
      [['--max-runtime', '9007199254740993'], 'coo: USAGE: --max-runtime takes a whole number of seconds from 1 to 86400, got "9007199254740993"'],
      [['--max-runtime', '1e400'], 'coo: USAGE: --max-runtime takes a whole number of seconds from 1 to 86400, got "1e400", a number too large to hold (read as Infinity)'],
    ];
    const said = cases.map(([extra], index) => consult(`Question ${index}?`, ...extra)).map((result) => [result.status, result.stderr.split('\n')[0]]);
    // The key's refusal goes on to say why and what to give (the first test); the others are said whole.
    expect(said).toEqual(cases.map(([, words]) => [2, words.endsWith('"~"') ? expect.stringContaining(words) : words]));
    const issue = coo(['dispatch', '--to', 'ea.codex', '--repo', w.target, '--task', 'Fix add().', '--scope', 'src/**', '--accept', 'add(1, 2) is 3', '--verify', 'true', '--issue', '9007199254740993'], { env });
    expect([issue.status, issue.stderr.split('\n')[0]]).toEqual([2, 'coo: USAGE: --issue takes an issue number from 1 to 9007199254740991, got "9007199254740993"']);
    expect(w.ledger.head()).toBe(head);
    // The guard: a duration and a budget inside the bounds are taken.
    expect(consult('Taken?', '--ttl', '2h', '--max-cost', '0.5', '--max-runtime', '60', '--max-hops', '3').status).toBe(0);
  });
});
