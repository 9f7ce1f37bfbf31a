// node bench/remote-writes.mjs [writers] [appends-per-writer]   (npm run build first)
// Writers on separate clones (each its own process and HOME) append envelopes through one remote
// ledger served by OpenSSH on 127.0.0.1, with its pre-receive hook; every write is published with
// RemoteLedger (fetch, verify, append, push; rebuilt on the new head when a push is refused).
// Prints the push conflicts and tries per write. The keys made here are throwaway bench fixtures.
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startSshd } from './sshd.mjs';

const root = join(import.meta.dirname, '..');
const dist = join(root, 'dist');
const COO = join(dist, 'cli', 'main.js');
const { generatePrivateKey, formatPrivateKey, parsePrivateKey } = await import(join(dist, 'crypto', 'keys.js'));

if (process.argv[2] === '--writer') {
  // One writer: node remote-writes.mjs --writer <clone> <url> <coo.key> <id> <count>
  const [, , , gitdir, url, keyFile, id, count] = process.argv;
  const { Ledger } = await import(join(dist, 'ledger', 'ledger.js'));
  const { RemoteLedger } = await import(join(dist, 'remote', 'publish.js'));
  const { appendEnvelope } = await import(join(dist, 'ledger', 'append-envelope.js'));
  const { newMessageId } = await import(join(dist, 'util', 'ids.js'));
  const key = parsePrivateKey(readFileSync(keyFile, 'utf8'));
  const template = readFileSync(join(root, 'test', 'fixtures', 'dispatch.yaml'), 'utf8');
  // The fixture dispatch's task, whose hash the fixture names.
  const TASK = Buffer.from('Fix add() so that test.sh passes.\n');
  const ledger = Ledger.open(gitdir);
  const remote = new RemoteLedger(ledger, { remote: url });
  const writes = [];
  for (let i = 0; i < Number(count); i += 1) {
    const now = new Date();
    const at = (seconds) => new Date(Math.floor(now.getTime() / 1000) * 1000 + seconds * 1000).toISOString().replace('.000Z', 'Z');
    const messageId = newMessageId(now.getTime());
    const created = at(0);
    const envelope = template
      .replace(/payload_ref: .*/, `payload_ref: messages/${created.slice(0, 7)}/${created.slice(8, 10)}/${created.slice(11, 13)}/${messageId}/prompt.md`)
      .replace(/MESSAGE_TAIL/g, messageId.slice(4))
      .replace(/MESSAGE_ID/g, messageId)
      .replace(/IDEMPOTENCY/g, `w${id}-${i}`)
      .replace(/created_at: .*/, `created_at: "${created}"`)
      .replace(/expires_at: .*/, `expires_at: "${at(3600)}"`)
      .replace(/deadline_at: .*/, `deadline_at: "${at(7200)}"`);
    const started = performance.now();
    // A write whose tries all met a competing push (REMOTE_CONFLICT) is counted and run again.
    let exhausted = 0;
    for (;;) {
      try {
        const published = await remote.write((own) => appendEnvelope(own, Buffer.from(envelope), new Map([['prompt.md', TASK]]), key, new Date()));
        writes.push({ tries: published.report.tries + 8 * exhausted, conflicts: published.report.conflicts + 8 * exhausted, exhausted, ms: performance.now() - started, landed: published.commit !== null });
        break;
      } catch (error) {
        if (error?.code !== 'REMOTE_CONFLICT') throw error;
        exhausted += 1;
      }
    }
  }
  ledger.close();
  process.stdout.write(`${JSON.stringify(writes)}\n`);
  process.exit(0);
}

const WRITERS = Number(process.argv[2] ?? 4);
const EACH = Number(process.argv[3] ?? 25);
const work = mkdtempSync(join(tmpdir(), 'coo-bench-remote-'));
const log = (line) => process.stderr.write(`${line}\n`);


function runWriter(args, env) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [import.meta.filename, '--writer', ...args], { env, stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (chunk) => (out += chunk));
    child.on('close', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`writer exited with ${code}`))));
  });
}

const sshd = await startSshd(join(work, 'sshd'));
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.once(signal, () => {
    sshd.close();
    rmSync(work, { recursive: true, force: true });
    process.exit(130);
  });
}
try {
  const { initLedger } = await import(join(dist, 'ledger', 'init.js'));
  const ceo = generatePrivateKey('ceo');
  const coo = generatePrivateKey('coo.hermes');
  const codex = generatePrivateKey('ea.codex');
  const served = join(work, 'served', 'ledger.git');
  await initLedger({ gitdir: served, ceoKey: ceo, actors: new Map([['coo.hermes', coo.publicKey], ['ea.codex', codex.publicKey]]), now: new Date() });
  const keyFile = join(work, 'bench-fixture-coo.key');
  writeFileSync(keyFile, formatPrivateKey(coo), { mode: 0o600 });
  const url = sshd.url(served);
  const writers = [];
  for (let id = 1; id <= WRITERS; id += 1) {
    const home = join(work, 'homes', `w${id}`);
    mkdirSync(home, { recursive: true });
    const env = { ...process.env, HOME: home, COO_LEDGER: '', COO_KEY: '', ...sshd.env };
    const gitdir = join(home, 'ledger.git');
    execFileSync(process.execPath, [COO, 'clone', url, gitdir, '--trust-root', ceo.publicKey.keyId], { env, stdio: 'ignore' });
    writers.push({ args: [gitdir, url, keyFile, String(id), String(EACH)], env });
  }
  log(`${WRITERS} writers x ${EACH} appends over ssh://, each on its own clone`);
  const started = performance.now();
  const results = await Promise.all(writers.map((writer) => runWriter(writer.args, writer.env)));
  const seconds = (performance.now() - started) / 1000;
  const writes = results.flat();
  const conflicts = writes.reduce((sum, write) => sum + write.conflicts, 0);
  const tries = writes.reduce((sum, write) => sum + write.tries, 0);
  const landed = writes.filter((write) => write.landed).length;
  const seq = Number(/Ledger-Seq: (\d+)/.exec(execFileSync('git', ['--git-dir', served, 'log', '-1', '--format=%B', 'main'], { encoding: 'utf8' }))?.[1]);
  const sorted = writes.map((write) => write.ms).sort((a, b) => a - b);
  const at = (p) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
  const verify = execFileSync(process.execPath, [COO, 'verify', '--ledger', served, '--no-checkpoint', '--json'], { encoding: 'utf8' });
  const summary = {
    writers: WRITERS,
    appends: writes.length,
    landed,
    remote_seq: seq,
    conflicts,
    tries,
    conflicts_per_100_writes: Number(((100 * conflicts) / writes.length).toFixed(1)),
    max_conflicts_one_write: Math.max(...writes.map((write) => write.conflicts)),
    per_writer_conflicts: results.map((list) => list.reduce((sum, write) => sum + write.conflicts, 0)),
    seconds: Number(seconds.toFixed(1)),
    writes_per_second: Number((writes.length / seconds).toFixed(2)),
    write_ms_p50: Math.round(at(50)),
    write_ms_p95: Math.round(at(95)),
    retries_exhausted: writes.reduce((sum, write) => sum + write.exhausted, 0),
    remote_findings: JSON.parse(verify).findings.length,
  };
  process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
} finally {
  sshd.close();
  rmSync(work, { recursive: true, force: true });
}
