// node bench/dispatch-overhead.mjs [rounds] [--adapter]   (after npm run build)
// One scripted Codex task end to end through the dispatch lane, from `enqueueDispatch` to the
// committed receipt (a ledger made with initLedger, the runner's `runOnce`: claim commit, worktree,
// Codex, the COO's evidence and verification, its signed commit, the receipt commit), against a
// bare `codex exec` of the same script on the same repository, alternating in one run. Prints the
// medians, the ratio and the parts. With --adapter: the adapter and the evidence alone, no ledger.
import { spawn, execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const dist = join(import.meta.dirname, '..', 'dist');
const { startScriptedResponsesServer } = await import(join(dist, 'offline', 'fake-responses-server.js'));
const { CodexExecutor, pinnedCodexCommand } = await import(join(dist, 'dispatch', 'codex.js'));
const { createAttemptWorktree } = await import(join(dist, 'dispatch', 'worktree.js'));
const { gatherEvidence } = await import(join(dist, 'dispatch', 'evidence.js'));
const { decideDispatch } = await import(join(dist, 'dispatch', 'outcome.js'));
const { generatePrivateKey } = await import(join(dist, 'crypto', 'keys.js'));
const { initLedger, defaultPolicy } = await import(join(dist, 'ledger', 'init.js'));
const { Ledger } = await import(join(dist, 'ledger', 'ledger.js'));
const { Runner } = await import(join(dist, 'runner', 'runner.js'));
const { OracleCli } = await import(join(dist, 'consult', 'oracle.js'));
const { enqueueDispatch } = await import(join(dist, 'dispatch', 'enqueue.js'));
const { executorFactory } = await import(join(dist, 'dispatch', 'executors.js'));

const args = process.argv.slice(2);
const ADAPTER = args.includes('--adapter');
const ROUNDS = Number(args.find((arg) => /^\d+$/.test(arg)) ?? 5);
const dir = mkdtempSync(join(tmpdir(), 'coo-bench-dispatch-'));
const repo = join(dir, 'target');
const git = (args, cwd) => execFileSync('git', args, { cwd, encoding: 'utf8', env: { ...process.env, GIT_AUTHOR_NAME: 'b', GIT_AUTHOR_EMAIL: 'b@x', GIT_COMMITTER_NAME: 'b', GIT_COMMITTER_EMAIL: 'b@x' } });
mkdirSync(join(repo, 'src'), { recursive: true });
git(['init', '-q', '-b', 'main', repo]);
writeFileSync(join(repo, 'src', 'add.js'), 'export const add = (a, b) => a - b;\n');
writeFileSync(join(repo, 'test.sh'), 'grep -q "a + b" src/add.js\n');
git(['add', '-A'], repo);
git(['commit', '-q', '-m', 'base'], repo);
const base = git(['rev-parse', 'HEAD'], repo).trim();
const key = generatePrivateKey('coo.hermes');

const SCRIPT = [
  { kind: 'patch', patch: '*** Update File: src/add.js\n@@\n-export const add = (a, b) => a - b;\n+export const add = (a, b) => a + b;' },
  { kind: 'shell', cmd: 'sh test.sh && echo tested' },
  { kind: 'message', text: 'Fixed add().' },
];
const server = await startScriptedResponsesServer();
const command = pinnedCodexCommand();
const baseUrl = `${server.url}/v1`;
const env = { PATH: process.env.PATH, MOCK_API_KEY: 'sk-bench' };
let n = 0;

async function bare() {
  n += 1;
  const wt = join(dir, `bare-${n}`);
  git(['worktree', 'add', '-q', '-b', `bare-${n}`, wt, base], repo);
  const scratch = join(dir, `bare-scratch-${n}`);
  for (const sub of ['home', 'codex-home', 'tmp']) mkdirSync(join(scratch, sub), { recursive: true });
  server.setScript(SCRIPT);
  const argv = ['exec', '--ignore-user-config', '-c', 'model_provider=mock', '-c', `model_providers.mock={name="Mock",base_url="${baseUrl}",env_key="MOCK_API_KEY",wire_api="responses",request_max_retries=0,stream_max_retries=0}`, '-c', 'model="mock-model"', '-c', 'approval_policy="never"', '-c', 'analytics.enabled=false', '-c', 'features.plugins=false', '-c', 'features.remote_plugin=false', '--sandbox', 'workspace-write', '--cd', wt, '--json', 'Fix add() so that test.sh passes.'];
  const started = performance.now();
  await new Promise((resolve) => {
    const child = spawn(command[0], [...command.slice(1), ...argv], { cwd: wt, env: { ...env, HOME: join(scratch, 'home'), CODEX_HOME: join(scratch, 'codex-home'), TMPDIR: join(scratch, 'tmp') }, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.resume();
    child.stderr.resume();
    child.on('close', resolve);
  });
  return { total: performance.now() - started };
}

async function dispatch(isolation) {
  n += 1;
  const parts = {};
  const t = () => performance.now();
  const started = t();
  let mark = started;
  const lap = (name) => {
    const now = t();
    parts[name] = now - mark;
    mark = now;
  };
  const scratch = join(dir, `scratch-${n}`);
  mkdirSync(scratch, { recursive: true });
  const wt = await createAttemptWorktree({ repo, base, branch: `coo/attempt-${n}`, path: join(dir, `wt-${n}`) });
  lap('worktree');
  server.setScript(SCRIPT);
  const executor = new CodexExecutor({ command, baseUrl, model: 'mock-model', providerKeyEnv: 'MOCK_API_KEY', env, isolation });
  executor.check();
  const run = await executor.run({ attemptId: `ea_attempt_BENCH_${n}`, worktree: wt.path, scratch, prompt: 'Fix add() so that test.sh passes.', timeoutSeconds: 120 });
  lap('codex');
  const gathered = await gatherEvidence(wt, { runnerDir: join(dir, `runner-${n}`), scope: ['src/**'], verify: ['sh test.sh'], verifyTimeoutSeconds: 30, isolation, hide: [], commit: { key, actor: 'coo.hermes', attemptId: `ea_attempt_BENCH_${n}`, summary: 'Fix add', now: new Date() } });
  lap('evidence, verification and commit');
  const decision = decideDispatch({ expected: { executor: 'codex', attemptId: `ea_attempt_BENCH_${n}` }, attemptTerminal: false, run, evidence: gathered.summary, costUsd: 0, maxCostUsd: 1, baseSha: base });
  lap('decision');
  if (decision.kind !== 'receipt' || decision.status !== 'succeeded') throw new Error(`attempt did not succeed: ${JSON.stringify(decision)}`);
  return { total: t() - started, parts };
}

// The ledger and the runner, as `coo watch` makes them (initLedger's default policy: ea.codex dispatches without the CEO).
const ceo = generatePrivateKey('ceo');
const codexKey = generatePrivateKey('ea.codex');
const gitdir = join(dir, 'ledger.git');
await initLedger({ gitdir, ceoKey: ceo, actors: new Map([['coo.hermes', key.publicKey], ['ea.codex', codexKey.publicKey]]), policy: defaultPolicy(), now: new Date() });
const ledger = Ledger.open(gitdir);

async function lane(isolation) {
  n += 1;
  const stateDir = join(dir, `state-${n}`);
  const seen = {};
  const t = () => performance.now();
  const executors = executorFactory({ command, baseUrl, isolation, hide: [gitdir, stateDir], env: { ...env, OPENAI_API_KEY: 'sk-bench' } });
  const runner = new Runner({ ledger, key, repo, stateDir, transport: new OracleCli({ route: {}, hide: [gitdir] }), executors, onEvent: (event) => (seen[event.type] ??= t()) });
  server.setScript(SCRIPT);
  const started = t();
  const { messageId } = await enqueueDispatch({ ledger, key, now: new Date(), target: 'ea.codex', repo, task: 'Fix add() so that test.sh passes.', scope: ['src/**'], accept: ['test.sh passes'], verify: ['sh test.sh'], timeoutSeconds: 120, maxRuntimeSeconds: 120, idempotencyKey: `bench-${n}` });
  const enqueued = t();
  await runner.runOnce();
  const ended = t();
  runner.close();
  const record = (await ledger.state()).messages.get(messageId);
  const receipt = record.attempts[0]?.receipt;
  if (receipt?.status !== 'succeeded') throw new Error(`dispatch ${messageId} did not succeed: ${JSON.stringify(receipt)}`);
  const parts = {
    enqueue: enqueued - started,
    'claim commit': seen.claimed - enqueued,
    worktree: seen.executor_started - seen.claimed,
    codex: seen.executor_ended - seen.executor_started,
    'evidence, verification and signed commit': seen.verified - seen.executor_ended,
    'receipt commit': seen.receipt - seen.verified,
    'then, after the receipt: worktree removed': ended - seen.receipt,
  };
  // The figure ends at the committed receipt; removing the worktree comes after it, shown as a part.
  return { total: seen.receipt - started, parts };
}

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
};
const results = { bare: [], bwrap: [], none: [] };
const measured = ADAPTER ? dispatch : lane;
await bare(); // warm the binary's pages
for (let i = 0; i < ROUNDS; i += 1) {
  results.bare.push(await bare());
  results.bwrap.push(await measured('bwrap'));
  results.none.push(await measured('none'));
}
ledger.close();
await server.close();
rmSync(dir, { recursive: true, force: true });
const m = (list, pick) => median(list.map(pick));
const bareMs = m(results.bare, (r) => r.total);
for (const name of ['bwrap', 'none']) {
  const list = results[name];
  const total = m(list, (r) => r.total);
  const parts = Object.keys(list[0].parts).map((part) => `${part} ${m(list, (r) => r.parts[part]).toFixed(0)} ms`).join(', ');
  console.log(`${ADAPTER ? 'adapter, no ledger' : 'dispatch, enqueue to committed receipt'} (${name === 'bwrap' ? 'bubblewrap' : 'no bubblewrap'}): ${total.toFixed(0)} ms vs bare codex exec ${bareMs.toFixed(0)} ms = ${(total / bareMs).toFixed(2)}x  [${parts}]`);
}
console.log(`rounds: ${ROUNDS}, medians; bare runs: ${results.bare.map((r) => r.total.toFixed(0)).join(' ')}`);
