import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { formatPrivateKey } from '../../src/crypto/keys.js';
import { requireBubblewrap } from '../helpers/bubblewrap.js';
import { COO } from '../helpers/cli.js';
import { makeLedger } from '../helpers/ledger.js';
import { fixtureEnvelope } from '../helpers/stock.js';
import { git, run, tempDir } from '../helpers/tmp.js';

/** Runs a shell script under bubblewrap: the whole file system read-only but for what `extra` mounts. */
function sandboxed(script: string, extra: string[]): { status: number | null; stdout: string; stderr: string } {
  const result = run(requireBubblewrap('the disk fault tests'), ['--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc', ...extra, '--', 'sh', '-c', script]);
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

const dir = tempDir();
let gitdir = '';
let keyFile = '';
let envelope = '';
let head = '';

beforeAll(async () => {
  const made = await makeLedger(dir);
  made.ledger.close();
  gitdir = made.gitdir;
  keyFile = join(dir, 'coo.key');
  writeFileSync(keyFile, formatPrivateKey(made.actors.coo), { mode: 0o600 });
  envelope = join(dir, 'envelope.yaml');
  writeFileSync(envelope, fixtureEnvelope('msg_01M8NQFJ01J7CG66HWNDDJ8700', 'disk'));
  head = git(['--git-dir', gitdir, 'rev-parse', 'main']).trim();
});

describe('when the disk fails', () => {
  it('gives a clear error and leaves a read-only ledger unchanged', () => {
    const result = sandboxed(`"${process.execPath}" "${COO}" append --ledger "${gitdir}" --key "${keyFile}" "${envelope}"`, []);
    expect(result.status).toBe(1);
    expect(result.stderr).toMatch(/^coo: IO_ERROR: cannot create .*main\.lock: EROFS/);
    expect(result.stderr).not.toMatch(/\n\s+at /);
    expect(git(['--git-dir', gitdir, 'rev-parse', 'main']).trim()).toBe(head);
  });

  it('gives a clear error and leaves the ledger unchanged and valid when the disk is full', () => {
    const full = join(dir, 'full');
    mkdirSync(full, { recursive: true });
    const copy = join(full, 'ledger.git');
    const script = [
      `cp -a "${gitdir}" "${copy}"`,
      `rm -f "${copy}/coo/checkpoint.json"`,
      `head -c 100000000 /dev/zero > "${full}/fill" 2>/dev/null`,
      `"${process.execPath}" "${COO}" append --ledger "${copy}" --key "${keyFile}" "${envelope}"; echo "append=$?"`,
      `echo "head=$(git --git-dir "${copy}" rev-parse main)"`,
      `rm -f "${full}/fill"`,
      `"${process.execPath}" "${COO}" verify --ledger "${copy}" --no-checkpoint; echo "verify=$?"`,
    ].join('; ');
    const result = sandboxed(script, ['--size', String(2 * 1024 * 1024), '--tmpfs', full]);
    expect(result.stdout).toContain('append=1');
    expect(result.stderr).toMatch(/coo: IO_ERROR: .*ENOSPC/);
    expect(result.stdout).toContain(`head=${head}`);
    expect(result.stdout).toContain('verify=0');
  });
});
