import { spawn } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PassThrough, Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { formatPrivateKey } from '../../src/crypto/keys.js';
import { openConsultBridge } from '../../src/dispatch/consult-bridge.js';
import { LIMITS } from '../../src/limits.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { runConsultRelay } from '../../src/mcp/consult-relay.js';
import { Scrubber } from '../../src/util/scrub.js';
import { COO, coo } from '../helpers/cli.js';
import { worlds, type World } from '../helpers/lane.js';
import { answersOf, call, INITIALIZE, line } from '../helpers/mcp-raw.js';
import { holdPushes, makeServedLedger, makeWriter } from '../helpers/remote-ledger.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * `coo mcp` against a raw client that ends the session itself while write calls are in hand: a line
 * over the bound sent after them, or its end of stdout closed. The calls read before are done (their
 * writes land whole, and answered where the client still reads) before the process exits; cut
 * wherever they stood, they were half done, the rest never written, and git's ref lock was left.
 */
const dir = tempDir('mcp-redteam-53-');
const fresh = worlds(dir);

/** Waits a bounded number of turns for `done`. */
async function until(what: string, done: () => boolean): Promise<void> {
  for (let turn = 0; turn < 4000 && !done(); turn += 1) await new Promise((resolve) => setTimeout(resolve, 5));
  if (!done()) throw new Error(`${what} never happened`);
}

/** `coo mcp` on `w`'s ledger, initialized, run by the built CLI. */
async function served(w: World) {
  const keyPath = join(w.dir, 'coo.key');
  writeFileSync(keyPath, formatPrivateKey(w.actors.coo), { mode: 0o600 });
  const child = spawn(process.execPath, [COO, 'mcp', '--ledger', w.gitdir, '--key', keyPath, '--repo', w.target], { env: { ...process.env, COO_LEDGER: '', COO_KEY: '' }, stdio: 'pipe' });
  child.stdin.on('error', () => undefined);
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
  const { answers, answer } = answersOf(child.stdout);
  child.stdin.write(line(INITIALIZE));
  await answer(0, 0);
  return { child, answers, answer, exited, stderr: () => stderr };
}

/** A dispatch and four consults, one line each: well under a pipe's atomic write, so the server reads them in one go. */
const CALLS = 5;
const writes = (): string =>
  line({ method: 'notifications/initialized' }) +
  call(1, 'dispatch', { to: 'ea.codex', task: 'Make add() return NaN for NaN.', scope: ['src/**'], accept: ['add(NaN, 1) is NaN'], verify: ['true'] }) +
  Array.from({ length: CALLS - 1 }, (_, index) => call(2 + index, 'consult', { to: 'aa.chatgpt', files: ['src/add.ts'], prompt: `Question ${index}: is add() right?` })).join('');

async function ledgerWhole(w: World): Promise<string[]> {
  expect(existsSync(join(w.gitdir, 'refs', 'heads', 'main.lock'))).toBe(false);
  expect(coo(['verify', '--ledger', w.gitdir]).status).toBe(0);
  return [...(await w.ledger.state()).messages.values()].map((record) => record.intent).sort();
}

describe('coo mcp whose client ends the session with write calls in hand', () => {
  it('answers the calls read before a line over the bound, writes each whole, leaves no lock, then exits 3 with the coded error', async () => {
    const w = await fresh();
    const session = await served(w);
    session.child.stdin.write(`${writes()}${'x'.repeat(LIMITS.mcpMessageBytes + 1)}\n`);
    expect(await session.exited).toBe(3);
    expect(session.stderr()).toMatch(/^coo: MCP_MESSAGE_TOO_LARGE: a message from the client was over the \d+-byte limit/m);
    expect(session.stderr()).not.toMatch(/\n {4}at |Unhandled/);
    const answered = session.answers.filter((found) => typeof found.id === 'number' && found.id >= 1);
    expect(answered.map((found) => [found.id, found.result?.isError ?? false]).sort()).toEqual(Array.from({ length: CALLS }, (_, index) => [index + 1, false]));
    expect(await ledgerWhole(w)).toEqual(['aa_consult', 'aa_consult', 'aa_consult', 'aa_consult', 'ea_dispatch']);
  }, 60_000);

  it('writes each call read before its client closed its end of stdout whole, leaves no lock, and exits 0', async () => {
    const w = await fresh();
    const session = await served(w);
    session.child.stdin.write(writes());
    session.child.stdout.destroy();
    expect(await session.exited).toBe(0);
    expect(session.stderr()).toMatch(/^coo mcp: IO_ERROR: the client's end of stdout is closed/m);
    expect(session.stderr()).not.toMatch(/\n {4}at |Unhandled/);
    expect(await ledgerWhole(w)).toEqual(['aa_consult', 'aa_consult', 'aa_consult', 'aa_consult', 'ea_dispatch']);
  }, 60_000);
});

/**
 * `coo mcp --remote` on a served ledger whose hook holds each push until the test releases it, a
 * consult sent and its push arrived there: a write certainly in hand, whatever the machine's speed.
 */
async function held(name: string) {
  const caseDir = join(dir, name);
  const served = await makeServedLedger(caseDir);
  const writer = await makeWriter(caseDir, 'coo', served, served.gitdir);
  const gate = holdPushes(served, caseDir);
  const child = spawn(process.execPath, [COO, 'mcp', '--remote', served.gitdir, '--ledger', writer.gitdir, '--key', served.keys.coo, '--repo', served.target], { env: { ...process.env, ...writer.env, COO_LEDGER: '', COO_KEY: '' }, stdio: 'pipe' });
  child.stdin.on('error', () => undefined);
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  const exited = new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.on('close', (code, signal) => resolve([code, signal])));
  const { answers, answer } = answersOf(child.stdout);
  const end = (): void => {
    gate.release();
    child.kill('SIGKILL');
  };
  try {
    child.stdin.write(line(INITIALIZE));
    await answer(0, 0);
    child.stdin.write(line({ method: 'notifications/initialized' }) + call(1, 'consult', { to: 'aa.chatgpt', files: ['README.md'], prompt: 'Is add() right?' }));
    await until('the consult reaching the remote', gate.arrived);
  } catch (error) {
    end();
    throw error;
  }
  const stopped = async (signal: NodeJS.Signals): Promise<void> => {
    child.kill(signal);
    await until(`the line saying ${signal} stopped it`, () => stderr.includes(`stopped by ${signal}`));
    expect(stderr).toMatch(new RegExp(`^coo mcp: stopped by ${signal}: nothing more is read, and the session ends once the calls in hand are done \\(a second signal ends it at once\\)$`, 'm'));
  };
  return { served, gate, child, answers, exited, stderr: () => stderr, stopped, end };
}

/** The intents of the messages on the remote's main. */
async function remoteIntents(gitdir: string): Promise<string[]> {
  const remote = Ledger.open(gitdir);
  try {
    return [...(await remote.state()).messages.values()].map((record) => record.intent);
  } finally {
    remote.close();
  }
}

describe('coo mcp whose session ends while a call waits on its remote', () => {
  it.each(['SIGTERM', 'SIGINT', 'SIGHUP'] as const)('after %s, lands the call in hand whole, answers it, leaves no lock and exits 0', async (signal) => {
    const session = await held(`once-${signal}`);
    try {
      await session.stopped(signal);
      // Released only once the signal is heard: before, the process exited mid-push, the call unanswered and its lock left.
      session.gate.release();
      expect(await session.exited).toEqual([0, null]);
      expect(session.stderr()).not.toMatch(/\n {4}at |Unhandled/);
      expect(session.answers.filter((found) => found.id === 1).map((found) => found.result?.isError ?? false)).toEqual([false]);
      expect(existsSync(join(session.served.gitdir, 'refs', 'heads', 'main.lock'))).toBe(false);
      expect(coo(['verify', '--ledger', session.served.gitdir]).status).toBe(0);
      expect(await remoteIntents(session.served.gitdir)).toEqual(['aa_consult']);
    } finally {
      session.end();
    }
  }, 60_000);

  it('after a line over the bound, lands the call in hand whole, answers it, leaves no lock and exits 3 with the coded error', async () => {
    const session = await held('over-limit');
    try {
      session.child.stdin.write(`${'x'.repeat(LIMITS.mcpMessageBytes + 1)}\n`);
      // The push is released only once the line over the bound is read.
      await until('the line over the bound read', () => session.stderr().includes('-byte limit: nothing more is read'));
      expect(session.stderr()).toMatch(new RegExp(`^coo mcp: a line over the ${LIMITS.mcpMessageBytes}-byte limit: nothing more is read, and the session ends once the calls in hand are done$`, 'm'));
      session.gate.release();
      expect(await session.exited).toEqual([3, null]);
      expect(session.stderr()).toMatch(/^coo: MCP_MESSAGE_TOO_LARGE: a message from the client was over the \d+-byte limit/m);
      expect(session.stderr()).not.toMatch(/\n {4}at |Unhandled/);
      expect(session.answers.filter((found) => found.id === 1).map((found) => found.result?.isError ?? false)).toEqual([false]);
      expect(existsSync(join(session.served.gitdir, 'refs', 'heads', 'main.lock'))).toBe(false);
      expect(await remoteIntents(session.served.gitdir)).toEqual(['aa_consult']);
    } finally {
      session.end();
    }
  }, 60_000);

  it('after its client closed its end of stdout, lands the call in hand whole, leaves no lock and exits 0', async () => {
    const session = await held('stdout-closed');
    try {
      session.child.stdout.destroy();
      // The ping's answer is the write that finds stdout closed; the push is released only once that is heard.
      session.child.stdin.write(line({ id: 9, method: 'ping' }));
      await until("the closed stdout heard", () => session.stderr().includes("IO_ERROR: the client's end of stdout is closed"));
      session.gate.release();
      expect(await session.exited).toEqual([0, null]);
      expect(session.stderr()).not.toMatch(/\n {4}at |Unhandled/);
      expect(existsSync(join(session.served.gitdir, 'refs', 'heads', 'main.lock'))).toBe(false);
      expect(await remoteIntents(session.served.gitdir)).toEqual(['aa_consult']);
    } finally {
      session.end();
    }
  }, 60_000);

  it.each([
    ['SIGINT', 'SIGTERM'],
    ['SIGHUP', 'SIGINT'],
  ] as const)('after %s, ends at once on %s, whatever the call in hand', async (first, second) => {
    const session = await held(`twice-${first}`);
    try {
      await session.stopped(first);
      session.child.kill(second);
      // Released only now: a process the second signal did not end lands the push, answers and exits 0.
      session.gate.release();
      expect(await session.exited).toEqual([null, second]);
      expect(session.answers.filter((found) => found.id === 1)).toEqual([]);
    } finally {
      session.end();
    }
  }, 60_000);
});

describe("the consult relay whose agent closes its end of stdout with consults queued", () => {
  it('sends none of those still waiting their turn: each would be charged, its answer with nowhere to go', async () => {
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    const seen: unknown[] = [];
    const bridge = await openConsultBridge(async (request) => {
      seen.push(request);
      await held;
      return { ok: true, text: 'the answer', result: {} };
    }, new Scrubber());
    try {
      const stdin = new PassThrough();
      let gone = false;
      // The agent's end of stdout: once closed, every write fails as a pipe's does.
      const stdout = new Writable({ write: (_chunk, _encoding, done) => done(gone ? Object.assign(new Error('write EPIPE'), { code: 'EPIPE' }) : null) });
      const relay = runConsultRelay(bridge.socket, '0.0.0', { stdin, stdout });
      stdin.write(line(INITIALIZE) + line({ method: 'notifications/initialized' }));
      const ask = (id: number): string => call(id, 'consult', { to: 'aa.chatgpt', question: `Question ${id}: is add() right?`, files: ['src/add.ts'] });
      stdin.write(ask(1) + ask(2) + ask(3));
      // The first reached the runner, which holds it; the other two wait their turn in the relay.
      await until('the first consult reaching the runner', () => seen.length === 1);
      // Heard after the relay's own listener, which its start added.
      const errored = new Promise((resolve) => stdout.once('error', resolve));
      gone = true;
      stdin.write(line({ id: 9, method: 'ping' }));
      // The ping's answer is the write that finds stdout closed, and the relay has heard it once the error is ours to hear.
      await errored;
      release();
      await relay;
      expect(seen).toHaveLength(1);
    } finally {
      release();
      await bridge.close();
    }
  }, 60_000);
});
