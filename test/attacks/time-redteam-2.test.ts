import { writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appendTrustVersion } from '../../src/ledger/trust-update.js';
import type { ActorPolicy, PolicyPanel } from '../../src/schema/policy.js';
import { claimPath, killSwitchPath, messageFolder, receiptPath, trustPath } from '../../src/ledger/layout.js';
import type { CooMessage } from '../../src/schema/message.js';
import { readStrictYaml, toYaml } from '../../src/schema/strict-yaml.js';
import type { Ledger, NewFile } from '../../src/ledger/ledger.js';
import type { LedgerState } from '../../src/authority/state.js';
import { isoSeconds } from '../../src/util/time.js';
import { attack, firstOr, useKit, type Kit } from '../helpers/attack-kit.js';
import { dispatchEnvelope, eaReceiptDoc, messageFiles } from '../helpers/ledger.js';
import { coo } from '../helpers/cli.js';
import { receiptsOf, worlds } from '../helpers/lane.js';
import { makeCase, remoteReceipts } from '../helpers/remote-runners.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * Entries dated ahead: a writer whose clock runs hours fast, or a hostile signed entry. A claim dated
 * before what it builds on is refused (CLOCK_SKEW, time-redteam.test.ts), so an entry dated hours
 * ahead would block its message until real time caught up. Every writer knows its own clock and the
 * hook knows the server's: an entry dated ahead of them by more than the allowed skew is refused.
 */

const dir = tempDir('coo-attack-time-redteam-2-');
const getKit = useKit(dir);
let kit: Kit;
beforeAll(() => {
  kit = getKit();
});

const fresh = worlds(join(dir, 'worlds'));
const HOUR = 3600_000;
const ahead = (ms: number): Date => new Date(Date.now() + ms);

function claimEntry(message: CooMessage, attempt: number, claimedAt: string): { path: string; bytes: Buffer } {
  const doc = { schema_version: 'claim.v0', message_id: message.message_id, attempt_id: `ea_attempt_${message.message_id.slice(4)}_${attempt}`, attempt_number: attempt, runner_id: 'ahead', transport_session_id: 'ahead', claimed_at: claimedAt };
  return { path: claimPath(messageFolder(message.message_id, message.created_at), attempt), bytes: Buffer.from(toYaml(doc)) };
}

function receiptEntry(message: CooMessage, attempt: number, createdAt: string): { path: string; bytes: Buffer } {
  const doc = eaReceiptDoc(message.message_id, attempt, { created_at: createdAt, commands_run: [], inner_exit_codes: [], tests_run: [] });
  return { path: receiptPath(messageFolder(message.message_id, message.created_at), attempt), bytes: Buffer.from(toYaml(doc)) };
}

const files = (entries: ReadonlyArray<{ path: string; bytes: Buffer }>): Record<string, Buffer> => Object.fromEntries(entries.map((entry) => [entry.path, entry.bytes]));

describe('an entry dated hours ahead of the clock of the one who writes it or the hook that takes it', () => {
  attack('a dispatch envelope dated three hours ahead of the writer', 'library', 'CLOCK_SKEW', () => kit.append(messageFiles(dispatchEnvelope({}, ahead(3 * HOUR))), kit.keys.coo.key));

  attack('the same envelope pushed with stock git', 'hook', 'CLOCK_SKEW', () => kit.push(files(messageFiles(dispatchEnvelope({}, ahead(3 * HOUR)))), { key: kit.keys.coo.file }));

  it('coo append of an envelope dated three hours ahead: CLOCK_SKEW, saying the clock runs ahead and what to do, and nothing written', () => {
    const message = dispatchEnvelope({}, ahead(3 * HOUR));
    const [envelope, task] = messageFiles(message);
    const envelopeFile = join(dir, 'ahead-envelope.yaml');
    const taskFile = join(dir, basename(task!.path));
    writeFileSync(envelopeFile, envelope!.bytes);
    writeFileSync(taskFile, task!.bytes);
    const before = kit.head();
    const result = coo(['append', '--ledger', kit.world.gitdir, '--key', kit.keys.coo.file, envelopeFile, taskFile]);
    expect(result.status).not.toBe(0);
    expect(result.stderr).toMatch(/^coo: CLOCK_SKEW: .*created_at .* ahead of the clock .*runs ahead.*set that machine's clock right \(NTP\)/m);
    expect(result.stderr).not.toMatch(/^\s+at /m);
    expect(kit.head()).toBe(before);
  });

  attack('a claim dated three hours ahead of the runner that writes it', 'library', 'CLOCK_SKEW', async () => {
    const message = dispatchEnvelope({}, new Date(Date.now() - 60_000));
    expect(await kit.append(messageFiles(message), kit.keys.coo.key)).toBe('accepted');
    return kit.append([claimEntry(message, 1, isoSeconds(ahead(3 * HOUR)))], kit.keys.coo.key);
  });

  attack('a receipt dated three hours ahead, pushed with stock git', 'hook', 'CLOCK_SKEW', async () => {
    const message = dispatchEnvelope({}, new Date(Date.now() - 60_000));
    expect(await kit.append(messageFiles(message), kit.keys.coo.key)).toBe('accepted');
    expect(await kit.append([claimEntry(message, 1, isoSeconds(new Date()))], kit.keys.coo.key)).toBe('accepted');
    return kit.push(files([receiptEntry(message, 1, isoSeconds(ahead(3 * HOUR)))]), { key: kit.keys.coo.file });
  });

  attack("a kill switch the CEO's machine dates a day ahead", 'library', 'CLOCK_SKEW', async () => {
    const version = ((await kit.world.ledger.state()).killSwitch?.version ?? 0) + 1;
    const doc = { schema_version: 'kill_switch.v0', version, state: 'off', reason: 'clock ahead', set_by: 'ceo', created_at: isoSeconds(ahead(24 * HOUR)) };
    return kit.append([{ path: killSwitchPath(version), bytes: Buffer.from(toYaml(doc)) }], kit.keys.ceo.key);
  });

  it('takes an envelope dated two minutes ahead: machines whose clocks differ by less than the allowed skew still work', async () => {
    expect(await kit.append(messageFiles(dispatchEnvelope({}, ahead(120_000))), kit.keys.coo.key)).toBe('accepted');
    expect(await kit.push(files(messageFiles(dispatchEnvelope({}, ahead(120_000)))), { key: kit.keys.coo.file })).toBe('accepted');
  });

  it('coo verify, which has no clock of the past, takes an envelope dated ahead written behind the hook', async () => {
    let codes: string[] = ['unset'];
    await kit.bypass(files(messageFiles(dispatchEnvelope({}, ahead(3 * HOUR)))), { key: kit.keys.coo.file }, () => {
      codes = kit.verifyCodes();
    });
    expect(firstOr(codes, 'CLOCK_SKEW')).toBe('accepted');
  });
});

describe('a policy whose panel contradicts the registry is refused when it is written, not when the panel is first asked', () => {
  /** ChatGPT's model again, through OpenRouter: one model under a second name. */
  const TWIN = 'aa.second_opinion';
  beforeAll(async () => {
    const registry = (await kit.world.ledger.state()).registry!.doc;
    if (registry.actors.some((actor) => actor.id === TWIN)) return;
    const twin = { id: TWIN, class: 'advisory_agent' as const, description: 'A second opinion.', keys: [], transport: { kind: 'oracle' as const, engine: 'api' as const, model: 'openai/gpt-5.5', provider_key_env: 'OPENROUTER_API_KEY' as const, route: 'openrouter' as const } };
    await appendTrustVersion(kit.world.ledger, { role: 'registry', document: { ...registry, version: undefined, actors: [...registry.actors, twin] } }, kit.keys.ceo.key, new Date());
  });

  async function withPanel(members: readonly string[], change: (policy: ActorPolicy) => ActorPolicy = (policy) => policy): Promise<Record<string, unknown>> {
    const policy = (await kit.world.ledger.state()).policy!.doc;
    const panel: PolicyPanel = { name: 'review', from: 'coo.*', members: [...members] };
    return { ...change({ ...policy, panels: [panel] }), version: undefined };
  }

  async function written(members: readonly string[], change?: (policy: ActorPolicy) => ActorPolicy): Promise<string> {
    const next = (await kit.world.ledger.state()).policy!.version + 1;
    return kit.append([{ path: trustPath('policy', next), bytes: Buffer.from(toYaml({ ...(await withPanel(members, change)), version: next })) }], kit.keys.ceo.key);
  }

  it('coo trust --policy with a panel whose two members are one model under two names: PANEL_INVALID, and nothing written', async () => {
    const file = join(dir, 'twin-policy.yaml');
    writeFileSync(file, toYaml(await withPanel(['aa.chatgpt', TWIN])));
    const before = kit.head();
    const result = coo(['trust', '--ledger', kit.world.gitdir, '--ceo-key', kit.keys.ceo.file, '--policy', file]);
    expect(result.status).not.toBe(0);
    expect(result.stderr).toMatch(/^coo: PANEL_INVALID: .*aa\.chatgpt and aa\.second_opinion are one model \(gpt-5\.5\)/m);
    expect(kit.head()).toBe(before);
  });

  attack('a policy panel of one model under two names, written with the library', 'library', 'PANEL_INVALID', () => written(['aa.chatgpt', TWIN, 'aa.claude']));

  attack('a policy panel naming an actor the registry does not know', 'library', 'ACTOR_UNKNOWN', () => written(['aa.chatgpt', 'aa.nobody']));

  attack('a policy panel naming an execution agent among its members', 'library', 'PANEL_INVALID', () => written(['aa.chatgpt', 'ea.codex']));

  attack("a policy panel whose member's model the same policy gives no price", 'library', 'PANEL_INVALID', () =>
    written(['aa.chatgpt', 'aa.claude'], (policy) => ({ ...policy, models: Object.fromEntries(Object.entries(policy.models).filter(([model]) => model !== 'claude-4.6-sonnet')) })),
  );

  attack('a policy panel naming a member no edge of the same policy lets its senders consult', 'library', 'PANEL_INVALID', () =>
    written(['aa.chatgpt', 'aa.gemini'], (policy) => ({ ...policy, edges: policy.edges.filter((edge) => edge.to !== 'aa.gemini') })),
  );

  attack('a policy panel whose senders (from) match no registered actor', 'library', 'PANEL_INVALID', async () => {
    const policy = (await kit.world.ledger.state()).policy!;
    const next = { ...policy.doc, version: policy.version + 1, panels: [{ name: 'review', from: 'cto.*', members: ['aa.chatgpt', 'aa.claude'] }] };
    return kit.append([{ path: trustPath('policy', policy.version + 1), bytes: Buffer.from(toYaml(next)) }], kit.keys.ceo.key);
  });

  it('takes a panel of three registered advisory agents on three priced models', async () => {
    expect(await written(['aa.chatgpt', 'aa.claude', 'aa.gemini'])).toBe('accepted');
  });

  attack('then a registry that drops a member of that panel', 'library', 'ACTOR_UNKNOWN', async () => {
    const registry = (await kit.world.ledger.state()).registry!;
    const doc = { ...registry.doc, version: registry.version + 1, actors: registry.doc.actors.filter((actor) => actor.id !== 'aa.gemini') };
    return kit.append([{ path: trustPath('registry', registry.version + 1), bytes: Buffer.from(toYaml(doc)) }], kit.keys.ceo.key);
  });
});

describe('a message an entry dated ahead already blocks (written before this rule, or where no hook stood)', () => {
  it('a consult whose envelope a machine three hours fast wrote: a runner with the right clock says CLOCK_SKEW once, naming the entry, claims nothing, pays nothing, and waits until a claim by its clock can land; by then it runs', async () => {
    const w = await fresh();
    const created = ahead(3 * HOUR);
    const { messageId } = await w.consult({ now: created });
    const runner = w.runner();
    const first = await runner.runOnce();
    await runner.runOnce();
    const errors = w.events.filter((event) => event.type === 'error');
    expect(errors).toEqual([expect.objectContaining({ messageId, code: 'CLOCK_SKEW', message: expect.stringContaining(`the envelope of ${messageId} is dated`) })]);
    expect(first.waiting).toContain(isoSeconds(new Date(Date.parse(isoSeconds(created)) - 300_000)));
    expect(w.events.filter((event) => event.type === 'claimed')).toEqual([]);
    expect((await w.ledger.state()).messages.get(messageId)!.attempts).toEqual([]);
    expect(w.server.requests).toHaveLength(0);

    await w.runner({ clock: () => new Date(Date.now() + 3 * HOUR) }).runOnce();
    expect((await receiptsOf(w, messageId)).map((receipt) => receipt['status'])).toEqual(['succeeded']);
  });
});

describe('a receipt that puts its retry far ahead', () => {
  /** The ledger, with every receipt the runner writes changed by `change` (and signed as changed) on its way in. */
  function twisting(ledger: Ledger, change: (doc: Record<string, unknown>) => Record<string, unknown>): Ledger {
    const twist = (files: readonly NewFile[]): NewFile[] =>
      files.map((file) => (/\/receipts\/\d{3}\.yaml$/.test(file.path) ? { path: file.path, bytes: Buffer.from(toYaml(change(readStrictYaml(file.bytes, file.path) as Record<string, unknown>))) } : file));
    return new Proxy(ledger, {
      get(target, property) {
        if (property === 'append') {
          return (options: Parameters<Ledger['append']>[0]) => target.append({ ...options, files: typeof options.files === 'function' ? (state: LedgerState) => twist((options.files as (state: LedgerState) => readonly NewFile[])(state)) : twist(options.files) });
        }
        const value = Reflect.get(target, property, target) as unknown;
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
  }

  it('a rate-limited consult whose receipt says to retry in a year: refused (ATTEMPT_INVALID), so the message never waits past what any policy lets a retry wait', async () => {
    const w = await fresh({ modes: ['rate-limit', 'ok'] });
    const { messageId } = await w.consult();
    const yearLater = (doc: Record<string, unknown>): Record<string, unknown> => (doc['next_attempt_at'] === null ? doc : { ...doc, next_attempt_at: isoSeconds(new Date(Date.parse(String(doc['created_at'])) + 365 * 24 * HOUR)) });
    await w.runner({ ledger: twisting(w.ledger, yearLater) }).runOnce().catch(() => undefined);
    expect(w.events).toContainEqual(expect.objectContaining({ code: 'ATTEMPT_INVALID' }));
    expect((await receiptsOf(w, messageId)).map((receipt) => receipt['next_attempt_at'])).toEqual([]);
  });
});

describe('a runner whose clock runs half an hour ahead of the server it pushes to', () => {
  const closers: Array<() => Promise<void> | void> = [];
  afterAll(async () => {
    for (const close of closers.reverse()) await close();
  });

  it('the hook refuses its claim (CLOCK_AHEAD naming CLOCK_SKEW): it stops, claims nothing, pays nothing, and says why; a runner with the right clock then runs the consult', async () => {
    const world = await makeCase(join(dir, 'remote'), closers);
    const messageId = await world.consult();
    const fast = await world.machine('fast');
    await expect(fast.runner({ clock: () => new Date(Date.now() + HOUR / 2) }).runOnce()).rejects.toMatchObject({ code: 'CLOCK_AHEAD', message: expect.stringMatching(/CLOCK_SKEW .*claimed_at .* ahead of the clock that judges it/) });
    expect(fast.events.filter((event) => event.type === 'claimed')).toEqual([]);
    expect(await remoteReceipts(world.served, messageId)).toEqual([]);
    expect(world.model.requests).toHaveLength(0);
    const right = await world.machine('right');
    await right.runner().runOnce();
    expect(await remoteReceipts(world.served, messageId)).toEqual([{ attempt: 1, status: 'succeeded', blockers: [] }]);
  });
});
