import { attemptIdOf } from '../../src/authority/runnable.js';
import { folderOf } from '../../src/authority/state.js';
import type { PrivateKey } from '../../src/crypto/keys.js';
import { claimPath } from '../../src/ledger/layout.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { sessionSlugFor } from '../../src/util/ids.js';
import { isoSeconds } from '../../src/util/time.js';
import type { World } from './lane.js';

/** A COO-signed claim of attempt 1 by a runner that then goes quiet (`run-gone`), dated `at`, with or without the allowance it states; signed by `key`, the world's COO key by default. */
export async function claimedByAGoneRunner(w: World, messageId: string, allowanceUsd: number | undefined, at: Date, key: PrivateKey = w.actors.coo): Promise<void> {
  const record = (await w.ledger.state()).messages.get(messageId)!;
  const claim = {
    schema_version: 'claim.v0',
    message_id: messageId,
    attempt_id: attemptIdOf(record, 1),
    attempt_number: 1,
    runner_id: 'run-gone',
    transport_session_id: sessionSlugFor(messageId, 1),
    claimed_at: isoSeconds(at),
    ...(allowanceUsd === undefined ? {} : { allowance_usd: allowanceUsd }),
  };
  await w.ledger.append({ files: [{ path: claimPath(folderOf(record), 1), bytes: Buffer.from(toYaml(claim)) }], key, now: at, summary: `claim ${messageId} attempt 1` });
}
