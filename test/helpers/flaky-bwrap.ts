import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * A `bwrap` to put first on PATH, in front of the real one: it logs each call and, as told, removes a
 * folder the sandbox is about to hide just before the real bubblewrap mounts over it (a neighbour
 * runner deleting its folder between the listing and the mount), or fails every call as bubblewrap
 * does when it cannot mount. Its paths are written into the script: a sandbox's environment is
 * allow-listed and carries no variable of the test's.
 */
export interface FlakyBwrap {
  /** The folder to put first on PATH. */
  readonly bin: string;
  /** How many times bubblewrap was started. */
  calls(): number;
  /** The next sandbox that hides `folder` finds it gone at its mount (the real race, made certain). */
  vanishAtMount(folder: string): void;
  /** Every start fails as bubblewrap fails to mount; `false` restores the real one. */
  failEvery(fail: boolean): void;
}

export function flakyBwrap(dir: string): FlakyBwrap {
  const real = spawnSync('/bin/sh', ['-c', 'command -v bwrap'], { encoding: 'utf8' }).stdout.trim();
  if (real === '') throw new Error('the flaky bubblewrap needs the real one: apt-get install bubblewrap');
  const bin = join(dir, 'flaky-bwrap-bin');
  mkdirSync(bin, { recursive: true });
  const log = join(dir, 'flaky-bwrap.log');
  const vanish = join(dir, 'flaky-bwrap.vanish');
  const fail = join(dir, 'flaky-bwrap.fail');
  writeFileSync(log, '');
  writeFileSync(
    join(bin, 'bwrap'),
    [
      '#!/bin/sh',
      `echo call >> '${log}'`,
      `if [ -f '${fail}' ]; then echo "bwrap: Can't mkdir /gone/before/the/mount: Read-only file system" >&2; exit 1; fi`,
      `gone=; [ -f '${vanish}' ] && gone=$(cat '${vanish}')`,
      'prev=',
      'for arg in "$@"; do',
      '  if [ "$prev" = --tmpfs ] && [ -n "$gone" ] && [ "$arg" = "$gone" ]; then rmdir "$arg"; fi',
      '  prev=$arg',
      'done',
      `exec '${real}' "$@"`,
      '',
    ].join('\n'),
    { mode: 0o755 },
  );
  return {
    bin,
    calls: () => readFileSync(log, 'utf8').split('\n').filter(Boolean).length,
    vanishAtMount: (folder) => writeFileSync(vanish, folder),
    failEvery: (on) => (on ? writeFileSync(fail, '') : rmSync(fail, { force: true })),
  };
}
