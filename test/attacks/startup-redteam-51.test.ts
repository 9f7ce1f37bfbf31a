import { execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { agentScript, dispatchTo, hostilePlaces, receiptsFor, watchOnce } from '../helpers/hostile-agent.js';
import { cooBounded, headOf, httpOracle, refusal, startBounded, until, writeKey } from '../helpers/damage.js';
import { startFakeModelServer, type FakeModelServer } from '../../src/offline/fake-model-server.js';
import { FAKE_ORACLE, receiptsOf, worlds } from '../helpers/lane.js';
import { freePort } from '../helpers/ports.js';
import { laneState } from '../helpers/startup.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * A careless operator, round 51: start-up mistakes under the full actor model. What a corrected
 * restart would run is the operator's mistake, not the message's: it is said at start, and the
 * message stays queued and unclaimed, never claimed and ended with a receipt that blames the work.
 */

const dir = tempDir('startup-redteam-51-');

describe('an execution agent\'s model base URL (--ea-base-url, $COO_EA_BASE_URL) no client can use', () => {
  const places = hostilePlaces(join(dir, 'places'), 'ea-url');

  it('leaves the dispatch queued and unclaimed, said at start by the one rule of an endpoint Oracle\'s routes follow; given a URL, the dispatch runs', { timeout: 180_000 }, async () => {
    const cases: Array<[string, string, RegExp]> = [
      ['not-a-url', 'localhost:8080/v1', /--ea-base-url \S+ is not an http or https URL/],
      ['words', 'the gateway', /--ea-base-url is not a URL \(give http:\/\/ or https:\/\/, a host and a path\)/],
      ['ftp', 'ftp://127.0.0.1/v1', /--ea-base-url ftp:\/\/127\.0\.0\.1\/v1 is not an http or https URL/],
      ['credentials', 'http://user:hunter2-secret@127.0.0.1:9/v1', /--ea-base-url carries credentials in its URL; give the key in the provider's variable instead/],
    ];
    for (const [name, url, said] of cases) {
      const place = await places(name);
      const id = (await dispatchTo(place, `url-${name}`)).messageId;
      const before = headOf(place.world.gitdir);
      const agent = agentScript(place.world.dir, 'true');
      const run = watchOnce(place, agent, { isolation: 'none', env: { COO_EA_BASE_URL: url } });
      expect(run.status, run.stderr).toBe(0);
      const waits = run.stderr.split('\n').find((line) => line.startsWith('coo watch: dispatches to ea.codex wait, queued and unclaimed: '));
      expect(waits, run.stderr).toMatch(said);
      expect(run.stderr).not.toContain('hunter2-secret');
      expect(run.stdout).not.toContain('"claimed"');
      expect(laneState(place.world, id)).toBe('queued');
      expect(headOf(place.world.gitdir)).toBe(before);
      expect(await receiptsFor(place, id)).toEqual([]);
    }
    // A URL on this machine where nothing answers: the dispatch waits too, said as such.
    const silent = await places('silent');
    const waiting = (await dispatchTo(silent, 'url-silent')).messageId;
    const port = await freePort();
    const idle = watchOnce(silent, agentScript(silent.world.dir, 'true'), { isolation: 'none', env: { COO_EA_BASE_URL: `http://localhost:${port}/v1` } });
    expect(idle.stderr).toContain(`coo watch: dispatches to ea.codex wait, queued and unclaimed: nothing answers at http://localhost:${port}/v1 on this machine (`);
    expect(idle.stdout).not.toContain('"claimed"');
    expect(laneState(silent.world, waiting)).toBe('queued');
    // The same start with a URL an agent can be given: the dispatch is claimed and run.
    const place = await places('fixed');
    const id = (await dispatchTo(place, 'url-fixed')).messageId;
    const run = watchOnce(place, agentScript(place.world.dir, 'true'), { isolation: 'none', env: { COO_EA_BASE_URL: 'https://models.example.test/v1' } });
    expect(run.stdout, run.stderr).toContain(`"claimed","messageId":"${id}"`);
    expect(await receiptsFor(place, id)).toHaveLength(1);
  });
});

describe('an offline model\'s endpoint on this machine where nothing answers (coo model serve not started, a port mistyped)', () => {
  const fresh = worlds(join(dir, 'worlds'));

  it('is said at start and claims nothing (the consult was claimed and failed aa_unavailable, blamed on the work); started once the server answers, the consult runs once', { timeout: 180_000 }, async () => {
    const world = await fresh();
    const consult = (await world.consult()).messageId;
    const before = headOf(world.gitdir);
    const key = writeKey(world.dir, 'coo', world.actors.coo);
    const stateDir = join(world.dir, 'state');
    const port = await freePort();
    const env = { OPENAI_API_KEY: 'sk-test-key' };
    const args = ['watch', '--once', '--ledger', world.gitdir, '--key', key, '--repo', world.target, '--state-dir', stateDir, '--isolation', 'none', '--oracle-command', httpOracle(world.dir), '--ea-command', join(world.dir, 'no-agent')];
    const silent = cooBounded([...args, '--oracle-base-url', `http://127.0.0.1:${port}/v1`], { env });
    expect(refusal(silent)).toMatch(new RegExp(`^coo: ORACLE_CONFIG: no lane can run here, so nothing is claimed: consults to aa\\.chatgpt: nothing answers at http://127\\.0\\.0\\.1:${port}/v1 on this machine \\(ECONNREFUSED at 127\\.0\\.0\\.1 port ${port}\\): start the model server it names`));
    // The MCP route's runner keeps running, as a watch does: it starts, saying the consults wait until the model answers.
    const served = cooBounded(['mcp', '--run', '--ledger', world.gitdir, '--key', key, '--repo', world.target, '--state-dir', stateDir, '--isolation', 'none', '--oracle-command', httpOracle(world.dir), '--ea-command', join(world.dir, 'no-agent'), '--oracle-base-url', `http://127.0.0.1:${port}/v1`], { env });
    expect(served.status, served.stderr).toBe(0);
    expect(served.stderr).toContain(`consults to aa.chatgpt wait, queued and unclaimed, until it answers (looked at again while they wait): nothing answers at http://127.0.0.1:${port}/v1 on this machine (`);
    expect(headOf(world.gitdir)).toBe(before);
    expect(laneState(world, consult)).toBe('queued');
    expect(world.server.requests).toHaveLength(0);

    // The operator starts the model and gives its URL: the consult runs, once.
    // Asynchronously: the model answers from this process.
    const ran = await startBounded([...args, '--oracle-base-url', `${world.server.url}/v1`], env).ended;
    expect(ran.status, ran.stderr).toBe(0);
    expect((await receiptsOf(world, consult)).map((receipt) => receipt['status'])).toEqual(['succeeded']);
  });

  it('holds the consults of a watch started before its model server, looks again, and runs them once it answers (the probe ran once: a watch started beside its model refused to start, or never ran that target)', { timeout: 180_000 }, async () => {
    const world = await fresh();
    const early = (await world.consult()).messageId;
    const key = writeKey(world.dir, 'coo', world.actors.coo);
    const port = await freePort();
    const watch = startBounded(['watch', '--ledger', world.gitdir, '--key', key, '--repo', world.target, '--state-dir', join(world.dir, 'state'), '--isolation', 'none', '--oracle-command', httpOracle(world.dir), '--ea-command', join(world.dir, 'no-agent'), '--oracle-base-url', `http://127.0.0.1:${port}/v1`], { OPENAI_API_KEY: 'sk-test-key' });
    let model: FakeModelServer | null = null;
    // A watch that ended (refused its start) ends the wait at once, with what it said.
    const said = (text: string) => (): boolean => {
      if (watch.child.exitCode !== null) throw new Error(`the watch ended (${watch.child.exitCode}): ${watch.stderr()}`);
      return watch.stderr().includes(text);
    };
    try {
      // The consult queued before the start is held, said so, and not claimed.
      await until('the consult held', said(`error on ${early}: ORACLE_CONFIG: it waits, queued and unclaimed, until something answers there: nothing answers at`));
      expect(watch.stderr()).toContain(`coo watch: consults to aa.chatgpt wait, queued and unclaimed, until it answers (looked at again while they wait): nothing answers at http://127.0.0.1:${port}/v1 on this machine (`);
      expect(watch.stderr()).not.toContain(`claimed ${early}`);
      expect(laneState(world, early)).toBe('queued');
      // The model server comes up: the held consult runs without the ledger moving, and one queued now runs too.
      model = await startFakeModelServer(['ok'], port);
      await until('the held consult answered', said(`receipt ${early} attempt 1: succeeded`));
      const late = (await world.consult()).messageId;
      await until('the new consult answered', said(`receipt ${late} attempt 1: succeeded`));
      expect((await receiptsOf(world, late)).map((receipt) => receipt['status'])).toEqual(['succeeded']);
      expect(model.requests.length).toBeGreaterThanOrEqual(2);
    } finally {
      watch.child.kill('SIGINT');
      const ended = await watch.ended;
      await model?.close();
      expect(ended.status, ended.stderr).toBe(0);
    }
  });
});

/** Test keys only: shaped as each provider's keys start, and no key of anyone. */
const SHAPED = { anthropic: 'sk-ant-api03-TESTONLY0000', google: 'AIzaTESTONLY0000' };

describe("another provider's key in a provider's variable (an Anthropic key in OPENAI_API_KEY), the call going to that provider's own API", () => {
  const fresh = worlds(join(dir, 'keys'));
  const places = hostilePlaces(join(dir, 'key-places'), 'keys');

  it('is said at start, naming the variable and whose key it reads as, and claims nothing (each consult was claimed and refused unauthorised); through a gateway any key is the gateway\'s, and runs', { timeout: 180_000 }, async () => {
    const world = await fresh();
    const consult = (await world.consult()).messageId;
    const before = headOf(world.gitdir);
    const key = writeKey(world.dir, 'coo', world.actors.coo);
    const stateDir = join(world.dir, 'state');
    // An Oracle that answers without a network: what is judged here is only whether the consult is claimed.
    const oracle = join(world.dir, 'oracle-ok.sh');
    writeFileSync(oracle, `#!/bin/sh\nexec "${process.execPath}" "${FAKE_ORACLE}" --fake-mode ok "$@"\n`, { mode: 0o755 });
    const args = ['watch', '--once', '--ledger', world.gitdir, '--key', key, '--repo', world.target, '--state-dir', stateDir, '--isolation', 'none', '--oracle-command', oracle, '--ea-command', join(world.dir, 'no-agent')];
    for (const wrong of [SHAPED.anthropic, SHAPED.google]) {
      const refused = refusal(cooBounded(args, { env: { OPENAI_API_KEY: wrong, COO_ORACLE_BASE_URL: '' } }));
      expect(refused).toMatch(/^coo: ORACLE_CONFIG: no lane can run here, so nothing is claimed: consults to aa\.chatgpt: OPENAI_API_KEY holds what reads as (Anthropic|Google)'s key \(it starts (sk-ant-|AIza)\), which OpenAI's own API refuses on every call: set OPENAI_API_KEY to OpenAI's key/);
      expect(refused).not.toContain('TESTONLY');
    }
    expect(headOf(world.gitdir)).toBe(before);
    expect(laneState(world, consult)).toBe('queued');
    // Through an endpoint the runner names (a gateway, an offline model), the key is that endpoint's to judge: it runs.
    const ran = await startBounded([...args, '--oracle-base-url', `${world.server.url}/v1`], { OPENAI_API_KEY: SHAPED.anthropic }).ended;
    expect(ran.status, ran.stderr).toBe(0);
    expect((await receiptsOf(world, consult)).map((receipt) => receipt['status'])).toEqual(['succeeded']);
  });

  it('leaves a dispatch to Codex on OpenAI\'s own API queued and unclaimed when OPENAI_API_KEY holds a Gemini key; given an --ea-base-url, it runs', { timeout: 180_000 }, async () => {
    const place = await places('codex');
    const id = (await dispatchTo(place, 'key-shape')).messageId;
    const agent = agentScript(place.world.dir, 'true');
    // Gemini's own key lets the runner start (no consult is queued): the dispatch's wait is said, not a refused start.
    const run = watchOnce(place, agent, { isolation: 'none', env: { OPENAI_API_KEY: SHAPED.google, GEMINI_API_KEY: 'gemini-test-key', COO_EA_BASE_URL: '' } });
    expect(run.status, run.stderr).toBe(0);
    expect(run.stderr).toContain("coo watch: dispatches to ea.codex wait, queued and unclaimed: OPENAI_API_KEY holds what reads as Google's key (it starts AIza), which OpenAI's own API refuses on every call");
    expect(run.stdout).not.toContain('"claimed"');
    expect(laneState(place.world, id)).toBe('queued');
    const through = watchOnce(place, agent, { isolation: 'none', env: { OPENAI_API_KEY: SHAPED.google, COO_EA_BASE_URL: 'https://models.example.test/v1' } });
    expect(through.stdout, through.stderr).toContain(`"claimed","messageId":"${id}"`);
  });
});

describe("an --ea-command that is one execution agent's CLI, on a runner that may dispatch to the other", () => {
  const places = hostilePlaces(join(dir, 'cli-places'), 'cli');

  it("leaves the other agent's dispatches queued and unclaimed, said at start (each was started with the other agent's arguments and failed as the work's), by its name or through a link; a program of no agent's name runs", { timeout: 180_000 }, async () => {
    const place = await places('claude-for-codex');
    const id = (await dispatchTo(place, 'cli-claude')).messageId;
    const stand = agentScript(place.world.dir, 'true');
    const bin = join(place.world.dir, 'bin');
    mkdirSync(bin);
    // Claude Code's CLI by its name, and a link of another name to it.
    const claude = join(bin, 'claude');
    copyFileSync(stand, claude);
    const linked = join(bin, 'my-agent');
    symlinkSync(claude, linked);
    const env = { ANTHROPIC_API_KEY: 'sk-ant-test-key' };
    for (const given of [claude, linked]) {
      const run = watchOnce(place, given, { isolation: 'none', env });
      expect(run.status, run.stderr).toBe(0);
      expect(run.stderr).toContain(`coo watch: dispatches to ea.codex wait, queued and unclaimed: --ea-command ${given} is Claude Code's CLI (claude), not Codex's: --ea-command names the program of every execution agent`);
      // Claude Code's own dispatches may run it: nothing is said of them.
      expect(run.stderr).not.toContain('dispatches to ea.claude_code wait');
      expect(run.stdout).not.toContain('"claimed"');
      expect(laneState(place.world, id)).toBe('queued');
    }
    const run = watchOnce(place, stand, { isolation: 'none', env });
    expect(run.stdout, run.stderr).toContain(`"claimed","messageId":"${id}"`);
  });
});

const root = process.geteuid?.() === 0;

describe.runIf(root)('a --state-dir on a file system mounted noexec (a hardened /tmp)', () => {
  const places = hostilePlaces(join(dir, 'noexec-places'), 'noexec');

  it("leaves dispatches queued and unclaimed, said at start (each was claimed, paid for, and failed tests_failed, its repository's script exit 126 in a worktree there); on a file system that runs programs, the dispatch runs and passes", { timeout: 180_000 }, async () => {
    const place = await places('state');
    writeFileSync(join(place.repo, 'check.sh'), '#!/bin/sh\nexit 0\n');
    chmodSync(join(place.repo, 'check.sh'), 0o755);
    git(['add', '-A'], { cwd: place.repo });
    git(['commit', '-q', '-m', 'check'], { cwd: place.repo });
    const id = (await dispatchTo(place, 'noexec', { verify: ['./check.sh'] })).messageId;
    const before = headOf(place.world.gitdir);
    const agent = agentScript(place.world.dir, "printf 'export const add = (a, b) => a + b;\\n' > src/add.js");
    const mount = join(place.world.dir, 'noexec');
    mkdirSync(mount);
    // Only root may mount; a tmpfs mounted noexec is such a file system on any machine.
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64m,noexec', 'tmpfs', mount]);
    try {
      const stateDir = join(mount, 'state');
      const run = watchOnce({ ...place, stateDir }, agent, { isolation: 'none' });
      expect(run.status, run.stderr).toBe(0);
      expect(run.stderr).toContain(`coo watch: dispatches to ea.codex wait, queued and unclaimed: ${stateDir}, the runner's state folder, is on a file system that runs no program (mounted noexec? EACCES for a program made there): each dispatch's worktree is made there`);
      expect(run.stdout).not.toContain('"claimed"');
      expect(laneState(place.world, id)).toBe('queued');
      expect(headOf(place.world.gitdir)).toBe(before);
    } finally {
      execFileSync('umount', [mount]);
    }
    const run = watchOnce(place, agent, { isolation: 'none' });
    expect(run.status, run.stderr).toBe(0);
    expect((await receiptsFor(place, id)).map((receipt) => receipt['status'])).toEqual(['succeeded']);
  });
});

describe("coo watch --once's closing line after a start where a target waits", () => {
  const fresh = worlds(join(dir, 'closing'));

  it('says the held consults stay queued for what the runner lacks, never that they wait for a retry (their expiry was counted as one); a consult that does wait for a retry is said so', { timeout: 180_000 }, async () => {
    const world = await fresh({ modes: ['rate-limit'], policy: (policy) => ({ ...policy, retries: { ...policy.retries, backoff_base_seconds: 600, backoff_max_seconds: 600 } }) });
    const held = (await world.consult({ target: 'aa.claude' })).messageId;
    const key = writeKey(world.dir, 'coo', world.actors.coo);
    const args = ['watch', '--once', '--ledger', world.gitdir, '--key', key, '--repo', world.target, '--state-dir', join(world.dir, 'state'), '--isolation', 'none', '--oracle-command', httpOracle(world.dir), '--oracle-base-url', `${world.server.url}/v1`];
    const env = { OPENAI_API_KEY: 'sk-test-key', ANTHROPIC_API_KEY: '' };
    const alone = cooBounded(args, { env });
    expect(alone.status, alone.stderr).toBe(0);
    expect(alone.stderr.trimEnd().split('\n').at(-1)).toBe('coo watch: 0 receipt(s) written; 1 message(s) stay queued, unclaimed, for what this runner lacks (above)');
    expect(laneState(world, held)).toBe('queued');
    // A consult the model turns away for its rate: its retry is said, with when.
    const retried = (await world.consult()).messageId;
    // Asynchronously: the model answers from this process.
    const ran = await startBounded(args, env).ended;
    expect(ran.status, ran.stderr).toBe(0);
    const receipts = await receiptsOf(world, retried);
    expect(receipts.map((receipt) => receipt['status'])).toEqual(['failed']);
    const next = receipts[0]!['next_attempt_at'] as string;
    expect(next).toMatch(/^\d{4}-/);
    expect(ran.stderr.trimEnd().split('\n').at(-1)).toBe(`coo watch: 1 receipt(s) written; 1 message(s) wait for a retry, the first at ${next}; 1 message(s) stay queued, unclaimed, for what this runner lacks (above)`);
  });
});
