import { Option } from 'commander';
import { Ledger } from '../ledger/ledger.js';
import { RemoteLedger, type PublishReport } from '../remote/publish.js';
import { requireRemoteOfClone } from '../remote/git-remote.js';

/** `--remote URL` of the writing verbs: the write is published through the clone's origin. */
export function remoteOption(): Option {
  return new Option(
    '--remote <url>',
    "publish through this remote; --ledger is then a local clone of it (coo clone URL DIR), whose origin must be this URL. The write is validated and signed locally, then pushed (never forced); when someone else wrote first it is rebuilt on the remote's verified new head and pushed again (bounded retries). Nothing is reported written until the remote has it",
  );
}

export interface WriteOutcome<R> {
  readonly result: R;
  /** How the write reached the remote, or null without --remote. */
  readonly remote: PublishReport | null;
}

/**
 * A write on a clone of a remote goes through that remote: on the clone alone it reaches no runner
 * (a kill switch, a revocation or a command only this copy holds) and forks the copy from it.
 */
export function requireRemoteOfWrites(gitdir: string, remote: string | undefined, what: string): void {
  requireRemoteOfClone(gitdir, remote === '' ? undefined : remote, what, 'where no runner working through the remote would ever see it (a kill switch, a revocation or a command only this copy holds) and the copy would fork from its remote; nothing was written');
}

/**
 * Opens the ledger and runs one write on it: directly, or, with a remote, on the clone at the
 * remote's verified head and published there (RemoteLedger.write, which may run `write` again on
 * a new head).
 */
export async function writeLedger<R>(gitdir: string, remote: string | undefined, write: (ledger: Ledger) => Promise<R>): Promise<WriteOutcome<R>> {
  requireRemoteOfWrites(gitdir, remote, 'every write');
  const ledger = Ledger.open(gitdir);
  try {
    if (remote === undefined || remote === '') return { result: await write(ledger), remote: null };
    const published = await new RemoteLedger(ledger, { remote }).write(write);
    return { result: published.result, remote: published.report };
  } finally {
    ledger.close();
  }
}

/** The `remote` field of a verb's --json output, when it published. */
export function remoteJson(remote: PublishReport | null): { remote?: PublishReport } {
  return remote === null ? {} : { remote: { url: remote.url, tries: remote.tries, conflicts: remote.conflicts } };
}

/** The words a verb's human output adds when it published. */
export function remoteText(remote: PublishReport | null): string {
  if (remote === null) return '';
  const conflicts = remote.conflicts === 0 ? '' : `, ${remote.conflicts} conflict${remote.conflicts === 1 ? '' : 's'}`;
  return ` (remote ${remote.url}: ${remote.tries} tr${remote.tries === 1 ? 'y' : 'ies'}${conflicts})`;
}
