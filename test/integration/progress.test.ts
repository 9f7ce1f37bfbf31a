import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { generatePrivateKey, type PrivateKey } from '../../src/crypto/keys.js';
import { COO } from '../helpers/cli.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * `coo verify`'s progress in a real pseudo-terminal (util-linux `script`), on a ledger long enough
 * to be stopped halfway: the bar hides the cursor and turns line wrap off, and whatever ends the
 * run must turn both back on.
 */
const HIDE_CURSOR = '\x1b[?25l';
const SHOW_CURSOR = '\x1b[?25h';
const WRAP_OFF = '\x1b[?7l';
const WRAP_ON = '\x1b[?7h';

const dir = tempDir();
const gitdir = join(dir, 'ledger.git');
const COMMITS = 3000;

type BuildLedger = (gitdir: string, count: number, keys: { ceo: PrivateKey; coo: PrivateKey; codex: PrivateKey }) => Promise<string>;

beforeAll(async () => {
  // The benchmark's builder: real signed commits, written straight into a pack.
  const builder = pathToFileURL(join(import.meta.dirname, '..', '..', 'bench', 'build-ledger.mjs')).href;
  const { buildLedger } = (await import(builder)) as { buildLedger: BuildLedger };
  await buildLedger(gitdir, COMMITS, { ceo: generatePrivateKey('ceo'), coo: generatePrivateKey('coo.hermes'), codex: generatePrivateKey('ea.codex') });
}, 300_000);

interface Terminal {
  /** Everything the terminal received, escape sequences included. */
  output(): string;
  /** Resolves once the output matches. */
  waitFor(pattern: RegExp): Promise<void>;
  /** Types into the terminal, as a user at the keyboard. */
  type(text: string): void;
  /** The pid of `coo` itself inside the terminal. */
  pid(): number;
  ended: Promise<number | null>;
}

/** Runs `coo verify` as the only program of a new pseudo-terminal, with `env` added to this environment. */
function verifyInTerminal(env: NodeJS.ProcessEnv): Terminal {
  const command = `echo PID $$; exec '${process.execPath}' '${COO}' verify --ledger '${gitdir}' --no-checkpoint`;
  const { CI: _ci, ...inherited } = process.env;
  // script runs the command with `sh -c`; exec makes the shell's pid coo's.
  const child = spawn('script', ['-qfec', command, '/dev/null'], { env: { ...inherited, XDG_STATE_HOME: join(dir, 'state'), ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
  let output = '';
  const waiters: Array<{ pattern: RegExp; resolve: () => void }> = [];
  child.stdout.on('data', (chunk: Buffer) => {
    output += chunk.toString('utf8');
    for (const waiter of waiters.splice(0)) {
      if (waiter.pattern.test(output)) waiter.resolve();
      else waiters.push(waiter);
    }
  });
  const ended = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  return {
    output: () => output,
    waitFor: (pattern) =>
      new Promise((resolve, reject) => {
        if (pattern.test(output)) return resolve();
        waiters.push({ pattern, resolve });
        void ended.then(() => reject(new Error(`the run ended before ${pattern}: ${JSON.stringify(output.slice(-400))}`)));
      }),
    type: (text) => child.stdin.write(text),
    pid: () => Number(/PID (\d+)/.exec(output)![1]),
    ended,
  };
}

/** The bar's output from its first draw: cursor hidden and wrap off first, both back on after. */
function expectRestored(output: string): void {
  const hidden = output.indexOf(HIDE_CURSOR);
  const wrapOff = output.indexOf(WRAP_OFF);
  expect(hidden).toBeGreaterThanOrEqual(0);
  expect(wrapOff).toBeGreaterThanOrEqual(0);
  expect(output.lastIndexOf(SHOW_CURSOR)).toBeGreaterThan(output.lastIndexOf(HIDE_CURSOR));
  expect(output.lastIndexOf(WRAP_ON)).toBeGreaterThan(output.lastIndexOf(WRAP_OFF));
}

const DRAWN = /verifying \[[^\]]*\] \d+\/3001 commits, (--|\d+(\.\d)?) commits\/s, ETA \S+/;

describe('the progress bar of a long verify, in a terminal', () => {
  it('shows the count, a rate and the time left, then clears itself when the verify ends', async () => {
    const terminal = verifyInTerminal({ TERM: 'xterm-256color' });
    expect(await terminal.ended).toBe(0);
    const output = terminal.output();
    expect(output).toMatch(DRAWN);
    expect(output).toMatch(/ok: 3001 commits from genesis/);
    expectRestored(output);
  });

  it('restores the cursor and line wrap when Ctrl-C stops it, and ends as SIGINT asks', async () => {
    const terminal = verifyInTerminal({ TERM: 'xterm-256color' });
    await terminal.waitFor(DRAWN);
    terminal.type('\x03');
    expect(await terminal.ended).toBe(130);
    const output = terminal.output();
    expect(output).not.toMatch(/ok: 3001 commits/);
    expectRestored(output);
  });

  it('restores the cursor and line wrap when SIGTERM stops it, and ends as SIGTERM asks', async () => {
    const terminal = verifyInTerminal({ TERM: 'xterm-256color' });
    await terminal.waitFor(DRAWN);
    process.kill(terminal.pid(), 'SIGTERM');
    expect(await terminal.ended).toBe(143);
    const output = terminal.output();
    expect(output).not.toMatch(/ok: 3001 commits/);
    expectRestored(output);
  });
});

describe('the progress of a long verify, as plain text', () => {
  const PLAIN = /^verifying: \d+\/3001 commits \(\d+%\), (--|\d+(\.\d)?) commits\/s, ETA \S+\r?$/m;

  for (const [name, env] of [
    ['under TERM=dumb', { TERM: 'dumb' }],
    ['when CI is set, even on a capable terminal', { TERM: 'xterm-256color', CI: '1' }],
  ] as const) {
    it(`prints lines with a rate and the time left, and no escape sequence, ${name}`, async () => {
      const terminal = verifyInTerminal(env);
      expect(await terminal.ended).toBe(0);
      const output = terminal.output();
      expect(output).not.toContain('\x1b');
      const lines = output.split('\n').filter((line) => PLAIN.test(line));
      expect(lines).toHaveLength(10);
      expect(lines.at(-1)).toMatch(/^verifying: 3001\/3001 commits \(100%\)/);
      expect(output).toMatch(/ok: 3001 commits from genesis/);
    });
  }
});
