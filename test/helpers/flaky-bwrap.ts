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
  /**
   * The next sandbox that hides `folder` finds it gone at its mount (the real race, made certain); with
   * `only`, only a sandbox given that argument (`--unshare-net`: a verification command's).
   */
  vanishAtMount(folder: string, only?: string): void;
  /** Every sandbox's start fails as bubblewrap fails to mount (a start-up probe still runs); `false` restores the real one. */
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
      // A sandbox's start (a start-up probe has no --chdir), and whether it carries the argument a vanish waits for.
      'sandbox=; marked=',
      `only=; [ -f '${vanish}.only' ] && only=$(cat '${vanish}.only')`,
      'for arg in "$@"; do [ "$arg" = --chdir ] && sandbox=1; [ -z "$only" ] || [ "$arg" != "$only" ] || marked=1; done',
      '[ -z "$only" ] && marked=1',
      `if [ -n "$sandbox" ] && [ -f '${fail}' ]; then echo "bwrap: Can't mkdir /gone/before/the/mount: Read-only file system" >&2; exit 1; fi`,
      `gone=; [ -f '${vanish}' ] && gone=$(cat '${vanish}')`,
      'prev=',
      'for arg in "$@"; do',
      '  if [ -n "$marked" ] && [ "$prev" = --tmpfs ] && [ -n "$gone" ] && [ "$arg" = "$gone" ]; then rmdir "$arg"; fi',
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
    vanishAtMount: (folder, only) => {
      writeFileSync(vanish, folder);
      if (only === undefined) rmSync(`${vanish}.only`, { force: true });
      else writeFileSync(`${vanish}.only`, only);
    },
    failEvery: (on) => (on ? writeFileSync(fail, '') : rmSync(fail, { force: true })),
  };
}
