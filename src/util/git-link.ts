import { resolve } from 'node:path';

/**
 * The git folder a `.git` file's text names (`gitdir: PATH`, as a linked worktree, a submodule or a work
 * tree made with `--separate-git-dir` has it), resolved from `folder`, the one the file is in, as git reads
 * it (trailing white space and the line end left off); null when the text is no such link.
 */
export function gitLinkTarget(text: string, folder: string): string | null {
  const named = /^gitdir: (.+)$/.exec(text.trimEnd())?.[1];
  return named === undefined ? null : resolve(folder, named);
}
