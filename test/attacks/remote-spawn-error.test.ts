import type * as nodeFs from 'node:fs';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { runRemoteGit } from '../../src/remote/git-remote.js';
import { git, tempDir } from '../helpers/tmp.js';

/** Test fixture: removing a fetch's quarantine fails (a file system that refuses it) while `failRemoval` is set. */
const fixture = vi.hoisted(() => ({ failRemoval: false }));
vi.mock('node:fs', async (importOriginal) => {
  const fs = await importOriginal<typeof nodeFs>();
  return {
    ...fs,
    rmSync: (...args: Parameters<typeof fs.rmSync>) => {
      if (fixture.failRemoval && String(args[0]).includes('tmp_coo-incoming-')) throw Object.assign(new Error('EBUSY: resource busy or locked'), { code: 'EBUSY' });
      return fs.rmSync(...args);
    },
  };
});

const dir = tempDir('coo-attack-remote-spawn-error-');
const path = process.env['PATH'];

afterEach(() => {
  process.env['PATH'] = path;
  fixture.failRemoval = false;
});

describe('a fetch whose git cannot be started, and whose quarantine cannot be removed after', () => {
  it('answers that git could not run, and leaves no promise rejected unhandled', async () => {
    const gitdir = join(dir, 'clone.git');
    git(['init', '--quiet', '--bare', gitdir]);
    const empty = join(dir, 'no-git');
    mkdirSync(empty);
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown): void => {
      unhandled.push(reason);
    };
    process.on('unhandledRejection', onUnhandled);
    try {
      process.env['PATH'] = empty;
      fixture.failRemoval = true;
      const result = await runRemoteGit(['fetch', '--quiet', 'origin', 'main'], { gitdir, maxReceivedBytes: 1024 * 1024 });
      expect(result).toMatchObject({ ok: false, stderr: expect.stringMatching(/^cannot run git: .*ENOENT/) });
      // Node reports a rejection nobody handled once the microtasks have run, before the next turn's immediates.
      await new Promise((resolve) => setImmediate(resolve));
      await new Promise((resolve) => setImmediate(resolve));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });
});
