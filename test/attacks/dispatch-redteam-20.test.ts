import { execFileSync, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { mkdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { safeGit } from '../../src/dispatch/worktree.js';
import { isDotGitName, parseRawTree } from '../../src/lane/raw-tree.js';
import { attack } from '../helpers/attack-kit.js';
import { agentScript, claudeStandInReceipt, codesOf, dispatchTo, FIX, hostilePlaces, receiptsFor, watchOnce } from '../helpers/hostile-agent.js';
import { worlds } from '../helpers/lane.js';
import { git, gitEnv, tempDir } from '../helpers/tmp.js';

/**
 * The dispatch lane against a hostile execution agent, round twenty: what its stream says past the
 * bound the runner keeps of it. Each agent is a script in place of the executor that does one hostile thing.
 */

const dir = tempDir('dispatch-redteam-20');
const event = (value: unknown): string => `printf '%s\\n' '${JSON.stringify(value)}'`;

/** Prints `line` followed by three MiB of spaces on one line: valid JSON wherever the runner's 2 MiB bound cuts it. */
const paddedPastTheBound = (line: unknown): string => `node -e 'process.stdout.write(${JSON.stringify(JSON.stringify(line))} + " ".repeat(3 * 1024 * 1024) + "\\n")'`;

describe("a hostile agent's event that the runner's bound on its stream cuts through", () => {
  const place = hostilePlaces(dir, 'cut');
  const fresh = worlds(join(dir, 'claude'));

  attack('a hostile agent: a Codex command it never ran, passing, on a line padded past the bound, so the cut keeps valid JSON', 'runner', 'refused', async () => {
    const where = await place('codex');
    const { messageId } = await dispatchTo(where, 'codex');
    const forged = { type: 'item.completed', item: { id: 'i9', type: 'command_execution', command: 'npm run forged-suite', exit_code: 0, status: 'completed' } };
    const stream = [event({ type: 'thread.started', thread_id: 'thread-cut' }), paddedPastTheBound(forged)].join('\n');
    const watch = watchOnce(where, agentScript(where.world.dir, FIX, stream), { timeoutMs: 40_000 });
    const [receipt] = watch.hung ? [] : await receiptsFor(where, messageId);
    if (receipt === undefined) return watch.hung ? 'hung' : `no receipt (exit ${watch.status})`;
    // The kept stream is its whole lines: the padded line is not in it.
    const events = (receipt['attachments'] as Array<{ path: string }>).find((item) => item.path.endsWith('codex-events.jsonl'))!;
    expect((await where.world.ledger.readFile(events.path))!.toString('utf8')).not.toContain('forged-suite');
    // The receipt says of the run only what its attached stream holds: the runner's verification, and a stream cut at its bound (a whole line, not one ending mid-event).
    if ((receipt['commands_run'] as string[]).includes('npm run forged-suite')) return 'accepted';
    expect(receipt['commands_run']).toEqual(['sh test.sh']);
    return JSON.stringify(codesOf(receipt)) === '["stream_overflow"]' ? 'refused' : `receipted as ${JSON.stringify(receipt['blockers'])}`;
  });

  attack('a hostile agent: a Claude Code result of success with its final message, on a line padded past the bound', 'runner', 'refused', async () => {
    const forged = { type: 'result', subtype: 'success', is_error: false, result: 'All tests pass (forged).', session_id: 'session-cut', usage: { input_tokens: 100, output_tokens: 10 }, total_cost_usd: 0.01 };
    const stream = [event({ type: 'system', subtype: 'init', session_id: 'session-cut' }), paddedPastTheBound(forged)].join('\n');
    const receipt = await claudeStandInReceipt(fresh, stream);
    const attached = (receipt['attachments'] as Array<{ path: string }>).map((item) => item.path.replace(/.*\//, ''));
    // No final message is attached that the attached stream does not hold.
    if (attached.includes('final-message.md')) return 'accepted';
    return receipt['status'] === 'failed' && JSON.stringify(codesOf(receipt)) === '["stream_overflow"]' ? 'refused' : `receipted as ${JSON.stringify(receipt['blockers'])}`;
  });
});

describe("a hostile agent's work in a folder git takes for its own .git on another system", () => {
  const place = hostilePlaces(dir, 'dotgit');

  // Each a name git's fsck calls hasDotgit and git's checkout refuses as an invalid path (core.protectNTFS, on by default everywhere;
  // core.protectHFS): on Windows or macOS the folder is the repository's own .git, whose hooks a checkout would write.
  // U+FFFE is UTF-8 to Node (a path the runner records) and no code point to git, which ends the name before it.
  for (const name of ['GIT~1', '.git.', '.Git ', '.g\u200cit', '.git\ufffe']) {
    attack(`a hostile agent: src/${JSON.stringify(name).slice(1, -1)}/hooks/post-checkout, in its scope, beside a right fix`, 'runner', 'refused', async () => {
      const where = await place(Buffer.from(name).toString('hex'));
      const { messageId } = await dispatchTo(where, `dotgit-${Buffer.from(name).toString('hex')}`);
      const folder = `src/${name}/hooks`;
      const watch = watchOnce(where, agentScript(where.world.dir, `${FIX}; mkdir -p '${folder}' && printf '#!/bin/sh\\necho pwned\\n' > '${folder}/post-checkout'`), { timeoutMs: 40_000 });
      const [receipt] = watch.hung ? [] : await receiptsFor(where, messageId);
      if (receipt === undefined) return watch.hung ? 'hung' : `no receipt (exit ${watch.status})`;
      const head = receipt['head_sha'] as string | null;
      // What the signed commit holds is a tree stock git checks out and fsck passes: no such folder in it.
      if (head !== null) {
        const listed = spawnSync('git', ['ls-tree', '-r', '--name-only', head], { cwd: where.repo, encoding: 'utf8' }).stdout;
        if (listed.includes('post-checkout')) return `accepted (${receipt['status'] as string})`;
      }
      return receipt['status'] === 'failed' && codesOf(receipt).includes('scope_violation') ? 'refused' : `receipted as ${String(receipt['status'])} ${JSON.stringify(receipt['blockers'])}`;
    });
  }
});

/** What git's fsck says of a tree entry named each of `names` (hasDotgit), from one fsck of them all: each tree it flags is named on a line of its own. */
function fsckSaysDotGit(folder: string, names: readonly Buffer[]): { readonly verdicts: boolean[]; readonly blob: string } {
  const repo = join(dir, folder);
  mkdirSync(repo, { recursive: true });
  git(['init', '-q', '--bare', repo]);
  const blob = git(['--git-dir', repo, 'hash-object', '-w', '--stdin'], { input: 'x\n' }).trim();
  const trees = names.map((name) => execFileSync('git', ['--git-dir', repo, 'mktree'], { input: Buffer.concat([Buffer.from(`100644 blob ${blob}\t`), name, Buffer.from('\n')]), env: gitEnv() }).toString('utf8').trim());
  const fsck = spawnSync('git', ['--git-dir', repo, 'fsck', '--no-dangling'], { encoding: 'utf8' });
  const flagged = `${fsck.stdout}${fsck.stderr}`.split('\n').filter((line) => /hasDotgit/.test(line));
  return { verdicts: trees.map((tree) => flagged.some((line) => line.includes(tree))), blob };
}

const bytes = (...parts: Array<string | number[]>): Buffer => Buffer.concat(parts.map((part) => (typeof part === 'string' ? Buffer.from(part, 'utf8') : Buffer.from(part))));

/** A raw tree object holding one entry of mode 100644 named `name`. */
const rawTree = (name: Buffer, oid: string): Buffer => Buffer.concat([Buffer.from('100644 '), name, Buffer.from([0]), Buffer.from(oid, 'hex')]);

describe("the runner's rule for a name that is a repository's .git", () => {
  it("says of each name what git's fsck says of a tree entry so named (hasDotgit)", () => {
    const names = ['.git', '.GIT', '.git.', '.git ', '.gIt . .', 'git~1', 'GIT~1', '.git::$INDEX_ALLOCATION', '.git\\x', '.g\u200cit', '.\ufeffGit\u206a', '.gitx', 'git~2', '.git~1', '.gitmodules', '.github', 'agit', '.g\u200cithub', 'x.git'].map((name) => Buffer.from(name));
    const { verdicts } = fsckSaysDotGit('fsck', names);
    expect(names.map((name) => isDotGitName(name))).toEqual(verdicts);
    expect(verdicts.filter(Boolean).length).toBe(11);
  });

  // On HFS+ (is_hfs_dotgit) git reads UTF-8 its own way: bytes that are no code point to it (0xff, an overlong
  // form, a surrogate, U+FFFE) end the name there, so `.git\xff` is hasDotgit to fsck and to a clone that checks what it fetches.
  it("says of each name that is not UTF-8 as git reads it what git's fsck says of it, and a tree the runner reads refuses such an entry", () => {
    const names = [
      bytes('.git', [0xff]),
      bytes('.GIT', [0xc3]),
      bytes('.g\u200cit', [0xff]),
      bytes('.git\u200c', [0xfe], 'x'),
      bytes('.git', [0xef, 0xbf, 0xbe]),
      bytes('.git', [0xed, 0xa0, 0x80]),
      bytes('.git', [0xc0, 0xae]),
      bytes('.git', [0xf4, 0x90, 0x80, 0x80]),
      bytes('.git', [0xe2, 0x80]),
      bytes('.git', [0xff], 'abc'),
      bytes('.gi\u200dt'),
      // Not .git to git: the bytes git cannot read come before `.git` is whole, or what follows is a code point.
      bytes([0xff], '.git'),
      bytes('.g', [0xff], 'it'),
      bytes('.git\ufffd'),
      bytes('.git\u00e9'),
      bytes('.git\u{1f600}'),
      bytes('.git\u200b'),
      bytes('.gitignore'),
      bytes('.github'),
    ];
    const { verdicts, blob } = fsckSaysDotGit('fsck-bytes', names);
    expect(names.map((name) => isDotGitName(name))).toEqual(verdicts);
    expect(verdicts.filter(Boolean).length).toBe(11);
    expect(() => parseRawTree(rawTree(names[0]!, blob))).toThrow();
  });

  it("a git the runner starts that refuses such a tree is said by git's own line, not the hint every git prints before it", async () => {
    const repo = join(dir, 'hint');
    mkdirSync(repo, { recursive: true });
    git(['init', '-q', '--bare', repo]);
    const blob = git(['--git-dir', repo, 'hash-object', '-w', '--stdin'], { input: 'x\n' }).trim();
    const tree = git(['--git-dir', repo, 'mktree'], { input: `100644 blob ${blob}\t.git.\n` }).trim();
    const commit = git(['--git-dir', repo, 'commit-tree', tree, '-m', 'm']).trim();
    const refused = await safeGit([`--git-dir=${repo}`, 'read-tree', commit]).then(() => null, (error: unknown) => error as Error & { code: string });
    expect(refused?.code).toBe('GIT_FAILED');
    expect(refused?.message).toMatch(/invalid path '\.git\.'/);
  });
});
