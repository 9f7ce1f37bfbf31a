import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openConsultBridge } from '../../src/dispatch/consult-bridge.js';
import { answerConsultCall, type ConsultToolCall } from '../../src/dispatch/consult-tool.js';
import { parseIssueRef } from '../../src/audit/github.js';
import { derivedIdempotencyKey } from '../../src/lane/request-key.js';
import { planEnvelope } from '../../src/ledger/envelope-plan.js';
import { envelopePath } from '../../src/ledger/layout.js';
import { folderOf } from '../../src/authority/state.js';
import { generatePrivateKey } from '../../src/crypto/keys.js';
import { enqueueDispatch } from '../../src/dispatch/enqueue.js';
import { enqueuePanel } from '../../src/consult/enqueue.js';
import { sendCommand } from '../../src/inbox/ceo-messages.js';
import type { ActorPolicy } from '../../src/schema/policy.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { Scrubber } from '../../src/util/scrub.js';
import { COO, coo, cooAsync } from '../helpers/cli.js';
import { codeOfAsync } from '../helpers/codes.js';
import { writeKey } from '../helpers/damage.js';
import { startFakeGitHub } from '../helpers/fake-github.js';
import { worlds, type World } from '../helpers/lane.js';
import { answersOf, call, INITIALIZE, line, rawSession, refusal } from '../helpers/mcp-raw.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * A careless operator, round 44. A key of the form a tool derives from a request (`req-<40 hex>`) was
 * refused from an MCP client alone: given to `coo consult`, `coo dispatch`, `coo adopt`, `coo
 * cross-check`, `coo command` or in an envelope `coo append` signs, it was written, and the request it
 * was derived for, sent later by an agent without a key, was told IDEMPOTENCY_CONFLICT. And the consult
 * tool a dispatch attempt's agent is given refused a max_cost_usd of 1e400 (read as Infinity) and 1e-400
 * (read as 0) in zod's words ("expected number, received Infinity"; "expected number to be >0"), where
 * the MCP tools say what was read and what to send. `--max-cost` and `--budget` past 1000000 USD were
 * refused by the envelope's schema in zod's words, naming no flag, and `coo cite --post OWNER/REPO#N`
 * read a number past 2^53 - 1 as another issue's, and #0 as an issue. Then the rule was asked of the
 * signer's slot by each verb: a retry of a cross-check (in the challenged agent's slot) under the key the
 * ledger held was refused, and a library writer took any key; now the writer judges the slot it writes.
 */

const fresh = worlds(tempDir('operator-redteam-44-'));
const ASKED = { to: 'aa.chatgpt', files: ['src/add.ts'], prompt: 'Is add() right?' };
/** A key of the derived form that no request derives and the ledger does not hold. */
const UNHELD = `req-${'0123456789abcdef'.repeat(3).slice(0, 40)}`;
const MSG = 'msg_01M97FKA5AW30G4RB262QVZD72';
const DERIVED_WORDS = 'has the form of a key derived from a request (req-<40 hex>), and is neither this request\'s nor one the ledger holds';
/** What a CLI verb, or a library caller, is told to do instead: a verb given no key makes a random one, so a retry gives the same key. */
const CLI_ADVICE = 'such keys are the derived ones; give a key of another form, or none for a new request; to repeat a request, give the key it was written under with the same request';
/** The refusal a verb's --idempotency-key of the derived form gets, the ledger holding none such in `slot`'s. */
const refusedAtCli = (key: string, slot: string): string => `coo: IDEMPOTENCY_CONFLICT: --idempotency-key "${key}" ${DERIVED_WORDS} for ${slot}: ${CLI_ADVICE}`;
/** The default policy, with an edge that lets the COO put one advisory agent's answer to another, and a panel. */
const crossChecks = (policy: ActorPolicy): ActorPolicy => ({ ...policy, edges: [...policy.edges, { from: 'aa.*', to: 'aa.*', intents: ['cross_check'], requires: [] }], panels: [{ name: 'review', from: 'coo.*', members: ['aa.chatgpt', 'aa.claude'] }] });

/** A consult to aa.chatgpt, answered (with a proposal, in a world whose model proposes): its message id. */
async function answered(w: World): Promise<string> {
  const consult = await w.consult({ question: 'How should add() be fixed?' });
  await w.runner().runOnce();
  expect((await w.ledger.state()).messages.get(consult.messageId)?.attempts[0]?.receipt?.status).toBe('succeeded');
  return consult.messageId;
}

describe('a CLI verb given an idempotency key of the derived form', () => {
  it("refuses the key derived for an agent's request not sent yet, with MCP's code in the CLI's words, and that request, sent later without a key, gets its own message; before, coo consult wrote it and the agent was told IDEMPOTENCY_CONFLICT", async () => {
    const w = await fresh();
    const env = { ...process.env, COO_LEDGER: w.gitdir, COO_KEY: writeKey(w.dir, 'coo', w.actors.coo) };
    const commit = git(['-C', w.target, 'rev-parse', 'HEAD']).trim();
    const theirs = derivedIdempotencyKey({ target: ASKED.to, commit, patterns: ASKED.files, question: ASKED.prompt });
    const head = w.ledger.head();
    const squat = coo(['consult', '--to', 'aa.chatgpt', '--repo', w.target, '--file', 'src/add.ts', '--prompt', 'Something else entirely?', '--idempotency-key', theirs], { env });
    expect([squat.status, squat.stderr.split('\n')[0]]).toEqual([3, refusedAtCli(theirs, 'coo.hermes')]);
    expect(w.ledger.head()).toBe(head);
    const session = await rawSession(w);
    try {
      const own = await session.ask(call(1, 'consult', ASKED), 1);
      expect([refusal(own), own.result?.structuredContent?.['existing']]).toEqual(['answered', false]);
      const id = String(own.result?.structuredContent?.['message_id']);
      expect((await w.ledger.state()).messages.get(id)?.idempotencyKey).toBe(theirs);
      // The guard: the operator who retries the agent's request at the CLI with the key it was shown finds its message.
      const retried = coo(['consult', '--to', 'aa.chatgpt', '--repo', w.target, '--file', 'src/add.ts', '--prompt', ASKED.prompt, '--idempotency-key', theirs, '--json'], { env });
      expect([retried.status, JSON.parse(retried.stdout || '{}')['message_id'], JSON.parse(retried.stdout || '{}')['existing']]).toEqual([0, id, true]);
    } finally {
      await session.close();
    }
  });

  it('refuses a key of the derived form the ledger does not hold at every verb that takes one, writing nothing; keys of other forms are taken as before', async () => {
    // Adoptions without the CEO's approval, so that coo adopt reaches the writer.
    const w = await fresh({ policy: (policy) => ({ ...crossChecks(policy), adoptions: { ceo_approval: false } }), modes: ['propose'] });
    const env = { ...process.env, COO_LEDGER: w.gitdir, COO_KEY: writeKey(w.dir, 'coo', w.actors.coo), COO_CEO_KEY: writeKey(w.dir, 'ceo', w.actors.ceo) };
    const consult = ['consult', '--to', 'aa.chatgpt', '--repo', w.target, '--file', 'src/add.ts', '--prompt', 'Is add() right for NaN?'];
    // A real answer with a proposal, so that cross-check and adopt reach the writer.
    const asked = await answered(w);
    // The slot each envelope lands in: a cross-check's is the challenged agent's, whose answer it puts.
    const verbs: ReadonlyArray<readonly [string, readonly string[], string]> = [
      ['consult', consult, 'coo.hermes'],
      ['consult (a panel)', ['consult', '--panel', 'review', '--repo', w.target, '--file', 'src/add.ts', '--prompt', 'Is add() right for NaN?'], 'coo.hermes'],
      ['cross-check', ['cross-check', asked, '--to', 'aa.claude'], 'aa.chatgpt'],
      ['dispatch', ['dispatch', '--to', 'ea.codex', '--repo', w.target, '--task', 'Fix add().', '--scope', 'src/**', '--accept', 'add(1, 2) is 3', '--verify', 'true'], 'coo.hermes'],
      ['adopt', ['adopt', asked, '--proposal', '1', '--to', 'ea.codex', '--repo', w.target], 'coo.hermes'],
      ['command', ['command', '--text', 'Look at add().'], 'ceo'],
    ];
    const head = w.ledger.head();
    const said = verbs.map(([name, args]) => {
      const result = coo([...args, '--idempotency-key', UNHELD], { env });
      return [name, result.status, result.stderr.split('\n')[0]];
    });
    expect(said).toEqual(verbs.map(([name, , slot]) => [name, 3, refusedAtCli(UNHELD, slot)]));
    // A panel member's key made from a derived one is refused too, before the ledger is read, naming the flag as every key with a "~" is.
    const member = coo([...consult, '--idempotency-key', `${UNHELD}~aa.chatgpt`, '--ledger', join(w.dir, 'no-ledger.git')], { env });
    expect([member.status, member.stderr.split('\n')[0]]).toEqual([2, `coo: USAGE: --idempotency-key "${UNHELD}~aa.chatgpt" has a "~", which joins a panel's key to each member's (<key>~<member>) and which no given key may have: it could take a key a panel derives for its member. Give a key without "~"; to repeat a panel, its own key`]);
    // An envelope written by hand under such a key, signed by coo append.
    const now = new Date();
    const plan = planEnvelope(await w.ledger.state(), w.actors.codex, 'coo.hermes', { maxRuntimeSeconds: 1 }, now, 'blocker');
    const blocker = { ...plan.header, idempotency_key: UNHELD, intent: 'blocker', authority_class: 'evidence', budget: { max_cost_usd: 0, max_runtime_seconds: 1 }, about_message_id: null, blocker: { code: 'needs_decision', detail: 'stuck' }, expected_receipt_schema: null };
    const file = join(w.dir, 'blocker.yaml');
    writeFileSync(file, toYaml(blocker));
    const appended = coo(['append', file, '--key', writeKey(w.dir, 'codex', w.actors.codex)], { env });
    expect([appended.status, appended.stderr.split('\n')[0]]).toEqual([3, `coo: IDEMPOTENCY_CONFLICT: idempotency_key "${UNHELD}" ${DERIVED_WORDS} for ea.codex: such keys are the derived ones; give a key of another form; to repeat a request, the key it was written under with the same request`]);
    expect(w.ledger.head()).toBe(head);
    // The guards: keys of any other form, even ones that start alike or are the derived form in capitals, are the operator's own.
    for (const key of ['my-review-1', 'req-later', UNHELD.toUpperCase()]) {
      const mine = coo([...consult, '--idempotency-key', key, '--json'], { env });
      expect([key, mine.status, JSON.parse(mine.stdout || '{}')['existing']]).toEqual([key, 0, false]);
    }
    const command = coo(['command', '--text', 'Look at add().', '--idempotency-key', 'cmd-1', '--json'], { env });
    expect([command.status, JSON.parse(command.stdout || '{}')['existing']]).toEqual([0, false]);
    // The key the COO's acknowledgement of that command derives is the validator's to keep, refused naming the flag that gave it; before, naming idempotency_key.
    const commandId = String(JSON.parse(command.stdout)['message_id']);
    const ack = coo([...consult, '--idempotency-key', `ack-${commandId}`], { env });
    expect([ack.status, ack.stderr.split('\n')[0]]).toEqual([3, `coo: IDEMPOTENCY_CONFLICT: --idempotency-key "ack-${commandId}" is the key of the acknowledgement of ${commandId}, which no other envelope may take`]);
  });
});

describe('the derived-form rule, judged by the writer in the slot the envelope lands in', () => {
  it("a CLI retry of a cross-check an agent asked over MCP, under the key the ledger holds in the challenged agent's slot, finds that message, as does coo append of its envelope; before, both were refused IDEMPOTENCY_CONFLICT, judged in the signer's slot", async () => {
    const w = await fresh({ policy: crossChecks });
    const env = { ...process.env, COO_LEDGER: w.gitdir, COO_KEY: writeKey(w.dir, 'coo', w.actors.coo) };
    const asked = await answered(w);
    const session = await rawSession(w);
    try {
      const first = await session.ask(call(1, 'cross_check', { answer: asked, to: 'aa.claude' }), 1);
      expect([refusal(first), first.result?.structuredContent?.['existing']]).toEqual(['answered', false]);
      const id = String(first.result?.structuredContent?.['message_id']);
      const record = (await w.ledger.state()).messages.get(id)!;
      // The COO signs it; the agent whose answer is challenged is its source, and the key is in that agent's slot.
      expect([record.source, record.idempotencyKey]).toEqual(['aa.chatgpt', expect.stringMatching(/^req-[0-9a-f]{40}$/)]);
      const head = w.ledger.head();
      const retried = coo(['cross-check', asked, '--to', 'aa.claude', '--idempotency-key', record.idempotencyKey, '--json'], { env });
      expect([retried.status, retried.stderr.split('\n')[0], JSON.parse(retried.stdout || '{}')['message_id'], JSON.parse(retried.stdout || '{}')['existing']]).toEqual([0, '', id, true]);
      // The envelope the tool wrote, signed again by hand with its artifacts: the same request under the key the ledger holds.
      const folder = folderOf(record);
      const copies: Array<readonly [string, string]> = [[envelopePath(folder), 'envelope.yaml'], [`${folder}/prompt.md`, 'prompt.md'], [`${folder}/context-manifest.yaml`, 'context-manifest.yaml']];
      for (const [path, name] of copies) writeFileSync(join(w.dir, name), (await w.ledger.readFile(path))!);
      const appended = coo(['append', ...copies.map(([, name]) => join(w.dir, name)), '--json'], { env });
      expect([appended.status, appended.stderr.split('\n')[0], JSON.parse(appended.stdout || '{}')['message_id'], JSON.parse(appended.stdout || '{}')['existing']]).toEqual([0, '', id, true]);
      expect(w.ledger.head()).toBe(head);
      // The guard: a derived-form key the ledger holds in no slot of this request is still refused, at the tool in its words and code.
      const squat = await session.ask(call(2, 'cross_check', { answer: asked, to: 'aa.claude', prompt: 'Another question?', idempotency_key: UNHELD }), 2);
      expect([refusal(squat), squat.result?.content?.[0]?.text]).toEqual(['tool error IDEMPOTENCY_CONFLICT', expect.stringContaining(`idempotency_key "${UNHELD}" ${DERIVED_WORDS} for aa.chatgpt: such keys are the derived ones; give a key of another form, or none and one is derived from the request`)]);
      expect(w.ledger.head()).toBe(head);
    } finally {
      await session.close();
    }
  }, 60_000);

  it("a CLI retry of a panel an agent asked over MCP without a key, under the panel's derived key the ledger holds only in its members' keys (<key>~<member>), finds that panel; another request under it is refused as a key reused", async () => {
    const w = await fresh({ policy: crossChecks });
    const env = { ...process.env, COO_LEDGER: w.gitdir, COO_KEY: writeKey(w.dir, 'coo', w.actors.coo) };
    const question = 'Is add() right for NaN?';
    const session = await rawSession(w);
    try {
      const first = await session.ask(call(1, 'consult', { panel: 'review', files: ['src/add.ts'], prompt: question }), 1);
      expect([refusal(first), first.result?.structuredContent?.['existing']]).toEqual(['answered', false]);
      const panelId = (first.result?.structuredContent?.['panel'] as { panel_id?: string } | undefined)?.panel_id;
      const members = [...(await w.ledger.state()).messages.values()].filter((record) => record.panel === panelId);
      const panelKey = members[0]!.idempotencyKey.split('~')[0]!;
      // The ledger holds the members' keys alone, never the panel's own.
      expect([panelKey, members.map((record) => record.idempotencyKey).sort()]).toEqual([expect.stringMatching(/^req-[0-9a-f]{40}$/), [`${panelKey}~aa.chatgpt`, `${panelKey}~aa.claude`]]);
      const head = w.ledger.head();
      const panel = ['consult', '--panel', 'review', '--repo', w.target, '--file', 'src/add.ts', '--idempotency-key', panelKey];
      const retried = coo([...panel, '--prompt', question, '--json'], { env });
      expect([retried.status, retried.stderr.split('\n')[0], JSON.parse(retried.stdout || '{}')['panel_id'], JSON.parse(retried.stdout || '{}')['existing']]).toEqual([0, '', panelId, true]);
      const other = coo([...panel, '--prompt', 'Something else entirely?'], { env });
      expect([other.status, other.stderr.split('\n')[0]]).toEqual([3, expect.stringMatching(new RegExp(`^coo: IDEMPOTENCY_CONFLICT: .*idempotency_key "${panelKey}~aa\\.chatgpt" was used by msg_[0-9A-Z]{26} for a different request$`))]);
      expect(w.ledger.head()).toBe(head);
    } finally {
      await session.close();
    }
  }, 60_000);

  it("a library enqueueConsult or enqueueDispatch given a fresh key of the derived form is refused naming its field idempotencyKey, writing nothing; before, the library wrote it, and then was refused naming the CLI's --idempotency-key", async () => {
    const w = await fresh();
    const head = w.ledger.head();
    const refused = await w.consult({ idempotencyKey: UNHELD }).then(() => 'written', (error: Error) => `${(error as { code?: string }).code}: ${error.message}`);
    expect(refused).toBe(`IDEMPOTENCY_CONFLICT: idempotencyKey "${UNHELD}" ${DERIVED_WORDS} for coo.hermes: ${CLI_ADVICE}`);
    const dispatch = { ledger: w.ledger, key: w.actors.coo, now: new Date(), target: 'ea.codex', repo: w.target, task: 'Fix add().', scope: ['src/**'], accept: ['add(1, 2) is 3'], verify: ['true'] };
    const dispatched = await enqueueDispatch({ ...dispatch, idempotencyKey: UNHELD }).then(() => 'written', (error: Error) => `${(error as { code?: string }).code}: ${error.message}`);
    expect(dispatched).toBe(`IDEMPOTENCY_CONFLICT: idempotencyKey "${UNHELD}" ${DERIVED_WORDS} for coo.hermes: ${CLI_ADVICE}`);
    expect(w.ledger.head()).toBe(head);
    // The guards: a caller that derived the key from its own request may write it, and then any caller may repeat that request under it.
    const own = await w.consult({ idempotencyKey: UNHELD, derivedKey: UNHELD });
    expect(own.existing).toBe(false);
    expect((await w.consult({ idempotencyKey: UNHELD })).messageId).toBe(own.messageId);
  });

  it("a signer the trust files do not know, with a key of the derived form, is told so in requireHolder's words, as without the key; before, IDEMPOTENCY_CONFLICT", async () => {
    const w = await fresh();
    const stranger = generatePrivateKey('coo.stranger');
    const env = { ...process.env, COO_LEDGER: w.gitdir, COO_KEY: writeKey(w.dir, 'stranger', stranger) };
    const consult = ['consult', '--to', 'aa.chatgpt', '--repo', w.target, '--file', 'src/add.ts', '--prompt', 'Is add() right?'];
    const head = w.ledger.head();
    const keyless = coo(consult, { env });
    const given = coo([...consult, '--idempotency-key', UNHELD], { env });
    expect(keyless.stderr.split('\n')[0]).toContain(`the sender's key (requests are sent by the active COO coo.hermes) ${stranger.publicKey.keyId} is a key the trust files do not know`);
    expect([given.status, given.stderr.split('\n')[0]]).toEqual([keyless.status, keyless.stderr.split('\n')[0]]);
    // An envelope written by hand and signed with that key: the validator's words, as under a key of another form.
    const now = new Date();
    const plan = planEnvelope(await w.ledger.state(), w.actors.codex, 'coo.hermes', { maxRuntimeSeconds: 1 }, now, 'blocker');
    const said = ['hand-1', UNHELD].map((key) => {
      const file = join(w.dir, `blocker-${key}.yaml`);
      writeFileSync(file, toYaml({ ...plan.header, idempotency_key: key, intent: 'blocker', authority_class: 'evidence', budget: { max_cost_usd: 0, max_runtime_seconds: 1 }, about_message_id: null, blocker: { code: 'needs_decision', detail: 'stuck' }, expected_receipt_schema: null }));
      const appended = coo(['append', file], { env });
      return [appended.status, appended.stderr.split('\n')[0]!.replace(key, 'KEY')];
    });
    expect(said[1]).toEqual(said[0]);
    expect(said[0]).toEqual([3, `coo: SIGNER_UNKNOWN: rejected: commit: signed by ${stranger.publicKey.keyId}, a key the trust files do not know (1 more finding(s))`]);
    expect(w.ledger.head()).toBe(head);
  });
});

describe('a given key no writer takes, refused in the words its caller gave it', () => {
  it('a key with a "~", or the key of an acknowledgement, is refused naming the tool\'s idempotency_key over MCP (a consult and a panel) and a library caller\'s idempotencyKey, writing nothing; before, "envelope: idempotency_key" and "panel: idempotency_key", fields the caller never sent', async () => {
    const w = await fresh({ policy: crossChecks });
    const commandId = (await sendCommand({ ledger: w.ledger, key: w.actors.ceo, now: new Date(), text: 'Ship it.' })).messageId;
    const head = w.ledger.head();
    const tilde = (given: string): string => `${given} "x~aa.chatgpt" has a "~", which joins a panel's key to each member's (<key>~<member>) and which no given key may have: it could take a key a panel derives for its member. Give a key without "~"; to repeat a panel, its own key`;
    const session = await rawSession(w);
    try {
      const asked = [
        await session.ask(call(1, 'consult', { ...ASKED, idempotency_key: 'x~aa.chatgpt' }), 1),
        await session.ask(call(2, 'consult', { panel: 'review', files: ASKED.files, prompt: ASKED.prompt, idempotency_key: 'x~aa.chatgpt' }), 2),
      ];
      expect(asked.map((answer) => [refusal(answer), answer.result?.content?.[0]?.text])).toEqual(asked.map(() => ['tool error USAGE', `USAGE: ${tilde('idempotency_key')}\nFix the arguments as the message says and call again.`]));
      // The key of an item's acknowledgement, named as the tool's argument; before, as the envelope's field at its path.
      const ack = await session.ask(call(3, 'consult', { ...ASKED, idempotency_key: `ack-${commandId}` }), 3);
      expect([refusal(ack), ack.result?.content?.[0]?.text]).toEqual(['tool error IDEMPOTENCY_CONFLICT', expect.stringMatching(new RegExp(`^IDEMPOTENCY_CONFLICT: idempotency_key "ack-${commandId}" is the key of the acknowledgement of ${commandId}, which no other envelope may take\n`))]);
    } finally {
      await session.close();
    }
    const said = (promise: Promise<unknown>): Promise<string> => promise.then(() => 'written', (error: Error) => `${(error as { code?: string }).code}: ${error.message}`);
    expect(await said(w.consult({ idempotencyKey: 'x~aa.chatgpt' }))).toBe(`USAGE: ${tilde('idempotencyKey')}`);
    expect(await said(enqueuePanel({ ledger: w.ledger, key: w.actors.coo, now: new Date(), repo: w.target, patterns: ASKED.files, question: ASKED.prompt, panel: 'review', idempotencyKey: 'x~aa.chatgpt' }))).toBe(`USAGE: ${tilde('idempotencyKey')}`);
    expect(w.ledger.head()).toBe(head);
  }, 60_000);
});

describe('a CLI idempotency key no envelope can hold', () => {
  it('refuses a key with a space or a tab, and one over 200 characters as a usage error naming --idempotency-key, writing nothing; before, the envelope\'s schema refused it as SCHEMA_INVALID naming envelope:idempotency_key', async () => {
    const w = await fresh();
    const env = { ...process.env, COO_LEDGER: w.gitdir, COO_KEY: writeKey(w.dir, 'coo', w.actors.coo), COO_CEO_KEY: writeKey(w.dir, 'ceo', w.actors.ceo) };
    const consult = ['consult', '--to', 'aa.chatgpt', '--repo', w.target, '--file', 'src/add.ts', '--prompt', 'Is add() right?'];
    const long = 'k'.repeat(201);
    const cases: ReadonlyArray<readonly [readonly string[], string, string]> = [
      // The guard (it held): an empty value is refused for every flag before the verb runs.
      [consult, '', 'coo: USAGE: --idempotency-key was given an empty value (a shell variable that is unset or empty?): give it a value, or leave the flag out for its default; nothing was done'],
      [consult, 'my key', 'coo: USAGE: --idempotency-key "my key": printable ASCII without spaces'],
      [consult, long, `coo: USAGE: --idempotency-key "${'k'.repeat(63)}…": Too big: expected string to have <=200 characters`],
      [['command', '--text', 'Look at add().'], 'my\tkey', 'coo: USAGE: --idempotency-key "my\\tkey": printable ASCII without spaces'],
    ];
    const head = w.ledger.head();
    const said = cases.map(([args, key]) => {
      const result = coo([...args, '--idempotency-key', key], { env });
      return [result.status, result.stderr.split('\n')[0]];
    });
    expect(said).toEqual(cases.map(([, , words]) => [2, words]));
    expect(w.ledger.head()).toBe(head);
    // The guard: a key of 200 printable characters is taken.
    expect(coo([...consult, '--idempotency-key', 'k'.repeat(200)], { env }).status).toBe(0);
  });
});

describe('a CLI amount of USD past what an envelope holds', () => {
  it('refuses --max-cost and --budget over 1000000 as a usage error naming the flag and the bound, writing nothing; before, the envelope\'s schema refused it in zod\'s words (SCHEMA_INVALID "expected number to be <=1000000")', async () => {
    const w = await fresh();
    const env = { ...process.env, COO_LEDGER: w.gitdir, COO_KEY: writeKey(w.dir, 'coo', w.actors.coo), COO_CEO_KEY: writeKey(w.dir, 'ceo', w.actors.ceo) };
    const consult = ['consult', '--to', 'aa.chatgpt', '--repo', w.target, '--file', 'src/add.ts', '--prompt', 'Is add() right?'];
    const dispatch = ['dispatch', '--to', 'ea.codex', '--repo', w.target, '--task', 'Fix add().', '--scope', 'src/**', '--accept', 'add(1, 2) is 3', '--verify', 'true'];
    const cases: ReadonlyArray<readonly [readonly string[], string, string]> = [
      [consult, '--max-cost', '1e21'],
      [consult, '--max-cost', '1000000.01'],
      [dispatch, '--max-cost', '1e308'],
      [['command', '--text', 'Look at add().'], '--budget', '2000000'],
    ];
    const head = w.ledger.head();
    const said = cases.map(([args, flag, value]) => {
      const result = coo([...args, flag, value], { env });
      return [result.status, result.stderr.split('\n')[0]];
    });
    expect(said).toEqual(cases.map(([, flag, value]) => [2, `coo: USAGE: ${flag} takes a positive number of USD of at most 1000000, the most an envelope holds, got "${value}"`]));
    expect(w.ledger.head()).toBe(head);
    // The guard: the bound itself passes the flag, and the policy's cap then speaks, as before.
    const atBound = coo([...consult, '--max-cost', '1000000'], { env });
    expect([atBound.status, atBound.stderr.split('\n')[0]]).toEqual([3, expect.stringMatching(/^coo: POLICY_LIMIT: rejected: .*: max_cost_usd 1000000 exceeds 5 \(policy v1\)$/)]);
    expect(coo([...consult, '--max-cost', '0.5'], { env }).status).toBe(0);
  });
});

describe('coo cite --post given an issue number a double cannot hold, or 0', () => {
  it('refuses OWNER/REPO#0 and a number past 2^53 - 1 naming --post and the range, before the ledger is read or GitHub asked; before, #9007199254740993 was read as issue 9007199254740992', async () => {
    const w = await fresh();
    const github = await startFakeGitHub();
    try {
      for (const number of ['0', '9007199254740993', '99999999999999999999999']) {
        const ref = `acme/ledger#${number}`;
        expect(() => parseIssueRef(ref), ref).toThrow(`--post takes OWNER/REPO#NUMBER with an issue number from 1 to 9007199254740991, got "${ref}"`);
        const cited = await cooAsync(['cite', MSG, '--ledger', w.gitdir, '--post', ref], { env: { GITHUB_TOKEN: 'ghp_test_token', GITHUB_API_URL: github.url } });
        expect([ref, cited.status, cited.stderr.split('\n')[0]]).toEqual([ref, 2, `coo: USAGE: --post takes OWNER/REPO#NUMBER with an issue number from 1 to 9007199254740991, got "${ref}"`]);
      }
      expect(github.requests).toEqual([]);
      // The guards: the largest whole number a double holds, and a number written with leading zeros, are read as written.
      expect(parseIssueRef('acme/ledger#9007199254740991').number).toBe(Number.MAX_SAFE_INTEGER);
      expect(parseIssueRef('acme/ledger#007').number).toBe(7);
    } finally {
      await github.close();
    }
  });
});

/** A tools/call line whose max_cost_usd is the JSON number `literal` as written, which JSON.stringify could not write. */
const rawConsult = (id: number, literal: string): string => call(id, 'consult', { to: 'aa.chatgpt', question: 'Is add() right?', files: ['src/add.ts'], max_cost_usd: '@@n@@' }).replace('"@@n@@"', literal);

describe("the consult tool of a dispatch attempt's agent given a max_cost_usd a double cannot hold", () => {
  const words: ReadonlyArray<readonly [string, string]> = [
    ['1e400', 'received a number too large in size for a double (such as 1e400), read as Infinity: send a number above 0 and at most 1000000'],
    ['-1e400', 'received a number too large in size for a double (such as 1e400), read as -Infinity: send a number above 0 and at most 1000000'],
    ['1e-400', 'received 0 (a number nearer 0 than a double holds, such as 1e-400, is read as 0): send a number above 0 and at most 1000000'],
    ['-0', 'received 0 (a number nearer 0 than a double holds, such as 1e-400, is read as 0): send a number above 0 and at most 1000000'],
    ['"5"', 'received the string "5": send a number above 0 and at most 1000000 as a JSON number, unquoted'],
  ];

  it("the relay says what was read and what to send, as coo mcp's tools do, and the call never reaches the runner; before, zod's words", async () => {
    const seen: unknown[] = [];
    const bridge = await openConsultBridge(async (request) => {
      seen.push(request);
      return { ok: true, text: 'the answer', result: {} };
    }, new Scrubber());
    try {
      const child = spawn(process.execPath, [COO, 'consult-relay', '--socket', bridge.socket], { env: { ...process.env, COO_LEDGER: '', COO_KEY: '' }, stdio: 'pipe' });
      const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
      const { answers, answer } = answersOf(child.stdout);
      child.stdin.write(line(INITIALIZE) + line({ method: 'notifications/initialized' }));
      words.forEach(([literal], index) => child.stdin.write(rawConsult(index + 1, literal)));
      for (let id = 1; id <= words.length; id += 1) await answer(id, 0);
      // The guard: a budget inside the bound reaches the runner.
      child.stdin.end(rawConsult(99, '0.5'));
      expect(await exited).toBe(0);
      const textOf = (id: number): string => answers.find((found) => found.id === id)?.result?.content?.[0]?.text ?? '';
      expect(words.map(([literal], index) => [literal, refusal(answers.find((found) => found.id === index + 1)!), textOf(index + 1)])).toEqual(words.map(([literal, said]) => [literal, 'tool error USAGE', expect.stringContaining(said)]));
      expect(textOf(99)).toContain('the answer');
      expect(seen).toEqual([{ to: 'aa.chatgpt', question: 'Is add() right?', files: ['src/add.ts'], max_cost_usd: 0.5 }]);
    } finally {
      await bridge.close();
    }
  }, 60_000);

  it('the runner, given the line by an agent that writes to its socket itself, says the same, before it reads the ledger', async () => {
    for (const [literal, said] of words) {
      const request: unknown = JSON.parse(`{"to":"aa.chatgpt","question":"Is add() right?","files":["src/add.ts"],"max_cost_usd":${literal}}`);
      // No ledger, worktree or key: the arguments are refused before any is used.
      const refused = answerConsultCall({} as ConsultToolCall, request).then(
        () => 'answered',
        (error: Error) => error.message,
      );
      expect(await refused).toBe(`max_cost_usd: ${said}`);
    }
    expect(await codeOfAsync(() => answerConsultCall({} as ConsultToolCall, { to: 'aa.chatgpt', question: 'q', files: ['a'], max_cost_usd: Number.POSITIVE_INFINITY }))).toBe('USAGE');
  });
});
