import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { claimPath, messageFolder } from '../../src/ledger/layout.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { isoSeconds } from '../../src/util/time.js';
import { useKit, type Kit } from '../helpers/attack-kit.js';
import { dispatchEnvelope, messageFiles } from '../helpers/ledger.js';
import { git, gitEnv, run, tempDir } from '../helpers/tmp.js';

/**
 * The hook refuses a claim dated behind its clock (rules/clock.ts checkNotBehind) as it lands from
 * the writer that dated it: every writer through a remote publishes one commit per push. A push of
 * several commits is history moving (the commits a rolled-back main dropped, put back from a clone
 * as coo's own advice says; a main restored; a ledger moved to a new server): their entries were
 * dated when they were written, long before, and such a push must not be refused forever for it.
 */

const dir = tempDir('coo-attack-clock-behind-restore-');
const getKit = useKit(dir);
let kit: Kit;
beforeAll(() => {
  kit = getKit();
});

const HOUR = 3_600_000;

/** A dispatch written two hours ago and the claim a runner wrote on it an hour ago, both on main as they were written then. */
async function claimedAnHourAgo(): Promise<void> {
  const message = dispatchEnvelope({}, new Date(Date.now() - 2 * HOUR));
  expect(await kit.append(messageFiles(message), kit.keys.coo.key)).toBe('accepted');
  const doc = { schema_version: 'claim.v0', message_id: message.message_id, attempt_id: `ea_attempt_${message.message_id.slice(4)}_1`, attempt_number: 1, runner_id: 'earlier', transport_session_id: 'earlier', claimed_at: isoSeconds(new Date(Date.now() - HOUR)) };
  expect(await kit.append([{ path: claimPath(messageFolder(message.message_id, message.created_at), 1), bytes: Buffer.from(toYaml(doc)) }], kit.keys.coo.key)).toBe('accepted');
}

describe('history pushed back through the hook, its claims dated when they were written', () => {
  it('still refuses a claim an hour behind pushed alone, as a writer lands it', async () => {
    const message = dispatchEnvelope({}, new Date(Date.now() - 2 * HOUR));
    expect(await kit.append(messageFiles(message), kit.keys.coo.key)).toBe('accepted');
    const doc = { schema_version: 'claim.v0', message_id: message.message_id, attempt_id: `ea_attempt_${message.message_id.slice(4)}_1`, attempt_number: 1, runner_id: 'behind', transport_session_id: 'behind', claimed_at: isoSeconds(new Date(Date.now() - HOUR)) };
    const claim = claimPath(messageFolder(message.message_id, message.created_at), 1);
    expect(await kit.push({ [claim]: Buffer.from(toYaml(doc)) }, { key: kit.keys.coo.file })).toBe('CLOCK_SKEW');
  });

  it('the commits a rolled-back main dropped (a dispatch and its claim an hour old) are put back with git push, as the rollback advice says', async () => {
    const before = kit.head();
    await claimedAnHourAgo();
    const dropped = kit.head();
    const clone = join(dir, 'holder');
    git(['clone', '-q', '--bare', kit.world.gitdir, clone]);
    git(['--git-dir', kit.world.gitdir, 'update-ref', 'refs/heads/main', before]);
    const pushed = run('git', ['--git-dir', clone, 'push', kit.world.gitdir, `${dropped}:refs/heads/main`], { env: gitEnv() });
    expect(pushed.stderr).not.toMatch(/CLOCK_SKEW/);
    expect(pushed.status).toBe(0);
    expect(kit.head()).toBe(dropped);
  });

  it('a main that was deleted, restored from a verified clone whose history holds an hour-old claim, as the missing-main advice says', async () => {
    await claimedAnHourAgo();
    const held = kit.head();
    const clone = join(dir, 'verified');
    git(['clone', '-q', '--bare', kit.world.gitdir, clone]);
    git(['--git-dir', kit.world.gitdir, 'update-ref', '-d', 'refs/heads/main']);
    const pushed = run('git', ['--git-dir', clone, 'push', kit.world.gitdir, `${held}:refs/heads/main`], { env: gitEnv() });
    expect(pushed.stderr).not.toMatch(/CLOCK_SKEW/);
    expect(pushed.status).toBe(0);
    expect(kit.head()).toBe(held);
  });
});
