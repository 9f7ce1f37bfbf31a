import { CooError } from '../errors.js';
import { formatPublicKeyLine, type PrivateKey, type PublicKey } from '../crypto/keys.js';
import { parseDocument } from '../schema/documents.js';
import { toYaml } from '../schema/strict-yaml.js';
import type { KillSwitch } from '../schema/control.js';
import { isoSeconds } from '../util/time.js';
import { killSwitchPath, trustPath, type TrustRole } from './layout.js';
import type { AppendResult, Ledger } from './ledger.js';

const KIND = { root: 'trust_root.v0', registry: 'actor_registry.v0', policy: 'actor_policy.v0' } as const;

export interface TrustUpdate {
  readonly role: TrustRole;
  /** The new document as plain data; `version` may be omitted, or must be the next version. */
  readonly document: Record<string, unknown>;
  /** Registry only: replace these actors' keys (key rotation). */
  readonly actorKeys?: ReadonlyMap<string, PublicKey>;
  /** Registry only: revoke these key ids, with reasons. */
  readonly revoke?: ReadonlyMap<string, string>;
}

/** Appends the next version of a trust file, signed by `key` (a trust-root authority in force). */
export async function appendTrustVersion(ledger: Ledger, update: TrustUpdate, key: PrivateKey, now: Date): Promise<AppendResult & { version: number }> {
  const state = await ledger.state();
  const current = update.role === 'root' ? state.root : update.role === 'registry' ? state.registry : state.policy;
  const next = (current?.version ?? 0) + 1;
  const given = update.document['version'];
  if (given !== undefined && given !== next) {
    throw new CooError('TRUST_VERSION', `the file says version ${String(given)} but version ${next} comes next (omit the field or set it to ${next})`);
  }
  let document: Record<string, unknown> = { ...update.document, version: next };
  if (update.role === 'registry') {
    const actors = (document['actors'] as Array<Record<string, unknown>> | undefined) ?? [];
    for (const id of update.actorKeys?.keys() ?? []) {
      if (!actors.some((actor) => actor['id'] === id)) throw new CooError('USAGE', `actor ${id} is not in the registry file`);
    }
    document = {
      ...document,
      actors: actors.map((actor) => {
        const key = update.actorKeys?.get(String(actor['id']));
        return key === undefined ? actor : { ...actor, keys: [{ key_id: key.keyId, public_key: formatPublicKeyLine(key) }] };
      }),
      revoked_keys: [
        ...((document['revoked_keys'] as unknown[] | undefined) ?? []),
        ...[...(update.revoke ?? [])].map(([keyId, reason]) => ({ key_id: keyId, reason })),
      ],
    };
  } else if (update.actorKeys !== undefined || update.revoke !== undefined) {
    throw new CooError('USAGE', 'actor keys and revocations belong to the registry');
  }
  if (update.role === 'root' && document['created_at'] === undefined) document = { ...document, created_at: isoSeconds(now) };
  const parsed = parseDocument(KIND[update.role], document, `${update.role} file`);
  const path = trustPath(update.role, next);
  const result = await ledger.append({ files: [{ path, bytes: Buffer.from(toYaml(parsed)) }], key, now, summary: `trust: ${update.role} version ${next}` });
  if ('skipped' in result) throw new CooError('INTERNAL', 'trust update skipped');
  return { ...result, version: next };
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
  const result = await ledger.append({ files: [{ path: killSwitchPath(version), bytes: Buffer.from(toYaml(doc)) }], key, now, summary: `kill switch ${state}: ${reason}` });
  if ('skipped' in result) throw new CooError('INTERNAL', 'kill switch skipped');
  return { ...result, version };
}
