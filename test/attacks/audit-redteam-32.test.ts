import { beforeAll, describe, expect, it } from 'vitest';
import { attemptArtifactPath, claimPath, messageFolder, receiptPath } from '../../src/ledger/layout.js';
import { readStrictYaml, toYaml } from '../../src/schema/strict-yaml.js';
import { sha256Ref } from '../../src/util/hash.js';
import { attack, firstOr, useKit, type Kit } from '../helpers/attack-kit.js';
import { forgedReceipt } from '../helpers/forged.js';
import { dispatchEnvelope, eaReceiptDoc, messageFiles } from '../helpers/ledger.js';
import { attemptIdFor } from '../../src/util/ids.js';
import { defaultBranchFor } from '../../src/authority/rules/intents/dispatch.js';
import { isoSeconds } from '../../src/util/time.js';
import { tempDir } from '../helpers/tmp.js';

const dir = tempDir();
const getKit = useKit(dir);
let kit: Kit;
beforeAll(async () => {
  kit = getKit();
});

let n = 0;

/**
 * A queued consult's claim and a succeeded receipt of its attempt 1, with the answer's bytes and the
 * bundle kept as sent; `shape` turns the honest receipt into the one under test.
 */
async function receiptCommit(shape: (receipt: Record<string, unknown>, paths: { answer: string; sent: string }) => Record<string, unknown>): Promise<Record<string, Buffer>> {
  n += 1;
  const { messageId, envelope } = await kit.world.consult({ idempotencyKey: `audit-32-${n}-${Date.now()}` });
  const folder = envelope.payload_ref.replace(/\/prompt\.md$/, '');
  const answer = Buffer.from('The answer the model gave.\n');
  const sent = Buffer.from('The bundle Oracle was handed.\n');
  const paths = { answer: attemptArtifactPath(folder, 1, 'answer.md'), sent: attemptArtifactPath(folder, 1, 'prompt-sent.md') };
  const honest = { ...forgedReceipt(envelope), output_ref: paths.answer, output_hash: sha256Ref(answer), bundle_hash: sha256Ref(sent), attachments: [{ path: paths.sent, sha256: sha256Ref(sent) }] };
  const claim = { schema_version: 'claim.v0', message_id: messageId, attempt_id: `aa_attempt_${messageId.slice(4)}_1`, attempt_number: 1, runner_id: 'r', transport_session_id: 'r', claimed_at: envelope.created_at };
  return {
    [claimPath(folder, 1)]: Buffer.from(toYaml(claim)),
    [receiptPath(folder, 1)]: Buffer.from(toYaml(shape(honest, paths))),
    [paths.answer]: answer,
    [paths.sent]: sent,
  };
}

/** The code each of the library, the pre-receive hook and `coo verify` answers one commit with. */
async function threeReaders(files: Record<string, Buffer>, wanted: string): Promise<{ library: string; hook: string; verify: string }> {
  // verify first: its commit is taken back after, so the hook and the library judge the same ledger it did.
  let verify = '';
  await kit.bypass(files, { key: kit.keys.coo.file }, () => {
    verify = firstOr(kit.verifyCodes(), wanted);
  });
  const hook = await kit.push(files, { key: kit.keys.coo.file });
  const library = await kit.append(Object.entries(files).map(([path, bytes]) => ({ path, bytes })), kit.keys.coo.key);
  return { library, hook, verify };
}

/** The answer's bytes hashed as its receipt's output_hash says: what a cross-check and a citation rely on. */
const otherBytes = sha256Ref('Another answer, the one the receipt claims.\n');

describe('a receipt names each file it keeps by the hash of its bytes', () => {
  attack('a receipt whose output_hash is not the answer\'s, the same path listed again as an attachment with the true hash', 'library', 'ARTIFACT_HASH_MISMATCH', async () => {
    const files = await receiptCommit((receipt, paths) => ({ ...receipt, output_hash: otherBytes, attachments: [...(receipt['attachments'] as unknown[]), { path: paths.answer, sha256: sha256Ref('The answer the model gave.\n') }] }));
    return kit.append(Object.entries(files).map(([path, bytes]) => ({ path, bytes })), kit.keys.coo.key);
  });

  attack('a receipt whose bundle_hash is not the hash of the bundle it keeps as sent', 'library', 'ARTIFACT_HASH_MISMATCH', async () => {
    const files = await receiptCommit((receipt) => ({ ...receipt, bundle_hash: otherBytes }));
    return kit.append(Object.entries(files).map(([path, bytes]) => ({ path, bytes })), kit.keys.coo.key);
  });

  attack('a receipt that keeps a bundle as sent but states no bundle_hash', 'library', 'ARTIFACT_HASH_MISMATCH', async () => {
    const files = await receiptCommit((receipt) => ({ ...receipt, bundle_hash: null }));
    return kit.append(Object.entries(files).map(([path, bytes]) => ({ path, bytes })), kit.keys.coo.key);
  });

  it('the hook and coo verify refuse the answer named by two hashes as the library does', async () => {
    const files = await receiptCommit((receipt, paths) => ({ ...receipt, output_hash: otherBytes, attachments: [...(receipt['attachments'] as unknown[]), { path: paths.answer, sha256: sha256Ref('The answer the model gave.\n') }] }));
    expect(await threeReaders(files, 'ARTIFACT_HASH_MISMATCH')).toEqual({ library: 'ARTIFACT_HASH_MISMATCH', hook: 'ARTIFACT_HASH_MISMATCH', verify: 'ARTIFACT_HASH_MISMATCH' });
  });

  it('the hook and coo verify refuse a bundle_hash of other bytes than the bundle kept as sent', async () => {
    const files = await receiptCommit((receipt) => ({ ...receipt, bundle_hash: otherBytes }));
    expect(await threeReaders(files, 'ARTIFACT_HASH_MISMATCH')).toEqual({ library: 'ARTIFACT_HASH_MISMATCH', hook: 'ARTIFACT_HASH_MISMATCH', verify: 'ARTIFACT_HASH_MISMATCH' });
  });

  attack('an honest receipt whose answer and kept bundle are each named once by their own hash', 'library', 'accepted', async () => {
    const files = await receiptCommit((receipt) => receipt);
    return kit.append(Object.entries(files).map(([path, bytes]) => ({ path, bytes })), kit.keys.coo.key);
  });

  attack('a receipt that names one file twice by the same hash', 'library', 'accepted', async () => {
    const files = await receiptCommit((receipt, paths) => ({ ...receipt, attachments: [...(receipt['attachments'] as unknown[]), { path: paths.answer, sha256: sha256Ref('The answer the model gave.\n') }] }));
    return kit.append(Object.entries(files).map(([path, bytes]) => ({ path, bytes })), kit.keys.coo.key);
  });
});

/** A dispatch from base b…b, its attempt 1 claimed, and that attempt's receipt with `fields` over a runner's. */
async function dispatchReceipt(fields: Record<string, unknown>): Promise<Record<string, Buffer>> {
  const now = new Date();
  const dispatch = dispatchEnvelope({}, now);
  const folder = messageFolder(dispatch.message_id, dispatch.created_at);
  const claim = { schema_version: 'claim.v0', message_id: dispatch.message_id, attempt_id: attemptIdFor(dispatch.message_id, 1, 'ea'), attempt_number: 1, runner_id: 'r', transport_session_id: 'r', claimed_at: isoSeconds(now) };
  expect(await kit.append([...messageFiles(dispatch), { path: claimPath(folder, 1), bytes: Buffer.from(toYaml(claim)) }], kit.keys.coo.key)).toBe('accepted');
  return { [receiptPath(folder, 1)]: Buffer.from(toYaml(eaReceiptDoc(dispatch.message_id, 1, { created_at: isoSeconds(now), ...fields }))) };
}

describe("a dispatch receipt's base, executor and branch are the ones its envelope names", () => {
  it('the library, the hook and coo verify refuse a receipt that says the work started from another commit', async () => {
    const files = await dispatchReceipt({ base_sha: 'c'.repeat(40) });
    expect(await threeReaders(files, 'CONTEXT_INVALID')).toEqual({ library: 'CONTEXT_INVALID', hook: 'CONTEXT_INVALID', verify: 'CONTEXT_INVALID' });
  });

  it('the library, the hook and coo verify refuse a receipt naming another executor than the dispatch names', async () => {
    const files = await dispatchReceipt({ executor: 'claude_code' });
    expect(await threeReaders(files, 'SCHEMA_INVALID')).toEqual({ library: 'SCHEMA_INVALID', hook: 'SCHEMA_INVALID', verify: 'SCHEMA_INVALID' });
  });

  attack("a receipt that puts the attempt's work on another branch than its own", 'library', 'SCHEMA_INVALID', async () => {
    const files = await dispatchReceipt({ branch: 'main' });
    return kit.append(Object.entries(files).map(([path, bytes]) => ({ path, bytes })), kit.keys.coo.key);
  });

  attack("a receipt that names the attempt's own branch", 'library', 'accepted', async () => {
    const files = await dispatchReceipt({});
    const [path, bytes] = Object.entries(files)[0]!;
    const doc = readStrictYaml(bytes, path) as { message_id: string };
    const branch = defaultBranchFor(doc.message_id);
    return kit.append([{ path, bytes: Buffer.from(toYaml({ ...(doc as object), branch })) }], kit.keys.coo.key);
  });

  attack("a receipt as the runner writes it, naming the dispatch's own base and executor", 'library', 'accepted', async () => {
    const files = await dispatchReceipt({});
    return kit.append(Object.entries(files).map(([path, bytes]) => ({ path, bytes })), kit.keys.coo.key);
  });
});
