import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import * as fs from 'node:fs';
import { join } from 'node:path';
import { CooError } from '../errors.js';
import type { TreeFile } from './git-tree.js';

/**
 * Which files the base commit's `.gitignore` files ignore. Ignored files are build output, never
 * work: the runner does not list, hash, commit or verify them, and the verification's checkout of
 * the signed commit does not have them. The rules are the base's, read from its git objects: a
 * `.gitignore` the agent adds or changes is a change like any other and hides nothing. git itself
 * judges (`git check-ignore`), against a folder the runner makes holding only those files, with a
 * private empty repository and no exclude files of the user's, so neither the agent nor the
 * target's configuration adds a rule.
 */

export interface IgnoreRules {
  /** Per path, whether the base's rules ignore it; a folder's path is asked with `dir: true`. */
  ignored(paths: ReadonlyArray<{ readonly path: Buffer; readonly dir: boolean }>): Promise<boolean[]>;
  close(): void;
}

/** No `.gitignore` in the base: nothing is ignored, and no process is started. */
const NOTHING_IGNORED: IgnoreRules = {
  ignored: (paths) => Promise.resolve(paths.map(() => false)),
  close: () => undefined,
};

/** Whether a path's last part is `name`, such as `.gitignore`. */
export function isNamed(path: Buffer, name: string): boolean {
  const bytes = Buffer.from(name);
  return path.length >= bytes.length && path.subarray(path.length - bytes.length).equals(bytes) && (path.length === bytes.length || path[path.length - bytes.length - 1] === 0x2f);
}

/** Whether `file` is a regular file named `name`: git reads its rules from no link. */
export function isRulesFile(file: TreeFile, name: string): boolean {
  return (file.mode === '100644' || file.mode === '100755') && isNamed(file.path, name);
}

/**
 * The runner's own folder for git to judge rules in: `folder/git`, the smallest private repository git
 * takes (HEAD, objects and refs), and `folder/tree`, a work tree holding only `rules` (a commit's
 * `.gitignore` or `.gitattributes` files), each written from the target's objects at its path.
 */
export async function rulesFolder(rules: readonly TreeFile[], folder: string, readBlobs: (oids: readonly string[]) => Promise<Buffer[]>): Promise<{ readonly gitdir: string; readonly tree: string }> {
  const tree = join(folder, 'tree');
  const gitdir = join(folder, 'git');
  for (const sub of ['objects', 'refs']) fs.mkdirSync(join(gitdir, sub), { recursive: true });
  fs.mkdirSync(tree, { recursive: true });
  fs.writeFileSync(join(gitdir, 'HEAD'), 'ref: refs/heads/main\n');
  const blobs = await readBlobs(rules.map((file) => file.oid));
  rules.forEach((file, index) => {
    const path = Buffer.concat([Buffer.from(`${tree}/`), file.path]);
    fs.mkdirSync(Buffer.from(path.subarray(0, path.lastIndexOf(0x2f))), { recursive: true });
    fs.writeFileSync(path, blobs[index]!);
  });
  return { gitdir, tree };
}

/** The environment of a git that judges rules in a rules folder: no configuration of the system's or the user's, the folder its HOME. */
export function rulesEnvironment(tree: string): NodeJS.ProcessEnv {
  return { PATH: process.env['PATH'] ?? '/usr/bin:/bin', GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null', HOME: tree, LANG: 'C' };
}

/**
 * The rules of the base commit whose files are `baseFiles`, judged in `folder` (the runner's own,
 * made after the agent exited). `readBlob` gives a blob's bytes from the target's objects.
 */
export async function baseIgnoreRules(baseFiles: readonly TreeFile[], folder: string, readBlobs: (oids: readonly string[]) => Promise<Buffer[]>): Promise<IgnoreRules> {
  const gitignores = baseFiles.filter((file) => isRulesFile(file, '.gitignore'));
  if (gitignores.length === 0) return NOTHING_IGNORED;
  const { gitdir, tree } = await rulesFolder(gitignores, folder, readBlobs);
  return new CheckIgnore(gitdir, tree);
}

const DOT_SLASH = Buffer.from('./');

/** One long-lived `git check-ignore --stdin -z`: a batch of paths in, one verdict per path out. */
class CheckIgnore implements IgnoreRules {
  private readonly child: ChildProcessWithoutNullStreams;
  private buffer = Buffer.alloc(0);
  private fields: Buffer[] = [];
  private waiting: { count: number; resolve: (verdicts: boolean[]) => void; reject: (error: Error) => void } | null = null;
  private failure: Error | null = null;

  constructor(gitdir: string, tree: string) {
    this.child = spawn('git', ['--git-dir', gitdir, '--work-tree', tree, '-c', 'core.excludesFile=/dev/null', 'check-ignore', '--no-index', '--stdin', '-z', '--verbose', '--non-matching'], {
      env: rulesEnvironment(tree),
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stderr = '';
    this.child.stderr.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString('utf8')).slice(-2000);
    });
    this.child.stdout.on('data', (chunk: Buffer) => {
      this.buffer = Buffer.concat([this.buffer, chunk]);
      for (let nul = this.buffer.indexOf(0); nul >= 0; nul = this.buffer.indexOf(0)) {
        this.fields.push(this.buffer.subarray(0, nul));
        this.buffer = this.buffer.subarray(nul + 1);
      }
      this.settle();
    });
    const fail = (error: Error): void => {
      this.failure ??= error;
      this.waiting?.reject(this.failure);
      this.waiting = null;
    };
    this.child.on('error', (error) => fail(new CooError('GIT_FAILED', `git check-ignore: ${error.message}`)));
    this.child.on('exit', (code) => fail(new CooError('GIT_FAILED', `git check-ignore exited ${code}: ${stderr.trim().split('\n')[0] ?? ''}`)));
    this.child.stdin.on('error', () => undefined);
  }

  private settle(): void {
    const waiting = this.waiting;
    if (waiting === null || this.fields.length < waiting.count * 4) return;
    const verdicts: boolean[] = [];
    for (let i = 0; i < waiting.count; i += 1) {
      // SOURCE, LINE, PATTERN, PATH: no source, no rule; a `!` rule is a match that un-ignores.
      const [source, , pattern] = this.fields.slice(i * 4, i * 4 + 4);
      verdicts.push(source!.length > 0 && pattern![0] !== 0x21);
    }
    this.fields = this.fields.slice(waiting.count * 4);
    this.waiting = null;
    waiting.resolve(verdicts);
  }

  ignored(paths: ReadonlyArray<{ readonly path: Buffer; readonly dir: boolean }>): Promise<boolean[]> {
    if (paths.length === 0) return Promise.resolve([]);
    if (this.failure !== null) return Promise.reject(this.failure);
    if (this.waiting !== null) return Promise.reject(new CooError('INTERNAL', 'one check-ignore batch at a time'));
    return new Promise((resolve, reject) => {
      this.waiting = { count: paths.length, resolve, reject };
      // Each path behind `./`, so a name such as `:(exclude)x` is a name and never pathspec magic
      // (check-ignore refuses GIT_LITERAL_PATHSPECS); a folder with its trailing slash, so a rule
      // that names folders only (`build/`) applies.
      this.child.stdin.write(Buffer.concat(paths.flatMap((entry) => [DOT_SLASH, entry.path, Buffer.from(entry.dir ? '/\0' : '\0')])));
    });
  }

  close(): void {
    this.child.stdin.end();
    this.child.kill();
  }
}
