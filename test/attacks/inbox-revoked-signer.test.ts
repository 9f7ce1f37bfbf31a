import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { generatePrivateKey } from '../../src/crypto/keys.js';
import { appendTrustVersion } from '../../src/ledger/trust-update.js';
import { inboxOutput } from '../../src/mcp/schemas.js';
import { coo, json } from '../helpers/cli.js';
import { makeWorld, type World } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * `coo inbox` says of an item whose key a registry revoked since what `coo show` says of it: what
 * that key signed may be a thief's. The COO reads its inbox first, and is told there.
 */

const dir = tempDir('inbox-revoked-signer-');

describe("an answer in the COO's inbox whose consult and receipt a COO key revoked since signed", () => {
  let w: World | undefined;
  afterAll(async () => w?.close());

  it('is listed by coo inbox (text and --json, as the MCP inbox tool gives it) as signed by a revoked key, with the revocation', async () => {
    w = await makeWorld(join(dir, 'world'));
    const asked = (await w.consult()).messageId;
    await w.runner().runOnce();
    type Item = { message_id: string; kind: string; revoked_signer?: unknown };
    const before = json<{ items: Item[] }>(coo(['inbox', '--ledger', w.gitdir, '--json'])).items.find((item) => item.message_id === asked);
    expect(before?.kind).toBe('answer');
    expect(before?.revoked_signer).toBeUndefined();
    const registry = (await w.ledger.state()).registry!.doc;
    const next = generatePrivateKey('coo.hermes-next');
    await appendTrustVersion(
      w.ledger,
      { role: 'registry', document: { ...registry, version: undefined }, actorKeys: new Map([['coo.hermes', next.publicKey]]), revoke: new Map([[w.actors.coo.publicKey.keyId, 'COO laptop stolen']]) },
      w.actors.ceo,
      new Date(),
    );
    const listed = json<{ items: Item[] }>(coo(['inbox', '--ledger', w.gitdir, '--json']));
    expect(inboxOutput.safeParse(listed).success).toBe(true);
    expect(listed.items.find((item) => item.message_id === asked)?.revoked_signer).toMatchObject({ key_id: w.actors.coo.publicKey.keyId, actor: 'coo.hermes', revoked: { reason: 'COO laptop stolen' } });
    const text = coo(['inbox', '--ledger', w.gitdir]);
    expect(text.status, text.stderr).toBe(0);
    const line = text.stdout.split('\n').find((entry) => entry.startsWith(asked));
    expect(line).toContain(`SIGNED BY A REVOKED KEY: coo.hermes (key ${w.actors.coo.publicKey.keyId}), revoked at Ledger-Seq`);
    expect(line).toContain('COO laptop stolen');
  }, 120_000);
});
