import { execFileSync } from 'node:child_process';
import { mkdirSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { generatePrivateKey, formatPublicKeyLine, type PrivateKey } from '../../src/crypto/keys.js';
import { appendTrustVersion } from '../../src/ledger/trust-update.js';
import type { ActorRegistry } from '../../src/schema/registry.js';
import { cooBounded, headOf, httpOracle, startBounded, watchArgs, writeKey, type BoundedResult } from '../helpers/damage.js';
import { blockersOf, receiptsOf, worlds, type World } from '../helpers/lane.js';
import { laneState, nothingClaimed, queued } from '../helpers/startup.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * Fail closed at start (runner/startup.ts): whatever can be checked before a claim is checked then,
 * per lane. A mistake that stops every lane exits 2 with one line and claims nothing; a lane that
 * cannot run here leaves its messages queued and unclaimed and says why once, at start.
 */

const dir = tempDir('cli-startup-');
const fresh = worlds(dir);
const env = { OPENAI_API_KEY: 'sk-test-key' };

function watchOnce(world: World, extra: readonly string[] = [], extraEnv: NodeJS.ProcessEnv = {}, key: PrivateKey = world.actors.coo): Promise<BoundedResult> {
  return startBounded([...watchArgs(world, writeKey(world.dir, `key-${key.publicKey.keyId.slice(7, 15).replace(/[^A-Za-z0-9]/g, '_')}`, key), join(world.dir, 'watch-state'), httpOracle(world.dir)), '--once', ...extra], { ...env, ...extraEnv }).ended;
}

/** The single `coo: CODE: message` line a refused start prints. */
function refusal(result: BoundedResult): string {
  expect(result.status).toBe(2);
  const lines = result.stderr.trimEnd().split('\n');
  expect(lines).toHaveLength(1);
  return lines[0]!;
}

/** A registry version signed by the CEO, made from the one in force. */
async function nextRegistry(world: World, change: (registry: ActorRegistry) => ActorRegistry): Promise<void> {
  const registry = (await world.ledger.state()).registry!.doc;
  await appendTrustVersion(world.ledger, { role: 'registry', document: { ...change(registry), version: undefined } }, world.actors.ceo, new Date());
}

/** A PATH folder with git and sh only: no bubblewrap, no agent CLI. */
function barePath(): string {
  const bin = join(dir, `bin-${Math.random().toString(36).slice(2)}`);
  mkdirSync(bin);
  for (const tool of ['git', 'sh']) symlinkSync(execFileSync('sh', ['-c', `command -v ${tool}`], { encoding: 'utf8' }).trim(), join(bin, tool));
  return bin;
}

describe('coo watch refuses at start, exit 2, claiming nothing', () => {
  it('when --repo is not a git repository: every consult and dispatch stays queued', async () => {
    const world = await fresh();
    const ids = await queued(world);
    const before = headOf(world.gitdir);
    const notGit = join(world.dir, 'notgit');
    mkdirSync(notGit);
    const args = watchArgs(world, writeKey(world.dir, 'coo', world.actors.coo), join(world.dir, 'watch-state'));
    args[args.indexOf('--repo') + 1] = notGit;
    const line = refusal(await startBounded([...args, '--once'], env).ended);
    expect(line).toBe(`coo: RUNNER_CONFIG: --repo ${notGit} is not a git repository: consults pin their context in it and dispatches work in it; give the repository they were written for`);
    await nothingClaimed(world, before, ids);
  });

  it('when the provider key is missing: the line names it for each lane, and nothing is burned as config_error', async () => {
    const world = await fresh();
    const ids = await queued(world);
    const before = headOf(world.gitdir);
    const line = refusal(await watchOnce(world, [], { OPENAI_API_KEY: '' }));
    expect(line).toMatch(/^coo: ORACLE_CONFIG: no lane can run here, so nothing is claimed: consults to aa\.chatgpt: OPENAI_API_KEY is not set in the runner's environment; .*dispatches to ea\.codex: OPENAI_API_KEY is not set/);
    await nothingClaimed(world, before, ids);
  });

  it("when the key is not the active COO's: it says whose key it is, or that it is retired or revoked", async () => {
    const world = await fresh();
    // A consult only: the last run, with the COO's key in force, runs it (a dispatch would need a model for Codex).
    const ids = { consult: (await world.consult()).messageId };
    const before = headOf(world.gitdir);
    expect(refusal(await watchOnce(world, [], {}, world.actors.ceo))).toMatch(/^coo: RUNNER_CONFIG: .* \(SHA256:\S+\) is not the active COO's key: it is the key of ceo, and claims and receipts are coo\.hermes's to sign; give coo\.hermes's key \(--key or \$COO_KEY\)$/);
    await nothingClaimed(world, before, ids);

    // The COO's key is rotated: the old one is retired.
    const old = world.actors.coo;
    const rotated = generatePrivateKey('coo.hermes');
    const entry = (key: PrivateKey) => ({ key_id: key.publicKey.keyId, public_key: formatPublicKeyLine(key.publicKey) });
    await nextRegistry(world, (registry) => ({ ...registry, actors: registry.actors.map((actor) => (actor.id === 'coo.hermes' ? { ...actor, keys: [entry(rotated)] } : actor)) }));
    const afterRotation = headOf(world.gitdir);
    expect(refusal(await watchOnce(world, [], {}, old))).toMatch(/is not the active COO's key: it is a key of coo\.hermes retired \(rotated out\) at Ledger-Seq \d+ by trust\/registry\/000002\.yaml; give coo\.hermes's key/);
    expect(headOf(world.gitdir)).toBe(afterRotation);

    // The old key is then revoked.
    await nextRegistry(world, (registry) => ({ ...registry, revoked_keys: [{ key_id: old.publicKey.keyId, reason: 'laptop stolen' }] }));
    const afterRevocation = headOf(world.gitdir);
    expect(refusal(await watchOnce(world, [], {}, old))).toMatch(/is not the active COO's key: it is a key of coo\.hermes revoked at Ledger-Seq \d+ by trust\/registry\/000003\.yaml \("laptop stolen"\); give coo\.hermes's key/);
    expect(headOf(world.gitdir)).toBe(afterRevocation);
    expect(laneState(world, ids.consult)).toBe('queued');
    expect(world.server.requests).toHaveLength(0);

    // The rotated key runs what it queues. What the revoked key queued starts no attempt (its key may be in other
    // hands): it is receipted blocked, unpaid.
    const mine = (await world.consult({ key: rotated, idempotencyKey: 'after-rotation' })).messageId;
    const ran = await watchOnce(world, [], {}, rotated);
    expect({ status: ran.status, stderr: ran.stderr }).toMatchObject({ status: 0 });
    expect(laneState(world, mine)).toBe('succeeded');
    expect(laneState(world, ids.consult)).toBe('blocked');
    expect(world.server.requests).toHaveLength(1);
  });

  it('without bubblewrap, naming bubblewrap and --isolation none: coo watch, coo mcp --run and coo demo alike', async () => {
    const world = await fresh();
    const ids = await queued(world);
    const before = headOf(world.gitdir);
    const PATH = barePath();
    const expected = 'coo: SANDBOX_UNAVAILABLE: bubblewrap is not installed, and no lane runs without a sandbox: install it (apt-get install bubblewrap), or choose --isolation none to run with a clean folder and environment only';
    expect(refusal(await watchOnce(world, [], { PATH }))).toBe(expected);
    expect(refusal(await watchOnce(world, ['--isolation', 'auto'], { PATH }))).toBe(expected);
    await nothingClaimed(world, before, ids);
    const mcp = cooBounded(['mcp', '--run', '--ledger', world.gitdir, '--key', writeKey(world.dir, 'coo', world.actors.coo), '--repo', world.target, '--state-dir', join(world.dir, 'mcp-state')], { env: { ...env, PATH } });
    expect(refusal(mcp)).toBe(expected);
    const demoDir = join(world.dir, 'demo');
    expect(refusal(cooBounded(['demo', '--dir', demoDir], { env: { PATH } }))).toBe(expected);
    await nothingClaimed(world, before, ids);
  });
});

describe('coo watch runs what it can', () => {
  it('runs the consults and says once, at start, why dispatches wait; the dispatch stays queued and unclaimed', async () => {
    const world = await fresh();
    // ea.codex now runs on a provider key this runner does not hold.
    await nextRegistry(world, (registry) => ({
      ...registry,
      actors: registry.actors.map((actor) => (actor.id === 'ea.codex' ? { ...actor, executor: { ...actor.executor!, provider_key_env: 'ANTHROPIC_API_KEY' as const } } : actor)),
    }));
    const ids = await queued(world);
    const result = await watchOnce(world);
    expect(result.status).toBe(0);
    const waits = result.stderr.split('\n').filter((line) => line.includes('ea.codex'));
    expect(waits).toEqual(["coo watch: dispatches to ea.codex wait, queued and unclaimed: ANTHROPIC_API_KEY is not set in the runner's environment"]);
    expect(result.stderr).toContain('1 message(s) stay queued, unclaimed, for what this runner lacks');
    expect(laneState(world, ids.consult)).toBe('succeeded');
    expect(laneState(world, ids.dispatch)).toBe('queued');
    expect((await world.ledger.state()).messages.get(ids.dispatch)!.attempts).toEqual([]);
  });

  it("leaves consults to an advisory agent whose key is missing or whose route is not configured here queued and unclaimed, said once at start, while the others run", async () => {
    const world = await fresh();
    // A fourth advisory agent behind an OpenAI-compatible gateway the registry names and this runner does not know.
    await nextRegistry(world, (registry) => ({
      ...registry,
      actors: [...registry.actors, { id: 'aa.local', class: 'advisory_agent' as const, keys: [], transport: { kind: 'oracle' as const, engine: 'api' as const, model: 'llama-3.1-8b', provider_key_env: 'OPENAI_API_KEY' as const, route: 'openai_compatible' as const, gateway: 'litellm' } }],
    }));
    const policy = (await world.ledger.state()).policy!.doc;
    await appendTrustVersion(world.ledger, { role: 'policy', document: { ...policy, version: undefined, edges: [...policy.edges, { from: 'coo.*', to: 'aa.local', intents: ['aa_consult'], requires: [] }] } }, world.actors.ceo, new Date());
    const chatgpt = (await world.consult({ idempotencyKey: 'chatgpt' })).messageId;
    const claude = (await world.consult({ target: 'aa.claude', idempotencyKey: 'claude' })).messageId;
    const local = (await world.consult({ target: 'aa.local', idempotencyKey: 'local' })).messageId;
    const result = await watchOnce(world, [], { ANTHROPIC_API_KEY: '', GEMINI_API_KEY: '' });
    expect(result.status).toBe(0);
    const waits = result.stderr.split('\n').filter((line) => line.includes('consults to') && line.includes(' wait, queued and unclaimed'));
    expect(waits).toEqual([
      "coo watch: consults to aa.gemini wait, queued and unclaimed: GEMINI_API_KEY is not set in the runner's environment",
      "coo watch: consults to aa.claude wait, queued and unclaimed: ANTHROPIC_API_KEY is not set in the runner's environment",
      'coo watch: consults to aa.local wait, queued and unclaimed: the route\'s gateway litellm is not configured here: give the runner --oracle-gateway litellm=URL',
    ]);
    expect(laneState(world, chatgpt)).toBe('succeeded');
    for (const id of [claude, local]) {
      expect(laneState(world, id)).toBe('queued');
      expect((await world.ledger.state()).messages.get(id)!.attempts).toEqual([]);
    }
    expect(world.server.requests).toHaveLength(1);
  });

  it('with --isolation none, says so at start and in every receipt', async () => {
    const world = await fresh();
    const { messageId } = await world.consult();
    const result = await watchOnce(world, ['--isolation', 'none']);
    expect(result.status).toBe(0);
    expect(result.stderr.split('\n')[0]).toBe(
      'coo watch: no OS sandbox (--isolation none): Oracle and the execution agents run in a clean folder and environment only, with every path of this machine in reach; every receipt says sandbox_unenforced',
    );
    const [receipt] = await receiptsOf(world, messageId);
    expect(receipt).toMatchObject({ status: 'succeeded', warnings: ['sandbox_unenforced'] });
    expect(blockersOf(receipt!)).toEqual([]);
  });
});
