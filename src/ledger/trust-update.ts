import { CooError } from '../errors.js';
import { formatPublicKeyLine, type PrivateKey, type PublicKey } from '../crypto/keys.js';
import { parseDocument } from '../schema/documents.js';
import { toYaml } from '../schema/strict-yaml.js';
import type { KillSwitch, TrustRoot } from '../schema/control.js';
import type { ActorRegistry } from '../schema/registry.js';
import { checkRegistryAgreesWithRoot, registryFollowingRoot } from '../authority/trust-agreement.js';
import { isoSeconds } from '../util/time.js';
import { refuseSignerSecrets } from './held-secrets.js';
import { killSwitchPath, trustPath, type TrustRole } from './layout.js';
import type { AppendResult, Ledger } from './ledger.js';

const KIND = { root: 'trust_root.v0', registry: 'actor_registry.v0', policy: 'actor_policy.v0' } as const;

export interface TrustUpdate {
  readonly role: TrustRole;
  /** The new document as plain data; `version` may be omitted, or must be the next version. */
  readonly document: Record<string, unknown>;
  /** Registry only: replace these actors' keys (key rotation). */
  readonly actorKeys?: ReadonlyMap<string, PublicKey>;
  /** Registry or root: revoke these key ids, with reasons; each loses every role it holds. */
  readonly revoke?: ReadonlyMap<string, string>;
}

export interface TrustAppended extends AppendResult {
  readonly version: number;
  /** The registry version written with a root, so that both name the same CEO keys. */
  readonly registryVersion?: number;
}

/**
 * Appends the next version of a trust file, signed by `key` (a trust-root authority in force). A
 * root comes with the registry that agrees with it in the same commit (the CEO actor's keys are
 * the root's, a revoked key is listed and given to no one); a registry that would disagree with
 * the root in force is refused with what to do instead (authority/trust-agreement.ts).
 */
export async function appendTrustVersion(ledger: Ledger, update: TrustUpdate, key: PrivateKey, now: Date): Promise<TrustAppended> {
  const state = await ledger.state();
  const current = update.role === 'root' ? state.root : update.role === 'registry' ? state.registry : state.policy;
  const next = (current?.version ?? 0) + 1;
  const given = update.document['version'];
  if (given !== undefined && given !== next) {
    throw new CooError('TRUST_VERSION', `the file says version ${String(given)} but version ${next} comes next (omit the field or set it to ${next})`);
  }
  let document: Record<string, unknown> = { ...update.document, version: next };
  const revoke = update.revoke ?? new Map<string, string>();
  if (update.role === 'registry') {
    const actors = (document['actors'] as Array<Record<string, unknown>> | undefined) ?? [];
    for (const id of update.actorKeys?.keys() ?? []) {
      if (!actors.some((actor) => actor['id'] === id)) throw new CooError('USAGE', `actor ${id} is not in the registry file`);
    }
    document = {
      ...document,
      actors: actors.map((actor) => {
        const key = update.actorKeys?.get(String(actor['id']));
        const keys = key === undefined ? ((actor['keys'] as Array<Record<string, unknown>> | undefined) ?? []) : [{ key_id: key.keyId, public_key: formatPublicKeyLine(key) }];
        // A revocation ends every role of the key: it leaves whichever actor held it.
        return { ...actor, keys: keys.filter((entry) => !revoke.has(String(entry['key_id']))) };
      }),
      revoked_keys: [
        ...((document['revoked_keys'] as unknown[] | undefined) ?? []),
        ...[...revoke].map(([keyId, reason]) => ({ key_id: keyId, reason })),
      ],
    };
  } else if (update.actorKeys !== undefined || (update.role === 'policy' && update.revoke !== undefined)) {
    throw new CooError('USAGE', update.actorKeys !== undefined ? "actor keys belong to the registry; a CEO key changes with --root" : 'revocations belong to the registry, or to a root that rotates the revoked key out');
  }
  if (update.role === 'root' && document['created_at'] === undefined) document = { ...document, created_at: isoSeconds(now) };
  const parsed = parseDocument(KIND[update.role], document, `${update.role} file`);
  const files = [{ path: trustPath(update.role, next), bytes: Buffer.from(toYaml(parsed)) }];
  let registryVersion: number | undefined;
  if (update.role === 'registry') checkRegistryAgreesWithRoot(state, parsed as ActorRegistry);
  if (update.role === 'root' && state.registry !== null) {
    const following = registryFollowingRoot(state.registry.doc, state.root?.doc ?? null, parsed as TrustRoot, revoke);
    if (following !== null) {
      registryVersion = state.registry.version + 1;
      const registry = parseDocument('actor_registry.v0', { ...following, version: registryVersion }, 'registry following the root');
      files.push({ path: trustPath('registry', registryVersion), bytes: Buffer.from(toYaml(registry)) });
    }
  }
  const summary = `trust: ${update.role} version ${next}${registryVersion === undefined ? '' : ` and registry version ${registryVersion}`}`;
  refuseSignerSecrets(files, key, ledger.gitdir);
  const result = await ledger.append({ files, key, now, summary });
  if ('skipped' in result) throw new CooError('INTERNAL', 'trust update skipped');
  return { ...result, version: next, ...(registryVersion === undefined ? {} : { registryVersion }) };
}

/** Appends the next kill-switch version, signed by `key` on behalf of `actor`. */
export async function appendKillSwitch(
  ledger: Ledger,
  state: 'on' | 'off',
  reason: string,
  actor: string,
  key: PrivateKey,
  now: Date,
): Promise<AppendResult & { version: number }> {
  const current = (await ledger.state()).killSwitch;
  const version = (current?.version ?? 0) + 1;
  const doc: KillSwitch = parseDocument(
    'kill_switch.v0',
    { schema_version: 'kill_switch.v0', version, state, reason, set_by: actor, created_at: isoSeconds(now) },
    'kill switch',
  );
  const files = [{ path: killSwitchPath(version), bytes: Buffer.from(toYaml(doc)) }];
  const summary = `kill switch ${state}: ${reason}`;
  refuseSignerSecrets([...files, { path: 'commit message', bytes: Buffer.from(summary) }], key, ledger.gitdir);
  const result = await ledger.append({ files, key, now, summary });
  if ('skipped' in result) throw new CooError('INTERNAL', 'kill switch skipped');
  return { ...result, version };
}
