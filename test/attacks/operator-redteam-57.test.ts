import { createPrivateKey } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { agentScript, dispatchTo, FIX, hostilePlaces, receiptsFor, watchOnce } from '../helpers/hostile-agent.js';
import { requireBubblewrap } from '../helpers/bubblewrap.js';
import { formatPrivateKey, generatePrivateKey } from '../../src/crypto/keys.js';
import { makeWorld, offlineEndpoints, receiptsOf } from '../helpers/lane.js';
import { holdsHeldSecret, sentSecretIn, sentSecrets } from '../../src/util/held-secrets.js';
import { environmentSecrets, privateKeySecrets, Scrubber } from '../../src/util/scrub.js';
import { codeOfAsync } from '../helpers/codes.js';
import { executorFactory } from '../../src/dispatch/executors.js';
import { isLedgerCommit, resolveWorkCommit } from '../../src/lane/work-repo.js';
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

  it("is hidden from the dispatch's sandbox all the same: the agent cannot read it, and the dispatch still runs (before, the agent read the key: the home folder is never hidden, and the git folder is bound back read-only); the start says the file alone is hidden, so a key renamed over it later (coo keygen --force) would not be, and where to keep it", { timeout: 180_000 }, async () => {
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
      // Hidden as a file, not as a folder: a key renamed over it while a sandbox runs (coo keygen --force) would be read there. Said at start.
      expect(run.stderr, where).toContain(`coo watch: the COO key ${keyFile} is in ${where === 'home' ? home : join(place.repo, '.git')}, ${where === 'home' ? 'the home folder or one holding it' : "the target repository's git folder, which every dispatch's sandbox reads"}, which no sandbox hides whole`);
      expect(run.stderr, where).toContain('keep the key in a folder of its own');
      const receipts = await receiptsFor(place, id);
      expect(receipts.map((receipt) => receipt['status']), run.stderr).toEqual(['succeeded']);
      const history = ledgerText(place.world.gitdir);
      expect(history, where).toContain('KEY HIDDEN');
      expect(history, where).not.toContain('KEY READ');
    }
    // A key in a folder of its own is hidden with its folder: nothing to say.
    const place = await places('own-folder');
    const id = (await dispatchTo(place, 'key-own-folder')).messageId;
    const run = watchOnce(place, agentScript(place.world.dir, FIX), { isolation: 'auto' });
    expect((await receiptsFor(place, id)).map((receipt) => receipt['status']), run.stderr).toEqual(['succeeded']);
    expect(run.stderr).not.toContain('which no sandbox hides whole');
  });

  it("in a folder of its own inside the git folder (.git/keys/coo.key) is hidden with that folder whole: the agent reads neither the key nor a file beside it (coo keygen --force's temporary key), and the start says nothing of it (before, it warned that no sandbox hides the folder)", { timeout: 180_000 }, async () => {
    requireBubblewrap('hiding the key from the sandbox');
    const place = await places('git-subfolder');
    const keys = join(place.repo, '.git', 'keys');
    const kept = join(keys, 'coo.key');
    mkdirSync(keys, { mode: 0o700 });
    copyFileSync(place.keyFile, kept);
    // What coo keygen --force leaves beside the key while it writes a new one.
    copyFileSync(place.keyFile, join(keys, 'coo.key.4242.tmp'));
    const id = (await dispatchTo(place, 'key-git-subfolder')).messageId;
    const agent = agentScript(place.world.dir, `for f in '${kept}' '${keys}/coo.key.4242.tmp'; do if [ -s "$f" ]; then echo "KEY READ $f" >&2; fi; done; echo "LOOKED" >&2; ${FIX}`);
    const run = watchOnce({ ...place, keyFile: kept }, agent, { isolation: 'auto' });
    expect(run.status, run.stderr).toBe(0);
    expect((await receiptsFor(place, id)).map((receipt) => receipt['status']), run.stderr).toEqual(['succeeded']);
    const history = ledgerText(place.world.gitdir);
    expect(history).toContain('LOOKED');
    expect(history).not.toContain('KEY READ');
    expect(run.stderr).not.toContain('which no sandbox hides whole');
  });
});

describe("a state folder a sandbox sees: the target repository's git folder (--state-dir REPO/.git), the home folder (--state-dir ~), one holding it, the root", () => {
  const places = hostilePlaces(join(dir, 'places'), 'state');

  it("the git folder leaves the dispatch queued and unclaimed, said at start (before, the agent ran with the state folder in sight: the runners' records, the other attempts), a folder inside it runs the dispatch, hidden, and under --isolation none there is no wait; the home folder, one holding it or the root is refused at start, exit 2", { timeout: 180_000 }, async () => {
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
    // The home folder, one holding it, or the root, no sandbox on this machine hides (this runner's nor another's): refused at start for
    // every lane, exit 2 (before, a consult runner started there, and another runner's agents read its state folder whole; the root was not even seen).
    const outside = outsideTempDir('operator-redteam-57-home-');
    const home = join(outside, 'home');
    mkdirSync(home, { mode: 0o700 });
    for (const [stateDir, what] of [[home, 'the home folder'], [outside, `a folder that holds the home folder ${home}`], ['/', 'the root folder']] as const) {
      const atHome = watchOnce({ ...place, stateDir }, look(stateDir), { isolation: 'auto', env: { HOME: home } });
      expect(atHome.status, atHome.stderr).toBe(2);
      expect(atHome.stdout).toContain('RUNNER_CONFIG');
      expect(atHome.stdout).toContain(`the runner's state folder ${stateDir} is ${what}, which no sandbox on this machine hides`);
      expect(atHome.stdout).not.toContain('"claimed"');
      expect(laneState(place.world, id)).toBe('queued');
      expect(existsSync(join(stateDir, 'dispatch'))).toBe(false);
      expect(existsSync(join(stateDir, 'holders'))).toBe(false);
    }
    // A folder of its own inside the git folder is hidden from the sandbox as any state folder is: the dispatch runs.
    const inside = join(gitFolder, 'coo-state');
    const run = watchOnce({ ...place, stateDir: inside }, look(inside), { isolation: 'auto' });
    expect(run.status, run.stderr).toBe(0);
    expect((await receiptsFor(place, id)).map((receipt) => receipt['status']), run.stderr).toEqual(['succeeded']);
    const history = ledgerText(place.world.gitdir);
    expect(history).toContain('STATE HIDDEN');
    expect(history).not.toContain('STATE SEEN');
    // Under --isolation none nothing is hidden from any agent, which every receipt says: the git folder's wait would protect nothing, and is not made.
    const unsandboxed = (await dispatchTo(place, 'state-git-folder-none')).messageId;
    const none = watchOnce({ ...place, stateDir: gitFolder }, agentScript(place.world.dir, FIX), { isolation: 'none' });
    expect(none.stderr).not.toContain('dispatches to ea.codex wait');
    const [receipt] = await receiptsFor(place, unsandboxed);
    expect(receipt?.['status'], none.stderr).toBe('succeeded');
    expect(JSON.stringify(receipt)).toContain('sandbox_unenforced');
  });
});

describe('a --state-dir refused at start (the home folder)', () => {
  const places = hostilePlaces(join(dir, 'refused-places'), 'refused');

  it("is not recorded as a runner's private folder, which every sandbox on the machine would hide (before, coo watch recorded it before its start refused it, and it stayed in the list); a state folder whose start passes is recorded", { timeout: 180_000 }, async () => {
    const place = await places('private-list');
    const outside = outsideTempDir('operator-redteam-57-list-');
    const home = join(outside, 'home');
    const xdg = join(outside, 'xdg');
    mkdirSync(home, { mode: 0o700 });
    const env = { HOME: home, XDG_STATE_HOME: xdg };
    const list = join(xdg, 'coo-commons', 'private-folders');
    const listed = (): string => (existsSync(list) ? readFileSync(list, 'utf8') : '');
    const refused = watchOnce({ ...place, stateDir: home }, agentScript(place.world.dir, FIX), { isolation: 'none', env });
    expect(refused.status, refused.stderr).toBe(2);
    expect(refused.stdout).toContain(`the runner's state folder ${home} is the home folder, which no sandbox on this machine hides`);
    expect(listed()).not.toContain(JSON.stringify(home));
    const started = watchOnce(place, agentScript(place.world.dir, FIX), { isolation: 'none', env });
    expect(started.status, started.stderr).toBe(0);
    expect(listed().split('\n')).toContain(JSON.stringify(place.stateDir));
    expect(listed()).not.toContain(JSON.stringify(home));
  });
});

describe('a COO key committed to the target repository (the key file copied into it, then added and committed with the rest)', () => {
  it("is never sent to the provider: a consult pinning it ends failed config_error, unpaid, naming the file and the kind of secret (before, the key went to the model); a repository's own test key is sent as before", { timeout: 180_000 }, async () => {
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
      expect(JSON.stringify(refused['blockers'])).toContain("the context pins keys/coo.key, which holds this runner's COO signing key (its --key)");
      expect(refused).toHaveProperty('actual_cost_usd', 0);
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

describe("a repository's files that hold what the runner's environment holds, but no secret the runner would hand over", () => {
  // A provider key of the length providers give (made up for this test, never a real one).
  const providerKey = `sk-proj-${'Zq8xW3vB7nM2kL9pR4tY6uI1oA5sD0fG'.repeat(2)}`;

  afterEach(() => {
    vi.unstubAllEnvs();
  });

  it("are sent (before, PGPASSWORD=postgres refused a docker-compose.yml naming postgres:16, a Docker image's GPG_KEY its Dockerfile, a base64 test key, a file ending in OPENAI_API_KEY=sk-proj-); a provider key the route sends is refused by its variable's name, never its value; a runner that cannot route the consult leaves it queued for one that can", { timeout: 180_000 }, async () => {
    const world = await makeWorld(join(dir, 'honest'));
    try {
      vi.stubEnv('PGPASSWORD', 'postgres');
      vi.stubEnv('GPG_KEY', 'A035C8C19219BA821ECEA86B64E628F8D684696D');
      const testKey = formatPrivateKey(generatePrivateKey('a test key of the repository'));
      mkdirSync(join(world.target, 'deploy'));
      writeFileSync(join(world.target, 'deploy', 'docker-compose.yml'), 'services:\n  db:\n    image: postgres:16\n');
      writeFileSync(join(world.target, 'deploy', 'Dockerfile'), 'FROM python:3.12\nENV GPG_KEY A035C8C19219BA821ECEA86B64E628F8D684696D\n');
      writeFileSync(join(world.target, 'deploy', 'tls.yaml'), `apiVersion: v1\nkind: Secret\ndata:\n  tls.key: ${Buffer.from(testKey).toString('base64')}\n`);
      writeFileSync(join(world.target, 'deploy', 'env.example'), 'OPENAI_API_KEY=sk-proj-');
      writeFileSync(join(world.target, 'deploy', 'env.leaked'), `OPENAI_API_KEY=${providerKey}\n`);
      writeFileSync(join(world.target, 'deploy', 'coo.key'), formatPrivateKey(world.actors.coo));
      git(['add', '-A'], { cwd: world.target });
      git(['commit', '-q', '-m', 'deploy'], { cwd: world.target });
      const honest = (await world.consult({ patterns: ['deploy/docker-compose.yml', 'deploy/Dockerfile', 'deploy/tls.yaml', 'deploy/env.example'] })).messageId;
      const leaking = (await world.consult({ patterns: ['deploy/env.leaked', 'src/add.ts'] })).messageId;
      const signingKey = (await world.consult({ patterns: ['deploy/coo.key'] })).messageId;
      const env = { OPENAI_API_KEY: providerKey, ANTHROPIC_API_KEY: 'sk-ant-test-key', GEMINI_API_KEY: 'gemini-test-key' };
      // A runner without the route's key cannot run any: all stay queued, unclaimed, none failed here (before, the one pinning the COO key was).
      await world.runner({ transport: world.transport({ env: {} }) }).runOnce();
      for (const id of [honest, leaking, signingKey]) expect(await receiptsOf(world, id)).toEqual([]);
      await world.runner({ transport: world.transport({ env }) }).runOnce();
      expect((await receiptsOf(world, honest)).map((receipt) => receipt['status'])).toEqual(['succeeded']);
      const refused = (await receiptsOf(world, leaking))[0]!;
      expect(refused['status']).toBe('failed');
      const said = JSON.stringify(refused['blockers']);
      expect(said).toContain("the context pins deploy/env.leaked, which holds the credential this runner holds as OPENAI_API_KEY: committed");
      expect(refused).toHaveProperty('actual_cost_usd', 0);
      expect((await receiptsOf(world, signingKey)).map((receipt) => [receipt['status'], JSON.stringify(receipt['blockers']).includes("this runner's COO signing key")])).toEqual([['failed', true]]);
      expect(world.server.requests).toHaveLength(1);
      expect(JSON.stringify(world.server.requests)).toContain('image: postgres:16');
    } finally {
      await world.close();
    }
  });
});

describe("a committed .env holding a secret the runner was given that no consult route sends: its forge token, an executor's provider key", () => {
  // Made up for this test, never a real token or key.
  const forgeToken = `ghp_${'Zq8xW3vB7nM2kL9pR4tY6uI1oA5sD0fG'.slice(0, 36)}`;
  const executorKey = `sk-ant-api03-${'Qw3eR5tY7uI9oP1aS3dF5gH7jK9lZ2x'.repeat(2)}`;

  afterEach(() => {
    vi.unstubAllEnvs();
  });

  it("is never sent to the provider: the consult ends failed config_error, unpaid, naming the kind of secret, never its value (before, only the COO key and the routes' keys counted, and the forge token went to the model); PGPASSWORD=postgres and a GPG_KEY are still sent", { timeout: 180_000 }, async () => {
    const world = await makeWorld(join(dir, 'given'));
    try {
      vi.stubEnv('PGPASSWORD', 'postgres');
      vi.stubEnv('GPG_KEY', 'A035C8C19219BA821ECEA86B64E628F8D684696D');
      vi.stubEnv('ANTHROPIC_API_KEY', executorKey);
      writeFileSync(join(world.target, '.env'), `GITHUB_TOKEN=${forgeToken}\n`);
      writeFileSync(join(world.target, '.env.ea'), `ANTHROPIC_API_KEY=${executorKey}\n`);
      writeFileSync(join(world.target, 'Dockerfile'), 'FROM postgres:16\nENV GPG_KEY A035C8C19219BA821ECEA86B64E628F8D684696D\n');
      git(['add', '-A'], { cwd: world.target });
      git(['commit', '-q', '-m', 'env'], { cwd: world.target });
      const forge = (await world.consult({ patterns: ['.env', 'src/add.ts'] })).messageId;
      const executor = (await world.consult({ patterns: ['.env.ea'] })).messageId;
      const honest = (await world.consult({ patterns: ['Dockerfile'] })).messageId;
      await world.runner({ pullRequests: { token: forgeToken, base: 'main' } }).runOnce();
      const refused = (await receiptsOf(world, forge))[0]!;
      expect(refused['status']).toBe('failed');
      expect(refused['blockers']).toMatchObject([{ code: 'config_error' }]);
      expect(refused).toHaveProperty('actual_cost_usd', 0);
      expect(JSON.stringify(refused['blockers'])).toContain('the context pins .env, which holds the credential this runner holds as forge token: committed');
      const byExecutor = (await receiptsOf(world, executor))[0]!;
      expect(JSON.stringify(byExecutor['blockers'])).toContain('the context pins .env.ea, which holds the credential this runner holds as ANTHROPIC_API_KEY: committed');
      expect((await receiptsOf(world, honest)).map((receipt) => receipt['status'])).toEqual(['succeeded']);
      expect(world.server.requests).toHaveLength(1);
      const sent = JSON.stringify(world.server.requests);
      expect(sent).toContain('FROM postgres:16');
      expect(sent).not.toContain(forgeToken);
      expect(sent).not.toContain(executorKey);
    } finally {
      await world.close();
    }
  });
});

describe("an endpoint URL given with a query the runner's routes send (--oracle-base-url https://gw/v1?api-version=2024-08-01-preview)", () => {
  it("refuses no file for the query's plain fields, only for its secret ones: a pinned config saying api_version=\"2024-08-01-preview\" is sent (before, it was refused as endpoint credentials), one holding the URL's key= is refused", { timeout: 180_000 }, async () => {
    const world = await makeWorld(join(dir, 'endpoint-query'));
    try {
      // Made up for this test, never a real key.
      const endpointKey = 'AIzaSyTestKey0123456789abcdefghijklmn';
      writeFileSync(join(world.target, 'settings.py'), 'api_version = "2024-08-01-preview"\n');
      writeFileSync(join(world.target, 'gateway.txt'), `key=${endpointKey}\n`);
      git(['add', '-A'], { cwd: world.target });
      git(['commit', '-q', '-m', 'settings'], { cwd: world.target });
      const plain = (await world.consult({ patterns: ['settings.py'] })).messageId;
      const keyed = (await world.consult({ patterns: ['gateway.txt'] })).messageId;
      const endpoints = { ...offlineEndpoints(world.server), google: `${world.server.url}/v1beta?api-version=2024-08-01-preview&key=${endpointKey}` };
      await world.runner({ transport: world.transport({ endpoints }) }).runOnce();
      expect((await receiptsOf(world, plain)).map((receipt) => receipt['status'])).toEqual(['succeeded']);
      const refused = (await receiptsOf(world, keyed))[0]!;
      expect(refused['status']).toBe('failed');
      expect(JSON.stringify(refused['blockers'])).toContain('the context pins gateway.txt, which holds the credential this runner holds as endpoint credentials: committed');
      expect(world.server.requests).toHaveLength(1);
      expect(JSON.stringify(world.server.requests)).not.toContain(endpointKey);
    } finally {
      await world.close();
    }
  });
});

describe("a URL with credentials in a variable the runner does not use (DATABASE_URL=postgres://postgres:postgres@localhost/app)", () => {
  afterEach(() => {
    vi.unstubAllEnvs();
  });

  it("refuses no pinned file repeating them, as the variable's other values (before, a docker-compose.yml with the same URL was refused as DATABASE_URL); a proxy's, which the runner's git and clients use, still refuses one", { timeout: 180_000 }, async () => {
    const world = await makeWorld(join(dir, 'env-url'));
    try {
      // Made up for this test, never a real password.
      const proxyPassword = 'proxyPassw0rd0123456789abcdefXYZ';
      vi.stubEnv('DATABASE_URL', 'postgres://postgres:postgres@localhost/app');
      vi.stubEnv('HTTPS_PROXY', `http://coo:${proxyPassword}@proxy.example.invalid:3128`);
      writeFileSync(join(world.target, 'docker-compose.yml'), 'services:\n  app:\n    environment:\n      DATABASE_URL: postgres://postgres:postgres@localhost/app\n');
      writeFileSync(join(world.target, 'proxy.env'), `HTTPS_PROXY=http://coo:${proxyPassword}@proxy.example.invalid:3128\n`);
      git(['add', '-A'], { cwd: world.target });
      git(['commit', '-q', '-m', 'compose'], { cwd: world.target });
      const compose = (await world.consult({ patterns: ['docker-compose.yml'] })).messageId;
      const proxied = (await world.consult({ patterns: ['proxy.env'] })).messageId;
      await world.runner().runOnce();
      expect((await receiptsOf(world, compose)).map((receipt) => receipt['status'])).toEqual(['succeeded']);
      const refused = (await receiptsOf(world, proxied))[0]!;
      expect(refused['status']).toBe('failed');
      expect(JSON.stringify(refused['blockers'])).toContain('the context pins proxy.env, which holds the credential this runner holds as HTTPS_PROXY: committed');
      expect(world.server.requests).toHaveLength(1);
      expect(JSON.stringify(world.server.requests)).toContain('postgres://postgres:postgres@localhost/app');
      expect(JSON.stringify(world.server.requests)).not.toContain(proxyPassword);
    } finally {
      await world.close();
    }
  });
});

describe("an endpoint URL whose key is a query field no secret's name (--oracle-base-url https://fn.azurewebsites.net/api/v1?code=KEY, an Azure Functions key)", () => {
  it("refuses a pinned file holding the key, as any query value of a URL the runner sends to but api-version's (before, only fields named like secrets counted, and a committed copy of the code= key was sent)", { timeout: 180_000 }, async () => {
    const world = await makeWorld(join(dir, 'endpoint-code'));
    try {
      // Made up for this test, never a real key.
      const functionKey = 'azFnKey0123456789abcdefghijKLMNOP';
      writeFileSync(join(world.target, 'settings.py'), 'api_version = "2024-08-01-preview"\n');
      writeFileSync(join(world.target, 'function.txt'), `FUNCTION_URL=https://fn.azurewebsites.net/api/v1?code=${functionKey}\n`);
      git(['add', '-A'], { cwd: world.target });
      git(['commit', '-q', '-m', 'function'], { cwd: world.target });
      const plain = (await world.consult({ patterns: ['settings.py'] })).messageId;
      const keyed = (await world.consult({ patterns: ['function.txt'] })).messageId;
      const endpoints = { ...offlineEndpoints(world.server), google: `${world.server.url}/v1beta?api-version=2024-08-01-preview&code=${functionKey}` };
      await world.runner({ transport: world.transport({ endpoints }) }).runOnce();
      expect((await receiptsOf(world, plain)).map((receipt) => receipt['status'])).toEqual(['succeeded']);
      const refused = (await receiptsOf(world, keyed))[0]!;
      expect(refused['status']).toBe('failed');
      expect(JSON.stringify(refused['blockers'])).toContain('the context pins function.txt, which holds the credential this runner holds as endpoint credentials: committed');
      expect(world.server.requests).toHaveLength(1);
      expect(JSON.stringify(world.server.requests)).not.toContain(functionKey);
    } finally {
      await world.close();
    }
  });
});

describe("an execution agent's base URL with credentials (--ea-base-url https://coo:TOKEN@gw/v1, ?key=)", () => {
  it("is a secret the runner holds from its start: a consult pinning a committed file holding the URL's token or key ends failed config_error, unsent, naming the kind, never the value (before, only a dispatch's scrubber knew them, and the consult sent them to the provider)", { timeout: 180_000 }, async () => {
    const world = await makeWorld(join(dir, 'ea-base-url'));
    try {
      // Made up for this test, never real credentials.
      const token = 'eaGatewayToken0123456789abcdefXYZ';
      const key = 'eaGatewayQueryKey9876543210zyxwvu';
      writeFileSync(join(world.target, 'gateway.env'), `GATEWAY=https://coo:${token}@gw.example.invalid/v1\n`);
      writeFileSync(join(world.target, 'query.txt'), `key=${key}\n`);
      git(['add', '-A'], { cwd: world.target });
      git(['commit', '-q', '-m', 'gateway'], { cwd: world.target });
      const userinfo = (await world.consult({ patterns: ['gateway.env'] })).messageId;
      const queried = (await world.consult({ patterns: ['query.txt'] })).messageId;
      const executors = executorFactory({ hide: [], baseUrl: `https://coo:${token}@gw.example.invalid/v1?key=${key}` });
      await world.runner({ executors }).runOnce();
      for (const [id, file] of [[userinfo, 'gateway.env'], [queried, 'query.txt']] as const) {
        const receipt = (await receiptsOf(world, id))[0]!;
        expect(receipt['status']).toBe('failed');
        expect(JSON.stringify(receipt['blockers'])).toContain(`the context pins ${file}, which holds the credential this runner holds as ea base URL credentials`);
      }
      expect(world.server.requests).toHaveLength(0);
      expect(ledgerText(world.gitdir)).not.toContain(token);
      expect(ledgerText(world.gitdir)).not.toContain(key);
    } finally {
      await world.close();
    }
  });
});

describe('the two meanings of "holds a secret" (src/util/held-secrets.ts), by who wrote the text', () => {
  it("an agent's or a client's text is refused for all the scrubber removes; a repository's pinned file only for what the runner would hand over, found whole", () => {
    const coo = generatePrivateKey('coo key of this test');
    const pkcs8 = createPrivateKey({ key: { kty: 'OKP', crv: 'Ed25519', d: Buffer.from(coo.seed).toString('base64url'), x: Buffer.from(coo.publicKey.bytes).toString('base64url') }, format: 'jwk' });
    const providerKey = `sk-proj-${'Zq8xW3vB7nM2kL9pR4tY6uI1oA5sD0fG'.repeat(2)}`;
    const held = [...environmentSecrets({ PGPASSWORD: 'postgres', GPG_KEY: 'A035C8C19219BA821ECEA86B64E628F8D684696D', OPENAI_API_KEY: providerKey }), ...privateKeySecrets(coo)];
    const wide = new Scrubber(held);
    const sent = sentSecrets(coo, [{ name: 'OPENAI_API_KEY', value: providerKey }]);
    const testKey = formatPrivateKey(generatePrivateKey('a test key'));
    const onlyWide = ['image: postgres:16\n', 'ENV GPG_KEY A035C8C19219BA821ECEA86B64E628F8D684696D\n', testKey, `tls.key: ${Buffer.from(testKey).toString('base64')}\n`, 'OPENAI_API_KEY=sk-proj-'];
    for (const text of onlyWide) {
      expect(holdsHeldSecret(wide, Buffer.from(text)), text).toBe(true);
      expect(sentSecretIn(sent, Buffer.from(text)), text).toBeNull();
    }
    const both: Array<[string, string]> = [
      [formatPrivateKey(coo), 'coo key'],
      [Buffer.from(formatPrivateKey(coo)).toString('base64'), 'coo key'],
      // The same key in the forms other tools write it: PKCS #8 PEM (openssl), its DER in base64, a JWK's d.
      [pkcs8.export({ type: 'pkcs8', format: 'pem' }).toString(), 'coo key'],
      [`key_der: ${(pkcs8.export({ type: 'pkcs8', format: 'der' })).toString('base64')}\n`, 'coo key'],
      [JSON.stringify(pkcs8.export({ format: 'jwk' })), 'coo key'],
      [`OPENAI_API_KEY=${providerKey}\n`, 'OPENAI_API_KEY'],
    ];
    for (const [text, name] of both) {
      expect(holdsHeldSecret(wide, Buffer.from(text)), text).toBe(true);
      expect(sentSecretIn(sent, Buffer.from(text)), text).toBe(name);
    }
    // A short provider key (a local gateway's) is a word, not a credential: the repository's files are not refused for it.
    expect(sentSecretIn(sentSecrets(coo, [{ name: 'OPENAI_API_KEY', value: 'sk-local' }]), Buffer.from('key: sk-local\n'))).toBeNull();
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
    const copyOfLedger = `--repo ${checkout} is a copy of the ledger ${place.world.gitdir}`;
    expect(await codeOfAsync(() => place.world.consult({ repo: checkout, patterns: ['README.md'] }))).toBe('USAGE');
    await expect(place.world.consult({ repo: checkout, patterns: ['README.md'] })).rejects.toThrow(copyOfLedger);
    expect(await codeOfAsync(() => dispatchTo({ ...place, repo: checkout }, 'ledger-copy-writer'))).toBe('USAGE');
    await expect(dispatchTo({ ...place, repo: checkout }, 'ledger-copy-writer')).rejects.toThrow(copyOfLedger);
    expect(git(['--git-dir', place.world.gitdir, 'rev-parse', 'main'])).toBe(seq);
    // The repository the work is for runs it.
    const ran = watchOnce(place, agentScript(place.world.dir, FIX), { isolation: 'auto' });
    expect((await receiptsFor(place, id)).map((receipt) => receipt['status']), ran.stderr).toEqual(['succeeded']);
  });

  it('is never let through when git cannot answer whether a commit is the ledger\'s: GIT_FAILED, nothing written (before, any failure of git read as "not the ledger\'s")', async () => {
    const place = await places('git-fails');
    const head = git(['-C', place.repo, 'rev-parse', 'HEAD']).trim();
    // A ledger folder git cannot read as a repository: git exits 128, not its quiet "no such commit" (1).
    const broken = join(place.world.dir, 'not-a-ledger.git');
    mkdirSync(broken);
    await expect(isLedgerCommit(place.world.gitdir, head)).resolves.toBe(false);
    expect(await codeOfAsync(() => isLedgerCommit(broken, head))).toBe('GIT_FAILED');
    expect(await codeOfAsync(() => resolveWorkCommit(broken, place.repo, 'HEAD'))).toBe('GIT_FAILED');
    await expect(resolveWorkCommit(broken, place.repo, 'HEAD')).rejects.toThrow(`cannot tell whether ${head.slice(0, 12)} is a commit of the ledger ${broken}`);
    // A runner's start asks the same of its ledger: an object there under the repository's HEAD that git cannot read (exit 128) refuses
    // the start, GIT_FAILED, nothing claimed (before, it read as "not the ledger's" and the runner started).
    const id = (await dispatchTo(place, 'git-fails-start')).messageId;
    const seq = git(['--git-dir', place.world.gitdir, 'rev-parse', 'main']);
    expect(git(['-C', place.repo, 'rev-parse', 'HEAD']).trim()).toBe(head);
    const loose = join(place.world.gitdir, 'objects', head.slice(0, 2), head.slice(2));
    mkdirSync(dirname(loose), { recursive: true });
    writeFileSync(loose, 'not a git object\n');
    expect(await codeOfAsync(() => isLedgerCommit(place.world.gitdir, head))).toBe('GIT_FAILED');
    const run = watchOnce(place, agentScript(place.world.dir, FIX), { isolation: 'none' });
    expect(run.status, run.stdout + run.stderr).not.toBe(0);
    expect(run.stdout).toContain('GIT_FAILED');
    expect(run.stdout).toContain(`cannot tell whether ${head.slice(0, 12)} is a commit of the ledger ${place.world.gitdir}`);
    expect(run.stdout).not.toContain('"claimed"');
    expect(laneState(place.world, id)).toBe('queued');
    expect(git(['--git-dir', place.world.gitdir, 'rev-parse', 'main'])).toBe(seq);
  });
});
