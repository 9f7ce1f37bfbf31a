import { copyFileSync, existsSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { agentScript, dispatchTo, FIX, hostilePlaces, receiptsFor, watchOnce } from '../helpers/hostile-agent.js';
import { requireBubblewrap } from '../helpers/bubblewrap.js';
import { formatPrivateKey, generatePrivateKey } from '../../src/crypto/keys.js';
import { makeWorld, receiptsOf } from '../helpers/lane.js';
import { codeOfAsync } from '../helpers/codes.js';
import { laneState } from '../helpers/startup.js';
import { git, outsideTempDir, tempDir } from '../helpers/tmp.js';

/**
 * A careless operator deploying runners, round 57: one mistake at a time, each judged by what a
 * runner started so does with the queued work and the secrets it holds.
 */

const dir = tempDir('operator-redteam-57-');

/** The text the ledger's history holds, every commit's changes (receipts, their attached stderr). */
function ledgerText(gitdir: string): string {
  return git(['--git-dir', gitdir, 'log', '-p', '--all', '--format=%H']);
}

describe("a COO key in a folder the sandbox cannot hide: the home folder (~/coo.key), the target repository's git folder (.git/coo.key, where git never commits it)", () => {
  const places = hostilePlaces(join(dir, 'places'), 'key');
  const outside = outsideTempDir('operator-redteam-57-');

  it("is hidden from the dispatch's sandbox all the same: the agent cannot read it, and the dispatch still runs (before, the agent read the key: the home folder is never hidden, and the git folder is bound back read-only)", { timeout: 180_000 }, async () => {
    requireBubblewrap('hiding the key from the sandbox');
    for (const where of ['home', 'git-folder', 'linked-into-git-folder'] as const) {
      const place = await places(where);
      // A home folder outside the shared temporary folders, which every sandbox empties anyway.
      const home = join(outside, `home-${where}`);
      mkdirSync(home, { recursive: true, mode: 0o700 });
      const kept = where === 'home' ? join(home, 'coo.key') : join(place.repo, '.git', 'coo.key');
      copyFileSync(place.keyFile, kept);
      // Given as it lies, or through a link elsewhere that names it there.
      const keyFile = where === 'linked-into-git-folder' ? join(place.world.dir, 'coo-key-link') : kept;
      if (keyFile !== kept) symlinkSync(kept, keyFile);
      const id = (await dispatchTo(place, `key-${where}`)).messageId;
      const agent = agentScript(place.world.dir, `if sum=$(sha256sum < '${kept}' 2>/dev/null) && [ -s '${kept}' ]; then echo "KEY READ $sum" >&2; else echo "KEY HIDDEN" >&2; fi; ${FIX}`);
      const run = watchOnce({ ...place, keyFile }, agent, { isolation: 'auto', env: { HOME: home } });
      expect(run.status, run.stderr).toBe(0);
      const receipts = await receiptsFor(place, id);
      expect(receipts.map((receipt) => receipt['status']), run.stderr).toEqual(['succeeded']);
      const history = ledgerText(place.world.gitdir);
      expect(history, where).toContain('KEY HIDDEN');
      expect(history, where).not.toContain('KEY READ');
    }
  });
});

describe("a state folder a sandbox sees: the target repository's git folder (--state-dir REPO/.git), the home folder (--state-dir ~)", () => {
  const places = hostilePlaces(join(dir, 'places'), 'state');

  it("leaves the dispatch queued and unclaimed, said at start (before, the agent ran with the state folder in sight: the runners' records, the other attempts); a folder inside it runs the dispatch, hidden", { timeout: 180_000 }, async () => {
    requireBubblewrap('hiding the state folder from the sandbox');
    const place = await places('git-folder');
    const id = (await dispatchTo(place, 'state-git-folder')).messageId;
    const look = (stateDir: string): string => agentScript(place.world.dir, `if [ -e '${join(stateDir, 'holders')}' ]; then echo "STATE SEEN" >&2; else echo "STATE HIDDEN" >&2; fi; ${FIX}`);
    const gitFolder = join(place.repo, '.git');
    const before = git(['--git-dir', place.world.gitdir, 'rev-parse', 'main']);
    const refused = watchOnce({ ...place, stateDir: gitFolder }, look(gitFolder), { isolation: 'auto' });
    expect(refused.stderr).toContain(`coo watch: dispatches to ea.codex wait, queued and unclaimed: the runner's state folder ${gitFolder} is the git folder of --repo ${place.repo}, which every dispatch's sandbox reads`);
    expect(refused.stdout).not.toContain('"claimed"');
    expect(laneState(place.world, id)).toBe('queued');
    expect(git(['--git-dir', place.world.gitdir, 'rev-parse', 'main'])).toBe(before);
    expect(existsSync(join(gitFolder, 'dispatch'))).toBe(false);
    // So does the home folder, which no sandbox hides (a home outside the shared temporary folders, which every sandbox empties).
    const home = join(outsideTempDir('operator-redteam-57-home-'), 'home');
    mkdirSync(home, { mode: 0o700 });
    const atHome = watchOnce({ ...place, stateDir: home }, look(home), { isolation: 'auto', env: { HOME: home } });
    expect(atHome.stderr).toContain(`coo watch: dispatches to ea.codex wait, queued and unclaimed: the runner's state folder ${home} is the home folder, which no sandbox hides`);
    expect(atHome.stdout).not.toContain('"claimed"');
    expect(laneState(place.world, id)).toBe('queued');
    expect(existsSync(join(home, 'dispatch'))).toBe(false);
    // A folder of its own inside the git folder is hidden from the sandbox as any state folder is: the dispatch runs.
    const inside = join(gitFolder, 'coo-state');
    const run = watchOnce({ ...place, stateDir: inside }, look(inside), { isolation: 'auto' });
    expect(run.status, run.stderr).toBe(0);
    expect((await receiptsFor(place, id)).map((receipt) => receipt['status']), run.stderr).toEqual(['succeeded']);
    const history = ledgerText(place.world.gitdir);
    expect(history).toContain('STATE HIDDEN');
    expect(history).not.toContain('STATE SEEN');
  });
});

describe("a COO key committed to the target repository (the key file linked into it, then added with the rest)", () => {
  it("is never sent to the provider: a consult pinning it ends failed config_error, unpaid, naming the file (before, the key went to the model); a repository's own test key is sent as before", { timeout: 180_000 }, async () => {
    const world = await makeWorld(join(dir, 'committed'));
    try {
      const pem = formatPrivateKey(world.actors.coo);
      const fixture = formatPrivateKey(generatePrivateKey('a test key of the repository'));
      mkdirSync(join(world.target, 'keys'));
      writeFileSync(join(world.target, 'keys', 'coo.key'), pem);
      writeFileSync(join(world.target, 'keys', 'fixture.key'), fixture);
      git(['add', '-A'], { cwd: world.target });
      git(['commit', '-q', '-m', 'keys'], { cwd: world.target });
      const leaking = (await world.consult({ patterns: ['keys/coo.key', 'src/add.ts'] })).messageId;
      const fixtureOnly = (await world.consult({ patterns: ['keys/fixture.key', 'src/add.ts'], question: 'Is this test key used anywhere?' })).messageId;
      await world.runner().runOnce();
      const refused = (await receiptsOf(world, leaking))[0]!;
      expect(refused['status']).toBe('failed');
      expect(JSON.stringify(refused['blockers'])).toContain('the context pins keys/coo.key, which holds a secret this runner holds');
      expect(refused['actual_cost_usd'] ?? 0).toBe(0);
      const sent = JSON.stringify(world.server.requests);
      // Its lines past the first, which every ed25519 key in this format begins alike.
      const lines = pem.trim().split('\n').slice(2, -1);
      expect(lines.length).toBeGreaterThan(2);
      for (const line of lines) expect(sent).not.toContain(line);
      // The other consult, pinning a key that is no secret of the runner's, is sent and answered.
      expect((await receiptsOf(world, fixtureOnly)).map((receipt) => receipt['status'])).toEqual(['succeeded']);
      expect(world.server.requests).toHaveLength(1);
    } finally {
      await world.close();
    }
  });
});

describe('a --repo that is a checkout of the ledger (git clone LEDGER), not the repository the work is for', () => {
  const places = hostilePlaces(join(dir, 'places'), 'copy');

  it('is refused at start (RUNNER_CONFIG, exit 2) saying what it is, nothing claimed (before, the runner started and every queued message waited there, told to fetch, until it expired); a writer given it writes nothing (USAGE)', { timeout: 180_000 }, async () => {
    const place = await places('checkout');
    const id = (await dispatchTo(place, 'ledger-copy')).messageId;
    const checkout = join(place.world.dir, 'ledger-checkout');
    git(['clone', '-q', place.world.gitdir, checkout]);
    const before = git(['--git-dir', place.world.gitdir, 'rev-parse', 'main']);
    const run = watchOnce({ ...place, repo: checkout }, agentScript(place.world.dir, FIX), { isolation: 'auto' });
    expect(run.status, run.stderr).toBe(2);
    expect(run.stdout).toContain('RUNNER_CONFIG');
    expect(run.stdout).toContain(`--repo ${checkout} is a copy of the ledger ${place.world.gitdir}`);
    expect(run.stdout).not.toContain('"claimed"');
    expect(laneState(place.world, id)).toBe('queued');
    expect(git(['--git-dir', place.world.gitdir, 'rev-parse', 'main'])).toBe(before);
    // A writer given it pins nothing there: the message would wait in every runner until it expired.
    const seq = git(['--git-dir', place.world.gitdir, 'rev-parse', 'main']);
    expect(await codeOfAsync(() => place.world.consult({ repo: checkout, patterns: ['README.md'] }))).toBe('USAGE');
    expect(await codeOfAsync(() => dispatchTo({ ...place, repo: checkout }, 'ledger-copy-writer'))).toBe('USAGE');
    expect(git(['--git-dir', place.world.gitdir, 'rev-parse', 'main'])).toBe(seq);
    // The repository the work is for runs it.
    const ran = watchOnce(place, agentScript(place.world.dir, FIX), { isolation: 'auto' });
    expect((await receiptsFor(place, id)).map((receipt) => receipt['status']), ran.stderr).toEqual(['succeeded']);
  });
});
