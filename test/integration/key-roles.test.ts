import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyLedger } from '../../src/audit/verify.js';
import { allowedSigners, revocationList } from '../../src/audit/allowed-signers.js';
import { signerHistory } from '../../src/cli/allowed-signers.js';
import { formatPrivateKey, formatPublicKeyLine, generatePrivateKey, type PrivateKey } from '../../src/crypto/keys.js';
import { defaultPolicy, initLedger } from '../../src/ledger/init.js';
import { envelopePath, killSwitchPath, messageFolder, trustPath } from '../../src/ledger/layout.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { appendTrustVersion } from '../../src/ledger/trust-update.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { isoSeconds } from '../../src/util/time.js';
import { TALLY_DIR } from '../helpers/attack-kit.js';
import { codeOfAsync } from '../helpers/codes.js';
import { dispatchEnvelope } from '../helpers/ledger.js';
import { stockCommit } from '../helpers/stock.js';
import { git, run, tempDir } from '../helpers/tmp.js';

/**
 * Every view of a key agrees. For each key role (CEO, COO, EA, AA) and each change (grant, rotate,
 * revoke, re-grant), a commit signed by the key in question after the change is judged by
 * `coo verify` and by stock git given what `coo allowed-signers --revocations` exports
 * (`git verify-commit`, and `ssh-keygen -Y verify` of its entry): all three say the same in every
 * cell. Probe commits are dated a day after the change, as an honest signer's clock would have
 * them; a back-dated commit is the one documented difference (allowed-signers-lifetimes.test.ts).
 */
const dir = tempDir('coo-key-roles-');
const gitdir = join(dir, 'ledger.git');
const DAY = 86_400_000;

type Role = 'CEO' | 'COO' | 'EA' | 'AA';
const ACTOR: Record<Role, string> = { CEO: 'ceo', COO: 'coo.hermes', EA: 'ea.codex', AA: 'aa.chatgpt' };

interface Cell {
  readonly role: Role;
  readonly change: 'grant' | 'rotate' | 're-grant' | 'revoke';
  readonly probe: string;
  readonly expected: 'accept' | 'refuse';
  readonly coo: string;
  readonly git: string;
  readonly sshKeygen: string;
}

const cells: Cell[] = [];
let ledger: Ledger;
let ceo: PrivateKey;
let probes = 0;

function keyFile(key: PrivateKey): string {
  const file = join(dir, 'keys', `${key.publicKey.keyId.slice(7, 19).replace(/[/+]/g, '_')}.key`);
  mkdirSync(join(dir, 'keys'), { recursive: true });
  writeFileSync(file, formatPrivateKey(key), { mode: 0o600 });
  return file;
}

function head(): string {
  return git(['--git-dir', gitdir, 'rev-parse', 'main']).trim();
}

async function seq(): Promise<number> {
  return (await ledger.state()).seq;
}

/** A valid entry for `role`, as that role's key would sign one: a kill switch (CEO, COO) or a blocker to the COO (EA, AA). */
async function entryFor(role: Role, at: Date): Promise<Record<string, string>> {
  const state = await ledger.state();
  if (role === 'CEO' || role === 'COO') {
    const version = (state.killSwitch?.version ?? 0) + 1;
    return { [killSwitchPath(version)]: toYaml({ schema_version: 'kill_switch.v0', version, state: 'on', reason: `probe by ${ACTOR[role]}`, set_by: ACTOR[role], created_at: isoSeconds(at) }) };
  }
  const blocker = dispatchEnvelope(
    { source_actor: ACTOR[role], principal: ACTOR[role], target_actor: 'coo.hermes', intent: 'blocker', authority_class: 'evidence', about_message_id: null, blocker: { code: 'needs_decision', detail: 'probe' }, expected_receipt_schema: null, dispatch: undefined, payload_ref: undefined, payload_hash: undefined, context_pin: undefined },
    at,
  );
  return { [envelopePath(messageFolder(blocker.message_id, blocker.created_at))]: toYaml(blocker) };
}

/** Adds, behind the hook's back, commits that extra files make (each signed by its key), returning the last one. */
async function forceCommits(commits: ReadonlyArray<{ files: Record<string, string>; key: PrivateKey; date: Date }>): Promise<string> {
  probes += 1;
  const work = join(dir, `probe-${probes}`);
  git(['clone', '-q', gitdir, work]);
  let next = (await seq()) + 1;
  for (const commit of commits) {
    stockCommit(work, commit.files, { key: keyFile(commit.key), seq: next, date: isoSeconds(commit.date) });
    next += 1;
  }
  git(['--git-dir', gitdir, 'fetch', '-q', work, `main:refs/heads/probe-${probes}`]);
  return git(['--git-dir', gitdir, 'rev-parse', `probe-${probes}`]).trim();
}

/** What coo verify, git verify-commit and ssh-keygen -Y verify each say of `probe` once main points at it. */
async function judge(probe: string, role: Role): Promise<{ coo: string; git: string; sshKeygen: string }> {
  const before = head();
  git(['--git-dir', gitdir, 'update-ref', 'refs/heads/main', probe]);
  try {
    const report = await verifyLedger(gitdir, { full: true });
    const coo = report.findings.length === 0 ? 'accept' : `refuse (${[...new Set(report.findings.map((finding) => finding.code))].join(', ')})`;
    const audit = Ledger.open(gitdir, { checkpoints: false });
    let exported: { signers: string; revoked: string };
    try {
      const { state, history } = await signerHistory(audit);
      exported = { signers: allowedSigners(state, history), revoked: revocationList(history) };
    } finally {
      audit.close();
    }
    const signersFile = join(dir, 'allowed_signers');
    const revokedFile = join(dir, 'revoked_keys');
    writeFileSync(signersFile, exported.signers);
    writeFileSync(revokedFile, exported.revoked);
    const revocation = exported.revoked === '' ? [] : ['-c', `gpg.ssh.revocationFile=${revokedFile}`];
    const verified = run('git', ['--git-dir', gitdir, '-c', 'gpg.format=ssh', '-c', `gpg.ssh.allowedSignersFile=${signersFile}`, ...revocation, 'verify-commit', probe]);
    const entry = git(['--git-dir', gitdir, 'diff-tree', '--no-commit-id', '--name-only', '-r', probe]).split('\n').find((path) => path.endsWith('.yaml'))!;
    const entryFile = join(dir, 'entry.yaml');
    writeFileSync(entryFile, git(['--git-dir', gitdir, 'show', `${probe}:${entry}`]));
    writeFileSync(`${entryFile}.sig`, git(['--git-dir', gitdir, 'show', `${probe}:${entry}.sig`]));
    const when = new Date(Number(git(['--git-dir', gitdir, 'log', '-1', '--format=%ct', probe]).trim()) * 1000).toISOString().replace(/[-:T]/g, '').slice(0, 14);
    const checked = run('ssh-keygen', ['-Y', 'verify', '-f', signersFile, '-I', ACTOR[role], '-n', 'coo-commons.entry.v0', '-s', `${entryFile}.sig`, `-Overify-time=${when}`, ...(exported.revoked === '' ? [] : ['-r', revokedFile])], {
      input: git(['--git-dir', gitdir, 'show', `${probe}:${entry}`]),
    });
    return { coo, git: verified.status === 0 ? 'accept' : 'refuse', sshKeygen: checked.status === 0 ? 'accept' : 'refuse' };
  } finally {
    git(['--git-dir', gitdir, 'update-ref', 'refs/heads/main', before]);
  }
}

async function probe(role: Role, change: Cell['change'], name: string, key: PrivateKey, expected: Cell['expected'], before: ReadonlyArray<{ files: Record<string, string>; key: PrivateKey; date: Date }> = []): Promise<void> {
  const at = new Date(Date.now() + DAY);
  const commit = await forceCommits([...before, { files: await entryFor(role, at), key, date: at }]);
  cells.push({ role, change, probe: name, expected, ...(await judge(commit, role)) });
}

const keys = { ceo: [] as PrivateKey[], coo: [] as PrivateKey[], ea: [] as PrivateKey[], aa: [] as PrivateKey[] };

async function registryChange(actor: string, key: PrivateKey, revoke?: PrivateKey): Promise<void> {
  const state = await ledger.state();
  await appendTrustVersion(
    ledger,
    { role: 'registry', document: { ...state.registry!.doc, version: undefined }, actorKeys: new Map([[actor, key.publicKey]]), ...(revoke === undefined ? {} : { revoke: new Map([[revoke.publicKey.keyId, 'key stolen']]) }) },
    ceo,
    new Date(),
  );
}

async function rootChange(next: PrivateKey, revoke?: PrivateKey): Promise<void> {
  const state = await ledger.state();
  const document = { schema_version: 'trust_root.v0', authorities: [{ actor: 'ceo', key_id: next.publicKey.keyId, public_key: formatPublicKeyLine(next.publicKey) }] };
  await appendTrustVersion(ledger, { role: 'root', document, ...(revoke === undefined ? {} : { revoke: new Map([[revoke.publicKey.keyId, 'key stolen']]) }) }, ceo, new Date());
  expect((await ledger.state()).root!.version).toBe(state.root!.version + 1);
  ceo = next;
}

/** A registry that gives `key` back to `actor`, or a root that names it again, as a stock-git user would commit it. */
async function regrantFiles(role: Role, key: PrivateKey): Promise<Record<string, string>> {
  const state = await ledger.state();
  if (role === 'CEO') {
    const version = state.root!.version + 1;
    return { [trustPath('root', version)]: toYaml({ ...state.root!.doc, version, authorities: [{ actor: 'ceo', key_id: key.publicKey.keyId, public_key: formatPublicKeyLine(key.publicKey) }] }) };
  }
  const version = state.registry!.version + 1;
  const actors = state.registry!.doc.actors.map((actor) => (actor.id === ACTOR[role] ? { ...actor, keys: [{ key_id: key.publicKey.keyId, public_key: formatPublicKeyLine(key.publicKey) }] } : actor));
  return { [trustPath('registry', version)]: toYaml({ ...state.registry!.doc, version, actors, revoked_keys: state.registry!.doc.revoked_keys.filter((entry) => entry.key_id !== key.publicKey.keyId) }) };
}

async function lifeOf(role: Role, first: PrivateKey, change: (key: PrivateKey, revoke?: PrivateKey) => Promise<void>, grant?: () => Promise<void>): Promise<void> {
  const [k2, k3] = [generatePrivateKey(ACTOR[role]), generatePrivateKey(ACTOR[role])];
  await grant?.();
  await probe(role, 'grant', 'the granted key', first, 'accept');
  await change(k2);
  await probe(role, 'rotate', 'the rotated-out key', first, 'refuse');
  await probe(role, 'rotate', 'its successor', k2, 'accept');
  await change(k3, k2);
  await probe(role, 'revoke', 'the revoked key', k2, 'refuse');
  await probe(role, 'revoke', 'its successor', k3, 'accept');
  // Re-grant: coo trust refuses it; written behind the hook with stock git, the ledger holds it, and the key still signs nothing.
  const regrant = await regrantFiles(role, k2);
  expect(await codeOfAsync(() => ledger.append({ files: Object.entries(regrant).map(([path, text]) => ({ path, bytes: Buffer.from(text) })), key: ceo, summary: 're-grant', now: new Date() }))).toBe('KEY_REVOKED');
  const at = new Date(Date.now() + DAY);
  await probe(role, 're-grant', 'the revoked key, granted again behind the hook', k2, 'refuse', [{ files: regrant, key: ceo, date: at }]);
}

beforeAll(async () => {
  ceo = generatePrivateKey('ceo');
  keys.coo.push(generatePrivateKey('coo.hermes'));
  keys.ea.push(generatePrivateKey('ea.codex'));
  keys.aa.push(generatePrivateKey('aa.chatgpt'));
  const base = defaultPolicy();
  // An advisory agent holds no key in the lanes; this policy gives it one edge, so that its key has something valid to sign.
  const policy = { ...base, edges: [...base.edges, { from: 'aa.*', to: 'coo.*', intents: ['blocker' as const], requires: [] }] };
  await initLedger({ gitdir, ceoKey: ceo, actors: new Map([['coo.hermes', keys.coo[0]!.publicKey]]), policy, now: new Date() });
  ledger = Ledger.open(gitdir);
}, 60_000);

afterAll(() => {
  ledger?.close();
  const table = [
    '| role | change | probe: a commit after the change by | coo verify | git verify-commit | ssh-keygen -Y verify |',
    '| --- | --- | --- | --- | --- | --- |',
    ...cells.map((cell) => `| ${cell.role} | ${cell.change} | ${cell.probe} | ${cell.coo} | ${cell.git} | ${cell.sshKeygen} |`),
  ].join('\n');
  mkdirSync(TALLY_DIR, { recursive: true });
  writeFileSync(join(TALLY_DIR, 'key-roles.md'), `${table}\n`);
  process.stdout.write(`\nkey roles x changes (coo verify against stock git with coo allowed-signers --revocations)\n${table}\n`);
});

describe('every view of a key agrees, for every role and change', () => {
  it('the CEO key: granted at genesis, rotated and revoked by the root, granted again', async () => {
    await lifeOf('CEO', ceo, rootChange);
  }, 120_000);

  it('the COO key: granted at genesis, rotated and revoked by the registry, granted again', async () => {
    await lifeOf('COO', keys.coo[0]!, (key, revoke) => registryChange('coo.hermes', key, revoke));
  }, 120_000);

  it('an EA key: granted, rotated and revoked by the registry, granted again', async () => {
    await lifeOf('EA', keys.ea[0]!, (key, revoke) => registryChange('ea.codex', key, revoke), () => registryChange('ea.codex', keys.ea[0]!));
  }, 120_000);

  it('an AA key: granted, rotated and revoked by the registry, granted again', async () => {
    await lifeOf('AA', keys.aa[0]!, (key, revoke) => registryChange('aa.chatgpt', key, revoke), () => registryChange('aa.chatgpt', keys.aa[0]!));
  }, 120_000);

  it('coo verify, git verify-commit and ssh-keygen agree in every cell, and each says what the chain allows', () => {
    expect(cells.length).toBe(24);
    for (const cell of cells) {
      const name = `${cell.role} ${cell.change}: ${cell.probe}`;
      expect(cell.coo.split(' ')[0], name).toBe(cell.expected);
      expect(cell.git, name).toBe(cell.expected);
      expect(cell.sshKeygen, name).toBe(cell.expected);
    }
  });
});
