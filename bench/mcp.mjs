// node bench/mcp.mjs [--quick] (after npm run build): the figures of `coo mcp`.
// 1. An MCP `consult` (enqueue, no wait) against `coo consult` from a shell, alternating in one run:
//    the server pays no process start, so the ratio of the medians is the figure.
// 2. `sessions` on a ledger of 100,000 signed entries (bench/build-ledger.mjs): the first call after
//    the server starts (it loads the state checkpoint) and the median of calls after it.
// Prints one JSON object; absolute times are context, the VM is noisy.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { buildLedger, warmCheckpoint } from './build-ledger.mjs';

const root = join(import.meta.dirname, '..');
const dist = join(root, 'dist');
const COO = join(dist, 'cli', 'main.js');
const QUICK = process.argv.includes('--quick');
const CONSULTS = QUICK ? 5 : 15;
const ENTRIES = QUICK ? 5000 : 100_000;
const CALLS = QUICK ? 5 : 20;

const { generatePrivateKey, formatPrivateKey } = await import(join(dist, 'crypto', 'keys.js'));
const { initLedger } = await import(join(dist, 'ledger', 'init.js'));

const work = mkdtempSync(join(tmpdir(), 'coo-bench-mcp-'));
const log = (line) => process.stderr.write(`${line}\n`);
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const env = { ...process.env, COO_LEDGER: '', COO_KEY: '', XDG_STATE_HOME: join(work, 'xdg') };

async function connect(gitdir, keyFile, repo) {
  const transport = new StdioClientTransport({ command: process.execPath, args: [COO, 'mcp', '--ledger', gitdir, '--key', keyFile, '--repo', repo], env, stderr: 'ignore' });
  const client = new Client({ name: 'coo-bench', version: '0.0.0' });
  await client.connect(transport);
  return client;
}

async function timedCall(client, name, args) {
  const start = performance.now();
  const result = await client.callTool({ name, arguments: args });
  const ms = performance.now() - start;
  if (result.isError) throw new Error(`${name}: ${result.content[0]?.text}`);
  return { ms, result };
}

try {
  // 1. consult: MCP against the shell.
  const keys = { ceo: generatePrivateKey('ceo'), coo: generatePrivateKey('coo.hermes'), codex: generatePrivateKey('ea.codex') };
  const gitdir = join(work, 'ledger.git');
  await initLedger({ gitdir, ceoKey: keys.ceo, actors: new Map([['coo.hermes', keys.coo.publicKey], ['ea.codex', keys.codex.publicKey]]), now: new Date() });
  const keyFile = join(work, 'coo.key');
  writeFileSync(keyFile, formatPrivateKey(keys.coo), { mode: 0o600 });
  const repo = join(work, 'target');
  mkdirSync(join(repo, 'src'), { recursive: true });
  writeFileSync(join(repo, 'src', 'add.ts'), 'export const add = (a: number, b: number): number => a + b;\n');
  execFileSync('git', ['init', '-q', '-b', 'main'], { cwd: repo });
  execFileSync('git', ['-c', 'user.name=b', '-c', 'user.email=b@b', 'commit', '-q', '--allow-empty', '-m', 'x'], { cwd: repo });
  execFileSync('git', ['add', '-A'], { cwd: repo });
  execFileSync('git', ['-c', 'user.name=b', '-c', 'user.email=b@b', 'commit', '-q', '-m', 'add'], { cwd: repo });
  const client = await connect(gitdir, keyFile, repo);
  await timedCall(client, 'consult', { to: 'aa.chatgpt', files: ['src/add.ts'], prompt: 'warm up' });
  const mcp = [];
  const shell = [];
  for (let i = 0; i < CONSULTS; i++) {
    mcp.push((await timedCall(client, 'consult', { to: 'aa.chatgpt', files: ['src/add.ts'], prompt: `question ${i} over MCP` })).ms);
    const start = performance.now();
    const cli = spawnSync(process.execPath, [COO, 'consult', '--ledger', gitdir, '--key', keyFile, '--repo', repo, '--to', 'aa.chatgpt', '--file', 'src/add.ts', '--prompt', `question ${i} from the shell`], { env, encoding: 'utf8' });
    shell.push(performance.now() - start);
    if (cli.status !== 0) throw new Error(`coo consult: ${cli.stderr}`);
  }
  await client.close();
  const consult = { mcp_median_ms: Math.round(median(mcp)), shell_median_ms: Math.round(median(shell)), ratio: Number((median(shell) / median(mcp)).toFixed(1)), n: CONSULTS };
  log(`consult: MCP ${consult.mcp_median_ms} ms, shell ${consult.shell_median_ms} ms, ${consult.ratio}x`);

  // 2. sessions on a large ledger.
  const big = join(work, 'big.git');
  const bigKeys = { ceo: generatePrivateKey('ceo'), coo: generatePrivateKey('coo.hermes'), codex: generatePrivateKey('ea.codex') };
  log(`building a ledger of ${ENTRIES} signed entries...`);
  await buildLedger(big, ENTRIES, bigKeys, { onProgress: (n) => log(`  ${n}`) });
  const warmed = await warmCheckpoint(big);
  log(`  replayed once (Ledger-Seq ${warmed.seq}, ${warmed.findings} findings)`);
  const bigKey = join(work, 'big-coo.key');
  writeFileSync(bigKey, formatPrivateKey(bigKeys.coo), { mode: 0o600 });
  const bigClient = await connect(big, bigKey, repo);
  const first = await timedCall(bigClient, 'sessions', { limit: 20 });
  const newest = [];
  const filtered = [];
  const paged = [];
  let before;
  for (let i = 0; i < CALLS; i++) {
    newest.push((await timedCall(bigClient, 'sessions', { limit: 20 })).ms);
    // A correlation filter that matches one message: every record is looked at.
    filtered.push((await timedCall(bigClient, 'sessions', { correlation_id: `corr_bench${i * 7}` })).ms);
    const page = await timedCall(bigClient, 'sessions', { limit: 200, ...(before === undefined ? {} : { before }) });
    paged.push(page.ms);
    before = page.result.structuredContent.next_before ?? undefined;
  }
  await bigClient.close();
  const sessions = {
    entries: ENTRIES,
    first_call_ms: Math.round(first.ms),
    newest_page_median_ms: Math.round(median(newest)),
    correlation_filter_median_ms: Math.round(median(filtered)),
    page_of_200_median_ms: Math.round(median(paged)),
    n: CALLS,
  };
  log(`sessions on ${ENTRIES}: first ${sessions.first_call_ms} ms, newest page ${sessions.newest_page_median_ms} ms, correlation ${sessions.correlation_filter_median_ms} ms, 200-page ${sessions.page_of_200_median_ms} ms`);
  process.stdout.write(`${JSON.stringify({ consult, sessions }, null, 2)}\n`);
} finally {
  rmSync(work, { recursive: true, force: true });
}
