// node bench/remote-runners.mjs [--models 1,15] [--runners 1,2,4,8] [--consults 24] [--samples 20]
//   [--idle-runners 2] [--profile 8] [--profile-runners 1] [--profile-delay 1] [--poll 0.5,2]
//   [--skip throughput,latency,profile] [--hook-template FILE]   (npm run build first)
//
// Runners on separate clones (each its own `coo watch --remote` process, HOME and state folder)
// drain consults through one remote ledger served by OpenSSH on 127.0.0.1, with its pre-receive
// hook, against a loopback model that answers after a fixed delay (the fake model server behind a
// proxy that holds each request): 1 s, where the two cores are the bound, and 15 s, a real model's
// latency, where the runners mostly wait and what grows with them is the coordination's cost.
//
// - throughput: for each delay and runner count, a fresh served ledger; the runners start, beat
//   once and go idle; then a COO pushes the row's consults in one push and the runners drain them.
//   Per row: consults a minute (first claim to last receipt), scaling against one runner, push
//   conflicts and retries per consult, pushes that reached the hook, paid calls, and CPU seconds per
//   consult of the processes the bench started (runners, their git and ssh, sshd, git on the
//   server, the hook), from the idle point to the last receipt. The machine is shared, so that sum,
//   not /proc/stat, is the figure; the machine's busy time is printed beside it for context.
// - latency: a COO on its own clone publishes one consult at a time; idle runners poll the remote;
//   the time from the published push to Oracle's start on a runner.
// - profile: one runner (or --profile-runners of them, with a --profile-delay s model) drains the
//   same consults through the remote (and, with one runner, on a local ledger), with every git, ssh,
//   Oracle, server session and hook wrapped to report its CPU time: where one consult's CPU goes;
//   which hook runs were for pushes that won, lost, or were stale (their old value of main no longer
//   main's) when the hook started.
//
// The keys made here are throwaway bench fixtures.
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request } from 'node:http';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { cpuOfMatching, grown, loadAverage, machineBusySeconds, readTimings, selfCpu, snapshot, timingWrapper, treeCpu, treeOf } from './procs.mjs';
import { startSshd } from './sshd.mjs';

// Options are parsed before anything starts: --help, or an option it does not know, runs nothing.
const OPTIONS = ['models', 'runners', 'consults', 'samples', 'idle-runners', 'profile', 'profile-runners', 'profile-delay', 'poll', 'skip', 'hook-template'];
let parsed;
try {
  parsed = parseArgs({ options: { help: { type: 'boolean' }, ...Object.fromEntries(OPTIONS.map((name) => [name, { type: 'string' }])) }, strict: true, allowPositionals: false }).values;
} catch (error) {
  process.stderr.write(`${error.message}\nusage: see \`node bench/remote-runners.mjs --help\`\n`);
  process.exit(2);
}
if (parsed.help === true) {
  const header = readFileSync(new URL(import.meta.url), 'utf8').split('\n');
  process.stdout.write(`${header.slice(0, header.findIndex((line) => !line.startsWith('//'))).map((line) => line.replace(/^\/\/ ?/, '')).join('\n')}\n`);
  process.exit(0);
}

const root = join(import.meta.dirname, '..');
const dist = join(root, 'dist');
const COO = join(dist, 'cli', 'main.js');
const FAKE_ORACLE = join(root, 'test', 'fixtures', 'fake-oracle.mjs');
const { generatePrivateKey, formatPrivateKey } = await import(join(dist, 'crypto', 'keys.js'));
const { initLedger, defaultPolicy } = await import(join(dist, 'ledger', 'init.js'));
const { Ledger } = await import(join(dist, 'ledger', 'ledger.js'));
const { RemoteLedger } = await import(join(dist, 'remote', 'publish.js'));
const { enqueueConsult } = await import(join(dist, 'consult', 'enqueue.js'));
const { startFakeModelServer } = await import(join(dist, 'offline', 'fake-model-server.js'));

function flag(name, fallback) {
  return parsed[name] ?? fallback;
}
const list = (text) => text.split(',').filter((item) => item !== '').map(Number);
const MODELS = list(flag('models', '1,15'));
const RUNNERS = list(flag('runners', '1,2,4,8'));
const CONSULTS = Number(flag('consults', '24'));
const SAMPLES = Number(flag('samples', '20'));
const IDLE_RUNNERS = Number(flag('idle-runners', '2'));
const PROFILE = Number(flag('profile', '8'));
const PROFILE_RUNNERS = Number(flag('profile-runners', '1'));
const PROFILE_DELAY = Number(flag('profile-delay', '1'));
const [POLL_MIN, POLL_MAX] = flag('poll', '0.5,2').split(',');
const POLL = ['--poll-interval', POLL_MIN, '--poll-max', POLL_MAX];
const SKIP = flag('skip', '').split(',');
// Another pre-receive hook template for the served ledgers (e.g. an earlier commit's ledger/hooks/pre-receive), to compare hooks.
const HOOK_TEMPLATE = flag('hook-template', '');

const work = mkdtempSync(join(tmpdir(), 'coo-bench-runners-'));
// The runners' temporary folder: OpenSSH's shared connection (its master, which leaves the runner's
// process tree and renames itself to its socket's path) is found by this path.
const runnerTmp = join(work, 'tmp');
mkdirSync(runnerTmp, { recursive: true });
/** Every process the bench started and has not stopped, for a stop by signal. */
const children = new Set();
const log = (line) => process.stderr.write(`${line}\n`);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const round = (value, digits = 2) => Number(value.toFixed(digits));

/** The fake model server behind a proxy that holds every request for `seconds`: a model that takes that long per answer. */
async function slowModel(seconds) {
  const model = await startFakeModelServer(['ok']);
  const target = new URL(model.url);
  const proxy = createServer((req, res) => {
    const chunks = [];
    req.on('data', (chunk) => chunks.push(chunk));
    req.on('end', async () => {
      await sleep(seconds * 1000);
      const forward = request({ host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers }, (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      });
      forward.end(Buffer.concat(chunks));
    });
  });
  await new Promise((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${proxy.address().port}`, requests: model.requests, close: async () => (proxy.close(), await model.close()) };
}

const sshd = await startSshd(join(work, 'sshd'));
// The bench's own git against the remote (the COO's writes) goes through the same server.
process.env.GIT_SSH_COMMAND = sshd.env.GIT_SSH_COMMAND;
const models = new Map();
for (const seconds of new Set([...MODELS, 1, PROFILE_DELAY])) models.set(seconds, await slowModel(seconds));
const bin = join(work, 'bin');
mkdirSync(bin, { recursive: true });
const oracle = join(bin, 'oracle-http.sh');
writeFileSync(oracle, `#!/bin/sh\nexec "${process.execPath}" "${FAKE_ORACLE}" --fake-mode http "$@"\n`, { mode: 0o755 });
let cases = 0;

/** A served ledger with quick retries, a target repository, and a COO key. */
async function served() {
  cases += 1;
  const dir = join(work, `case-${cases}`);
  const ceo = generatePrivateKey('ceo');
  const coo = generatePrivateKey('coo.hermes');
  const gitdir = join(dir, 'served', 'ledger.git');
  const base = defaultPolicy();
  await initLedger({ gitdir, ceoKey: ceo, actors: new Map([['coo.hermes', coo.publicKey], ['ea.codex', generatePrivateKey('ea.codex').publicKey]]), policy: { ...base, retries: { ...base.retries, backoff_base_seconds: 0, backoff_max_seconds: 0 } }, now: new Date() });
  if (HOOK_TEMPLATE !== '') writeFileSync(join(gitdir, 'hooks', 'pre-receive'), readFileSync(HOOK_TEMPLATE, 'utf8').replace('@NODE@', process.execPath).replace('@COO@', COO), { mode: 0o755 });
  const keyFile = join(dir, 'bench-fixture-coo.key');
  writeFileSync(keyFile, formatPrivateKey(coo), { mode: 0o600 });
  const target = join(dir, 'target');
  mkdirSync(target, { recursive: true });
  writeFileSync(join(target, 'README.md'), '# calc\n');
  execFileSync('git', ['init', '-q', '-b', 'main'], { cwd: target });
  execFileSync('git', ['add', '-A'], { cwd: target });
  execFileSync('git', ['-c', 'user.name=bench', '-c', 'user.email=bench@example.invalid', 'commit', '-q', '-m', 'first'], { cwd: target });
  return { dir, gitdir, url: sshd.url(gitdir), key: coo, keyFile, target, trustRoot: ceo.publicKey.keyId };
}

/**
 * Makes the served ledger's pre-receive hook report the CPU time of each run to `timings`: the hook
 * `coo init` installed moves aside and a bash wrapper times it, so every push that reaches the hook
 * is one line. The wrapper costs a few milliseconds of a hook's hundreds.
 */
function timeHook(ledger, timings) {
  const path = join(ledger.gitdir, 'hooks', 'pre-receive');
  renameSync(path, `${path}.timed`);
  writeFileSync(path, timingWrapper(`'${path}.timed'`, 'hook', timings), { mode: 0o755 });
}

function clone(ledger, name, extraEnv = {}) {
  const home = join(ledger.dir, 'homes', name);
  mkdirSync(home, { recursive: true });
  const env = { ...process.env, HOME: home, COO_LEDGER: '', COO_KEY: '', ...sshd.env, ...extraEnv };
  const gitdir = join(home, 'ledger.git');
  execFileSync(process.execPath, [COO, 'clone', ledger.url, gitdir, '--trust-root', ledger.trustRoot], { env, stdio: 'ignore' });
  return { home, env, gitdir };
}

function consultOf(ledger, own, i) {
  return enqueueConsult({ ledger: own, key: ledger.key, now: new Date(), target: 'aa.chatgpt', repo: ledger.target, patterns: ['README.md'], question: `Is add() correct for input ${i}?`, idempotencyKey: `bench-${cases}-${i}`, maxRuntimeSeconds: 120 });
}

/**
 * A COO on its own clone. `stage` brings the clone to the remote's verified head (after the
 * runners' first beats) and enqueues `count` consults there without publishing them; `push` then
 * publishes them all in one push, so every row starts from the same queue.
 */
function cooClone(ledger) {
  const machine = clone(ledger, 'coo');
  const stage = async (count) => {
    const own = Ledger.open(machine.gitdir);
    const remote = new RemoteLedger(own, { remote: ledger.url });
    await remote.sync();
    for (let i = 0; i < count; i += 1) await consultOf(ledger, own, i);
    const head = own.head();
    remote.close();
    own.close();
    return head;
  };
  const push = () =>
    new Promise((resolve, reject) => {
      const child = spawn('git', ['--git-dir', machine.gitdir, 'push', '--quiet', 'origin', 'refs/heads/main:refs/heads/main'], { env: machine.env, stdio: 'ignore' });
      child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`the COO's push exited with ${code}`))));
    });
  return { stage, push };
}

/** `coo watch` on its own clone (or, with remote false, on a local ledger); its --json events, each stamped with when it arrived. */
function runner(ledger, machine, options = {}) {
  const remote = options.remote === false ? [] : ['--remote', ledger.url, ...POLL];
  const child = spawn(process.execPath, [COO, 'watch', '--json', ...remote, '--ledger', machine.gitdir, '--key', ledger.keyFile, '--repo', ledger.target, '--state-dir', join(machine.home, 'state'), '--oracle-command', options.oracle ?? oracle, '--oracle-base-url', `${options.model.url}/v1`, '--isolation', 'none'], {
    env: { ...machine.env, OPENAI_API_KEY: 'sk-bench-fixture', TMPDIR: runnerTmp },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  child.on('exit', () => children.delete(child));
  const events = [];
  let buffer = '';
  let said = '';
  child.stdout.on('data', (chunk) => {
    buffer += chunk;
    const lines = buffer.split('\n');
    buffer = lines.pop();
    for (const line of lines) if (line.trim() !== '') events.push({ ...JSON.parse(line), seen: Date.now() });
  });
  child.stderr.on('data', (chunk) => {
    if (said.length < 65_536) said += chunk;
  });
  const exited = new Promise((resolve) => child.on('exit', resolve));
  return { child, events, said: () => said, stop: async () => (child.kill('SIGTERM'), await exited) };
}

async function waitFor(done, seconds, what) {
  const end = Date.now() + seconds * 1000;
  while (!done()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

/**
 * Waits until every runner watches (through a remote: has beaten once; at most 60 s), then lets
 * them settle into idle polling: the figures start from there, without the runners' start.
 */
async function settle(runners, { beats = true } = {}) {
  const ready = (r) => (beats ? r.events.some((event) => event.type === 'heartbeat') : r.said().includes('coo watch: watching'));
  const end = Date.now() + 60_000;
  while (Date.now() < end && !runners.every(ready)) await sleep(100);
  await sleep(2000);
}

/** The bench's own processes: what each runner tree, the ssh masters that left them, sshd's tree and this process have spent. */
function account(runners) {
  const procs = snapshot();
  const trees = runners.map((r) => treeCpu(procs, r.child.pid));
  const inTrees = new Set(runners.flatMap((r) => treeOf(procs, r.child.pid)));
  const masters = new Map([...cpuOfMatching(procs, [join(runnerTmp, 'coo-sockets-')])].filter(([pid]) => !inTrees.has(pid)));
  return { procs, trees, masters, sshd: treeCpu(procs, sshd.pid), sshdMaster: procs.get(sshd.pid), bench: selfCpu(), busy: machineBusySeconds(), at: Date.now() };
}

const percentile = (values, p) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
};

async function throughputRow(modelSeconds, count) {
  const model = models.get(modelSeconds);
  const ledger = await served();
  const timings = join(ledger.dir, 'hook-times.log');
  timeHook(ledger, timings);
  const machines = Array.from({ length: count }, (_, n) => clone(ledger, `runner-${n + 1}`));
  const coo = cooClone(ledger);
  const runners = machines.map((machine) => runner(ledger, machine, { model }));
  await settle(runners);
  await coo.stage(CONSULTS);
  const loadBefore = loadAverage();
  const paidBefore = model.requests.length;
  const hooksBefore = readTimings(timings).lines;
  const a = account(runners);
  await coo.push();
  const all = () => runners.flatMap((r) => r.events.filter((event) => event.seen >= a.at));
  await waitFor(() => all().filter((event) => event.type === 'receipt').length >= CONSULTS, 900 + CONSULTS * modelSeconds * 2, `${CONSULTS} receipts`);
  const b = account(runners);
  const loadAfter = loadAverage();
  await Promise.all(runners.map((r) => r.stop()));
  const events = all();
  const first = Math.min(...events.filter((event) => event.type === 'claimed').map((event) => event.seen));
  const last = Math.max(...events.filter((event) => event.type === 'receipt').map((event) => event.seen));
  const rebuilt = events.filter((event) => event.type === 'rebuilt');
  const lostClaims = events.filter((event) => event.type === 'skipped' && String(event.reason).endsWith('was claimed by another runner')).length;
  const conflicts = rebuilt.reduce((sum, event) => sum + event.conflicts, 0);
  const paid = model.requests.slice(paidBefore).map((r) => r.canary);
  // The first hook run after the idle point is the COO's push of the row's consults.
  const hooks = readTimings(timings, hooksBefore).entries.slice(1);
  const hookSeconds = hooks.reduce((sum, line) => sum + Number(line.split(' ')[1]) + Number(line.split(' ')[2]), 0);
  const runnersCpu = b.trees.reduce((sum, value, i) => sum + value - a.trees[i], 0);
  const mastersCpu = grown(a.masters, b.masters);
  const serverCpu = b.sshd - a.sshd;
  const cooPushCpu = b.bench.children - a.bench.children;
  const own = runnersCpu + mastersCpu + serverCpu + cooPushCpu;
  const wall = (b.at - a.at) / 1000;
  return {
    model_seconds: modelSeconds,
    runners: count,
    consults: CONSULTS,
    seconds: round((last - first) / 1000, 1),
    consults_per_minute: round((CONSULTS * 60_000) / (last - first), 1),
    paid_calls: paid.length,
    duplicate_paid_calls: paid.length - new Set(paid).size,
    claims_lost_to_another_runner: lostClaims,
    writes_rebuilt_after_conflicts: rebuilt.length,
    push_conflicts_of_landed_writes: conflicts,
    conflicts_per_consult: round((conflicts + lostClaims) / CONSULTS),
    retries_per_consult: round((rebuilt.length + lostClaims) / CONSULTS),
    runner_pushes_at_the_hook_per_consult: round(hooks.length / CONSULTS),
    hook_cpu_seconds_per_consult: round(hookSeconds / CONSULTS),
    errors: events.filter((event) => event.type === 'error').length,
    journaled: events.filter((event) => event.type === 'journaled').length,
    // The processes the bench started, from the idle point to the last receipt (the model's stand-in, in this process, is not counted).
    cpu_seconds_per_consult: round(own / CONSULTS),
    cpu_parts_per_consult: { runners: round(runnersCpu / CONSULTS), ssh_masters: round(mastersCpu / CONSULTS), server: round(serverCpu / CONSULTS), coo_push_client: round(cooPushCpu / CONSULTS) },
    // With every core busy, this many CPU seconds per consult allow at most cores x 60 / that a minute.
    cpu_bound_consults_per_minute: round((cpus().length * 60 * CONSULTS) / own, 1),
    machine_busy_percent_all_users: round((100 * (b.busy - a.busy)) / (cpus().length * wall), 0),
    load_average_before: loadBefore,
    load_average_after: loadAfter,
  };
}

async function latency() {
  const model = models.get(1);
  const ledger = await served();
  const cooMachine = clone(ledger, 'coo');
  const cooLedger = Ledger.open(cooMachine.gitdir);
  const publisher = new RemoteLedger(cooLedger, { remote: ledger.url });
  const runners = Array.from({ length: IDLE_RUNNERS }, (_, n) => runner(ledger, clone(ledger, `runner-${n + 1}`), { model }));
  const all = () => runners.flatMap((r) => r.events);
  await settle(runners);
  const latencies = [];
  const loadBefore = loadAverage();
  for (let i = 0; i < SAMPLES; i += 1) {
    // A gap that is not a multiple of the poll interval, so pushes land anywhere in the runners' cycle.
    await sleep(700 + Math.floor(Math.random() * 1500));
    const published = await publisher.write((own) => consultOf(ledger, own, i));
    const pushed = Date.now();
    const id = published.result.messageId;
    await waitFor(() => all().some((event) => event.type === 'receipt' && event.messageId === id), 120, `the receipt of ${id}`);
    const started = all().find((event) => event.type === 'oracle_started' && event.messageId === id);
    latencies.push(started.at - pushed);
  }
  const loadAfter = loadAverage();
  await Promise.all(runners.map((r) => r.stop()));
  publisher.close();
  cooLedger.close();
  return { idle_runners: IDLE_RUNNERS, samples: latencies.length, p50_ms: percentile(latencies, 50), p95_ms: percentile(latencies, 95), max_ms: Math.max(...latencies), load_average_before: loadBefore, load_average_after: loadAfter };
}

/**
 * The profile's hook wrapper: like timeHook, and each line also says the push's old and new value of
 * main, main's value when the hook started, and the hook's exit status
 * (`hook <user> <system> <old> <new> <main at start> <status>`), so the profile can tell pushes
 * that won from pushes that lost after the hook took them and pushes already stale when it started.
 */
function timeHookDetailed(ledger, timings) {
  const path = join(ledger.gitdir, 'hooks', 'pre-receive');
  renameSync(path, `${path}.timed`);
  const wrapper = [
    '#!/bin/bash',
    'input=$(cat)',
    'read -r old new ref <<<"$input"',
    'main=$(/usr/bin/git rev-parse -q --verify refs/heads/main)',
    'TIMEFORMAT="%3U %3S"',
    'exec 4>&1',
    `t=$( { time printf '%s\n' "$input" | '${path}.timed' 1>&4 2>&3 3>&- 4>&- ; } 3>&2 2>&1 )`,
    'status=$?',
    `echo "hook $t $old $new \${main:-none} $status" >>'${timings}'`,
    'exit $status',
    '',
  ].join('\n');
  writeFileSync(path, wrapper, { mode: 0o755 });
}

/**
 * PROFILE_RUNNERS runners drain PROFILE consults with a PROFILE_DELAY s model through the remote
 * (and, with one runner, on a local ledger too), with each git, ssh, Oracle, server session and
 * hook run by a wrapper that reports its CPU time. Per consult: the runners' own node processes;
 * git (without the ssh it ran), and git by subcommand (with its ssh); ssh (the per-command clients
 * and the shared connections' masters); sshd; git on the server (upload-pack, receive-pack,
 * without the hook); the hook, split by how its push ended; Oracle; and what no wrapper saw (the
 * wrappers' own bash, processes that straddle the start). The COO's one push is shown apart.
 */
async function profile() {
  const model = models.get(PROFILE_DELAY);
  const timings = join(work, 'profile-times.log');
  const pbin = join(work, 'profile-bin');
  mkdirSync(pbin, { recursive: true });
  const wrap = (name, target, label, extra) => writeFileSync(join(pbin, name), timingWrapper(target, label, timings, extra), { mode: 0o755 });
  // git's subcommand: its first argument that is a bare lowercase word (options, paths and -c values are not).
  writeFileSync(
    join(pbin, 'git'),
    ['#!/bin/bash', 'sub=none; for a in "$@"; do if [[ $a =~ ^[a-z][a-z-]*$ ]]; then sub=$a; break; fi; done', 'TIMEFORMAT="git %3U %3S $sub"', `{ time /usr/bin/git "$@" 2>&3 3>&- ; } 3>&2 2>>'${timings}'`, ''].join('\n'),
    { mode: 0o755 },
  );
  wrap('ssh', '/usr/bin/ssh', 'ssh');
  wrap('oracle', `"${process.execPath}" "${FAKE_ORACLE}" --fake-mode http`, 'oracle');
  // sshd runs the forced command with the client's command in SSH_ORIGINAL_COMMAND; its first word says fetch or push.
  wrap('server', '/bin/sh -c "$SSH_ORIGINAL_COMMAND"', 'server', '${SSH_ORIGINAL_COMMAND%% *}');
  const env = { PATH: `${pbin}:${process.env.PATH}`, GIT_SSH_COMMAND: sshd.env.GIT_SSH_COMMAND.replace(/^ssh /, `${join(pbin, 'ssh')} `) };
  const parts = {};

  // Through the remote.
  {
    const ledger = await served();
    timeHookDetailed(ledger, timings);
    const machines = Array.from({ length: PROFILE_RUNNERS }, (_, n) => clone(ledger, `runner-${n + 1}`, env));
    const coo = cooClone(ledger);
    sshd.forceCommand(join(pbin, 'server'));
    const runners = machines.map((machine) => runner(ledger, machine, { model, oracle: join(pbin, 'oracle') }));
    await settle(runners);
    const cooHead = await coo.stage(PROFILE);
    const from = readTimings(timings).lines;
    const loadBefore = loadAverage();
    const a = account(runners);
    await coo.push();
    const receipts = () => runners.reduce((sum, r) => sum + r.events.filter((event) => event.type === 'receipt' && event.seen >= a.at).length, 0);
    await waitFor(() => receipts() >= PROFILE, 600 + PROFILE * PROFILE_DELAY * 2, `${PROFILE} receipts`);
    const b = account(runners);
    const loadAfter = loadAverage();
    await Promise.all(runners.map((r) => r.stop()));
    sshd.forceCommand(null);
    const events = runners.flatMap((r) => r.events.filter((event) => event.seen >= a.at));
    const all = readTimings(timings, from).entries;
    // The COO's push: its hook run is the one that brought its head; its session ended (into sshd's own reaped children) with the first receive-pack after the idle point.
    const cooHook = all.findIndex((line) => line.startsWith('hook ') && line.split(' ')[4] === cooHead);
    const cooServer = all.findIndex((line) => line.startsWith('server ') && line.endsWith('git-receive-pack'));
    const secondsOf = (line) => (line === undefined ? 0 : Number(line.split(' ')[1]) + Number(line.split(' ')[2]));
    const cooPush = { hook: all[cooHook], server: all[cooServer] };
    const entries = all.filter((_, i) => i !== cooHook && i !== cooServer);
    const sumOf = (lines) => lines.reduce((total, line) => total + secondsOf(line), 0);
    const sum = (label) => sumOf(entries.filter((line) => line.split(' ')[0] === label));
    const cooSession = b.sshdMaster.children - a.sshdMaster.children;
    const runnerSelf = runners.reduce((total, r) => total + b.procs.get(r.child.pid).self - a.procs.get(r.child.pid).self, 0);
    const tree = b.trees.reduce((total, value, i) => total + value - a.trees[i], 0);
    const [git, ssh, oracleCpu, server, hook] = ['git', 'ssh', 'oracle', 'server', 'hook'].map(sum);
    const masters = grown(a.masters, b.masters);
    const serverTree = b.sshd - a.sshd - cooSession - (b.sshdMaster.self - a.sshdMaster.self);
    // How each runner push that reached the hook ended: landed (its new value is in main's history now), taken by the hook and then lost at git's ref update, or declined.
    const finalMain = execFileSync('git', ['--git-dir', ledger.gitdir, 'rev-parse', 'refs/heads/main'], { encoding: 'utf8' }).trim();
    const landed = (oid) => {
      try {
        execFileSync('git', ['--git-dir', ledger.gitdir, 'merge-base', '--is-ancestor', oid, finalMain], { stdio: 'ignore' });
        return true;
      } catch {
        return false;
      }
    };
    const hookRuns = entries
      .filter((line) => line.startsWith('hook '))
      .map((line) => {
        const [, , , old, next, mainAtStart, status] = line.split(' ');
        return { line, stale: old !== mainAtStart, outcome: status !== '0' ? 'declined' : landed(next) ? 'won' : 'lost_after_the_hook_took_it' };
      });
    const byOutcome = (runs) => Object.fromEntries(['won', 'lost_after_the_hook_took_it', 'declined'].map((outcome) => [outcome, { runs: runs.filter((run) => run.outcome === outcome).length, cpu_seconds: round(sumOf(runs.filter((run) => run.outcome === outcome).map((run) => run.line)), 3) }]));
    const gitBySubcommand = {};
    for (const line of entries.filter((item) => item.startsWith('git '))) {
      const sub = line.split(' ')[3] ?? 'none';
      gitBySubcommand[sub] ??= { runs: 0, cpu_seconds_with_ssh: 0 };
      gitBySubcommand[sub].runs += 1;
      gitBySubcommand[sub].cpu_seconds_with_ssh = round(gitBySubcommand[sub].cpu_seconds_with_ssh + secondsOf(line), 3);
    }
    const sessions = (kind) => entries.filter((line) => line.startsWith('server ') && line.endsWith(kind));
    parts.remote = {
      consults: PROFILE,
      runners: PROFILE_RUNNERS,
      model_seconds: PROFILE_DELAY,
      runner_node: runnerSelf,
      git: git - ssh,
      ssh_client: ssh + masters,
      sshd: serverTree - server,
      server_git: server - hook,
      hook,
      oracle: oracleCpu,
      unattributed: tree - runnerSelf - git - oracleCpu,
      hook_runs: hookRuns.length,
      hook_runs_by_outcome: byOutcome(hookRuns),
      hook_runs_stale_at_start: { runs: hookRuns.filter((run) => run.stale).length, by_outcome: byOutcome(hookRuns.filter((run) => run.stale)) },
      server_sessions: Object.fromEntries(['git-upload-pack', 'git-receive-pack'].map((kind) => [kind, { sessions: sessions(kind).length, cpu_seconds_with_hook: round(sumOf(sessions(kind)), 3) }])),
      git_commands: entries.filter((line) => line.startsWith('git ')).length,
      git_by_subcommand: gitBySubcommand,
      rebuilt_writes: events.filter((event) => event.type === 'rebuilt').length,
      push_conflicts: events.filter((event) => event.type === 'rebuilt').reduce((total, event) => total + event.conflicts, 0),
      claims_lost: events.filter((event) => event.type === 'skipped' && String(event.reason).endsWith('was claimed by another runner')).length,
      coo_push: { session: cooSession, hook: secondsOf(cooPush.hook), server_git: secondsOf(cooPush.server) - secondsOf(cooPush.hook) },
      load_average_before: loadBefore,
      load_average_after: loadAfter,
      machine_busy_percent_all_users: round((100 * (b.busy - a.busy)) / (cpus().length * ((b.at - a.at) / 1000)), 0),
      seconds: round((b.at - a.at) / 1000, 1),
    };
  }
  if (PROFILE_RUNNERS > 1) {
    const perConsult = (row) => Object.fromEntries(Object.entries(row).map(([key, value]) => [key, typeof value === 'number' && ['runner_node', 'git', 'ssh_client', 'sshd', 'server_git', 'hook', 'oracle', 'unattributed'].includes(key) ? round(value / row.consults, 3) : value]));
    return { remote: perConsult(parts.remote) };
  }

  // The same consults on a local ledger.
  {
    const ledger = await served();
    const machine = { home: join(ledger.dir, 'homes', 'local'), gitdir: ledger.gitdir, env: { ...process.env, ...env } };
    mkdirSync(machine.home, { recursive: true });
    const r = runner(ledger, machine, { model, oracle: join(pbin, 'oracle'), remote: false });
    await settle([r], { beats: false });
    const from = readTimings(timings).lines;
    const a = account([r]);
    const own = Ledger.open(ledger.gitdir);
    for (let i = 0; i < PROFILE; i += 1) await consultOf(ledger, own, i);
    own.close();
    await waitFor(() => r.events.filter((event) => event.type === 'receipt' && event.seen >= a.at).length >= PROFILE, 600, `${PROFILE} receipts`);
    const b = account([r]);
    await r.stop();
    const entries = readTimings(timings, from).entries;
    const sum = (label) => entries.filter((line) => line.split(' ')[0] === label).reduce((total, line) => total + Number(line.split(' ')[1]) + Number(line.split(' ')[2]), 0);
    const runnerSelf = b.procs.get(r.child.pid).self - a.procs.get(r.child.pid).self;
    const tree = b.trees[0] - a.trees[0];
    const [git, oracleCpu] = ['git', 'oracle'].map(sum);
    parts.local = { consults: PROFILE, runner_node: runnerSelf, git, ssh_client: 0, sshd: 0, server_git: 0, hook: 0, oracle: oracleCpu, unattributed: tree - runnerSelf - git - oracleCpu, git_commands: entries.filter((line) => line.startsWith('git ')).length };
  }
  const perConsult = (row) => Object.fromEntries(Object.entries(row).map(([key, value]) => [key, typeof value === 'number' && ['runner_node', 'git', 'ssh_client', 'sshd', 'server_git', 'hook', 'oracle', 'unattributed'].includes(key) ? round(value / row.consults, 3) : value]));
  return { remote: perConsult(parts.remote), local: perConsult(parts.local) };
}

function table(rows) {
  const one = new Map(rows.filter((row) => row.runners === 1).map((row) => [row.model_seconds, row.consults_per_minute]));
  const head = '| model | runners | consults/min | scaling | conflicts / consult | retries / consult | runner pushes at the hook / consult | hook CPU s / consult | CPU s / consult | CPU vs 1 runner | paid calls / consults | errors |';
  const out = [head, `|${' --- |'.repeat(12)}`];
  const cpuOne = new Map(rows.filter((row) => row.runners === 1).map((row) => [row.model_seconds, row.cpu_seconds_per_consult]));
  for (const row of rows) {
    const scaling = one.has(row.model_seconds) ? `${(row.consults_per_minute / one.get(row.model_seconds)).toFixed(2)}x` : '';
    const cpu = cpuOne.has(row.model_seconds) ? `${(row.cpu_seconds_per_consult / cpuOne.get(row.model_seconds)).toFixed(2)}x` : '';
    out.push(`| ${row.model_seconds} s | ${row.runners} | ${row.consults_per_minute} | ${scaling} | ${row.conflicts_per_consult} | ${row.retries_per_consult} | ${row.runner_pushes_at_the_hook_per_consult} | ${row.hook_cpu_seconds_per_consult} | ${row.cpu_seconds_per_consult} | ${cpu} | ${row.paid_calls} / ${row.consults} | ${row.errors} |`);
  }
  return out.join('\n');
}

for (const signal of ['SIGINT', 'SIGTERM']) {
  process.once(signal, () => {
    for (const child of children) child.kill('SIGTERM');
    sshd.close();
    setTimeout(() => {
      rmSync(work, { recursive: true, force: true });
      process.exit(1);
    }, 2000);
  });
}

try {
  const summary = { cores: cpus().length, poll: POLL.join(' '), consults_per_row: CONSULTS, load_average_at_start: loadAverage() };
  if (!SKIP.includes('throughput')) {
    summary.throughput = [];
    for (const modelSeconds of MODELS) {
      for (const count of RUNNERS) {
        const row = await throughputRow(modelSeconds, count);
        log(JSON.stringify(row));
        summary.throughput.push(row);
      }
    }
    summary.table = table(summary.throughput);
  }
  if (!SKIP.includes('latency')) {
    summary.push_to_oracle_start = await latency();
    log(JSON.stringify(summary.push_to_oracle_start));
  }
  if (!SKIP.includes('profile')) {
    summary.profile_cpu_seconds_per_consult = await profile();
    log(JSON.stringify(summary.profile_cpu_seconds_per_consult));
  }
  summary.load_average_at_end = loadAverage();
  process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
  if (summary.table !== undefined) process.stdout.write(`\n${summary.table}\n`);
} finally {
  // Runners a failed row left running are stopped first: removing their folders under them hides the row's own error.
  await Promise.all([...children].map((child) => new Promise((resolve) => (child.once('exit', resolve), child.kill('SIGTERM'), setTimeout(resolve, 10_000).unref()))));
  for (const model of models.values()) await model.close();
  sshd.close();
  rmSync(work, { recursive: true, force: true });
}
