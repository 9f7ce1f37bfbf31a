// Builds a synthetic ledger of N signed dispatch envelopes quickly: genesis through the library,
// then every commit made here with real SSHSIG entry signatures and real signed commits, objects
// written straight into one pack without deltas, uncompressed as a ledger's own config
// (core.compression 0) has git store them. Messages are spread over days (100 a day) and over
// sixteen hours of each day, as a ledger that grew over time would be. The result passes
// `coo verify`.
import { createHash } from 'node:crypto';
import { closeSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { deflateSync } from 'node:zlib';
import { execFileSync } from 'node:child_process';

const dist = join(import.meta.dirname, '..', 'dist');
const { initLedger } = await import(join(dist, 'ledger', 'init.js'));
const { Ledger } = await import(join(dist, 'ledger', 'ledger.js'));
const { checkpointPath } = await import(join(dist, 'ledger', 'checkpoint.js'));
const { signSshsig, ENTRY_NAMESPACE, GIT_NAMESPACE } = await import(join(dist, 'crypto', 'sshsig.js'));
const { renderTree } = await import(join(dist, 'ledger', 'tree-format.js'));
const { formatIdent, ledgerMessage, renderCommitPayload, renderSignedCommit } = await import(join(dist, 'ledger', 'commit-format.js'));
const { toYaml } = await import(join(dist, 'schema', 'strict-yaml.js'));
const { newMessageId } = await import(join(dist, 'util', 'ids.js'));

/**
 * Objects go straight into one pack file (git's pack format: header, entries, sha1 trailer), indexed
 * once with `git index-pack` at the end: a hundred thousand commits in one file, not a million loose ones.
 */
class PackWriter {
  constructor(gitdir) {
    this.gitdir = gitdir;
    this.path = join(gitdir, 'objects', 'pack', `bench-${process.pid}.pack`);
    mkdirSync(join(gitdir, 'objects', 'pack'), { recursive: true });
    this.fd = openSync(this.path, 'w');
    this.hash = createHash('sha1');
    this.count = 0;
    this.chunks = [];
    this.size = 0;
    this.put(Buffer.alloc(12));
  }
  put(buffer) {
    this.chunks.push(buffer);
    this.size += buffer.length;
    if (this.size > 4 * 1024 * 1024) this.spill();
  }
  spill() {
    const data = Buffer.concat(this.chunks);
    this.chunks = [];
    this.size = 0;
    writeSync(this.fd, data);
  }
  write(type, content) {
    const oid = createHash('sha1').update(`${type} ${content.length}\0`).update(content).digest('hex');
    const code = { commit: 1, tree: 2, blob: 3 }[type];
    const header = [];
    let size = content.length;
    let byte = (code << 4) | (size & 0x0f);
    size >>= 4;
    while (size > 0) {
      header.push(byte | 0x80);
      byte = size & 0x7f;
      size >>= 7;
    }
    header.push(byte);
    this.put(Buffer.from(header));
    this.put(deflateSync(content, { level: 0 }));
    this.count += 1;
    return oid;
  }
  finish() {
    this.spill();
    closeSync(this.fd);
    const body = readFileSync(this.path);
    body.write('PACK', 0, 'latin1');
    body.writeUInt32BE(2, 4);
    body.writeUInt32BE(this.count, 8);
    const trailer = createHash('sha1').update(body).digest();
    writeFileSync(this.path, Buffer.concat([body, trailer]));
    execFileSync('git', ['--git-dir', this.gitdir, 'index-pack', this.path], { stdio: 'ignore' });
  }
}

/** An in-memory tree that rewrites only the folders on a changed path. */
class Dir {
  constructor(entries = []) {
    this.files = new Map();
    this.dirs = new Map();
    this.oid = null;
    for (const entry of entries) (entry.mode === '40000' ? this.dirs : this.files).set(entry.name, entry.mode === '40000' ? { oid: entry.oid } : entry.oid);
  }
  child(name) {
    let dir = this.dirs.get(name);
    if (dir === undefined || !(dir instanceof Dir)) {
      dir = new Dir();
      this.dirs.set(name, dir);
    }
    return dir;
  }
  write(pack) {
    if (this.oid !== null) return this.oid;
    const entries = [...this.files].map(([name, oid]) => ({ name, mode: '100644', oid }));
    for (const [name, dir] of this.dirs) entries.push({ name, mode: '40000', oid: dir instanceof Dir ? dir.write(pack) : dir.oid });
    this.oid = pack.write('tree', renderTree(entries));
    return this.oid;
  }
}

function treeEntries(gitdir, oid) {
  const raw = execFileSync('git', ['--git-dir', gitdir, 'cat-file', 'tree', oid]);
  const out = [];
  let offset = 0;
  while (offset < raw.length) {
    const space = raw.indexOf(0x20, offset);
    const nul = raw.indexOf(0, space);
    out.push({ mode: raw.toString('latin1', offset, space), name: raw.toString('utf8', space + 1, nul), oid: raw.toString('hex', nul + 1, nul + 21) });
    offset = nul + 21;
  }
  return out;
}

const DAY0 = Date.parse('2024-01-01T08:00:00Z');
/** A day's messages are spread from 08:00 to midnight (UTC), whole seconds apart. */
const WORKDAY = 16 * 3_600_000;

/** The task every synthetic dispatch carries, as its prompt.md. */
const TASK = Buffer.from('Fix add() so that test.sh passes.\n');
const TASK_HASH = `sha256:${createHash('sha256').update(TASK).digest('hex')}`;

const promptRef = (id, created) => `messages/${created.slice(0, 7)}/${created.slice(8, 10)}/${created.slice(11, 13)}/${id}/prompt.md`;

export function envelopeFor(i, createdMs) {
  const created = new Date(createdMs).toISOString().replace(/\.\d{3}Z$/, 'Z');
  const expires = new Date(createdMs + 3600_000).toISOString().replace(/\.\d{3}Z$/, 'Z');
  const id = newMessageId(createdMs);
  return {
    id,
    created,
    doc: {
      schema_version: 'coo_message.v0', message_id: id, correlation_id: `corr_bench${i}`, parent_message_id: null, causality_chain: [], hop_count: 0, max_hops: 3,
      expires_at: expires, deadline_at: expires, principal: 'coo.hermes', source_actor: 'coo.hermes', target_actor: 'ea.codex', intent: 'ea_dispatch',
      authority_class: 'governed_execution', idempotency_key: `bench-${i}`, budget: { max_cost_usd: 1, max_runtime_seconds: 600, correlation_budget_remaining_usd: null },
      dispatch: { repo: 'lifeos/example', issue_number: 62, attempt_id: `ea_attempt_${id.slice(4)}_1`, executor: 'codex', base_ref: 'b'.repeat(40), branch_name: `coo/bench-${i}`, scope_paths: ['src'], acceptance_criteria: ['tests pass'], verification_commands: ['npm test'], timeout_seconds: 600 },
      payload_ref: promptRef(id, created), payload_hash: TASK_HASH, context_pin: null, expected_receipt_schema: 'ea_receipt.v0', status: 'queued', created_at: created,
    },
  };
}

/** Creates `gitdir` with `count` envelope commits after genesis. Returns the head. */
export async function buildLedger(gitdir, count, { ceo, coo, codex }, { perDay = 100, onProgress } = {}) {
  await initLedger({ gitdir, ceoKey: ceo, actors: new Map([['coo.hermes', coo.publicKey], ['ea.codex', codex.publicKey]]), now: new Date(DAY0) });
  let head = execFileSync('git', ['--git-dir', gitdir, 'rev-parse', 'main'], { encoding: 'utf8' }).trim();
  const genesisTree = execFileSync('git', ['--git-dir', gitdir, 'rev-parse', 'main^{tree}'], { encoding: 'utf8' }).trim();
  const root = new Dir(treeEntries(gitdir, genesisTree));
  const pack = new PackWriter(gitdir);
  // Every envelope has the same shape: write it once, then substitute what differs.
  const first = envelopeFor(0, DAY0);
  const template = toYaml(first.doc);
  const taskBlob = pack.write('blob', TASK);
  for (let i = 0; i < count; i += 1) {
    const createdMs = DAY0 + Math.floor(i / perDay) * 86_400_000 + (i % perDay) * Math.floor(WORKDAY / perDay / 1000) * 1000;
    const { id, created, doc } = envelopeFor(i, createdMs);
    const text =
      template
        .replace(`message_id: ${first.id}\n`, `message_id: ${id}\n`)
        // Timestamps are written double-quoted, so that YAML 1.1 readers see strings as coo does.
        .replace(`created_at: "${first.created}"\n`, `created_at: "${created}"\n`)
        .replace(`expires_at: "${first.doc.expires_at}"\n`, `expires_at: "${doc.expires_at}"\n`)
        .replace(`deadline_at: "${first.doc.deadline_at}"\n`, `deadline_at: "${doc.deadline_at}"\n`)
        .replace('correlation_id: corr_bench0\n', `correlation_id: corr_bench${i}\n`)
        .replace('idempotency_key: bench-0\n', `idempotency_key: bench-${i}\n`)
        .replace(`attempt_id: ea_attempt_${first.id.slice(4)}_1\n`, `attempt_id: ea_attempt_${id.slice(4)}_1\n`)
        .replace(`payload_ref: ${promptRef(first.id, first.created)}\n`, `payload_ref: ${promptRef(id, created)}\n`)
        .replace('branch_name: coo/bench-0\n', `branch_name: coo/bench-${i}\n`);
    // A substitution that found nothing would write the template's value silently: refuse instead.
    for (const line of [`message_id: ${id}\n`, `created_at: "${created}"\n`, `expires_at: "${doc.expires_at}"\n`, `branch_name: coo/bench-${i}\n`, `attempt_id: ea_attempt_${id.slice(4)}_1\n`, `payload_ref: ${promptRef(id, created)}\n`]) {
      if (!text.includes(line)) throw new Error(`build-ledger: the envelope template has no line ${JSON.stringify(line)}: toYaml changed its form`);
    }
    const bytes = Buffer.from(text);
    const sig = Buffer.from(signSshsig(coo, bytes, ENTRY_NAMESPACE));
    const messages = root.child('messages');
    const month = messages.child(created.slice(0, 7));
    const day = month.child(created.slice(8, 10));
    const hour = day.child(created.slice(11, 13));
    const folder = hour.child(id);
    folder.files.set('envelope.yaml', pack.write('blob', bytes));
    folder.files.set('envelope.yaml.sig', pack.write('blob', sig));
    folder.files.set('prompt.md', taskBlob);
    for (const dir of [root, messages, month, day, hour, folder]) dir.oid = null;
    const tree = root.write(pack);
    const ident = formatIdent('coo.hermes', coo.publicKey.keyId, Math.floor(createdMs / 1000));
    const fields = { tree, parents: [head], author: ident, committer: ident, message: ledgerMessage(`ea_dispatch ${id}`, i + 2) };
    const raw = renderSignedCommit(fields, signSshsig(coo, renderCommitPayload(fields), GIT_NAMESPACE));
    head = pack.write('commit', raw);
    if (onProgress !== undefined && (i + 1) % 10000 === 0) onProgress(i + 1);
  }
  pack.finish();
  writeFileSync(join(gitdir, 'refs', 'heads', 'main'), `${head}\n`);
  return head;
}

/** Replays the whole ledger once through the validator and leaves a state checkpoint, as a long-lived ledger has. */
/** Replays the whole ledger from its first commit (any earlier state checkpoint is dropped first) and saves a checkpoint. */
export async function warmCheckpoint(gitdir) {
  rmSync(checkpointPath(gitdir), { force: true });
  const ledger = Ledger.open(gitdir);
  try {
    const state = await ledger.state();
    ledger.checkpoint();
    return { seq: state.seq, findings: ledger.findings.length };
  } finally {
    ledger.close();
  }
}
