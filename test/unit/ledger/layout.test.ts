import { describe, expect, it } from 'vitest';
import { classifyPath, envelopePath, explainPath, forgeWorkflowPath, heartbeatPath, isForgePath, messageFolder } from '../../../src/ledger/layout.js';

const ID = 'msg_01M8NQFJ01J7CG66HWNDDJ8485';

describe('ledger layout', () => {
  it('puts a message under the month, day and hour (UTC) of its created_at', () => {
    expect(messageFolder(ID, '2026-11-30T14:05:09Z')).toBe(`messages/2026-11/30/14/${ID}`);
    expect(messageFolder(ID, '2026-01-02T00:00:00.250Z')).toBe(`messages/2026-01/02/00/${ID}`);
    expect(heartbeatPath('2026-11-30T23:59:59Z', 42)).toBe('heartbeats/2026-11/30/23/0000000042.yaml');
  });

  it('reads the same places back', () => {
    expect(classifyPath(envelopePath(messageFolder(ID, '2026-11-30T14:05:09Z')))).toEqual({ kind: 'envelope', messageId: ID, hour: '2026-11-30T14', folder: `messages/2026-11/30/14/${ID}` });
    expect(classifyPath(`messages/2026-11/30/14/${ID}/receipts/001.yaml`)).toEqual({ kind: 'receipt', messageId: ID, folder: `messages/2026-11/30/14/${ID}`, attempt: 1 });
    expect(classifyPath('heartbeats/2026-11/30/23/0000000042.yaml')).toEqual({ kind: 'heartbeat', hour: '2026-11-30T23', seq: 42 });
    expect(classifyPath('heartbeats/2026-11/30/23/0000000042.yaml.sig')).toEqual({ kind: 'signature', of: 'heartbeats/2026-11/30/23/0000000042.yaml' });
  });

  it('has no place for a day folder without its hour, or for malformed month, day or hour folders', () => {
    for (const path of [
      `messages/2026/11/30/${ID}/envelope.yaml`,
      `messages/2026-11/30/${ID}/envelope.yaml`,
      `messages/2026-11/30/4/${ID}/envelope.yaml`,
      `messages/2026/11/30/14/${ID}/envelope.yaml`,
      `messages/2026-11/30/14/15/${ID}/envelope.yaml`,
      'heartbeats/2026/11/30/0000000042.yaml',
      'heartbeats/2026-11/30/0000000042.yaml',
    ]) {
      expect(classifyPath(path), path).toBeNull();
    }
  });

  it('places a workflow under .github/workflows with its signature, and nothing else under .github', () => {
    expect(classifyPath(forgeWorkflowPath('coo-verify.yml'))).toEqual({ kind: 'forge_file', name: 'coo-verify.yml' });
    expect(classifyPath('.github/workflows/coo-verify.yml.sig')).toEqual({ kind: 'signature', of: '.github/workflows/coo-verify.yml' });
    expect(isForgePath('.github/workflows/coo-verify.yml.sig')).toBe(true);
    for (const path of ['.github/workflows/Verify.yml', '.github/workflows/sub/x.yml', '.github/workflows/x.json', '.github/actions/x/action.yml', '.github/CODEOWNERS', '.github/workflows/.yml', 'github/workflows/x.yml']) {
      expect(classifyPath(path), path).toBeNull();
      expect(isForgePath(path), path).toBe(false);
    }
  });

  it('says why a path has no place, in words a person writing files by hand can act on', () => {
    const cases: Array<[string, RegExp]> = [
      ['messages/2026-11/30/07/msg_01HANDWRITTEN0000000000IL/envelope.yaml', /^"msg_01HANDWRITTEN0000000000IL" is not a message id: msg_ and then 26 characters of Crockford's base32 \(0-9 and A-Z without I, L, O and U\)/],
      ['messages/2026-11/30/msg_01M8NQFJ01J7CG66HWNDDJ8485/envelope.yaml', /^a message's files live in messages\/YYYY-MM\/DD\/HH\/<message_id>\//],
      [`messages/2026-11/30/07/${ID}/notes.txt`, /^a message folder holds envelope\.yaml, prompt\.md/],
      ['trust/registry/2.yaml', /^trust files are trust\/root\|registry\|policy\/NNNNNN\.yaml/],
      ['notes.txt', /^the ledger holds README\.md/],
    ];
    for (const [path, why] of cases) {
      expect(classifyPath(path), path).toBeNull();
      expect(explainPath(path), path).toMatch(why);
    }
  });
});
