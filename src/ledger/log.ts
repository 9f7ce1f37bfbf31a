import { parseSshsig } from '../crypto/sshsig.js';
import type { LedgerState } from '../authority/state.js';
import { identTime, parseCommit } from './commit-format.js';
import { readCommitLinks, type TreeReader } from './history.js';
import type { ObjectReader } from './object-store.js';

export interface LogEntry {
  readonly commit: string;
  readonly seq: number | null;
  readonly time: string;
  readonly signer: { readonly keyId: string; readonly actor: string | null } | null;
  readonly summary: string;
  readonly files: readonly string[];
}

/** The newest `limit` commits, newest first: who signed each (by key) and what it added. Informational: `coo verify` judges. */
export async function readLog(reader: ObjectReader, trees: TreeReader, head: string | null, state: LedgerState, limit: number): Promise<LogEntry[]> {
  const out: LogEntry[] = [];
  let oid = head ?? undefined;
  while (oid !== undefined && out.length < limit) {
    const links = await readCommitLinks(reader, oid);
    const parent = links.parents[0];
    const parentTree = parent === undefined ? null : (await readCommitLinks(reader, parent)).tree;
    const files = (await trees.diff(parentTree, links.tree)).filter((change) => !change.path.endsWith('.sig')).map((change) => `${change.status === 'added' ? '+' : change.status === 'deleted' ? '-' : '~'} ${change.path}`);
    let signer: LogEntry['signer'] = null;
    let summary: string;
    let time = '';
    try {
      const commit = parseCommit(links.raw);
      summary = commit.message.split('\n')[0] ?? '';
      time = new Date(identTime(commit.committer) * 1000).toISOString();
      const keyId = parseSshsig(commit.gpgsig).publicKey.keyId;
      signer = { keyId, actor: state.everKeys.get(keyId)?.actor ?? null };
    } catch {
      summary = '(malformed commit: run coo verify)';
    }
    out.push({ commit: oid, seq: links.seq, time, signer, summary, files });
    oid = parent;
  }
  return out;
}
