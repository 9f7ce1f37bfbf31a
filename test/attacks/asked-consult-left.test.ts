import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { enqueueAskedConsult } from '../../src/dispatch/asked-consult.js';
import { claimPath, messageFolder, receiptPath } from '../../src/ledger/layout.js';
import type { EaDispatchMessage } from '../../src/schema/message.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { sha256Ref } from '../../src/util/hash.js';
import { attemptIdFor } from '../../src/util/ids.js';
import { isoSeconds } from '../../src/util/time.js';
import { makeWorld, type World } from '../helpers/lane.js';
import { dispatchEnvelope, eaReceiptDoc, messageFiles } from '../helpers/ledger.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * A consult an agent asked and left behind: its dispatch attempt ended before any runner ran it
 * (the tool gave up waiting, another runner held it). A runner that takes it up later receipts it
 * unrun, and the advisory agent is never called: nobody would read the answer.
 */

const dir = tempDir('asked-consult-left');
let w: World;
beforeAll(async () => {
  w = await makeWorld(join(dir, 'world'));
});
afterAll(async () => w.close());

describe('a consult its agent left behind', () => {
  it('is receipted expired by the next runner pass, unrun and unpaid, and the advisory agent is never called', async () => {
    const now = new Date();
    const dispatch = dispatchEnvelope({}, now) as EaDispatchMessage;
    const folder = messageFolder(dispatch.message_id, dispatch.created_at);
    await w.ledger.append({ files: messageFiles(dispatch), key: w.actors.coo, summary: 'dispatch', now });
    const claim = { schema_version: 'claim.v0', message_id: dispatch.message_id, attempt_id: attemptIdFor(dispatch.message_id, 1, 'ea'), attempt_number: 1, runner_id: 'run-test', transport_session_id: 'test', claimed_at: isoSeconds(now) };
    await w.ledger.append({ files: [{ path: claimPath(folder, 1), bytes: Buffer.from(toYaml(claim)) }], key: w.actors.coo, summary: 'claim', now });
    const bytes = Buffer.from('export const add = (a: number, b: number) => a + b;\n');
    const asked = await enqueueAskedConsult({
      ledger: w.ledger,
      key: w.actors.coo,
      now,
      dispatch,
      attempt: 1,
      attemptId: attemptIdFor(dispatch.message_id, 1, 'ea'),
      target: 'aa.chatgpt',
      question: 'Is add() right for NaN?',
      files: [{ path: 'src/add.ts', sha256: sha256Ref(bytes), bytes }],
      maxCostUsd: 0.1,
    });
    const receipt = eaReceiptDoc(dispatch.message_id, 1, { consults: [{ message_id: asked.messageId, receipt: null }] });
    await w.ledger.append({ files: [{ path: receiptPath(folder, 1), bytes: Buffer.from(toYaml(receipt)) }], key: w.actors.coo, summary: 'receipt', now });

    await w.runner().runOnce();

    const record = (await w.ledger.state()).messages.get(asked.messageId)!;
    expect(record.attempts).toHaveLength(1);
    expect(record.attempts[0]!.receipt).toMatchObject({ status: 'blocked', blockers: ['expired'], costUsd: 0, nextAttemptAt: null });
    expect(w.server.requests).toEqual([]);
  });
});
