import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import { join, resolve } from 'node:path';
import { CooError } from '../errors.js';
import { ObjectWriter } from '../ledger/object-store.js';
import { LIMITS } from '../limits.js';
import { gitEnvironment } from '../util/git-env.js';
import type { TreeFile } from './git-tree.js';
import { keyOf } from './work-walk.js';

/**
 * What git's own object checks (`git fsck`, which a forge runs on every push and a clone with
 * `transfer.fsckObjects` on what it fetches) refuse of the files of the work: a `.gitmodules` in any
 * folder whose submodule URL, path or name reads as an option or climbs out (`url = --upload-pack=...`),
 * one that is a link, a `.gitattributes` with a line of 2048 bytes or more. A commit holding such a
 * file is one git itself calls broken: a branch no such remote takes. git judges, by its own names
 * (`.GITMODULES`, `gitmod~1`) and rules, in the runner's folder: a private repository that borrows the
 * target's objects (where the work's blobs were written) and holds, for each file, a tree of that file
 * alone under its own name, which `git fsck --no-full` checks with nothing else of the target's.
 */

/** One git fsck over the files' one-entry trees; by path (latin1 key), the message ids git gives it. */
export async function fsckRefusals(gitdir: string, folder: string, files: readonly TreeFile[]): Promise<Map<string, string>> {
  const refusals = new Map<string, string>();
  if (files.length === 0) return refusals;
  const scratch = join(folder, 'git');
  for (const sub of ['objects/info', 'refs']) fs.mkdirSync(join(scratch, sub), { recursive: true, mode: 0o700 });
  fs.writeFileSync(join(scratch, 'HEAD'), 'ref: refs/heads/main\n');
  fs.writeFileSync(join(scratch, 'objects', 'info', 'alternates'), `${resolve(gitdir, 'objects')}\n`);
  const writer = new ObjectWriter(scratch, -1);
  const byObject = new Map<string, string[]>();
  const note = (oid: string, key: string): void => {
    byObject.set(oid, [...(byObject.get(oid) ?? []), key]);
  };
  for (const file of files) {
    const slash = file.path.lastIndexOf(0x2f);
    const name = file.path.subarray(slash + 1);
    const tree = await writer.write('tree', Buffer.concat([Buffer.from(`${file.mode} `, 'latin1'), name, Buffer.from([0]), Buffer.from(file.oid, 'hex')]));
    note(tree, keyOf(file.path));
    // A blob git refuses is named by its id: every file of the work with those bytes is named with it.
    note(file.oid, keyOf(file.path));
  }
  const { code, stderr } = await new Promise<{ code: number | null; stderr: string }>((done) => {
    execFile(
      'git',
      [`--git-dir=${scratch}`, 'fsck', '--no-full', '--no-dangling', '--no-progress', '--no-reflogs'],
      { env: gitEnvironment({ GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null', HOME: folder, LC_ALL: 'C', GIT_TERMINAL_PROMPT: '0' }), encoding: 'utf8', maxBuffer: 16 * 1024 * 1024 },
      (error, _stdout, errors) => done({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : null, stderr: errors }),
    );
  });
  for (const line of stderr.split('\n')) {
    const found = /^error in (?:blob|tree) ([0-9a-f]{40}): ([A-Za-z]+):/.exec(line);
    if (found === null) continue;
    for (const key of byObject.get(found[1]!) ?? []) {
      const ids = refusals.get(key);
      if (ids === undefined) refusals.set(key, found[2]!);
      else if (!ids.split(', ').includes(found[2]!)) refusals.set(key, `${ids}, ${found[2]!}`);
    }
  }
  // git failed, or refused something it named no file of the work for: nothing is known of the work's files.
  if (code !== 0 && refusals.size === 0) {
    const said = stderr.split('\n').find((line) => line.startsWith('error') || line.startsWith('fatal')) ?? `exit ${code ?? 'by a signal'}`;
    throw new CooError('GIT_FAILED', `git fsck of the work's files: ${said.slice(0, LIMITS.pathChars)}`);
  }
  return refusals;
}
