// node bench/remote-runners.mjs [consults] [latency-samples]   (npm run build first)
// Runners on separate clones (each its own process, HOME and state folder) drain consults through
// one remote ledger served by OpenSSH on 127.0.0.1, with its pre-receive hook, against a loopback
// model that takes a fixed 1 s per answer (the fake model server behind a 1 s delay). Prints
// consults per minute with 1, 2 and 4 runners, the push conflicts and retries per 100 consults, and
// the time from a COO's push on its own clone to Oracle's start on a runner (p50, p95). The keys
// made here are throwaway bench fixtures.
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request } from 'node:http';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { startSshd } from './sshd.mjs';

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

const CONSULTS = Number(process.argv[2] ?? 24);
const SAMPLES = Number(process.argv[3] ?? 20);
const POLL = ['--poll-interval', '0.5', '--poll-max', '2'];
const work = mkdtempSync(join(tmpdir(), 'coo-bench-runners-'));
const log = (line) => process.stderr.write(`${line}\n`);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));


/** The fake model server behind a proxy that holds every request for 1 s: a model that takes a fixed 1 s per answer. */
async function slowModel() {
  const model = await startFakeModelServer(['ok']);
  const target = new URL(model.url);
  const proxy = createServer((req, res) => {
    const chunks = [];
    req.on('data', (chunk) => chunks.push(chunk));
    req.on('end', async () => {
      await sleep(1000);
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
const model = await slowModel();
const wrapper = join(work, 'oracle-http.sh');
writeFileSync(wrapper, `#!/bin/sh\nexec "${process.execPath}" "${FAKE_ORACLE}" --fake-mode http "$@"\n`, { mode: 0o755 });
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

function clone(ledger, name) {
  const home = join(ledger.dir, 'homes', name);
  mkdirSync(home, { recursive: true });
  const env = { ...process.env, HOME: home, COO_LEDGER: '', COO_KEY: '', ...sshd.env };
  const gitdir = join(home, 'ledger.git');
  execFileSync(process.execPath, [COO, 'clone', ledger.url, gitdir, '--trust-root', ledger.trustRoot], { env, stdio: 'ignore' });
  return { home, env, gitdir };
}

function consultOf(ledger, own, i) {
  return enqueueConsult({ ledger: own, key: ledger.key, now: new Date(), target: 'aa.chatgpt', repo: ledger.target, patterns: ['README.md'], question: `Is add() correct for input ${i}?`, idempotencyKey: `bench-${cases}-${i}`, maxRuntimeSeconds: 60 });
}

/** `coo watch --remote` on its own clone; its --json events, each stamped with when it arrived. */
function runner(ledger, machine) {
  const child = spawn(process.execPath, [COO, 'watch', '--json', '--remote', ledger.url, '--ledger', machine.gitdir, '--key', ledger.keyFile, '--repo', ledger.target, '--state-dir', join(machine.home, 'state'), '--oracle-command', wrapper, '--oracle-base-url', `${model.url}/v1`, '--isolation', 'none', ...POLL], {
    env: { ...machine.env, OPENAI_API_KEY: 'sk-bench-fixture' },
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  const events = [];
  let buffer = '';
  child.stdout.on('data', (chunk) => {
    buffer += chunk;
    const lines = buffer.split('\n');
    buffer = lines.pop();
    for (const line of lines) if (line.trim() !== '') events.push({ ...JSON.parse(line), seen: Date.now() });
  });
  const exited = new Promise((resolve) => child.on('exit', resolve));
  return { child, events, stop: async () => (child.kill('SIGTERM'), await exited) };
}

async function waitFor(done, seconds) {
  const end = Date.now() + seconds * 1000;
  while (!done()) {
    if (Date.now() > end) throw new Error('timed out');
    await sleep(50);
  }
}

/** CPU seconds the whole machine spent busy (all processes, all cores) since boot, from /proc/stat. */
function busyCpuSeconds() {
  const [user, nice, system, , , irq, softirq, steal] = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  return (user + nice + system + irq + softirq + steal) / 100;
}

const percentile = (values, p) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
};

try {
  const throughput = [];
  for (const count of [1, 2, 4]) {
    const ledger = await served();
    const direct = Ledger.open(ledger.gitdir);
    for (let i = 0; i < CONSULTS; i += 1) await consultOf(ledger, direct, i);
    direct.close();
    const machines = Array.from({ length: count }, (_, n) => clone(ledger, `runner-${n + 1}`));
    const before = model.requests.length;
    const busyBefore = busyCpuSeconds();
    const wallBefore = Date.now();
    const runners = machines.map((machine) => runner(ledger, machine));
    const all = () => runners.flatMap((r) => r.events);
    await waitFor(() => all().filter((event) => event.type === 'receipt').length >= CONSULTS, 900);
    const busy = busyCpuSeconds() - busyBefore;
    const wall = (Date.now() - wallBefore) / 1000;
    await Promise.all(runners.map((r) => r.stop()));
    const events = all();
    const first = Math.min(...events.filter((event) => event.type === 'claimed').map((event) => event.seen));
    const last = Math.max(...events.filter((event) => event.type === 'receipt').map((event) => event.seen));
    const rebuilt = events.filter((event) => event.type === 'rebuilt');
    const lostClaims = events.filter((event) => event.type === 'skipped' && String(event.reason).endsWith('was claimed by another runner')).length;
    const conflicts = rebuilt.reduce((sum, event) => sum + event.conflicts, 0);
    const paid = model.requests.slice(before).map((r) => r.canary);
    const row = {
      runners: count,
      consults: CONSULTS,
      seconds: Number(((last - first) / 1000).toFixed(1)),
      consults_per_minute: Number(((CONSULTS * 60_000) / (last - first)).toFixed(1)),
      paid_calls: paid.length,
      duplicate_paid_calls: paid.length - new Set(paid).size,
      claims_lost_to_another_runner: lostClaims,
      writes_rebuilt_after_conflicts: rebuilt.length,
      push_conflicts_of_landed_writes: conflicts,
      conflicts_per_100_consults: Number(((100 * (conflicts + lostClaims)) / CONSULTS).toFixed(1)),
      retries_per_100_consults: Number(((100 * (rebuilt.length + lostClaims)) / CONSULTS).toFixed(1)),
      errors: events.filter((event) => event.type === 'error').length,
      // The machine's bound: with every core busy, this many CPU seconds per consult allow at most cores x 60 / that per minute.
      cpu_seconds_per_consult: Number((busy / CONSULTS).toFixed(2)),
      cpu_busy_percent: Number(((100 * busy) / (cpus().length * wall)).toFixed(0)),
      cpu_bound_consults_per_minute: Number(((cpus().length * 60 * CONSULTS) / busy).toFixed(1)),
    };
    log(JSON.stringify(row));
    throughput.push(row);
  }

  // Latency: a COO on its own clone pushes one consult at a time; two idle runners poll the remote.
  const ledger = await served();
  const cooMachine = clone(ledger, 'coo');
  const cooLedger = Ledger.open(cooMachine.gitdir);
  const publisher = new RemoteLedger(cooLedger, { remote: ledger.url });
  process.env.GIT_SSH_COMMAND = sshd.env.GIT_SSH_COMMAND;
  const runners = [clone(ledger, 'runner-1'), clone(ledger, 'runner-2')].map((machine) => runner(ledger, machine));
  const all = () => runners.flatMap((r) => r.events);
  await sleep(3000);
  const latencies = [];
  for (let i = 0; i < SAMPLES; i += 1) {
    // A gap that is not a multiple of the poll interval, so pushes land anywhere in the runners' cycle.
    await sleep(700 + Math.floor(Math.random() * 1500));
    const published = await publisher.write((own) => consultOf(ledger, own, i));
    const pushed = Date.now();
    const id = published.result.messageId;
    await waitFor(() => all().some((event) => event.type === 'receipt' && event.messageId === id), 120);
    const started = all().find((event) => event.type === 'oracle_started' && event.messageId === id);
    latencies.push(started.at - pushed);
  }
  await Promise.all(runners.map((r) => r.stop()));
  cooLedger.close();
  const one = throughput.find((row) => row.runners === 1);
  const summary = {
    cores: cpus().length,
    poll: POLL.join(' '),
    model_seconds_per_answer: 1,
    throughput,
    scaling_2_runners: Number((throughput[1].consults_per_minute / one.consults_per_minute).toFixed(2)),
    scaling_4_runners: Number((throughput[2].consults_per_minute / one.consults_per_minute).toFixed(2)),
    push_to_oracle_start_ms: { samples: latencies.length, p50: percentile(latencies, 50), p95: percentile(latencies, 95), max: Math.max(...latencies) },
  };
  process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
} finally {
  await model.close();
  sshd.close();
  rmSync(work, { recursive: true, force: true });
}
