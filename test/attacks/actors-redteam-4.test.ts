import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatPublicKeyLine, generatePrivateKey, type PrivateKey } from '../../src/crypto/keys.js';
import { trustPath } from '../../src/ledger/layout.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { attack, codeOf } from '../helpers/attack-kit.js';
import { makeWorld, type World } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * The actor model, attacked where a key speaks in two roles: a root and registry that give one key
 * to the CEO and to another actor (the COO, an agent), or give the CEO's root a role the registry
 * holds as something else.
 */

const dir = tempDir('actors-redteam-4');

describe('one key speaks for one actor: the trust root and the registry agree on whose its keys are', () => {
  let w: World;
  beforeAll(async () => {
    w = await makeWorld(join(dir, 'roles'));
  });
  afterAll(async () => w.close());

  /** The next root or registry written by hand (past `coo trust`'s agreement check), signed by the CEO. */
  async function writeTrust(role: 'root' | 'registry', change: (doc: Record<string, unknown>) => Record<string, unknown>): Promise<string> {
    const state = await w.ledger.state();
    const current = role === 'root' ? state.root! : state.registry!;
    const version = current.version + 1;
    const bytes = Buffer.from(toYaml({ ...change({ ...current.doc }), version }));
    return codeOf(() => w.ledger.append({ files: [{ path: trustPath(role, version), bytes }], key: w.actors.ceo, now: new Date(), summary: 'trust' }));
  }

  const key = (actor: string, holder: PrivateKey) => ({ actor, key_id: holder.publicKey.keyId, public_key: formatPublicKeyLine(holder.publicKey) });
  const actors = (doc: Record<string, unknown>) => doc['actors'] as Array<Record<string, unknown>>;

  attack("a trust root naming the COO's key as a trust-root authority of the COO", 'library', 'TRUST_CONFLICT', () => writeTrust('root', (doc) => ({ ...doc, authorities: [...(doc['authorities'] as unknown[]), key('coo.hermes', w.actors.coo)] })));

  attack("a trust root naming an execution agent's key as a CEO key", 'library', 'TRUST_CONFLICT', () => writeTrust('root', (doc) => ({ ...doc, authorities: [...(doc['authorities'] as unknown[]), key('ceo', w.actors.codex)] })));

  attack("a registry giving the CEO's root key to the COO instead of the CEO", 'library', 'TRUST_CONFLICT', () =>
    writeTrust('registry', (doc) => ({
      ...doc,
      actors: actors(doc).map((actor) => (actor['id'] === 'ceo' ? { ...actor, keys: [] } : actor['id'] === 'coo.hermes' ? { ...actor, keys: [{ key_id: w.actors.ceo.publicKey.keyId, public_key: formatPublicKeyLine(w.actors.ceo.publicKey) }] } : actor)),
    })),
  );

  attack('a registry that makes the actor the trust root names an orchestrator, and the active COO', 'library', 'TRUST_CONFLICT', () =>
    writeTrust('registry', (doc) => ({ ...doc, active_coo: 'ceo', actors: actors(doc).map((actor) => (actor['id'] === 'ceo' ? { ...actor, class: 'orchestrator' } : actor)) })),
  );

  it('accepts a root that adds a second CEO key the registry gives the CEO in the same commit', async () => {
    const deputy = generatePrivateKey('ceo');
    const state = await w.ledger.state();
    const root = { ...state.root!.doc, version: state.root!.version + 1, authorities: [...state.root!.doc.authorities, key('ceo', deputy)] };
    const registry = { ...state.registry!.doc, version: state.registry!.version + 1, actors: state.registry!.doc.actors.map((actor) => (actor.id === 'ceo' ? { ...actor, keys: [...actor.keys, { key_id: deputy.publicKey.keyId, public_key: formatPublicKeyLine(deputy.publicKey) }] } : actor)) };
    const files = [
      { path: trustPath('root', root.version), bytes: Buffer.from(toYaml(root)) },
      { path: trustPath('registry', registry.version), bytes: Buffer.from(toYaml(registry)) },
    ];
    expect(await codeOf(() => w.ledger.append({ files, key: w.actors.ceo, now: new Date(), summary: 'a second CEO key' }))).toBe('accepted');
  });
});
