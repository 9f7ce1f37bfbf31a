import { appendFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { formatPrivateKey, generatePrivateKey, type PrivateKey } from '../../src/crypto/keys.js';
import { isCooError } from '../../src/errors.js';
import type { NewFile } from '../../src/ledger/ledger.js';
import { coo, json } from './cli.js';
import { makeWorld, type World } from './lane.js';
import { git, gitEnv, run } from './tmp.js';

/** Where every attack's outcome is tallied for `npm run test:reliability`. */
export const TALLY_DIR = join(import.meta.dirname, '..', '..', 'test-artifacts', 'reliability');

export type Via = 'cli' | 'library' | 'hook' | 'verify' | 'runner';

/**
 * One named attack: `perform` returns the code the system answered with ('accepted' if it took the
 * bait). The test asserts the expected code and tallies the outcome.
 */
export function attack(name: string, via: Via, expected: string, perform: () => Promise<string> | string): void {
  it(`${name} (${via}: ${expected})`, async () => {
    const observed = await perform();
    mkdirSync(TALLY_DIR, { recursive: true });
    const file = basename(expect.getState().testPath ?? '');
    appendFileSync(join(TALLY_DIR, 'attacks.jsonl'), `${JSON.stringify({ name, via, file, expected, observed, accepted: observed === 'accepted' })}\n`);
    expect(observed).toBe(expected);
  });
}

export async function codeOf(fn: () => Promise<unknown>): Promise<string> {
  try {
    await fn();
    return 'accepted';
  } catch (error) {
    if (isCooError(error)) return error.code;
    throw error;
  }
}

export interface Kit {
  readonly world: World;
  readonly keys: Record<'ceo' | 'coo' | 'codex' | 'intruder' | 'aa', { readonly key: PrivateKey; readonly file: string }>;
  head(): string;
  seq(): Promise<number>;
  /** Commits files with stock git in a fresh clone and pushes: the code the pre-receive hook declined with, or 'accepted'. */
  push(files: Record<string, string | Buffer>, options: { key: string | null; entryKey?: string; seq?: number; sign?: readonly string[] | boolean }): Promise<string>;
  /** Writes a commit behind the hook's back (fetch into the bare repo), runs `check`, then restores main. */
  bypass(files: Record<string, string | Buffer>, options: { key: string; seq?: number; sign?: readonly string[] | boolean; remove?: readonly string[] }, check: () => Promise<void> | void): Promise<void>;
  /** Points main at a raw commit made from the head's raw bytes by `mutate`, runs `check`, restores. */
  rewriteHead(mutate: (raw: string) => string, check: () => Promise<void> | void): Promise<void>;
  /** The finding codes of `coo verify` (no checkpoint). */
  verifyCodes(): string[];
  append(files: readonly NewFile[], key: PrivateKey): Promise<string>;
}

let clones = 0;

export async function makeKit(dir: string): Promise<Kit> {
  const world = await makeWorld(dir);
  const aa = generatePrivateKey('aa.chatgpt');
  const intruder = generatePrivateKey('intruder');
  // Registry v2: an advisory agent with a key, to show what such a key may not do.
  const { appendTrustVersion } = await import('../../src/ledger/trust-update.js');
  const registry = (await world.ledger.state()).registry!.doc;
  await appendTrustVersion(world.ledger, { role: 'registry', document: { ...registry, version: undefined }, actorKeys: new Map([['aa.chatgpt', aa.publicKey]]) }, world.actors.ceo, new Date());
  const write = (name: string, key: PrivateKey): { key: PrivateKey; file: string } => {
    const file = join(dir, `${name}.key`);
    writeFileSync(file, formatPrivateKey(key), { mode: 0o600 });
    return { key, file };
  };
  const keys = {
    ceo: write('ceo', world.actors.ceo),
    coo: write('coo', world.actors.coo),
    codex: write('codex', world.actors.codex),
    intruder: write('intruder', intruder),
    aa: write('aa', aa),
  };
  const head = (): string => git(['--git-dir', world.gitdir, 'rev-parse', 'main']).trim();
  const seq = async (): Promise<number> => Number(/Ledger-Seq: (\d+)/.exec(git(['--git-dir', world.gitdir, 'log', '-1', '--format=%B', 'main']))![1]);
  const commitInClone = async (files: Record<string, string | Buffer>, options: { key: string | null; entryKey?: string; seq?: number; sign?: readonly string[] | boolean; remove?: readonly string[] }): Promise<string> => {
    clones += 1;
    const work = join(dir, `clone-${clones}`);
    git(['clone', '-q', world.gitdir, work]);
    for (const path of options.remove ?? []) git(['rm', '-q', path], { cwd: work });
    for (const [path, content] of Object.entries(files)) {
      mkdirSync(join(work, path, '..'), { recursive: true });
      writeFileSync(join(work, path), content);
      const sign = Array.isArray(options.sign) ? options.sign.includes(path) : options.sign !== false && path.endsWith('.yaml');
      // ssh-keygen asks before replacing a signature file, and on a closed stdin keeps the old one (exit 0).
      if (sign) rmSync(join(work, `${path}.sig`), { force: true });
      if (sign) expect(run('ssh-keygen', ['-Y', 'sign', '-n', 'coo-commons.entry.v0', '-f', options.entryKey ?? options.key ?? keys.coo.file, join(work, path)]).status).toBe(0);
    }
    git(['add', '-A'], { cwd: work });
    const signing = options.key === null ? [] : ['-c', 'gpg.format=ssh', '-c', `user.signingkey=${options.key}`];
    git([...signing, 'commit', '-q', ...(options.key === null ? [] : ['-S']), '--allow-empty', '-m', 'attack', '-m', `Ledger-Seq: ${options.seq ?? (await seq()) + 1}`], { cwd: work, env: gitEnv() });
    return work;
  };
  return {
    world,
    keys,
    head,
    seq,
    async push(files, options) {
      const before = head();
      const work = await commitInClone(files, options);
      const pushed = run('git', ['push', 'origin', 'main'], { cwd: work, env: gitEnv() });
      if (pushed.status === 0) return 'accepted';
      if (process.env['DEBUG_PUSH'] === '1') console.log(pushed.stderr);
      expect(head()).toBe(before);
      return /^remote:\s+([A-Z][A-Z0-9_]*) \[/m.exec(pushed.stderr)?.[1] ?? (/non-fast-forward|fetch first|rejected/.test(pushed.stderr) ? 'NON_FAST_FORWARD' : 'DECLINED');
    },
    async bypass(files, options, check) {
      const before = head();
      const work = await commitInClone(files, options);
      git(['--git-dir', world.gitdir, 'fetch', '-q', work, 'main:refs/heads/main']);
      try {
        await check();
      } finally {
        git(['--git-dir', world.gitdir, 'update-ref', 'refs/heads/main', before]);
      }
    },
    async rewriteHead(mutate, check) {
      const before = head();
      const raw = git(['--git-dir', world.gitdir, 'cat-file', 'commit', 'main']);
      const variant = mutate(raw);
      expect(variant).not.toBe(raw);
      const oid = run('git', ['--git-dir', world.gitdir, 'hash-object', '-w', '-t', 'commit', '--literally', '--stdin'], { input: variant }).stdout.trim();
      git(['--git-dir', world.gitdir, 'update-ref', 'refs/heads/main', oid]);
      try {
        await check();
      } finally {
        git(['--git-dir', world.gitdir, 'update-ref', 'refs/heads/main', before]);
      }
    },
    verifyCodes() {
      const result = coo(['verify', '--ledger', world.gitdir, '--no-checkpoint', '--json']);
      return json<{ findings: Array<{ code: string }> }>(result).findings.map((finding) => finding.code);
    },
    append(files, key) {
      const before = head();
      return codeOf(() => world.ledger.append({ files, key, summary: 'attack', now: new Date() })).then((code) => {
        if (code !== 'accepted') expect(head()).toBe(before);
        return code;
      });
    },
  };
}

/** The first code of a list, or 'accepted' when verification found nothing. */
export function firstOr(codes: readonly string[], wanted: string): string {
  if (codes.length === 0) return 'accepted';
  return codes.includes(wanted) ? wanted : codes[0]!;
}

/** One kit for a test file: made before its tests, closed after them. Read it through the returned getter. */
export function useKit(dir: string): () => Kit {
  let kit: Kit | null = null;
  beforeAll(async () => {
    kit = await makeKit(join(dir, 'kit'));
  });
  afterAll(async () => kit?.world.close());
  return () => kit!;
}

/** `ssh-keygen -Y sign` of `text` with a key file, as a stock-git user would sign an entry. */
export function sshSign(text: string, keyFile: string, namespace = 'coo-commons.entry.v0'): string {
  const dir = mkdtempSync(join(tmpdir(), 'coo-sign-'));
  try {
    writeFileSync(join(dir, 'entry.yaml'), text);
    const signed = run('ssh-keygen', ['-Y', 'sign', '-n', namespace, '-f', keyFile, join(dir, 'entry.yaml')]);
    if (signed.status !== 0) throw new Error(signed.stderr);
    return readFileSync(join(dir, 'entry.yaml.sig'), 'utf8');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
