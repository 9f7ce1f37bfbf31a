import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { shareSshConnection } from '../../../src/remote/git-remote.js';
import { tempDir } from '../../helpers/tmp.js';

/**
 * A runner shares one ssh connection with its remote through a socket in its private folder
 * (util/private-sockets.ts). ssh binds the socket under its name and a 17-character suffix first,
 * and a unix socket's path holds at most 107 bytes: with a deep temporary folder (a CI runner's
 * `/home/runner/work/_temp`, say) a longer name made every ssh command fail (exit 255).
 */
const saved = process.env['TMPDIR'];
afterEach(() => {
  if (saved === undefined) delete process.env['TMPDIR'];
  else process.env['TMPDIR'] = saved;
});

function controlPath(shared: ReturnType<typeof shareSshConnection>): string | undefined {
  // As ssh expands it: %C is a 40-character hash.
  return /ControlPath=([^']*)'/.exec(shared?.env['GIT_SSH_COMMAND'] ?? '')?.[1]?.replace('%C', 'c'.repeat(40));
}

describe('the ssh connection a runner shares with its remote', () => {
  it('binds where ssh can, with the suffix ssh adds, under a temporary folder as deep as a CI runner’s', () => {
    const deep = join(tempDir('ssh-share'), 'home', 'runner', 'work', '_temp');
    mkdirSync(deep, { recursive: true });
    process.env['TMPDIR'] = deep;
    const shared = shareSshConnection(tempDir('ssh-share-git'), 'ssh://ledger.example/ledger.git');
    try {
      const path = controlPath(shared);
      expect(path?.startsWith(deep)).toBe(true);
      expect(Buffer.byteLength(path!) + 17).toBeLessThanOrEqual(107);
    } finally {
      shared?.close();
    }
  });

  it('is not shared (git connects as usual) when the temporary folder is too deep for any socket', () => {
    const deep = join(tempDir('ssh-share'), 'x'.repeat(60), 'y'.repeat(40));
    mkdirSync(deep, { recursive: true });
    process.env['TMPDIR'] = deep;
    expect(shareSshConnection(tempDir('ssh-share-git'), 'ssh://ledger.example/ledger.git')).toBeNull();
  });
});
