#!/usr/bin/env node
// Panels and providers against bare Oracle calls (`node bench/panel.mjs [rounds]`, after `npm run build`).
//
// - A single consult on each provider (ChatGPT, Claude, Gemini), enqueue to committed receipt through
//   the lane, against a bare call of the pinned Oracle to the same scripted server with the same
//   question and files.
// - A three-member panel (one question, three members, their Oracles at once), enqueue to the last
//   member's committed receipt, against the slowest member's bare call of the same round.
// Rounds alternate lane and bare runs. The scripted server answers each call after a fixed delay, so
// that a provider's answer takes about as long as a short real one, not a few milliseconds.
import { spawn, execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';

const root = join(import.meta.dirname, '..');
const dist = join(root, 'dist');
const ROUNDS = Number(process.argv[2] ?? 5);
const DELAY_MS = 1500;

const { generatePrivateKey } = await import(join(dist, 'crypto', 'keys.js'));
const { Ledger } = await import(join(dist, 'ledger', 'ledger.js'));
const { initLedger, defaultPolicy } = await import(join(dist, 'ledger', 'init.js'));
const { startFakeModelServer } = await import(join(dist, 'offline', 'fake-model-server.js'));
const { enqueueConsult, enqueuePanel } = await import(join(dist, 'consult', 'enqueue.js'));
const { OracleCli } = await import(join(dist, 'consult', 'oracle.js'));
const { Runner } = await import(join(dist, 'runner', 'runner.js'));

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};
const seconds = (ms) => `${(ms / 1000).toFixed(2)} s`;
const timed = async (fn) => {
  const start = performance.now();
  await fn();
  return performance.now() - start;
};

const work = mkdtempSync(join(tmpdir(), 'coo-bench-panel-'));
const loadBefore = loadavg().map((value) => value.toFixed(2)).join(', ');

// The offline model answers every call after DELAY_MS: 'slow' holds 1.5 s.
const server = await startFakeModelServer(['slow']);
const keys = { ceo: generatePrivateKey('ceo'), coo: generatePrivateKey('coo.hermes') };
const gitdir = join(work, 'ledger.git');
const members = ['aa.chatgpt', 'aa.claude', 'aa.gemini'];
const base = defaultPolicy();
await initLedger({ gitdir, ceoKey: keys.ceo, actors: new Map([['coo.hermes', keys.coo.publicKey]]), policy: { ...base, panels: [{ name: 'review', from: 'coo.*', members }] }, now: new Date() });
const target = join(work, 'target');
mkdirSync(join(target, 'src'), { recursive: true });
writeFileSync(join(target, 'src', 'add.ts'), 'export function add(a: number, b: number): number {\n  return a + b;\n}\n');
writeFileSync(join(target, 'README.md'), '# calc\n');
const g = (...args) => execFileSync('git', ['-C', target, ...args], { env: { ...process.env, GIT_AUTHOR_NAME: 'b', GIT_AUTHOR_EMAIL: 'b@x', GIT_COMMITTER_NAME: 'b', GIT_COMMITTER_EMAIL: 'b@x' } });
g('init', '-q', '-b', 'main');
g('add', '-A');
g('commit', '-q', '-m', 'first');

const env = { OPENAI_API_KEY: 'sk-bench', ANTHROPIC_API_KEY: 'sk-ant-bench', GEMINI_API_KEY: 'gemini-bench' };
const anthropicUrl = `http://api.anthropic.com:${server.port}/v1/messages`;
const ledger = Ledger.open(gitdir);
// Claude's route keeps its host (Oracle's Claude client is used for api.anthropic.com only), which the sandbox resolves to 127.0.0.1.
const transport = new OracleCli({ route: { baseUrl: `${server.url}/v1` }, endpoints: { anthropic: anthropicUrl, google: server.url, hosts: [{ name: 'api.anthropic.com', address: '127.0.0.1' }] }, env, hide: [gitdir] });
if (!transport.isolated) throw new Error('bubblewrap is needed: the Claude route resolves api.anthropic.com to the offline model inside the sandbox');
const runner = new Runner({ ledger, key: keys.coo, repo: target, stateDir: join(work, 'state'), transport });

// The bare calls: the pinned Oracle in a folder of the same files, its own HOME, the same server.
// Claude's host is pinned to 127.0.0.1 by a dns.lookup preload (bubblewrap's hosts file in the lane).
const oracleCli = join(root, 'node_modules', '@steipete', 'oracle', 'dist', 'bin', 'oracle-cli.js');
const preload = join(work, 'pin-hosts.mjs');
writeFileSync(
  preload,
  "import dns from 'node:dns';\nconst original = dns.lookup;\ndns.lookup = function lookup(hostname, options, callback) {\n  if (hostname !== 'api.anthropic.com') return original.call(this, hostname, options, callback);\n  const cb = typeof options === 'function' ? options : callback;\n  if (typeof options === 'object' && options !== null && options.all) return process.nextTick(cb, null, [{ address: '127.0.0.1', family: 4 }]);\n  return process.nextTick(cb, null, '127.0.0.1', 4);\n};\n",
);
const bareDir = join(work, 'bare');
mkdirSync(join(bareDir, 'src'), { recursive: true });
writeFileSync(join(bareDir, 'src', 'add.ts'), readFileSync(join(target, 'src', 'add.ts')));
writeFileSync(join(bareDir, 'README.md'), readFileSync(join(target, 'README.md')));
const PROVIDERS = {
  'aa.chatgpt': { model: 'gpt-5.5', node: [], args: ['--base-url', `${server.url}/v1`], env: { OPENAI_API_KEY: env.OPENAI_API_KEY } },
  'aa.claude': { model: 'claude-4.6-sonnet', node: ['--import', preload], args: [], env: { ANTHROPIC_API_KEY: env.ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL: anthropicUrl } },
  'aa.gemini': { model: 'gemini-3.1-pro', node: [], args: [], env: { GEMINI_API_KEY: env.GEMINI_API_KEY, GOOGLE_GEMINI_BASE_URL: server.url } },
};
const question = 'Review add() for numeric edge cases before an execution agent extends it.';
let bareCount = 0;
function bare(actor) {
  const provider = PROVIDERS[actor];
  const home = mkdtempSync(join(work, 'bare-home-'));
  bareCount += 1;
  return timed(
    () =>
      new Promise((resolve, reject) => {
        const child = spawn(
          process.execPath,
          [...provider.node, oracleCli, '--engine', 'api', '--model', provider.model, '--wait', '--no-notify', '--heartbeat', '0', '--search', 'off', '--slug', `bare-run-number-b${bareCount}`, '--force', '--write-output', join(home, 'answer.md'), '--max-output', '2048', ...provider.args, '-p', question, '--file', 'src/add.ts', 'README.md'],
          { cwd: bareDir, env: { PATH: process.env.PATH, HOME: home, ORACLE_HOME_DIR: join(home, 'oracle'), ORACLE_NOTIFY: '0', DOTENV_CONFIG_PATH: '/dev/null', ...provider.env }, stdio: 'ignore' },
        );
        child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`bare oracle for ${actor} exited ${code}`))));
      }),
  );
}

let key = 0;
async function laneConsult(actor) {
  key += 1;
  return timed(async () => {
    await enqueueConsult({ ledger, key: keys.coo, now: new Date(), target: actor, repo: target, patterns: ['src/add.ts', 'README.md'], question, maxRuntimeSeconds: 120, idempotencyKey: `bench-${key}` });
    await runner.runOnce();
  });
}
async function lanePanel() {
  key += 1;
  return timed(async () => {
    await enqueuePanel({ ledger, key: keys.coo, now: new Date(), panel: 'review', repo: target, patterns: ['src/add.ts', 'README.md'], question, maxRuntimeSeconds: 120, idempotencyKey: `bench-panel-${key}` });
    await runner.runOnce();
  });
}

// One warm-up of each, not counted: the first Oracle start reads its modules from disk.
for (const actor of members) {
  await bare(actor);
  await laneConsult(actor);
}
const single = Object.fromEntries(members.map((actor) => [actor, { lane: [], bare: [] }]));
const panel = { lane: [], slowest: [], members: [], together: [] };
for (let round = 0; round < ROUNDS; round += 1) {
  for (const actor of members) {
    // Alternate which runs first, so neither always gets the warmer machine.
    if (round % 2 === 0) {
      single[actor].lane.push(await laneConsult(actor));
      single[actor].bare.push(await bare(actor));
    } else {
      single[actor].bare.push(await bare(actor));
      single[actor].lane.push(await laneConsult(actor));
    }
  }
  const bares = [];
  for (const actor of members) bares.push(await bare(actor));
  panel.slowest.push(Math.max(...bares));
  panel.members.push(bares);
  // The same three bare calls started at once: what three Oracle processes cost on this machine without the lane.
  panel.together.push(await timed(() => Promise.all(members.map((actor) => bare(actor)))));
  panel.lane.push(await lanePanel());
}

const state = await ledger.state();
const notSucceeded = [...state.messages.values()].filter((message) => message.attempts.at(-1)?.receipt?.status !== 'succeeded');
if (notSucceeded.length > 0) throw new Error(`${notSucceeded.length} consults did not succeed`);
const calls = server.requests.length;
runner.close();
ledger.close();
await server.close();
const loadAfter = loadavg().map((value) => value.toFixed(2)).join(', ');

const rows = [];
const row = (figure, value, peer, peerValue, ratio, target) => rows.push(`| ${figure} | ${value} | ${peer} | ${peerValue} | ${ratio.toFixed(2)}x | ${target} | ${ratio <= 1.15 ? 'yes' : 'NO'} |`);
for (const actor of members) {
  const lane = median(single[actor].lane);
  const peer = median(single[actor].bare);
  row(`consult on ${actor} (${PROVIDERS[actor].model}), enqueue to committed receipt (median of ${ROUNDS})`, seconds(lane), 'bare Oracle call, same question, files and server', seconds(peer), lane / peer, '<= 1.15x');
}
const laneP = median(panel.lane);
const slowest = median(panel.slowest);
row(`three-member panel, enqueue to the last committed receipt (median of ${ROUNDS})`, seconds(laneP), "the slowest member's bare Oracle call in the same round", seconds(slowest), laneP / slowest, '<= 1.15x');
const together = median(panel.together);
rows.push(`| three-member panel (the row above) | ${seconds(laneP)} | the three bare calls started at once, to the last one's end | ${seconds(together)} | ${(laneP / together).toFixed(2)}x | context | n/a |`);

const out = [
  `Run ${new Date().toISOString()} with \`node bench/panel.mjs ${ROUNDS}\` on ${cpus().length} x ${cpus()[0]?.model.trim()}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}; bubblewrap on in the lane; the scripted server answers every call after ${DELAY_MS} ms.`,
  `Load averages (1, 5, 15 min): ${loadBefore} before, ${loadAfter} after; other work shared the machine.`,
  '',
  '| figure | value | peer | peer value | ratio | target | met |',
  '| --- | --- | --- | --- | --- | --- | --- |',
  ...rows,
  '',
  `- Panel rounds, lane (s): ${panel.lane.map((ms) => (ms / 1000).toFixed(2)).join(' ')}; slowest bare member (s): ${panel.slowest.map((ms) => (ms / 1000).toFixed(2)).join(' ')}.`,
  `- Three bare calls at once (s): ${panel.together.map((ms) => (ms / 1000).toFixed(2)).join(' ')}.`,
  `- Bare calls per member, medians: ${members.map((actor, index) => `${actor} ${seconds(median(panel.members.map((round) => round[index])))}`).join(', ')}.`,
  `- Calls the server saw: ${calls} (${members.length} warm-up consults, ${members.length * ROUNDS} single consults, ${members.length * ROUNDS} panel members, ${bareCount} bare calls): one per attempt.`,
];
process.stdout.write(`${out.join('\n')}\n`);
