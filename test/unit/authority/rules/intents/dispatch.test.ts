import { describe, expect, it } from 'vitest';
import { attemptBranchFor, defaultBranchFor, dispatchRequestHash, isBranchName, stableDispatchFields } from '../../../../../src/authority/rules/intents/dispatch.js';
import type { EaDispatchMessage } from '../../../../../src/schema/message.js';
import { dispatchEnvelope } from '../../../../helpers/ledger.js';

describe('branch names for a dispatch', () => {
  it('takes plain new branch names, and their numbered attempts', () => {
    for (const name of ['coo/msg_01ARZ3NDEKTSV4RRFFQ69G5FAV', 'fix/add-nan', 'feature.x', 'a', 'coo/issue-62']) {
      expect(isBranchName(name), name).toBe(true);
      expect(isBranchName(attemptBranchFor(name, 12)), name).toBe(true);
    }
  });

  it('refuses what git check-ref-format --branch refuses', () => {
    for (const name of ['', '-x', 'a..b', 'a/.b', 'a/b.lock', 'a.', 'a/b.', 'a//b', '/a', 'a/', 'a b', 'a~1', 'a^', 'a:b', 'a?', 'a*', 'a[b', 'a\\b', '@{u}', 'x'.repeat(181)]) expect(isBranchName(name), name).toBe(false);
  });

  it('refuses names git resolves to another ref than the new branch: HEAD, pseudo-refs, refs/, heads/, tags/, remotes/', () => {
    for (const name of ['HEAD', 'FETCH_HEAD', 'ORIG_HEAD', 'MERGE_HEAD', 'refs/heads/main', 'heads/main', 'tags/v1', 'remotes/origin/main']) expect(isBranchName(name), name).toBe(false);
    for (const name of ['Head', 'main-HEAD', 'my/heads/x', 'refsx/y']) expect(isBranchName(name), name).toBe(true);
  });

  it('names the default branch by the message id as printed', () => {
    expect(defaultBranchFor('msg_01ARZ3NDEKTSV4RRFFQ69G5FAV')).toBe('coo/msg_01ARZ3NDEKTSV4RRFFQ69G5FAV');
  });
});

describe('what an approval of a dispatch covers', () => {
  const message = dispatchEnvelope() as EaDispatchMessage;
  const withBranch = (branch: string): EaDispatchMessage => ({ ...message, dispatch: { ...message.dispatch, branch_name: branch } });

  it('pins a named branch: another name is another request', () => {
    expect(dispatchRequestHash(withBranch('fix/a'))).not.toBe(dispatchRequestHash(withBranch('fix/b')));
  });

  it('leaves the default branch out, by the id as printed or lowercased as before, since it derives from the id', () => {
    const printed = dispatchRequestHash(withBranch(`coo/${message.message_id}`));
    expect(dispatchRequestHash(withBranch(`coo/${message.message_id.toLowerCase()}`))).toBe(printed);
    expect(stableDispatchFields(withBranch(`coo/${message.message_id}`))).not.toHaveProperty('branch_name');
    expect(printed).not.toBe(dispatchRequestHash(withBranch('fix/a')));
  });
});
