import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { generatePrivateKey } from '../../src/crypto/keys.js';
import { COO } from '../helpers/cli.js';
import { cooBounded, headOf, writeKey, type BoundedResult } from '../helpers/damage.js';
import { worlds } from '../helpers/lane.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * A careless operator at every verb: a wrong path, a FIFO or a device where a file goes. Each ends
 * with one coded line and the documented exit status (2 for a mistake in the command line), never
 * a wait for ever, a stack trace, or a file of the machine replaced.
 */

const dir = tempDir('operator-redteam-4-');
const fresh = worlds(dir);
const MESSAGE = 'msg_01M8NQFJ01J7CG66HWNDDJ8600';
/** Long past what any of these takes; a command still running then is waiting on a FIFO. */
const WAIT_MS = 20_000;

/** A command that may wait for ever on a FIFO: run within WAIT_MS, then 'hung'. */
function within(args: readonly string[]): BoundedResult | 'hung' {
  const result = spawnSync(process.execPath, [COO, ...args], { env: { ...process.env, COO_LEDGER: '', COO_KEY: '', XDG_STATE_HOME: join(dir, 'xdg') }, encoding: 'utf8', timeout: WAIT_MS, killSignal: 'SIGKILL' });
  if ((result.error as NodeJS.ErrnoException | undefined)?.code === 'ETIMEDOUT') return 'hung';
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

/** The status and the one line a refusal says, asserting it is one coded line with no stack frame. */
function said(result: BoundedResult | 'hung'): { status: number | null; line: string } | 'hung' {
  if (result === 'hung') return 'hung';
  expect(result.stderr).not.toMatch(/\n\s+at /);
  const lines = result.stderr.trimEnd().split('\n').filter((line) => !line.startsWith('coo: warning: '));
  expect(lines).toHaveLength(1);
  return { status: result.status, line: lines[0]! };
}

function mkfifo(path: string): string {
  execFileSync('mkfifo', [path]);
  return path;
}

describe('a --ledger that names no ledger is a mistake in the command line, in every verb', () => {
  const keys = join(dir, 'keys');
  mkdirSync(keys, { recursive: true });
  const coo = writeKey(keys, 'coo', generatePrivateKey('coo.hermes'));
  const ceo = writeKey(keys, 'ceo', generatePrivateKey('ceo'));
  const repo = join(dir, 'repo');
  const prompt = join(dir, 'prompt.md');
  writeFileSync(prompt, 'What is wrong with add()?\n');
  const verbs: ReadonlyArray<readonly string[]> = [
    ['log'],
    ['verify'],
    ['show', MESSAGE],
    ['inbox'],
    ['report', '--html', join(dir, 'report.html')],
    ['allowed-signers'],
    ['cite', MESSAGE],
    ['attest', MESSAGE, '--key', coo],
    ['append', prompt, '--key', coo],
    ['kill-switch', 'on', '--reason', 'r', '--key', coo],
    ['command', '--text', 't', '--ceo-key', ceo],
    ['approve', MESSAGE, '--reason', 'r', '--ceo-key', ceo],
    ['reject', MESSAGE, '--reason', 'r', '--ceo-key', ceo],
    ['ack', MESSAGE, '--key', coo],
    ['dispatch', '--key', coo, '--to', 'ea.codex', '--repo', repo, '--task', 't', '--scope', 'src', '--accept', 'ok', '--verify', 'true'],
    ['consult', '--key', coo, '--to', 'aa.chatgpt', '--repo', repo, '--prompt-file', prompt],
    ['adopt', MESSAGE, '--proposal', '1', '--key', coo, '--to', 'ea.codex', '--repo', repo],
    ['cross-check', MESSAGE, '--key', coo, '--to', 'aa.claude'],
    ['forge', 'github', '--ceo-key', ceo],
    ['watch', '--once', '--key', coo, '--repo', repo, '--isolation', 'none'],
    ['mcp', '--key', coo, '--repo', repo],
  ];

  it('a path that does not exist, or a folder that is no repository, is LEDGER_NOT_FOUND with exit 2 (USAGE class), as a missing --ledger is; in JSON too', () => {
    const folder = join(dir, 'a folder');
    mkdirSync(folder, { recursive: true });
    for (const [ledger, some] of [[join(dir, 'no-such-ledger.git'), verbs], [folder, verbs.filter((verb) => ['log', 'append', 'watch'].includes(verb[0]!))]] as const) {
      for (const verb of some) {
        const result = cooBounded([...verb, '--ledger', ledger]);
        expect({ verb: verb[0], ...(said(result) as object) }).toEqual({ verb: verb[0], status: 2, line: expect.stringMatching(/^coo: LEDGER_NOT_FOUND: \S.* is not a ledger \(a bare git repository made by "coo init"\)$/) });
      }
    }
    const json = cooBounded(['verify', '--ledger', folder, '--json']);
    expect(json.status).toBe(2);
    expect(JSON.parse(json.stdout)).toEqual({ ok: false, error: { code: 'LEDGER_NOT_FOUND', message: `${folder} is not a ledger (a bare git repository made by "coo init")`, where: null, findings: [] } });
  });

  it('a work tree checked out of the ledger (git clone) is said as one, naming what to give instead, and nothing is written to the ledger', async () => {
    const world = await fresh();
    const before = headOf(world.gitdir);
    const work = join(world.dir, 'checkout');
    git(['clone', '-q', world.gitdir, work]);
    const key = writeKey(world.dir, 'coo', world.actors.coo);
    for (const verb of [['kill-switch', 'on', '--reason', 'r', '--key', key], ['verify'], ['watch', '--once', '--key', key, '--repo', world.target, '--isolation', 'none']]) {
      expect(said(cooBounded([...verb, '--ledger', work]))).toEqual({ status: 2, line: `coo: LEDGER_NOT_FOUND: ${work} is not a ledger (a bare git repository made by "coo init"): it is a git work tree; give the bare repository itself (coo init or coo clone made it)` });
    }
    expect(headOf(world.gitdir)).toBe(before);
  });
});

describe('a file the operator names for coo to read', () => {
  it('that does not exist is USAGE (exit 2) naming it, as a key file holding no key is; in JSON too', () => {
    const missing = join(dir, 'no-such.key');
    for (const verb of [['kill-switch', 'on', '--reason', 'r', '--key', missing], ['append', join(dir, 'e.yaml'), '--key', missing], ['command', '--text', 't', '--ceo-key', missing]]) {
      expect(said(cooBounded([...verb, '--ledger', join(dir, 'x.git')]))).toEqual({ status: 2, line: `coo: USAGE: cannot read key file ${missing} (ENOENT): check the path` });
    }
    const json = cooBounded(['verify-bundle', join(dir, 'no-such.tar'), '--json']);
    expect(json.status).toBe(2);
    expect(JSON.parse(json.stdout)).toMatchObject({ ok: false, error: { code: 'USAGE', message: `cannot read bundle ${join(dir, 'no-such.tar')} (ENOENT): check the path` } });
  });

  it('that is a FIFO no program writes to is USAGE saying so (key, envelope, task, command text), never waited on, and nothing is written', async () => {
    const world = await fresh();
    const before = headOf(world.gitdir);
    const fifo = mkfifo(join(world.dir, 'input.fifo'));
    const coo = writeKey(world.dir, 'coo', world.actors.coo);
    const ceo = writeKey(world.dir, 'ceo', world.actors.ceo);
    for (const [what, args] of [
      ['key file', ['kill-switch', 'on', '--reason', 'r', '--key', fifo]],
      ['envelope', ['append', fifo, '--key', coo]],
      ['task file', ['dispatch', '--key', coo, '--to', 'ea.codex', '--repo', world.target, '--task-file', fifo, '--scope', 'src', '--accept', 'ok', '--verify', 'true']],
      ['text file', ['command', '--text-file', fifo, '--ceo-key', ceo]],
    ] as const) {
      expect(said(within([...args, '--ledger', world.gitdir]))).toEqual({ status: 2, line: `coo: USAGE: the ${what} ${fifo} is a FIFO that gave nothing (no program was writing to it): give a file, or start the program that writes it first` });
    }
    expect(headOf(world.gitdir)).toBe(before);
  });

  it('a pipe a shell gives for <(...) is read as the file it stands for: the key and the command text of coo command', async () => {
    const world = await fresh();
    const before = headOf(world.gitdir);
    const key = writeKey(world.dir, 'ceo', world.actors.ceo);
    const script = 'exec "$0" "$1" command --ledger "$2" --ceo-key <(cat "$3") --text-file <(printf "Ship the release notes.\\n") --json';
    const ran = spawnSync('bash', ['-c', script, process.execPath, COO, world.gitdir, key], { env: { ...process.env, COO_LEDGER: '', COO_KEY: '', XDG_STATE_HOME: join(dir, 'xdg') }, encoding: 'utf8', timeout: WAIT_MS, killSignal: 'SIGKILL' });
    expect({ status: ran.status, stderr: ran.stderr }).toEqual({ status: 0, stderr: '' });
    const id = (JSON.parse(ran.stdout) as { message_id: string }).message_id;
    expect(headOf(world.gitdir)).not.toBe(before);
    const inbox = JSON.parse(cooBounded(['inbox', '--ledger', world.gitdir, '--json']).stdout) as { items: Array<{ message_id: string; ceo_text: string }> };
    expect(inbox.items.find((item) => item.message_id === id)?.ceo_text).toBe('Ship the release notes.\n');
  });
});

describe('a path the operator names for coo to write (--html, --revocations, --out, --bundle)', () => {
  it('that is a FIFO or a link is refused (USAGE, exit 2), neither replaced, written through nor waited on; a regular file there is replaced whole', async () => {
    const world = await fresh();
    const { messageId } = await world.consult({ idempotencyKey: 'operator-redteam-4' });
    await world.runner({ transport: world.fakeOracle('ok') }).runOnce();
    const key = writeKey(world.dir, 'coo', world.actors.coo);
    const out = join(world.dir, 'out');
    mkdirSync(out);
    const fifo = mkfifo(join(out, 'a.fifo'));
    const target = join(world.dir, 'elsewhere.txt');
    const link = join(out, 'a.link');
    symlinkSync(target, link);
    for (const [flag, args] of [
      ['--html', ['report', '--ledger', world.gitdir, '--html']],
      ['--revocations', ['allowed-signers', '--ledger', world.gitdir, '--revocations']],
      ['--out', ['attest', messageId, '--ledger', world.gitdir, '--key', key, '--out']],
      ['--bundle', ['cite', messageId, '--ledger', world.gitdir, '--bundle']],
    ] as const) {
      for (const [path, type] of [[fifo, 'fifo'], [link, 'symlink']] as const) {
        expect({ flag, ...(said(within([...args, path])) as object) }).toEqual({ flag, status: 2, line: `coo: USAGE: ${flag} ${path} is a ${type}, not a file: give ${flag} the path of a file to write (coo replaces it whole)` });
      }
      expect(lstatSync(fifo).isFIFO()).toBe(true);
      expect(lstatSync(link).isSymbolicLink()).toBe(true);
      expect(existsSync(target)).toBe(false);
      const file = join(out, `${flag.slice(2)}.file`);
      writeFileSync(file, 'an older copy\n');
      expect(within([...args, file])).toMatchObject({ status: 0 });
      expect(readFileSync(file, 'utf8')).not.toBe('an older copy\n');
    }
    // Nothing half-written was left beside them.
    expect(readdirSync(out).sort()).toEqual(['a.fifo', 'a.link', 'bundle.file', 'html.file', 'out.file', 'revocations.file']);
  });
});

describe('where coo init or coo clone is to make a ledger', () => {
  it('a file, a device, a path through a file or an existing ledger is LEDGER_EXISTS (exit 2, as keygen refusing to overwrite a key is), and nothing is made or removed', async () => {
    const world = await fresh();
    const ceo = writeKey(world.dir, 'ceo', world.actors.ceo);
    const file = join(world.dir, 'a-file');
    writeFileSync(file, 'mine\n');
    const before = headOf(world.gitdir);
    for (const [path, why] of [
      [file, `${file} is a file, not an empty folder; choose a new path`],
      ['/dev/null', '/dev/null is a device, not an empty folder; choose a new path'],
      [join(file, 'ledger.git'), `cannot make a ledger at ${join(file, 'ledger.git')} (ENOTDIR): choose a new path in a folder this user may write`],
      [world.gitdir, `${world.gitdir} exists and is not empty; choose a new path`],
    ] as const) {
      expect(said(cooBounded(['init', '--ledger', path, '--ceo-key', ceo]))).toEqual({ status: 2, line: `coo: LEDGER_EXISTS: ${why}` });
      expect(said(cooBounded(['clone', world.gitdir, path, '--trust-root', world.actors.ceo.publicKey.keyId]))).toEqual({ status: 2, line: `coo: LEDGER_EXISTS: ${why}` });
    }
    expect(readFileSync(file, 'utf8')).toBe('mine\n');
    expect(lstatSync('/dev/null').isCharacterDevice()).toBe(true);
    expect(headOf(world.gitdir)).toBe(before);
  });
});

describe('coo schemas', () => {
  it('a FIFO where a schema goes is refused when writing (USAGE) and drifted when checking, never waited on', () => {
    const out = join(dir, 'schemas');
    mkdirSync(out, { recursive: true });
    const fifo = mkfifo(join(out, 'coo_message.v0.json'));
    expect(said(within(['schemas', '--out', out]))).toEqual({ status: 2, line: `coo: USAGE: --out ${fifo} is a fifo, not a file: give --out the path of a file to write (coo replaces it whole)` });
    const checked = within(['schemas', '--out', out, '--check', '--json']);
    expect(checked).toMatchObject({ status: 3 });
    expect((JSON.parse((checked as BoundedResult).stdout) as { drifted: string[] }).drifted).toContain('coo_message.v0.json');
    expect(lstatSync(fifo).isFIFO()).toBe(true);
  });
});
