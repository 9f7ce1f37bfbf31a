import type { Ledger } from '../ledger/ledger.js';
import { folderOf, type MessageRecord } from '../authority/state.js';
import { snapshotFilePath } from '../ledger/layout.js';
import { LIMITS } from '../limits.js';
import type { CooMessage } from '../schema/message.js';
import { sha256Ref } from '../util/hash.js';
import type { PinCheck, PinnedFile, PinnedRepo } from './pins.js';

type ContextPin = NonNullable<Extract<CooMessage, { intent: 'aa_consult' }>['context_pin']>;

/**
 * The files a message's context pin names, read again and checked against their hashes, whatever
 * the pin's form: from the repository's objects at the pinned commit, or, for a snapshot of a
 * dispatch attempt's worktree, from the bytes the ledger stores beside the envelope. Any difference
 * fails closed: the AA sees exactly what the ledger says it saw.
 */
export async function checkContextPin(ledger: Ledger, repo: PinnedRepo, record: Pick<MessageRecord, 'id' | 'createdAt'>, pin: ContextPin): Promise<PinCheck> {
  if (pin.snapshot_of === undefined) return repo.check(pin.repo_commit_sha, pin.files);
  const folder = folderOf(record);
  const files: PinnedFile[] = [];
  for (const file of pin.files) {
    const path = snapshotFilePath(folder, file.sha256);
    const bytes = await ledger.readFile(path);
    if (bytes === null) return { ok: false, detail: `${path}, the snapshot of ${file.path}, is not in the ledger` };
    if (bytes.length > LIMITS.contextFileBytes) return { ok: false, detail: `${file.path}: ${bytes.length} bytes exceeds the ${LIMITS.contextFileBytes}-byte limit for one context file` };
    const sha256 = sha256Ref(bytes);
    if (sha256 !== file.sha256) return { ok: false, detail: `${file.path} has ${sha256} in the ledger, pinned ${file.sha256}` };
    files.push({ path: file.path, sha256, bytes });
  }
  return { ok: true, files };
}

/**
 * The commit of the runner's repository a message needs before it can run: a dispatch's base, a
 * consult's pinned commit (none when its files are a snapshot the ledger stores). One rule for the
 * start-up check of a shallow clone and the runner's hold of a message its repository lacks.
 */
export function pinnedCommitOf(message: CooMessage): string | null {
  if (message.intent === 'ea_dispatch') return message.dispatch.base_ref;
  return 'context_pin' in message && message.context_pin != null && message.context_pin.snapshot_of === undefined ? message.context_pin.repo_commit_sha : null;
}
