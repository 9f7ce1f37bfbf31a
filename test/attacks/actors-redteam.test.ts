import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatPublicKeyLine, generatePrivateKey, type PrivateKey } from '../../src/crypto/keys.js';
import { enqueueDispatch } from '../../src/dispatch/enqueue.js';
import { appendEnvelope } from '../../src/ledger/append-envelope.js';
import { planEnvelope } from '../../src/ledger/envelope-plan.js';
import { trustPath } from '../../src/ledger/layout.js';
import { appendTrustVersion } from '../../src/ledger/trust-update.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { sha256Ref } from '../../src/util/hash.js';
import { attack, codeOf } from '../helpers/attack-kit.js';
import { makeTargetRepo } from '../helpers/dispatch-repo.js';
import { makeWorld, type World } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * The actor model, attacked where one actor's word could pass for another's: the CEO's word signed
 * by a key the trust root does not name, and advice that becomes work without the COO's adoption
 * once the registry no longer lists the advisory agent that gave it. Each is refused by the
 * validator, past the writers' own checks.
 */

const dir = tempDir('actors-redteam');
let w: World;

/** An envelope written by hand with `key`, the header planned for it and `fields` over it: the code it was refused with, or 'accepted'. */
function writeAs(key: PrivateKey, target: string, fields: Record<string, unknown>, artifacts = new Map<string, Buffer>()): Promise<string> {
  return codeOf(async () => {
    const now = new Date();
    const plan = planEnvelope(await w.ledger.state(), key, target, {}, now, 'hand');
    const envelope = { ...plan.header, budget: { max_cost_usd: 0, max_runtime_seconds: 1 }, expected_receipt_schema: null, ...fields };
    const withRef = 'payload_hash' in fields ? { ...envelope, payload_ref: `${plan.folder}/prompt.md` } : envelope;
    return appendEnvelope(w.ledger, Buffer.from(toYaml(withRef)), artifacts, key, now);
  });
}

const TEXT = Buffer.from('Ship it.\n');
const COMMAND = { intent: 'ceo_command', authority_class: 'directive', payload_hash: sha256Ref(TEXT), budget_usd: null };

beforeAll(async () => {
  w = await makeWorld(join(dir, 'world'));
});
afterAll(async () => w.close());

describe("the CEO's word comes only from a key the trust root names", () => {
  /** A second key the registry gives the CEO actor and the root does not name (a registry written by hand, past `coo trust`'s agreement check). */
  let deputy: PrivateKey;

  beforeAll(async () => {
    deputy = generatePrivateKey('ceo');
    const state = await w.ledger.state();
    const registry = state.registry!.doc;
    const actors = registry.actors.map((actor) => (actor.id === 'ceo' ? { ...actor, keys: [...actor.keys, { key_id: deputy.publicKey.keyId, public_key: formatPublicKeyLine(deputy.publicKey) }] } : actor));
    const next = { ...registry, version: state.registry!.version + 1, actors };
    await w.ledger.append({ files: [{ path: trustPath('registry', next.version), bytes: Buffer.from(toYaml(next)) }], key: w.actors.ceo, now: new Date(), summary: 'registry: a second ceo key' });
  });

  it('accepts the same command from the root key: the attacks below are refused for the key alone', async () => {
    expect(await writeAs(w.actors.ceo, 'coo.hermes', COMMAND, new Map([['prompt.md', TEXT]]))).toBe('accepted');
  });

  attack("a CEO command signed by a key the registry gives the CEO and the trust root does not name", 'library', 'TRUST_AUTHORITY', () => writeAs(deputy, 'coo.hermes', COMMAND, new Map([['prompt.md', TEXT]])));

  attack("a CEO rejection signed by a key the registry gives the CEO and the trust root does not name", 'library', 'TRUST_AUTHORITY', () =>
    writeAs(deputy, 'coo.hermes', { intent: 'ceo_reject', authority_class: 'directive', about_message_id: null, request_hash: `sha256:${'e'.repeat(64)}`, reason: 'no' }),
  );
});

describe('advice becomes work only through an adoption, whoever the registry lists now', () => {
  let v: World;
  beforeAll(async () => {
    v = await makeWorld(join(dir, 'leaving'));
  });
  afterAll(async () => v.close());

  attack('a dispatch descending from a consult to an advisory agent the registry no longer lists, without adopting a proposal of it', 'library', 'POLICY_PROPOSAL_TO_DISPATCH', async () => {
    const repo = join(v.dir, 'work');
    makeTargetRepo(repo);
    const consult = await v.consult({ target: 'aa.gemini' });
    const registry = (await v.ledger.state()).registry!.doc;
    await appendTrustVersion(v.ledger, { role: 'registry', document: { ...registry, version: undefined, actors: registry.actors.filter((actor) => actor.id !== 'aa.gemini') } }, v.actors.ceo, new Date());
    return codeOf(() => enqueueDispatch({ ledger: v.ledger, key: v.actors.coo, now: new Date(), target: 'ea.codex', repo, task: 'Do what Gemini said.', scope: ['src/**'], accept: ['ok'], verify: ['sh test.sh'], parentMessageId: consult.messageId }));
  });
});
