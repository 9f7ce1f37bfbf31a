import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { fsckRefusals } from '../../src/dispatch/git-fsck.js';
import { ObjectWriter } from '../../src/ledger/object-store.js';
import { attack } from '../helpers/attack-kit.js';
import { agentScript, codesOf, dispatchTo, FIX, hostilePlaces, receiptsFor, watchOnce, type HostilePlace } from '../helpers/hostile-agent.js';
import { git, gitEnv, tempDir } from '../helpers/tmp.js';

/**
 * The dispatch lane against a hostile execution agent, round fifty-eight: work holding a file that
 * git's own object checks refuse (`git fsck`, which a forge runs on every push and a clone with
 * `transfer.fsckObjects` on what it fetches): a `.gitmodules` whose submodule URL reads as an option,
 * under git's name or another spelling git reads as it, one that is a link, a folder of that name. Each agent is a script
 * in place of the executor that does the fix and one hostile thing, under bubblewrap; each case judges
 * the receipt and the commit it names as stock git reads them.
 */

const dir = tempDir('dispatch-redteam-58');

async function attempted(where: HostilePlace, name: string, action: string) {
  const { messageId } = await dispatchTo(where, name);
  const watch = watchOnce(where, agentScript(where.world.dir, action), { timeoutMs: 40_000 });
  const [receipt] = watch.hung ? [] : await receiptsFor(where, messageId);
  return { receipt, unreceipted: watch.hung ? 'hung' : `no receipt (exit ${watch.status}) ${watch.stderr.slice(-300)}` };
}

/** The attempt's receipt, the commit it names and what stock `git fsck` says of it; or the verdict when there is no receipt or no commit. */
async function judged(where: HostilePlace, name: string, action: string) {
  const { receipt, unreceipted } = await attempted(where, name, action);
  if (receipt === undefined) return unreceipted;
  const head = receipt['head_sha'] as string | null;
  if (head === null) return `no commit named (status ${String(receipt['status'])}, ${codesOf(receipt).join(', ')})`;
  return { receipt, head, broken: fsckOf(where, head) };
}

/** What stock `git fsck` says of the target repository with the receipt's commit on a ref of its own: null when it finds nothing wrong. */
function fsckOf(where: HostilePlace, head: string): string | null {
  git(['update-ref', 'refs/heads/fsck-judged', head], { cwd: where.repo });
  const fsck = spawnSync('git', ['fsck', '--no-dangling', '--no-progress'], { cwd: where.repo, env: { ...gitEnv(), LC_ALL: 'C' }, encoding: 'utf8' });
  return fsck.status === 0 ? null : fsck.stderr.trim();
}

/** The paths of the files the commit holds, as stock git lists them. */
function pathsAt(where: HostilePlace, commit: string): string[] {
  return git(['ls-tree', '-r', '--name-only', commit], { cwd: where.repo }).trim().split('\n');
}

const MODULES = (url: string): string => `[submodule "lib"]\\n\\tpath = lib\\n\\turl = ${url}\\n`;

describe('a hostile agent whose work holds a file git itself refuses', () => {
  const place = hostilePlaces(dir, 'fsck');

  for (const [name, file] of [
    ['.gitmodules', 'src/.gitmodules'],
    ['.GitModules', 'src/.GitModules'],
  ] as const) {
    attack(`a hostile agent: ${file} with a submodule URL that reads as an option (--upload-pack=...), beside the fix`, 'runner', 'refused', async () => {
      // Before: the receipt succeeded and named a COO-signed commit that `git fsck` calls broken (gitmodulesUrl), which a forge
      // refuses on push, and the attempt's branch carried it in the operator's repository.
      const where = await place(name.replace(/^\./, 'dot-'));
      const attempt = await judged(where, name, `${FIX}\nprintf '${MODULES('--upload-pack=touch /tmp/coo-redteam-58')}' > ${file}`);
      if (typeof attempt === 'string') return attempt;
      const { receipt, head, broken } = attempt;
      if (receipt['status'] === 'succeeded') return `accepted: ${broken ?? 'a commit stock git takes'}`;
      if (broken !== null) return `accepted as a failed attempt whose commit stock git calls broken: ${broken}`;
      // Not committed: the fix is, and the receipt names what the commit holds.
      expect(pathsAt(where, head)).not.toContain(file);
      expect(pathsAt(where, head)).toContain('src/add.js');
      expect((receipt['file_hashes'] as Array<{ path: string }>).map((entry) => entry.path)).toEqual(['src/add.js']);
      expect(JSON.stringify(receipt['blockers'])).toContain(`${file} (git_refuses: gitmodulesUrl)`);
      return 'refused';
    });
  }

  attack('a hostile agent: src/.gitmodules as a link, beside the fix', 'runner', 'refused', async () => {
    // A link is never work; before, it was refused and committed all the same, to a branch holding what git fsck calls broken (gitmodulesSymlink).
    const where = await place('link');
    const attempt = await judged(where, 'link', `${FIX}\nln -s add.js src/.gitmodules`);
    if (typeof attempt === 'string') return attempt;
    const { receipt, head, broken } = attempt;
    if (broken !== null) return `accepted: the attempt's commit is one stock git calls broken: ${broken}`;
    expect(receipt['status']).toBe('failed');
    expect(pathsAt(where, head)).not.toContain('src/.gitmodules');
    // git refuses the tree that holds the link: judged again file by file, the fix beside it in that tree stands.
    expect(pathsAt(where, head)).toContain('src/add.js');
    expect(JSON.stringify(receipt['blockers'])).toContain('src/.gitmodules (git_refuses: gitmodulesSymlink)');
    expect(JSON.stringify(receipt['blockers'])).not.toContain('src/add.js (git_refuses');
    return 'refused';
  });

  attack('a hostile agent: a folder named src/.gitmodules holding a file, beside the fix', 'runner', 'refused', async () => {
    // Before: the receipt succeeded and named a commit `git fsck` calls broken (gitmodulesBlob: a tree where git reads .gitmodules).
    const where = await place('folder');
    const attempt = await judged(where, 'folder', `${FIX}\nmkdir -p src/.gitmodules/deep && printf 'notes\\n' > src/.gitmodules/deep/notes.txt`);
    if (typeof attempt === 'string') return attempt;
    const { receipt, head, broken } = attempt;
    if (receipt['status'] === 'succeeded') return `accepted: ${broken ?? 'a commit stock git takes'}`;
    if (broken !== null) return `accepted as a failed attempt whose commit stock git calls broken: ${broken}`;
    expect(pathsAt(where, head)).toContain('src/add.js');
    expect(pathsAt(where, head)).not.toContain('src/.gitmodules/deep/notes.txt');
    expect(JSON.stringify(receipt['blockers'])).toContain('src/.gitmodules/deep/notes.txt (git_refuses: gitmodulesBlob)');
    return 'refused';
  });

  attack('a hostile agent: a well-formed src/.gitmodules beside the fix is work like any other', 'runner', 'succeeded', async () => {
    // Guard: git judges, and refuses only what it calls broken; a `.gitmodules` it takes is committed and named.
    const where = await place('good');
    const { receipt, unreceipted } = await attempted(where, 'good', `${FIX}\nprintf '${MODULES('https://example.invalid/lib.git')}' > src/.gitmodules`);
    if (receipt === undefined) return unreceipted;
    const head = receipt['head_sha'] as string;
    expect(fsckOf(where, head)).toBeNull();
    expect(pathsAt(where, head)).toContain('src/.gitmodules');
    return String(receipt['status']);
  });
});

describe("git fsck's judgement of the work's files (fsckRefusals)", () => {
  it('names only the files git refuses, whichever tree they share with others and however often a name repeats', async () => {
    const repo = join(dir, 'unit');
    mkdirSync(repo, { recursive: true });
    git(['init', '-q', repo]);
    const writer = new ObjectWriter(join(repo, '.git'), -1);
    const blob = (text: string): Promise<string> => writer.write('blob', Buffer.from(text));
    const bad = await blob('[submodule "x"]\n\tpath = x\n\turl = -u./payload\n');
    const good = await blob('[submodule "x"]\n\tpath = x\n\turl = https://example.invalid/x.git\n');
    const files = [
      { path: Buffer.from('a/.gitmodules'), mode: '100644', oid: good },
      { path: Buffer.from('b/.gitmodules'), mode: '100644', oid: bad },
      { path: Buffer.from('c/.gitmodules'), mode: '120000', oid: await blob('../a/.gitmodules') },
      { path: Buffer.from('c/add.js'), mode: '100644', oid: await blob('export const add = (a, b) => a + b;\n') },
      // Bytes of their own: named by git's reading of the name (an NTFS short name of .gitmodules), not as another refused file's blob.
      { path: Buffer.from('d/GITMOD~1'), mode: '100644', oid: await blob('[submodule "y"]\n\tpath = y\n\turl = -u./other\n') },
      { path: Buffer.from('e/notes.txt'), mode: '100644', oid: await blob('[submodule "z"]\n\tpath = z\n\turl = -u./text\n') },
      // A new folder git reads as .gitmodules: each file in it, at any depth, and nothing beside it.
      { path: Buffer.from('f/.gitmodules/a.txt'), mode: '100644', oid: good },
      { path: Buffer.from('f/.gitmodules/sub/b.txt'), mode: '100644', oid: good },
      { path: Buffer.from('f/ok.txt'), mode: '100644', oid: good },
    ];
    const folders = ['a', 'b', 'c', 'd', 'e', 'f', 'f/.gitmodules', 'f/.gitmodules/sub'].map((name) => Buffer.from(name));
    const refused = await fsckRefusals(join(repo, '.git'), join(dir, 'unit-judged'), files, folders);
    expect(Object.fromEntries(refused)).toEqual({
      'b/.gitmodules': 'gitmodulesUrl',
      'c/.gitmodules': 'gitmodulesSymlink',
      'd/GITMOD~1': 'gitmodulesUrl',
      'f/.gitmodules/a.txt': 'gitmodulesBlob',
      'f/.gitmodules/sub/b.txt': 'gitmodulesBlob',
    });
  });

  async function unitRepo(name: string) {
    const repo = join(dir, name);
    mkdirSync(repo, { recursive: true });
    git(['init', '-q', repo]);
    const writer = new ObjectWriter(join(repo, '.git'), -1);
    return { gitdir: join(repo, '.git'), blob: (text: string): Promise<string> => writer.write('blob', Buffer.from(text)) };
  }

  it("is git's checks as git ships them: settings in the runner's environment that turn a check off or point git at other objects change nothing", async () => {
    const { gitdir, blob } = await unitRepo('unit-env');
    const files = [{ path: Buffer.from('b/.gitmodules'), mode: '100644', oid: await blob('[submodule "x"]\n\tpath = x\n\turl = -u./payload\n') }];
    const empty = join(dir, 'unit-env-empty-objects');
    mkdirSync(empty, { recursive: true });
    const settings: Array<Record<string, string>> = [
      { GIT_CONFIG_COUNT: '1', GIT_CONFIG_KEY_0: 'fsck.gitmodulesUrl', GIT_CONFIG_VALUE_0: 'ignore' },
      { GIT_CONFIG_PARAMETERS: "'fsck.gitmodulesurl'='ignore'" },
      { GIT_OBJECT_DIRECTORY: empty },
    ];
    for (const [at, setting] of settings.entries()) {
      const before = Object.fromEntries(Object.keys(setting).map((name) => [name, process.env[name]]));
      Object.assign(process.env, setting);
      try {
        const refused = await fsckRefusals(gitdir, join(dir, `unit-env-judged-${at}`), files);
        expect(Object.fromEntries(refused), JSON.stringify(setting)).toEqual({ 'b/.gitmodules': 'gitmodulesUrl' });
      } finally {
        for (const [name, value] of Object.entries(before)) {
          if (value === undefined) delete process.env[name];
          else process.env[name] = value;
        }
      }
    }
  });

  it("is not failed by an error git says of the target's own setup, not of the work's objects: its alternates naming a folder gone (a stale --reference clone)", async () => {
    const { gitdir, blob } = await unitRepo('unit-stale-alternates');
    const files = [
      { path: Buffer.from('a/add.js'), mode: '100644', oid: await blob('export const add = (a, b) => a + b;\n') },
      { path: Buffer.from('b/.gitmodules'), mode: '100644', oid: await blob('[submodule "y"]\n\tpath = y\n\turl = -u./payload\n') },
    ];
    mkdirSync(join(gitdir, 'objects', 'info'), { recursive: true });
    writeFileSync(join(gitdir, 'objects', 'info', 'alternates'), `${join(dir, 'unit-stale-alternates-gone', 'objects')}\n`);
    expect(Object.fromEntries(await fsckRefusals(gitdir, join(dir, 'unit-stale-alternates-judged'), files))).toEqual({ 'b/.gitmodules': 'gitmodulesUrl' });
    expect((await fsckRefusals(gitdir, join(dir, 'unit-stale-alternates-judged-clean'), files.slice(0, 1))).size).toBe(0);
  });

  it("reads only a whole answer: git's words cut off at the bound (a refused file's 17 MB URL), where a refusal after them would be lost, fail the judgement (GIT_FAILED), never pass what was not read", async () => {
    const { gitdir, blob } = await unitRepo('unit-flood');
    const files = [
      { path: Buffer.from('a/.gitmodules'), mode: '100644', oid: await blob(`[submodule "x"]\n\tpath = x\n\turl = -u${'x'.repeat(17 * 1024 * 1024)}\n`) },
      { path: Buffer.from('b/.gitmodules'), mode: '100644', oid: await blob('[submodule "y"]\n\tpath = y\n\turl = -u./payload\n') },
    ];
    await expect(fsckRefusals(gitdir, join(dir, 'unit-flood-judged'), files)).rejects.toMatchObject({ code: 'GIT_FAILED' });
  });
});
