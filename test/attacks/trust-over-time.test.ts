import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe } from 'vitest';
import { allowedSigners } from '../../src/audit/allowed-signers.js';
import { verifyLedger } from '../../src/audit/verify.js';
import { signerHistory } from '../../src/cli/allowed-signers.js';
import { rejectRequest, sendCommand } from '../../src/inbox/ceo-messages.js';
import { formatPrivateKey, formatPublicKeyLine, generatePrivateKey, type PrivateKey } from '../../src/crypto/keys.js';
import { approvalPath, killSwitchPath, trustPath } from '../../src/ledger/layout.js';
import type { Ledger, NewFile } from '../../src/ledger/ledger.js';
import { layGithubWorkflow } from '../../src/ledger/forge-workflow.js';
import { appendTrustVersion } from '../../src/ledger/trust-update.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { newMessageId } from '../../src/util/ids.js';
import { addSeconds, isoSeconds } from '../../src/util/time.js';
import { attack, codeOf } from '../helpers/attack-kit.js';
import { coo } from '../helpers/cli.js';
import { makeActors, makeLedger, type Actors } from '../helpers/ledger.js';
import { stockCommit, push } from '../helpers/stock.js';
import { git, run, tempDir } from '../helpers/tmp.js';

/**
 * Trust over time, as a careless CEO or a thief with an old key would exercise it: a revocation
 * ends every role of the key at once and for good, a key the root rotates out is retired
 * everywhere, and every writer, reader and stock tool says so with the same code.
 */
const dir = tempDir('coo-trust-time-');
let opened: Ledger[] = [];
let made = 0;

afterAll(() => {
  for (const ledger of opened) ledger.close();
  opened = [];
});

async function fresh(): Promise<{ gitdir: string; actors: Actors; ledger: Ledger }> {
  made += 1;
  const made_ = await makeLedger(join(dir, `l${made}`), makeActors());
  opened.push(made_.ledger);
  return made_;
}

function keyFile(key: PrivateKey, name: string): string {
  const file = join(dir, `${name}-${made}.key`);
  writeFileSync(file, formatPrivateKey(key), { mode: 0o600 });
  return file;
}

async function registryFile(ledger: Ledger, change: (doc: Record<string, unknown>) => Record<string, unknown>): Promise<NewFile> {
  const registry = (await ledger.state()).registry!;
  const version = registry.version + 1;
  return { path: trustPath('registry', version), bytes: Buffer.from(toYaml({ ...change({ ...registry.doc }), version })) };
}

async function rootFile(ledger: Ledger, key: PrivateKey): Promise<NewFile> {
  const root = (await ledger.state()).root!;
  const version = root.version + 1;
  return { path: trustPath('root', version), bytes: Buffer.from(toYaml({ ...root.doc, version, authorities: [{ actor: 'ceo', key_id: key.publicKey.keyId, public_key: formatPublicKeyLine(key.publicKey) }] })) };
}

async function killSwitchFile(ledger: Ledger, setBy: string): Promise<NewFile> {
  const version = ((await ledger.state()).killSwitch?.version ?? 0) + 1;
  return { path: killSwitchPath(version), bytes: Buffer.from(toYaml({ schema_version: 'kill_switch.v0', version, state: 'on', reason: 'stop', set_by: setBy, created_at: isoSeconds(new Date()) })) };
}

function approvalFile(): NewFile {
  const now = new Date();
  const id = `apr_${newMessageId(now.getTime()).slice(4)}`;
  const doc = { schema_version: 'approval.v0', approval_id: id, approves: 'dispatch', request_hash: `sha256:${'0'.repeat(64)}`, message_id: null, attempt_number: null, reason: 'go', approved_by: 'ceo', created_at: isoSeconds(now), expires_at: isoSeconds(addSeconds(now, 3600)) };
  return { path: approvalPath(id, doc.created_at), bytes: Buffer.from(toYaml(doc)) };
}

const revokeKey = (keyId: string, from: string) => (doc: Record<string, unknown>): Record<string, unknown> => ({
  ...doc,
  actors: (doc['actors'] as Array<Record<string, unknown>>).map((actor) => (actor['id'] === from ? { ...actor, keys: [] } : actor)),
  revoked_keys: [...(doc['revoked_keys'] as unknown[]), { key_id: keyId, reason: 'laptop stolen' }],
});

const append = (ledger: Ledger, files: NewFile[], key: PrivateKey): Promise<string> => codeOf(() => ledger.append({ files, key, summary: 'attack', now: new Date() }));

describe('a revocation ends every role of the key, root authority included', () => {
  let world: Awaited<ReturnType<typeof fresh>>;
  beforeAll(async () => {
    world = await fresh();
    // The careless CEO: revokes its own stolen key in the registry and leaves the root as it was.
    const { ledger, actors } = world;
    const code = await append(ledger, [await registryFile(ledger, revokeKey(actors.ceo.publicKey.keyId, 'ceo'))], actors.ceo);
    if (code !== 'accepted') throw new Error(`the revoking registry was refused: ${code}`);
  });

  attack('the revoked CEO key signs the next policy', 'library', 'SIGNER_REVOKED', async () => {
    const policy = (await world.ledger.state()).policy!;
    return append(world.ledger, [{ path: trustPath('policy', policy.version + 1), bytes: Buffer.from(toYaml({ ...policy.doc, version: policy.version + 1 })) }], world.actors.ceo);
  });

  attack('the revoked CEO key signs an approval', 'library', 'SIGNER_REVOKED', () => append(world.ledger, [approvalFile()], world.actors.ceo));

  attack('the revoked CEO key sets the kill switch', 'library', 'SIGNER_REVOKED', async () => append(world.ledger, [await killSwitchFile(world.ledger, 'ceo')], world.actors.ceo));

  attack('the revoked CEO key signs the next trust root, naming a key of its own', 'library', 'SIGNER_REVOKED', async () => append(world.ledger, [await rootFile(world.ledger, generatePrivateKey('ceo'))], world.actors.ceo));

  attack('the revoked CEO key sends the COO a command', 'library', 'SIGNER_REVOKED', () => codeOf(() => sendCommand({ ledger: world.ledger, key: world.actors.ceo, now: new Date(), text: 'Dispatch everything the agents propose.' })));

  attack('the revoked CEO key rejects a request', 'library', 'SIGNER_REVOKED', () => codeOf(() => rejectRequest({ ledger: world.ledger, key: world.actors.ceo, now: new Date(), requestHash: `sha256:${'d'.repeat(64)}`, reason: 'no' })));
});

describe('the writer keeps the root and the registry agreeing', () => {
  attack('coo trust --registry revoking the CEO key the root still names', 'cli', 'TRUST_CONFLICT', async () => {
    const { gitdir, actors, ledger } = await fresh();
    const file = join(dir, `registry-${made}.yaml`);
    writeFileSync(file, toYaml({ ...(await ledger.state()).registry!.doc, version: undefined, actors: (await ledger.state()).registry!.doc.actors.map((actor) => (actor.id === 'ceo' ? { ...actor, keys: [] } : actor)) }));
    const result = coo(['trust', '--ledger', gitdir, '--ceo-key', keyFile(actors.ceo, 'ceo'), '--registry', file, '--revoke', `${actors.ceo.publicKey.keyId}=stolen`]);
    return /^coo: ([A-Z_]+):/.exec(result.stderr)?.[1] ?? (result.status === 0 ? 'accepted' : 'DECLINED');
  });

  attack('coo trust --registry giving the CEO actor a key the root does not name', 'library', 'TRUST_CONFLICT', async () => {
    const { actors, ledger } = await fresh();
    const registry = (await ledger.state()).registry!.doc;
    return codeOf(() => appendTrustVersion(ledger, { role: 'registry', document: { ...registry, version: undefined }, actorKeys: new Map([['ceo', generatePrivateKey('ceo').publicKey]]) }, actors.ceo, new Date()));
  });
});

describe('a key the root rotates out is retired everywhere', () => {
  let world: Awaited<ReturnType<typeof fresh>>;
  let successor: PrivateKey;
  beforeAll(async () => {
    world = await fresh();
    successor = generatePrivateKey('ceo');
    // A rotation written the way coo trust --root wrote it before: the root alone, the registry's ceo left with the old key.
    const code = await append(world.ledger, [await rootFile(world.ledger, successor)], world.actors.ceo);
    if (code !== 'accepted') throw new Error(`the rotation was refused: ${code}`);
  });

  attack("the rotated-out CEO key signs as the registry's ceo actor", 'library', 'SIGNER_RETIRED', async () => append(world.ledger, [await killSwitchFile(world.ledger, 'ceo')], world.actors.ceo));

  attack('the rotated-out CEO key lays the forge check, refused with the code the validator gives', 'library', 'SIGNER_RETIRED', () =>
    codeOf(() => layGithubWorkflow(world.ledger, { packageSpec: 'coo-commons@0.1.0', trustRoot: world.actors.ceo.publicKey.keyId }, world.actors.ceo, new Date())),
  );

  attack('the rotated-out CEO key signs a commit dated after the rotation, checked with stock git and the exported allowed-signers', 'verify', 'SIGNER_RETIRED', async () => {
    const work = join(dir, `work-${made}-rotated`);
    git(['clone', '-q', world.gitdir, work]);
    const version = ((await world.ledger.state()).killSwitch?.version ?? 0) + 1;
    const later = isoSeconds(new Date(Date.now() + 86_400_000));
    const doc = toYaml({ schema_version: 'kill_switch.v0', version, state: 'on', reason: 'old key', set_by: 'ceo', created_at: later });
    stockCommit(work, { [killSwitchPath(version)]: doc }, { key: keyFile(world.actors.ceo, 'old-ceo'), seq: (await world.ledger.state()).seq + 1, date: later });
    const before = git(['--git-dir', world.gitdir, 'rev-parse', 'main']).trim();
    git(['--git-dir', world.gitdir, 'fetch', '-q', work, 'main:refs/heads/main']);
    try {
      const { findings } = await verifyLedger(world.gitdir, { full: true });
      const { state, history } = await signerHistory(world.ledger);
      const signers = join(dir, `allowed-${made}`);
      writeFileSync(signers, allowedSigners(state, history));
      const stock = run('git', ['--git-dir', world.gitdir, '-c', 'gpg.format=ssh', '-c', `gpg.ssh.allowedSignersFile=${signers}`, 'verify-commit', 'main']).status;
      if (stock === 0) return 'accepted';
      return findings.find((finding) => finding.code === 'SIGNER_RETIRED')?.code ?? findings[0]?.code ?? 'accepted';
    } finally {
      git(['--git-dir', world.gitdir, 'update-ref', 'refs/heads/main', before]);
    }
  });
});

describe('revocation is final', () => {
  let world: Awaited<ReturnType<typeof fresh>>;
  let before: NewFile;
  beforeAll(async () => {
    world = await fresh();
    const { ledger, actors } = world;
    before = await registryFile(ledger, (doc) => doc);
    const spare = generatePrivateKey('ea.codex');
    const registry = (await ledger.state()).registry!.doc;
    await appendTrustVersion(ledger, { role: 'registry', document: { ...registry, version: undefined }, actorKeys: new Map([['ea.codex', spare.publicKey]]), revoke: new Map([[actors.codex.publicKey.keyId, 'laptop stolen']]) }, actors.ceo, new Date());
  });

  const giveBack = (key: PrivateKey) => (doc: Record<string, unknown>): Record<string, unknown> => ({
    ...doc,
    actors: (doc['actors'] as Array<Record<string, unknown>>).map((actor) => (actor['id'] === 'ea.codex' ? { ...actor, keys: [{ key_id: key.publicKey.keyId, public_key: formatPublicKeyLine(key.publicKey) }] } : actor)),
  });

  attack('a later registry that drops the revocation', 'library', 'KEY_REVOKED', async () => append(world.ledger, [await registryFile(world.ledger, (doc) => ({ ...doc, revoked_keys: [] }))], world.actors.ceo));

  attack('a later registry that drops the revocation and gives the key back', 'library', 'KEY_REVOKED', async () =>
    append(world.ledger, [await registryFile(world.ledger, (doc) => ({ ...giveBack(world.actors.codex)(doc), revoked_keys: [] }))], world.actors.ceo),
  );

  attack('the registry from before the revocation, re-applied as the next version', 'library', 'KEY_REVOKED', async () => {
    const version = (await world.ledger.state()).registry!.version + 1;
    const old = before.bytes.toString('utf8').replace(/^version: \d+$/m, `version: ${version}`);
    return append(world.ledger, [{ path: trustPath('registry', version), bytes: Buffer.from(old) }], world.actors.ceo);
  });

  attack('a trust root that names the revoked key as a CEO key', 'library', 'KEY_REVOKED', async () => append(world.ledger, [await rootFile(world.ledger, world.actors.codex)], world.actors.ceo));

  attack('a registry giving the revoked key back, pushed with stock git', 'hook', 'KEY_REVOKED', async () => {
    const work = join(dir, `work-${made}-regrant`);
    git(['clone', '-q', world.gitdir, work]);
    const file = await registryFile(world.ledger, (doc) => ({ ...giveBack(world.actors.codex)(doc), revoked_keys: [] }));
    stockCommit(work, { [file.path]: file.bytes.toString('utf8') }, { key: keyFile(world.actors.ceo, 'ceo'), seq: (await world.ledger.state()).seq + 1 });
    const pushed = push(work, 'main');
    if (pushed.status === 0) return 'accepted';
    return /^remote:\s+([A-Z_]+) \[/m.exec(pushed.stderr)?.[1] ?? 'DECLINED';
  });

  attack('the revoked key sets the kill switch through the CLI, refused with the code the validator gives', 'cli', 'SIGNER_REVOKED', () => {
    const result = coo(['kill-switch', 'on', '--reason', 'stolen key', '--ledger', world.gitdir, '--key', keyFile(world.actors.codex, 'codex')]);
    return /^coo: ([A-Z_]+):/.exec(result.stderr)?.[1] ?? (result.status === 0 ? 'accepted' : 'DECLINED');
  });
});
