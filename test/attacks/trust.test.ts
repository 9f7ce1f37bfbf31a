import { beforeAll, describe } from 'vitest';
import { trustPath } from '../../src/ledger/layout.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { attack, useKit, type Kit } from '../helpers/attack-kit.js';
import { tempDir } from '../helpers/tmp.js';

const dir = tempDir();
const getKit = useKit(dir);
let kit: Kit;
beforeAll(async () => {
  kit = getKit();
});

async function registryFile(version: number, change: Record<string, unknown> = {}): Promise<{ path: string; bytes: Buffer }> {
  const registry = (await kit.world.ledger.state()).registry!.doc;
  return { path: trustPath('registry', version), bytes: Buffer.from(toYaml({ ...registry, version, ...change })) };
}

describe('trust files', () => {
  attack('a registry version that skips a number', 'library', 'TRUST_VERSION', async () => {
    const current = (await kit.world.ledger.state()).registry!.version;
    return kit.append([await registryFile(current + 2)], kit.keys.ceo.key);
  });

  attack('a registry version that repeats a number', 'library', 'WRITE_ONCE', async () => {
    const current = (await kit.world.ledger.state()).registry!.version;
    return kit.append([await registryFile(current)], kit.keys.ceo.key);
  });

  attack('a registry whose file name and version disagree', 'library', 'TRUST_VERSION', async () => {
    const current = (await kit.world.ledger.state()).registry!.version;
    const file = await registryFile(current + 1, { version: 1 });
    return kit.append([file], kit.keys.ceo.key);
  });

  attack('a registry signed by the COO instead of the CEO', 'library', 'TRUST_AUTHORITY', async () => {
    const current = (await kit.world.ledger.state()).registry!.version;
    return kit.append([await registryFile(current + 1, { active_coo: 'coo.hermes' })], kit.keys.coo.key);
  });

  attack('a policy signed by the COO instead of the CEO', 'library', 'TRUST_AUTHORITY', async () => {
    const policy = (await kit.world.ledger.state()).policy!;
    return kit.append([{ path: trustPath('policy', policy.version + 1), bytes: Buffer.from(toYaml({ ...policy.doc, version: policy.version + 1, budgets: { ...policy.doc.budgets, daily_cost_cap_usd: 100000 } })) }], kit.keys.coo.key);
  });

  attack('a trust root rolled back to an earlier version number', 'library', 'WRITE_ONCE', async () => {
    const root = (await kit.world.ledger.state()).root!;
    return kit.append([{ path: trustPath('root', 1), bytes: Buffer.from(toYaml(root.doc)) }], kit.keys.ceo.key);
  });

  attack('a trust root rotated by the COO, whose key is not in the root before it', 'library', 'TRUST_AUTHORITY', async () => {
    const root = (await kit.world.ledger.state()).root!;
    const { formatPublicKeyLine } = await import('../../src/crypto/keys.js');
    const doc = { ...root.doc, version: root.version + 1, authorities: [{ actor: 'ceo', key_id: kit.keys.intruder.key.publicKey.keyId, public_key: formatPublicKeyLine(kit.keys.intruder.key.publicKey) }] };
    return kit.append([{ path: trustPath('root', root.version + 1), bytes: Buffer.from(toYaml(doc)) }], kit.keys.coo.key);
  });

  attack('a registry whose key id is not the fingerprint of its key', 'library', 'KEY_MALFORMED', async () => {
    const registry = (await kit.world.ledger.state()).registry!;
    const actors = registry.doc.actors.map((actor) => (actor.id === 'ea.codex' ? { ...actor, keys: [{ ...actor.keys[0]!, key_id: kit.keys.intruder.key.publicKey.keyId }] } : actor));
    return kit.append([await registryFile(registry.version + 1, { actors })], kit.keys.ceo.key);
  });

  attack('a policy that opens an AA -> EA edge', 'library', 'POLICY_EDGE_FORBIDDEN', async () => {
    const policy = (await kit.world.ledger.state()).policy!;
    const doc = { ...policy.doc, version: policy.version + 1, edges: [...policy.doc.edges, { from: 'aa.*', to: 'ea.*', intents: ['receipt_notice'], requires: [] }] };
    return kit.append([{ path: trustPath('policy', policy.version + 1), bytes: Buffer.from(toYaml(doc)) }], kit.keys.ceo.key);
  });
});
