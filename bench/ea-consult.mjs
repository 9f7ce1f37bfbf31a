// node bench/ea-consult.mjs [rounds]   (after npm run build)
// The wall time of one advisory consult asked by an execution agent inside its dispatch attempt,
// against the same consult sent by the COO, alternating in one run, on one ledger, one Oracle
// transport and one loopback model. The agent's consult is timed as the agent sees it: from its
// tool call to the answer in hand, through the real relay (`coo consult-relay`, an MCP server the
// SDK's client starts over stdio), the runner's socket, the snapshot of its worktree, the envelope
// the COO signs on its behalf, and the consult lane's attempt and receipt. The COO's is timed from
// `enqueueConsult` to the receipt committed and the answer read. Prints the medians and the ratio.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';

const root = join(import.meta.dirname, '..');
const dist = join(root, 'dist');
const COO = join(dist, 'cli', 'main.js');
const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js');
const { generatePrivateKey } = await import(join(dist, 'crypto', 'keys.js'));
const { initLedger } = await import(join(dist, 'ledger', 'init.js'));
const { Ledger } = await import(join(dist, 'ledger', 'ledger.js'));
const { Runner } = await import(join(dist, 'runner', 'runner.js'));
const { OracleCli } = await import(join(dist, 'consult', 'oracle.js'));
const { enqueueConsult } = await import(join(dist, 'consult', 'enqueue.js'));
const { enqueueDispatch } = await import(join(dist, 'dispatch', 'enqueue.js'));
const { openConsultBridge } = await import(join(dist, 'dispatch', 'consult-bridge.js'));
const { answerConsultCall } = await import(join(dist, 'dispatch', 'consult-tool.js'));
const { Scrubber } = await import(join(dist, 'util', 'scrub.js'));
const { startFakeModelServer } = await import(join(dist, 'offline', 'fake-model-server.js'));
const { claimPath, messageFolder } = await import(join(dist, 'ledger', 'layout.js'));
const { readStrictYaml, toYaml } = await import(join(dist, 'schema', 'strict-yaml.js'));
const { attemptIdFor } = await import(join(dist, 'util', 'ids.js'));
const { isoSeconds } = await import(join(dist, 'util', 'time.js'));

const ROUNDS = Number(process.argv.slice(2).find((arg) => /^\d+$/.test(arg)) ?? 7);
const dir = mkdtempSync(join(tmpdir(), 'coo-bench-ea-consult-'));
const keys = { ceo: generatePrivateKey('ceo'), coo: generatePrivateKey('coo.hermes'), codex: generatePrivateKey('ea.codex') };
const gitdir = join(dir, 'ledger.git');
await initLedger({ gitdir, ceoKey: keys.ceo, actors: new Map([['coo.hermes', keys.coo.publicKey], ['ea.codex', keys.codex.publicKey]]), now: new Date() });
const repo = join(dir, 'target');
mkdirSync(join(repo, 'src'), { recursive: true });
writeFileSync(join(repo, 'src', 'add.js'), 'export const add = (a, b) => a + b;\n');
writeFileSync(join(repo, 'test.sh'), 'grep -q "a + b" src/add.js\n');
const git = (...args) => execFileSync('git', ['-C', repo, ...args], { env: { ...process.env, GIT_AUTHOR_NAME: 'b', GIT_AUTHOR_EMAIL: 'b@x', GIT_COMMITTER_NAME: 'b', GIT_COMMITTER_EMAIL: 'b@x' } });
git('init', '-q', '-b', 'main');
git('add', '-A');
git('commit', '-q', '-m', 'first');

const server = await startFakeModelServer(['ok']);
const ledger = Ledger.open(gitdir);
const transport = new OracleCli({ route: { baseUrl: `${server.url}/v1` }, env: { OPENAI_API_KEY: 'sk-bench' }, hide: [gitdir] });
const runner = new Runner({ ledger, key: keys.coo, repo, stateDir: join(dir, 'state'), transport });
// The runner's own path for a consult an agent asks (what its dispatch lane calls while the agent waits).
const consultLane = runner.lanes.get('aa_consult');
const runAsked = (id) => runner.runAsked(consultLane, id);
const question = 'Is add() in src/add.js right for negative numbers and NaN?';

/** A dispatch to ea.codex with its first attempt claimed, as the runner holds it while its agent works. */
async function openAttempt(i) {
  const queued = await enqueueDispatch({ ledger, key: keys.coo, now: new Date(), target: 'ea.codex', repo, task: 'Check add() and fix it if it is wrong.', scope: ['src/**'], accept: ['test.sh passes'], verify: ['sh test.sh'], idempotencyKey: `bench-dispatch-${i}` });
  const claim = { schema_version: 'claim.v0', message_id: queued.messageId, attempt_id: attemptIdFor(queued.messageId, 1, 'ea'), attempt_number: 1, runner_id: 'run-bench', transport_session_id: 'bench', claimed_at: isoSeconds(new Date()) };
  await ledger.append({ files: [{ path: claimPath(messageFolder(queued.messageId, queued.envelope.created_at), 1), bytes: Buffer.from(toYaml(claim)) }], key: keys.coo, summary: 'claim', now: new Date() });
  return queued.envelope;
}

async function eaConsult(i) {
  const dispatch = await openAttempt(i);
  const bridge = await openConsultBridge((request) =>
    answerConsultCall({ ctx: { ledger, key: keys.coo, clock: () => new Date(), write: (write) => write(ledger) }, consults: { run: runAsked }, dispatch, attempt: 1, attemptId: attemptIdFor(dispatch.message_id, 1, 'ea'), worktree: repo, secrets: new Scrubber() }, request),
  );
  const client = new Client({ name: 'bench-agent', version: '0.0.0' });
  // The relay is started before the clock runs, as the executor starts it when the agent's session begins.
  await client.connect(new StdioClientTransport({ command: process.execPath, args: [COO, 'consult-relay', '--socket', bridge.socket], stderr: 'ignore' }));
  try {
    const start = performance.now();
    const result = await client.callTool({ name: 'consult', arguments: { to: 'aa.chatgpt', question, files: ['src/add.js'] } }, undefined, { timeout: 300_000 });
    const ms = performance.now() - start;
    if (result.isError === true || !/UNTRUSTED DATA/.test(result.content[0]?.text ?? '')) throw new Error(`the agent's consult failed: ${result.content[0]?.text ?? ''}`);
    return ms;
  } finally {
    await client.close();
    await bridge.close();
  }
}

async function cooConsult(i) {
  const start = performance.now();
  const queued = await enqueueConsult({ ledger, key: keys.coo, now: new Date(), target: 'aa.chatgpt', repo, patterns: ['src/add.js'], question, maxRuntimeSeconds: 600, idempotencyKey: `bench-consult-${i}` });
  await runner.runOnce();
  const record = (await ledger.state()).messages.get(queued.messageId);
  const receipt = record.attempts[0]?.receipt;
  if (receipt?.status !== 'succeeded') throw new Error(`the COO's consult ended ${receipt?.status ?? 'without a receipt'}`);
  // The answer in hand, as the agent has it: the receipt names it.
  const doc = readStrictYaml(await ledger.readFile(receipt.path), receipt.path);
  if ((await ledger.readFile(doc.output_ref)) === null) throw new Error('no answer');
  return performance.now() - start;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
// One of each first, untimed: the first Oracle start and the first git calls warm caches both paths share.
await cooConsult(-1);
await eaConsult(-1);
const ea = [];
const coo = [];
const load = [];
for (let i = 0; i < ROUNDS; i += 1) {
  load.push(loadavg()[0]);
  if (i % 2 === 0) {
    ea.push(await eaConsult(i));
    coo.push(await cooConsult(i));
  } else {
    coo.push(await cooConsult(i));
    ea.push(await eaConsult(i));
  }
}
runner.close();
ledger.close();
await server.close();
const result = {
  rounds: ROUNDS,
  ea_median_ms: Math.round(median(ea)),
  coo_median_ms: Math.round(median(coo)),
  ratio: Number((median(ea) / median(coo)).toFixed(3)),
  ea_ms: ea.map(Math.round),
  coo_ms: coo.map(Math.round),
  load_1min: load.map((value) => Number(value.toFixed(2))),
  cpus: (await import('node:os')).cpus().length,
};
process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
