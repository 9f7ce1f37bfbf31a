import { join } from 'node:path';
import { CooError } from '../errors.js';
import { checkoutFold } from '../lane/raw-tree.js';
import type { TreeFile } from './git-tree.js';
import { isNamed, isRulesFile, rulesEnvironment, rulesFolder } from './ignore-rules.js';
import { safeGit } from './worktree.js';

/**
 * Whether the work changes how git writes the commit's files on checkout. The runner hashes, commits
 * and verifies the blobs as stored (checkout.ts writes them byte for byte), but every stock checkout
 * of the commit (a reviewer's, CI's, a deploy's) and every archive the forge makes applies the
 * commit's `.gitattributes`: `ident` writes `$Id$` as `$Id: <blob> $`, `eol=crlf` adds a CR to each
 * line, `working-tree-encoding` re-encodes, `export-subst` and `export-ignore` change an archive. An
 * agent's `.gitattributes` so had code pass the verification on bytes no checkout holds (a line
 * whose behaviour turns on `'$Id$'.length`). git itself judges (`git check-attr`), the attributes of
 * the base's rules against those of the commit's, each set of `.gitattributes` files alone in a
 * folder of the runner's with a private empty repository and no attributes of the system's or the
 * user's, as ignore-rules.ts does for `.gitignore`. No filter runs: git is asked what applies, not to
 * apply it.
 */

/** The attributes by which git writes a file other than as its blob on checkout, or in an archive. */
export const CHECKOUT_ATTRIBUTES = ['text', 'eol', 'crlf', 'ident', 'working-tree-encoding', 'filter', 'export-subst', 'export-ignore'] as const;

/**
 * Which of `paths` (the work's changed paths) are attributes files: `judged`, named `.gitattributes`, which
 * git here reads; `folded`, named as a macOS or Windows checkout opens for `.gitattributes` (checkoutFold:
 * `.GITATTRIBUTES`, `.gitattributes.`), which git here never reads, so nothing can judge them here.
 */
export function attributesFiles(paths: readonly Buffer[]): { readonly judged: Buffer[]; readonly folded: Buffer[] } {
  const named = paths.filter((path) => checkoutFold(path.subarray(path.lastIndexOf(0x2f) + 1).toString('utf8')) === '.gitattributes');
  return { judged: named.filter((path) => isNamed(path, '.gitattributes')), folded: named.filter((path) => !isNamed(path, '.gitattributes')) };
}

/** The values of the attributes `names` that the `.gitattributes` files of `files` give each of `paths`, in that order. */
async function attributesOf(files: readonly TreeFile[], folder: string, paths: readonly Buffer[], names: readonly string[], readBlobs: (oids: readonly string[]) => Promise<Buffer[]>): Promise<string[][]> {
  const { gitdir, tree } = await rulesFolder(
    files.filter((file) => isRulesFile(file, '.gitattributes')),
    folder,
    readBlobs,
  );
  const out = await safeGit([`--git-dir=${gitdir}`, `--work-tree=${tree}`, '-c', 'core.attributesFile=/dev/null', 'check-attr', '-z', '--stdin', ...names], {
    env: { ...rulesEnvironment(tree), GIT_ATTR_NOSYSTEM: '1' },
    input: Buffer.concat(paths.flatMap((path) => [path, Buffer.from([0])])),
  });
  // PATH, ATTRIBUTE, VALUE for each attribute of each path, in the order asked.
  const fields: Buffer[] = [];
  for (let start = 0, nul = out.indexOf(0); nul >= 0; start = nul + 1, nul = out.indexOf(0, start)) fields.push(out.subarray(start, nul));
  const per = names.length * 3;
  if (fields.length !== paths.length * per) throw new CooError('GIT_FAILED', `git check-attr answered ${fields.length} fields for ${paths.length} paths`);
  return paths.map((_, index) =>
    fields
      .slice(index * per, (index + 1) * per)
      .filter((_, at) => at % 3 === 2)
      .map((value) => value.toString('latin1')),
  );
}

/**
 * The files of `after` (a commit's) that a checkout writes by other attributes than the rules of
 * `before` (the base's) give them, where `changed` are the `.gitattributes` paths the work added,
 * changed or removed: only files in their folders are asked about. Judged in `folder`, the runner's own.
 */
export async function checkoutAttributeChanges(
  before: readonly TreeFile[],
  after: readonly TreeFile[],
  changed: readonly Buffer[],
  folder: string,
  readBlobs: (oids: readonly string[]) => Promise<Buffer[]>,
): Promise<Buffer[]> {
  const folders = changed.map((path) => path.subarray(0, path.lastIndexOf(0x2f) + 1));
  const paths = after.filter((file) => file.mode !== '160000' && folders.some((prefix) => file.path.subarray(0, prefix.length).equals(prefix))).map((file) => file.path);
  if (paths.length === 0) return [];
  const [was, now] = await Promise.all([attributesOf(before, join(folder, 'base'), paths, CHECKOUT_ATTRIBUTES, readBlobs), attributesOf(after, join(folder, 'work'), paths, CHECKOUT_ATTRIBUTES, readBlobs)]);
  return paths.filter((_, index) => was[index]!.join('\0') !== now[index]!.join('\0'));
}

/**
 * The files of the work (`written`: paths it added or changed in `after`, a commit's files) that the
 * commit's rules give a filter (`filter=lfs`, whatever the base's rules say). Such a file is held in its
 * stored form, in the agent's worktree as in the verification's checkout, and a checkout writes what the
 * filter makes of it: an LFS pointer becomes the bytes the server it names (`.lfsconfig`) holds, which no
 * verification read. Judged in `folder`, the runner's own; no filter runs.
 */
export async function filteredChanges(after: readonly TreeFile[], written: readonly Buffer[], folder: string, readBlobs: (oids: readonly string[]) => Promise<Buffer[]>): Promise<Buffer[]> {
  if (written.length === 0 || !after.some((file) => isRulesFile(file, '.gitattributes'))) return [];
  const values = await attributesOf(after, folder, written, ['filter'], readBlobs);
  // Only a driver's name names a filter: `filter` set or unset alone names none.
  return written.filter((_, index) => !['unspecified', 'unset', 'set'].includes(values[index]![0]!));
}
