import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import type * as IsomorphicGit from 'isomorphic-git';
import { join } from 'node:path';
import { CooError } from '../errors.js';
import { cliEntryPoint, readAsset } from '../assets.js';
import { formatPublicKeyLine, type PrivateKey, type PublicKey } from '../crypto/keys.js';
import { parseDocument, readDocument } from '../schema/documents.js';
import type { ActorPolicy } from '../schema/policy.js';
import type { ActorRegistry } from '../schema/registry.js';
import type { TrustRoot } from '../schema/control.js';
import { toYaml } from '../schema/strict-yaml.js';
import { fileType } from '../util/bounded-read.js';
import { importPackage } from '../util/import-package.js';
import { isoSeconds } from '../util/time.js';
import { refuseSignerSecrets } from './held-secrets.js';
import { README_PATH, trustPath } from './layout.js';
import { Ledger, type AppendResult } from './ledger.js';

export interface InitOptions {
  readonly gitdir: string;
  readonly ceoKey: PrivateKey;
  /** The actor id of the CEO in the registry; `ceo` by default. */
  readonly ceoActor?: string;
  /** Public keys of other actors, by id (they must exist in the registry template). */
  readonly actors?: ReadonlyMap<string, PublicKey>;
  /** Registry and policy to start from; the files under policy/ by default. */
  readonly registry?: ActorRegistry;
  readonly policy?: ActorPolicy;
  readonly now: Date;
  /** The ledger's id in its first trust root (32 hex digits); fresh random bits unless told. */
  readonly ledgerId?: string;
  /** The command the pre-receive hook runs; the built CLI of this package by default. */
  readonly hookCommand?: { readonly node: string; readonly script: string };
}

export function defaultRegistry(): ActorRegistry {
  return readDocument('actor_registry.v0', readAsset('policy/actor_registry.v0.yaml'), 'policy/actor_registry.v0.yaml');
}

export function defaultPolicy(): ActorPolicy {
  return readDocument('actor_policy.v0', readAsset('policy/actor_policy.v0.yaml'), 'policy/actor_policy.v0.yaml');
}

function keyEntry(key: PublicKey): { key_id: string; public_key: string } {
  return { key_id: key.keyId, public_key: formatPublicKeyLine(key) };
}

/**
 * The version-1 trust files of a new ledger: checks every document before anything touches disk. The
 * first root carries the ledger's id, random unless `ledgerId` is given: two ledgers made in one second
 * from the same keys and files would otherwise lay the same genesis commit and share an identity.
 */
export function genesisDocuments(options: InitOptions): { root: TrustRoot; registry: ActorRegistry; policy: ActorPolicy } {
  const ceoActor = options.ceoActor ?? 'ceo';
  const ceo = options.ceoKey.publicKey;
  const template = options.registry ?? defaultRegistry();
  const given = new Map(options.actors ?? []);
  for (const id of given.keys()) {
    if (!template.actors.some((actor) => actor.id === id)) {
      throw new CooError('USAGE', `actor ${id} is not in the registry; add it to the registry file first`);
    }
  }
  if (!template.actors.some((actor) => actor.id === ceoActor && actor.class === 'human_authority')) {
    throw new CooError('USAGE', `the registry has no human_authority actor ${ceoActor} for the CEO key`);
  }
  const registry = parseDocument(
    'actor_registry.v0',
    {
      ...template,
      version: 1,
      actors: template.actors.map((actor) => {
        if (actor.id === ceoActor) return { ...actor, keys: [keyEntry(ceo)] };
        const key = given.get(actor.id);
        return key === undefined ? actor : { ...actor, keys: [keyEntry(key)] };
      }),
    },
    'registry',
  );
  const policy = parseDocument('actor_policy.v0', { ...(options.policy ?? defaultPolicy()), version: 1 }, 'policy');
  const root = parseDocument(
    'trust_root.v0',
    {
      schema_version: 'trust_root.v0',
      version: 1,
      authorities: [{ actor: ceoActor, ...keyEntry(ceo) }],
      created_at: isoSeconds(options.now),
      ledger_id: options.ledgerId ?? randomBytes(16).toString('hex'),
    },
    'trust root',
  );
  return { root, registry, policy };
}

function hookScript(command: { node: string; script: string }): string {
  // A path with a double quote, backslash, dollar or backtick cannot stand in the hook's quotes: it is left for coo on PATH to run.
  const quotable = (path: string): string => (/["\\$`\n]/.test(path) ? '' : path);
  return readAsset('ledger/hooks/pre-receive').toString('utf8').replace('@NODE@', quotable(command.node)).replace('@COO@', quotable(command.script));
}

/** A ledger's git settings, made by `coo init` and by `coo clone` alike. */
export const LEDGER_CONFIG = [
  ['receive.denyNonFastForwards', true],
  ['receive.denyDeletes', true],
  ['receive.fsckObjects', true],
  ['receive.maxInputSize', 64 * 1024 * 1024],
  // What a push or a fetch brings is kept as the pack it came in: unpacked into the loose objects of a
  // ledger without compression (below), a small pack of zero-filled blobs would be written out whole.
  ['transfer.unpackLimit', 1],
  ['core.logAllRefUpdates', true],
  // Objects stored without compression: every full verify reads every object (docs/design.md, Packing).
  ['core.compression', 0],
] as const;

/** The pre-receive hook that runs the validator on every push into the ledger. */
export function installHook(gitdir: string, command?: { node: string; script: string }): void {
  fs.mkdirSync(join(gitdir, 'hooks'), { recursive: true });
  fs.writeFileSync(join(gitdir, 'hooks', 'pre-receive'), hookScript(command ?? { node: process.execPath, script: cliEntryPoint() }), { mode: 0o755 });
}

/**
 * Where a new ledger goes (coo init, coo clone): nothing there yet, or an empty folder. Anything
 * else (a ledger, a file, a device, a path through a file) is a mistake in the command line, said
 * before anything is made.
 */
export function requireNewLedgerPath(gitdir: string): void {
  let stats: fs.Stats;
  try {
    stats = fs.statSync(gitdir);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'EIO';
    if (code === 'ENOENT') return;
    throw new CooError('LEDGER_EXISTS', `cannot make a ledger at ${gitdir} (${code}): choose a new path in a folder this user may write`);
  }
  if (!stats.isDirectory()) throw new CooError('LEDGER_EXISTS', `${gitdir} is a ${fileType(stats)}, not an empty folder; choose a new path`);
  if (fs.readdirSync(gitdir).length > 0) throw new CooError('LEDGER_EXISTS', `${gitdir} exists and is not empty; choose a new path`);
}

/**
 * Creates a ledger: a bare repository whose first commit, signed by the CEO, holds the ledger
 * README, trust root, registry and policy (each version 1), and a pre-receive hook that runs the
 * validator on every push. On any failure the directory is removed: no half-made ledger stays.
 */
export async function initLedger(options: InitOptions): Promise<AppendResult> {
  const { gitdir } = options;
  requireNewLedgerPath(gitdir);
  const docs = genesisDocuments(options);
  const files = [
    { path: README_PATH, bytes: readAsset('ledger/README.md') },
    { path: trustPath('root', 1), bytes: Buffer.from(toYaml(docs.root)) },
    { path: trustPath('registry', 1), bytes: Buffer.from(toYaml(docs.registry)) },
    { path: trustPath('policy', 1), bytes: Buffer.from(toYaml(docs.policy)) },
  ];
  // The registry and policy are the operator's files: one holding a secret of this process is refused before any folder is made.
  refuseSignerSecrets(files, options.ceoKey, gitdir);
  const created = !fs.existsSync(gitdir);
  let ledger: Ledger | null = null;
  try {
    fs.mkdirSync(gitdir, { recursive: true });
    // An empty folder given for the ledger keeps its mode: one others may write (made under umask 000) is closed, as coo clone's is.
    if (!created) fs.chmodSync(gitdir, fs.statSync(gitdir).mode & 0o7755);
    // Loaded here, not at start-up: creating a ledger is the only use, and the module costs every other verb ~0.1 s.
    const { default: git } = await importPackage<typeof IsomorphicGit>('isomorphic-git');
    await git.init({ fs, dir: gitdir, gitdir, bare: true, defaultBranch: 'main' });
    for (const [path, value] of LEDGER_CONFIG) await git.setConfig({ fs, gitdir, path, value });
    ledger = Ledger.forInit(gitdir);
    const result = await ledger.append({
      files,
      key: options.ceoKey,
      summary: 'genesis: trust root, registry and policy version 1',
      now: options.now,
    });
    installHook(gitdir, options.hookCommand);
    if ('skipped' in result) throw new CooError('INTERNAL', 'genesis was skipped');
    ledger.checkpoint();
    return result;
  } catch (error) {
    ledger?.close();
    ledger = null;
    try {
      if (created) fs.rmSync(gitdir, { recursive: true, force: true });
      else for (const name of fs.readdirSync(gitdir)) fs.rmSync(join(gitdir, name), { recursive: true, force: true });
    } catch {
      // Nothing was made there to remove (its folder could not be made): the cause is the error below, not this.
    }
    throw error;
  } finally {
    ledger?.close();
  }
}
