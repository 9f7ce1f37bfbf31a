import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { acknowledge } from '../../src/inbox/ack.js';
import { sendCommand } from '../../src/inbox/ceo-messages.js';
import { inboxRecords, readInbox } from '../../src/inbox/inbox.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { LIMITS } from '../../src/limits.js';
import { attack, codeOf, firstOr, useKit, type Kit } from '../helpers/attack-kit.js';
import { coo, json } from '../helpers/cli.js';
import { connectMcp, structured, textOf } from '../helpers/mcp.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * The actor model under attack, round 14: a CEO command the COO never took up, past the
 * expires_at its `--ttl` set. Its ack, and work with it as its parent, are refused by the writers,
 * the pre-receive hook and `coo verify` alike (COMMAND_EXPIRED); a command taken up in time stands.
 */

const dir = tempDir('actors-redteam-14');
const getKit = useKit(dir);
let kit: Kit;
beforeAll(() => {
  kit = getKit();
});

const HOUR_MS = 60 * 60_000;
let copies = 0;

/** A CEO command sent `agoMs` ago that the COO has `ttlSeconds` to take up. */
async function commandSent(agoMs: number, ttlSeconds: number, text = 'Make add() right.'): Promise<{ id: string; sentAt: number }> {
  const sentAt = Date.now() - agoMs;
  const { messageId } = await sendCommand({ ledger: kit.world.ledger, key: kit.world.actors.ceo, now: new Date(sentAt), text: `${text} ${agoMs}`, ttlSeconds });
  return { id: messageId, sentAt };
}

/** A child consult of `parent`, asked at `at` in `ledger`. */
function childConsult(ledger: Ledger, parent: string, at: Date, question: string): Promise<unknown> {
  return kit.world.consult({ ledger, now: at, parentMessageId: parent, question });
}

/**
 * The files of an entry as a writer makes them where it is accepted: written by `write` in a copy of
 * the ledger (where the command may have been taken up in time first), and carried out of the
 * copy's last commit, to be committed by hand into the ledger where the command never was.
 */
async function carried(write: (copy: Ledger) => Promise<unknown>): Promise<Record<string, Buffer>> {
  copies += 1;
  const copy = join(dir, `copy-${copies}.git`);
  execFileSync('git', ['clone', '-q', '--mirror', kit.world.gitdir, copy]);
  const other = Ledger.open(copy);
  try {
    await write(other);
  } finally {
    other.close();
  }
  const names = execFileSync('git', ['-C', copy, 'diff-tree', '-r', '--name-only', '--no-commit-id', 'HEAD~1', 'HEAD']).toString().trim().split('\n');
  return Object.fromEntries(names.filter((name) => !name.endsWith('.sig')).map((path) => [path, execFileSync('git', ['-C', copy, 'show', `HEAD:${path}`])]));
}

/** An ack of a command sent two hours ago with a minute to take it up, dated now; taken up in the copy by a consult within its minute. */
async function lateAck(): Promise<Record<string, Buffer>> {
  const command = await commandSent(2 * HOUR_MS, 60);
  return carried(async (copy) => {
    await childConsult(copy, command.id, new Date(command.sentAt + 10_000), 'Where is add() wrong?');
    await acknowledge({ ledger: copy, key: kit.world.actors.coo, now: new Date(), messageId: command.id });
  });
}

/** A consult under a command sent two hours ago with a minute to take it up, dated now; taken up in the copy by an ack within its minute. */
async function lateChild(): Promise<Record<string, Buffer>> {
  const command = await commandSent(2 * HOUR_MS, 60);
  return carried(async (copy) => {
    await acknowledge({ ledger: copy, key: kit.world.actors.coo, now: new Date(command.sentAt + 10_000), messageId: command.id });
    await childConsult(copy, command.id, new Date(), 'Is add() right for NaN now?');
  });
}

/** The options of a hand-made commit of carried files: signed by the COO, each envelope with its .sig (a context manifest has none). */
function byCoo(files: Record<string, Buffer>): { key: string; sign: string[] } {
  return { key: kit.keys.coo.file, sign: Object.keys(files).filter((path) => path.endsWith('/envelope.yaml')) };
}

function pushed(files: Record<string, Buffer>): Promise<string> {
  return kit.push(files, byCoo(files));
}

async function verifyCode(files: Record<string, Buffer>): Promise<string> {
  let codes: string[] = ['unset'];
  await kit.bypass(files, byCoo(files), () => {
    codes = kit.verifyCodes();
  });
  return firstOr(codes, 'COMMAND_EXPIRED');
}

describe('a CEO command the COO never took up, acknowledged or worked under after its expires_at', () => {
  it('coo ack of it exits 3 with one coded line saying the command lapsed and the CEO sends it again, and writes nothing', async () => {
    const command = await commandSent(2 * HOUR_MS, 60);
    const head = kit.head();
    const result = coo(['ack', command.id, '--ledger', kit.world.gitdir, '--key', kit.keys.coo.file]);
    expect(result.status).toBe(3);
    expect(result.stderr).toMatch(/^coo: COMMAND_EXPIRED: [^\n]*lapsed at its expires_at [^\n]*the CEO sends it again[^\n]*\n$/);
    expect(kit.head()).toBe(head);
  });

  it('coo consult --parent naming it exits 3 with one coded line, and writes nothing', async () => {
    const command = await commandSent(2 * HOUR_MS, 60);
    const head = kit.head();
    const result = coo(['consult', '--to', 'aa.chatgpt', '--repo', kit.world.target, '--file', 'src/add.ts', '--prompt', 'Is add() right?', '--parent', command.id], { env: { COO_LEDGER: kit.world.gitdir, COO_KEY: kit.keys.coo.file } });
    expect(result.status).toBe(3);
    expect(result.stderr).toMatch(/^coo: COMMAND_EXPIRED: [^\n]*lapsed at its expires_at [^\n]*\n$/);
    expect(kit.head()).toBe(head);
  });

  attack('an ack of it, dated two hours after it was sent with a minute to take it up', 'library', 'COMMAND_EXPIRED', async () => {
    const command = await commandSent(2 * HOUR_MS, 60);
    return codeOf(() => acknowledge({ ledger: kit.world.ledger, key: kit.world.actors.coo, now: new Date(), messageId: command.id }));
  });

  attack('a consult with it as its parent, spending under its budget two hours on', 'library', 'COMMAND_EXPIRED', async () => {
    const command = await commandSent(2 * HOUR_MS, 60);
    return codeOf(() => childConsult(kit.world.ledger, command.id, new Date(), 'Is add() right?'));
  });

  attack('an ack of it committed by hand and pushed', 'hook', 'COMMAND_EXPIRED', async () => pushed(await lateAck()));

  attack('a consult under it committed by hand and pushed', 'hook', 'COMMAND_EXPIRED', async () => pushed(await lateChild()));

  attack('coo verify of an ack of it written behind the hook', 'verify', 'COMMAND_EXPIRED', async () => verifyCode(await lateAck()));

  attack('coo verify of a consult under it written behind the hook', 'verify', 'COMMAND_EXPIRED', async () => verifyCode(await lateChild()));

  attack("an ack of a live command dated more than the skew behind the hook's clock, by which the command would still stand", 'hook', 'CLOCK_SKEW', async () => {
    // A day to take it up from three hours ago: live by the hook's clock too; the rule judges the writer's clock, not the command.
    const command = await commandSent(3 * HOUR_MS, 86_400);
    const files = await carried((copy) => acknowledge({ ledger: copy, key: kit.world.actors.coo, now: new Date(Date.now() - 2 * HOUR_MS), messageId: command.id }));
    return pushed(files);
  });
});

describe('a CEO command taken up in time (guards)', () => {
  it('an ack within its time, then a consult under it two hours on, are both accepted', async () => {
    const command = await commandSent(2 * HOUR_MS, 60);
    expect(await codeOf(() => acknowledge({ ledger: kit.world.ledger, key: kit.world.actors.coo, now: new Date(command.sentAt + 10_000), messageId: command.id }))).toBe('accepted');
    expect(await codeOf(() => childConsult(kit.world.ledger, command.id, new Date(), 'And now?'))).toBe('accepted');
  });

  it('a consult under it within its time, then its ack two hours on, are both accepted, and pushed by hand the ack passes the hook', async () => {
    const command = await commandSent(2 * HOUR_MS, 60);
    expect(await codeOf(() => childConsult(kit.world.ledger, command.id, new Date(command.sentAt + 10_000), 'Where is add() wrong?'))).toBe('accepted');
    const files = await carried((copy) => acknowledge({ ledger: copy, key: kit.world.actors.coo, now: new Date(), messageId: command.id }));
    expect(await pushed(files)).toBe('accepted');
    expect(kit.verifyCodes()).toEqual([]);
  });

  it('an ack at its expires_at itself is accepted: the command lapses after it', async () => {
    const command = await commandSent(2 * HOUR_MS, 60);
    expect(await codeOf(() => acknowledge({ ledger: kit.world.ledger, key: kit.world.actors.coo, now: new Date(command.sentAt + 60_000), messageId: command.id }))).toBe('accepted');
  });

  it(`an ack of a live command dated behind the hook's clock by less than the ${LIMITS.clockSkewSeconds} s skew passes the hook`, async () => {
    const command = await commandSent(HOUR_MS, 86_400);
    const files = await carried((copy) => acknowledge({ ledger: copy, key: kit.world.actors.coo, now: new Date(Date.now() - 1000), messageId: command.id }));
    expect(await pushed(files)).toBe('accepted');
  });
});

describe("the COO's inbox and a command's expiry", () => {
  it('shows each command with its expires_at, and by the reader\'s clock leaves out one that lapsed untaken, not one taken up in time', async () => {
    const lapsed = await commandSent(2 * HOUR_MS, 60, 'Lapsed.');
    const taken = await commandSent(2 * HOUR_MS, 60, 'Taken up.');
    expect(await codeOf(() => childConsult(kit.world.ledger, taken.id, new Date(taken.sentAt + 10_000), 'Taken up?'))).toBe('accepted');
    const live = await commandSent(0, 3600, 'Live.');
    const items = await readInbox(kit.world.ledger, new Date());
    const ids = items.map((item) => item.message_id);
    expect(ids).not.toContain(lapsed.id);
    expect(ids).toContain(taken.id);
    const liveItem = items.find((item) => item.message_id === live.id)!;
    expect(Date.parse(liveItem.expires_at!) - live.sentAt).toBeGreaterThanOrEqual(3599_000);
    // The reader's clock decides: an hour and a half ago, the lapsed one was still to take up.
    const state = await kit.world.ledger.state();
    expect(inboxRecords(state, new Date(lapsed.sentAt + 30_000)).map((record) => record.id)).toContain(lapsed.id);
    expect(inboxRecords(state, new Date()).map((record) => record.id)).not.toContain(lapsed.id);
  });

  it('coo inbox lists when a command is to be taken up by, and not a lapsed one', async () => {
    const lapsed = await commandSent(2 * HOUR_MS, 60, 'Lapsed too.');
    const live = await commandSent(0, 3600, 'Live too.');
    const listed = coo(['inbox', '--ledger', kit.world.gitdir]);
    expect(listed.status).toBe(0);
    expect(listed.stdout).not.toContain(lapsed.id);
    const line = listed.stdout.split('\n').find((text) => text.startsWith(`${live.id} `))!;
    expect(line).toMatch(/ command from ceo \(take up by \d{4}-\d\d-\d\dT[\d:]+Z\): Live too\. 0/);
    const listedJson = json<{ items: Array<{ message_id: string; expires_at?: string }> }>(coo(['inbox', '--ledger', kit.world.gitdir, '--json']));
    expect(listedJson.items.map((item) => item.message_id)).not.toContain(lapsed.id);
    expect(listedJson.items.find((item) => item.message_id === live.id)?.expires_at).toMatch(/Z$/);
  });

  it('the MCP inbox tool leaves out a lapsed command and gives a live one its expires_at; the ack tool refuses the lapsed one, COMMAND_EXPIRED, with the step to ask the CEO again', async () => {
    const lapsed = await commandSent(2 * HOUR_MS, 60, 'Lapsed over MCP.');
    const live = await commandSent(0, 3600, 'Live over MCP.');
    const session = await connectMcp(kit.world);
    try {
      const items = structured<{ items: Array<{ message_id: string; expires_at?: string }> }>(await session.call('inbox')).items;
      expect(items.map((item) => item.message_id)).not.toContain(lapsed.id);
      expect(Date.parse(items.find((item) => item.message_id === live.id)!.expires_at!) - live.sentAt).toBeGreaterThanOrEqual(3599_000);
      const head = kit.head();
      const refused = await session.call('ack', { message_id: lapsed.id });
      expect(refused.isError).toBe(true);
      const [said, next] = textOf(refused).split('\n');
      expect(said).toMatch(/^COMMAND_EXPIRED: /);
      expect(next).toMatch(/ask the CEO to send it again/);
      expect(kit.head()).toBe(head);
    } finally {
      await session.close();
    }
  });
});
