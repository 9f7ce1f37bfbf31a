import { beforeAll, describe } from 'vitest';
import { claimPath, receiptPath } from '../../src/ledger/layout.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { attack, firstOr, sshSign, useKit, type Kit } from '../helpers/attack-kit.js';
import { forgedReceipt } from '../helpers/forged.js';
import { dispatchEnvelope, messageFiles } from '../helpers/ledger.js';
import { fixtureEnvelope } from '../helpers/stock.js';
import { git, tempDir } from '../helpers/tmp.js';

const dir = tempDir();
const getKit = useKit(dir);
let kit: Kit;
beforeAll(async () => {
  kit = getKit();
});



const folder = (id: string): string => `messages/2026-11/30/07/${id}`;
let n = 0;
const nextId = (): string => `msg_01M8NQFJ01J7CG66HWNDDJ${String(8400 + (n += 1)).padStart(4, '0')}`;

describe('forgery and tampering', () => {
  attack('an envelope and commit signed by an unknown key', 'hook', 'SIGNER_UNKNOWN', () => {
    const id = nextId();
    return kit.push({ [`${folder(id)}/envelope.yaml`]: fixtureEnvelope(id, id) }, { key: kit.keys.intruder.file });
  });

  attack('an envelope signed by the CEO but naming the COO as its source', 'library', 'SIGNER_WRONG_ACTOR', () =>
    kit.append([...messageFiles(dispatchEnvelope())], kit.keys.ceo.key),
  );

  attack('an envelope signed by an execution agent but naming the COO as its source', 'hook', 'SIGNER_WRONG_ACTOR', () => {
    const id = nextId();
    return kit.push({ [`${folder(id)}/envelope.yaml`]: fixtureEnvelope(id, id) }, { key: kit.keys.codex.file });
  });

  attack('one flipped byte in a committed entry', 'verify', 'SIG_INVALID', async () => {
    let code = '';
    const id = nextId();
    const envelope = fixtureEnvelope(id, id);
    const sig = sshSign(envelope, kit.keys.coo.file);
    const flipped = envelope.replace('issue_number: 62', 'issue_number: 63');
    await kit.bypass({ [`${folder(id)}/envelope.yaml`]: flipped, [`${folder(id)}/envelope.yaml.sig`]: sig }, { key: kit.keys.coo.file, sign: false }, () => {
      code = firstOr(kit.verifyCodes(), 'SIG_INVALID');
    });
    return code;
  });

  attack('one flipped byte in an entry signature', 'hook', 'SIG_INVALID', async () => {
    const id = nextId();
    const envelope = fixtureEnvelope(id, id);
    const sig = sshSign(envelope, kit.keys.coo.file);
    const lines = sig.split('\n');
    const body = Buffer.from(lines.slice(1, -2).join(''), 'base64');
    body[body.length - 10] = body[body.length - 10]! ^ 0x01;
    const rewrapped = ['-----BEGIN SSH SIGNATURE-----', ...body.toString('base64').match(/.{1,70}/g)!, '-----END SSH SIGNATURE-----', ''].join('\n');
    return kit.push({ [`${folder(id)}/envelope.yaml`]: envelope, [`${folder(id)}/envelope.yaml.sig`]: rewrapped }, { key: kit.keys.coo.file, sign: false });
  });

  attack('one flipped byte in a commit message', 'verify', 'SIG_INVALID', async () => {
    let code = '';
    await kit.rewriteHead((raw) => raw.replace(/\n\n(.)/, (_m, first: string) => `\n\n${first === 'X' ? 'Y' : 'X'}`), () => {
      code = firstOr(kit.verifyCodes(), 'SIG_INVALID');
    });
    return code;
  });

  attack("an entry whose .sig belongs to another entry", 'hook', 'SIG_INVALID', async () => {
    const a = nextId();
    const b = nextId();
    return kit.push({ [`${folder(b)}/envelope.yaml`]: fixtureEnvelope(b, b), [`${folder(b)}/envelope.yaml.sig`]: sshSign(fixtureEnvelope(a, a), kit.keys.coo.file) }, { key: kit.keys.coo.file, sign: false });
  });

  attack('an entry signed for a different namespace (git instead of the entry namespace)', 'hook', 'SIG_NAMESPACE', async () => {
    const id = nextId();
    return kit.push({ [`${folder(id)}/envelope.yaml`]: fixtureEnvelope(id, id), [`${folder(id)}/envelope.yaml.sig`]: sshSign(fixtureEnvelope(id, id), kit.keys.coo.file, 'git') }, { key: kit.keys.coo.file, sign: false });
  });

  attack('an entry signed by one key inside a commit signed by another', 'hook', 'SIGNER_MISMATCH', () => {
    const id = nextId();
    return kit.push({ [`${folder(id)}/envelope.yaml`]: fixtureEnvelope(id, id) }, { key: kit.keys.ceo.file, entryKey: kit.keys.coo.file });
  });

  attack('an unsigned commit', 'hook', 'COMMIT_UNSIGNED', () => {
    const id = nextId();
    return kit.push({ [`${folder(id)}/envelope.yaml`]: fixtureEnvelope(id, id) }, { key: null, entryKey: kit.keys.coo.file });
  });

  attack('an entry without its signature', 'hook', 'SIG_MISSING', () => {
    const id = nextId();
    return kit.push({ [`${folder(id)}/envelope.yaml`]: fixtureEnvelope(id, id) }, { key: kit.keys.coo.file, sign: false });
  });

  attack('a receipt for a message that does not exist', 'library', 'MESSAGE_UNKNOWN', async () => {
    const ghost = dispatchEnvelope();
    const { envelope } = await kit.world.consult({ idempotencyKey: `ghost-template-${Date.now()}` });
    const receipt = { ...forgedReceipt(envelope), message_id: ghost.message_id };
    return kit.append([{ path: receiptPath(folder(ghost.message_id), 1), bytes: Buffer.from(toYaml(receipt)) }], kit.keys.coo.key);
  });

  attack('a receipt and claim signed by an execution agent', 'library', 'NOT_ACTIVE_COO', async () => {
    const { messageId, envelope } = await kit.world.consult({ idempotencyKey: `ea-receipt-${Date.now()}` });
    const base = envelope.payload_ref.replace(/\/prompt\.md$/, '');
    const claim = { schema_version: 'claim.v0', message_id: messageId, attempt_id: `aa_attempt_${messageId.slice(4)}_1`, attempt_number: 1, runner_id: 'rogue', transport_session_id: 'rogue', claimed_at: envelope.created_at };
    return kit.append(
      [
        { path: claimPath(base, 1), bytes: Buffer.from(toYaml(claim)) },
        { path: receiptPath(base, 1), bytes: Buffer.from(toYaml(forgedReceipt(envelope))) },
      ],
      kit.keys.codex.key,
    );
  });

  attack('an artifact whose bytes do not match the hash its receipt records', 'library', 'ARTIFACT_HASH_MISMATCH', async () => {
    const { messageId, envelope } = await kit.world.consult({ idempotencyKey: `artifact-${Date.now()}` });
    const base = envelope.payload_ref.replace(/\/prompt\.md$/, '');
    const claim = { schema_version: 'claim.v0', message_id: messageId, attempt_id: `aa_attempt_${messageId.slice(4)}_1`, attempt_number: 1, runner_id: 'r', transport_session_id: 'r', claimed_at: envelope.created_at };
    return kit.append(
      [
        { path: claimPath(base, 1), bytes: Buffer.from(toYaml(claim)) },
        { path: receiptPath(base, 1), bytes: Buffer.from(toYaml(forgedReceipt(envelope))) },
        { path: `${base}/artifacts/001/answer.md`, bytes: Buffer.from('not what the receipt hashed\n') },
      ],
      kit.keys.coo.key,
    );
  });

  attack('a file modified after it was written', 'hook', 'WRITE_ONCE', () =>
    kit.push({ 'trust/policy/000001.yaml': git(['--git-dir', kit.world.gitdir, 'show', 'main:trust/policy/000001.yaml']).replace('daily_cost_cap_usd: 50', 'daily_cost_cap_usd: 5000') }, { key: kit.keys.coo.file, sign: false }),
  );

  attack('a file deleted from the ledger', 'verify', 'WRITE_ONCE', async () => {
    let code = '';
    await kit.bypass({}, { key: kit.keys.coo.file, remove: ['README.md'] }, () => {
      code = firstOr(kit.verifyCodes(), 'WRITE_ONCE');
    });
    return code;
  });
});
