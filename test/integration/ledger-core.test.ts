import { existsSync, readFileSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { allowedSigners } from '../../src/audit/allowed-signers.js';
import { verifyLedger } from '../../src/audit/verify.js';
import { isCooError } from '../../src/errors.js';
import { PACK_CHECK_EVERY } from '../../src/ledger/ledger.js';
import { ObjectWriter, hashObject } from '../../src/ledger/object-store.js';
import { git, run, tempDir } from '../helpers/tmp.js';
import { T0, dispatchEnvelope, messageFiles, makeLedger } from '../helpers/ledger.js';

const dir = tempDir();

async function rejectionCode(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (error) {
    if (isCooError(error)) return error.code;
    throw error;
  }
  return 'accepted';
}

/** git's loose and packed object counts (`git count-objects -v`). */
function objectCounts(gitdir: string): { loose: number; packed: number } {
  const out = git(['--git-dir', gitdir, 'count-objects', '-v']);
  return { loose: Number(/^count: (\d+)$/m.exec(out)![1]), packed: Number(/^in-pack: (\d+)$/m.exec(out)![1]) };
}

describe('the signed ledger', () => {
  it('creates a ledger whose genesis stock git accepts, with Good signatures', async () => {
    const { gitdir, ledger } = await makeLedger(dir, undefined, 'genesis.git');
    const state = await ledger.state();
    expect(state.seq).toBe(1);
    expect(state.registry?.version).toBe(1);
    expect(state.policy?.version).toBe(1);
    expect(ledger.findings).toEqual([]);
    expect(git(['--git-dir', gitdir, 'fsck', '--strict'])).toBe('');
    const allowed = join(dir, 'allowed_signers');
    writeFileSync(allowed, allowedSigners(state));
    const verified = run('git', ['--git-dir', gitdir, '-c', 'gpg.format=ssh', '-c', `gpg.ssh.allowedSignersFile=${allowed}`, 'verify-commit', '-v', 'main']);
    expect(verified.status).toBe(0);
    expect(verified.stderr).toContain('Good "git" signature for ceo');
    ledger.close();
  });

  it('appends a COO-signed envelope as commit 2 and stock git sees its signature as Good', async () => {
    const { gitdir, actors, ledger } = await makeLedger(dir, undefined, 'append.git');
    const message = dispatchEnvelope();
    const result = await ledger.append({ files: [...messageFiles(message)], key: actors.coo, summary: 'dispatch', now: T0 });
    expect('commit' in result && result.seq).toBe(2);
    const state = await ledger.state();
    expect(state.messages.get(message.message_id)?.source).toBe('coo.hermes');
    const allowed = join(dir, 'allowed_signers_2');
    writeFileSync(allowed, allowedSigners(state));
    const log = run('git', ['--git-dir', gitdir, '-c', 'gpg.format=ssh', '-c', `gpg.ssh.allowedSignersFile=${allowed}`, 'log', '--format=%G? %GS %s']);
    expect(log.stdout.trim().split('\n')).toEqual([
      expect.stringMatching(/^G coo\.hermes dispatch$/),
      expect.stringMatching(/^G ceo genesis/),
    ]);
    ledger.close();
  });

  it('refuses an envelope claiming to be from the COO but signed by an EA key, and leaves the ref where it was', async () => {
    const { gitdir, actors, ledger } = await makeLedger(dir, undefined, 'spoof.git');
    const before = git(['--git-dir', gitdir, 'rev-parse', 'main']).trim();
    const code = await rejectionCode(ledger.append({ files: [...messageFiles(dispatchEnvelope())], key: actors.codex, summary: 'spoof', now: T0 }));
    expect(code).toBe('SIGNER_WRONG_ACTOR');
    expect(git(['--git-dir', gitdir, 'rev-parse', 'main']).trim()).toBe(before);
    ledger.close();
  });

  it(`asks git to pack its loose objects every ${PACK_CHECK_EVERY} commits, and leaves the head a loose ref`, async () => {
    const { gitdir, actors, ledger } = await makeLedger(dir, undefined, 'pack.git');
    // git packs once objects/17 holds more than gc.auto / 256 loose objects. With gc.auto at 1 and
    // two unreachable objects planted there, git's answer is yes whenever it is asked: what is
    // under test is that the writer asks, at the commits it should, and what packing leaves.
    git(['--git-dir', gitdir, 'config', 'gc.auto', '1']);
    const writer = new ObjectWriter(gitdir);
    const planted: string[] = [];
    for (let i = 0; planted.length < 2; i += 1) {
      const bytes = Buffer.from(`planted ${i}\n`);
      if (hashObject('blob', bytes).startsWith('17')) planted.push(await writer.write('blob', bytes));
    }
    const appendOne = () => ledger.append({ files: [...messageFiles(dispatchEnvelope())], key: actors.coo, summary: 'dispatch', now: T0 });
    for (let seq = 2; seq < PACK_CHECK_EVERY; seq += 1) await appendOne();
    expect(objectCounts(gitdir).packed).toBe(0);
    const last = await appendOne();
    expect('seq' in last && last.seq).toBe(PACK_CHECK_EVERY);
    // git gc runs apart from the writer; gc.pid is held until it is done.
    for (let i = 0; i < 2400 && (objectCounts(gitdir).packed === 0 || existsSync(join(gitdir, 'gc.pid'))); i += 1) await new Promise((resolve) => setTimeout(resolve, 25));
    const reachable = git(['--git-dir', gitdir, 'rev-list', '--objects', '--all']).trim().split('\n').length;
    expect(objectCounts(gitdir)).toEqual({ loose: 2, packed: reachable });
    for (const oid of planted) expect(git(['--git-dir', gitdir, 'cat-file', '-t', oid]).trim()).toBe('blob');
    const head = git(['--git-dir', gitdir, 'rev-parse', 'main']).trim();
    expect(readFileSync(join(gitdir, 'refs', 'heads', 'main'), 'utf8').trim()).toBe(head);
    expect(existsSync(join(gitdir, 'packed-refs'))).toBe(false);
    expect(git(['--git-dir', gitdir, 'fsck', '--strict', '--no-dangling'])).toBe('');
    const report = await verifyLedger(gitdir, { full: true });
    expect(report.findings).toEqual([]);
    expect(report.seq).toBe(PACK_CHECK_EVERY);
    const next = await appendOne();
    expect('seq' in next && next.seq).toBe(PACK_CHECK_EVERY + 1);
    ledger.close();
  }, 120_000);

  it('stores objects uncompressed, and freshens one it writes again, as git does, so that git gc does not prune it as old', async () => {
    const { gitdir, ledger } = await makeLedger(dir, undefined, 'freshen.git');
    ledger.close();
    const writer = new ObjectWriter(gitdir);
    const bytes = Buffer.from('written once, unreferenced, then needed again\n');
    const oid = await writer.write('blob', bytes);
    const path = join(gitdir, 'objects', oid.slice(0, 2), oid.slice(2));
    // Stored, not compressed, as the ledger's core.compression asks: the bytes sit in the file as they are.
    expect(readFileSync(path).includes(bytes)).toBe(true);
    expect(git(['--git-dir', gitdir, 'config', '--get', 'core.compression']).trim()).toBe('0');
    const longAgo = new Date('2020-01-01T00:00:00Z');
    utimesSync(path, longAgo, longAgo);
    expect(await writer.write('blob', bytes)).toBe(oid);
    git(['--git-dir', gitdir, 'prune', '--expire=2.weeks.ago']);
    expect(existsSync(path)).toBe(true);
  });
});
