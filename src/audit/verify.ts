import { CooError, type Finding } from '../errors.js';
import { cloneState, emptyState, type LedgerState } from '../authority/state.js';
import type { PublicKey } from '../crypto/keys.js';
import { trustPath } from '../ledger/layout.js';
import { readDocument } from '../schema/documents.js';
import { isAncestor, readCommitLinks } from '../ledger/history.js';
import { Ledger } from '../ledger/ledger.js';
import { isoSeconds } from '../util/time.js';
import { runGit } from '../util/exec.js';
import { MAIN_REF, readRef } from '../ledger/ref-lock.js';
import { ORIGIN_REF, VERIFIED_REF } from '../remote/git-remote.js';
import { loadVerified, saveVerified } from './checkpoint.js';
import { TimelineRecorder, type Timeline } from './timeline.js';
import { judgeLedgerPin, judgePin } from './trust-pin.js';
import { heartbeatReading } from '../authority/lease.js';
import { LIMITS } from '../limits.js';

export interface VerifyReport {
  readonly head: string | null;
  readonly seq: number;
  readonly commits: number;
  /** How many commits this run replayed (all of them with `full`, the new ones otherwise). */
  readonly replayed: number;
  readonly incremental: boolean;
  readonly findings: readonly Finding[];
  /** What the auditor should know that is not wrong with the ledger: a pinned key since rotated out or revoked. */
  readonly notes: readonly string[];
  /** The refs beside main and coo's own, which this report does not judge (`otherRefsNote` says so). */
  readonly otherRefs: readonly string[];
  /**
   * The first commit the replay refused and the one before it (null: none before it, genesis was
   * refused), or null when the replay refused none: where a damaged ledger was last whole.
   */
  readonly firstInvalid: { readonly commit: string; readonly seq: number; readonly lastValid: { readonly commit: string; readonly seq: number } | null } | null;
  readonly state: LedgerState;
  readonly timeline: Timeline | null;
}

export interface VerifyOptions {
  /** Where the last verified (sequence, commit) and state are kept; none: no checkpoint is read or written. */
  readonly checkpointFile?: string;
  /** Replay everything from genesis even when a checkpoint exists. */
  readonly full?: boolean;
  /** The trust root key the auditor expects genesis to name (pinned out of band). */
  readonly trustRoot?: Pick<PublicKey, 'keyId'>;
  /** The genesis commit the auditor expects (pinned out of band): another ledger under the same keys is a finding. */
  readonly genesis?: string;
  /** The time heartbeats are judged against; captured once by the caller. */
  readonly now?: Date;
  /** Collect every commit's signer and entries (for the report). Forces a full replay. */
  readonly timeline?: boolean;
  readonly onProgress?: (done: number, total: number) => void;
  /** Judge nothing past the first invalid commit (ReplayObserver.untilInvalid): for a caller that refuses the history on any finding. */
  readonly untilInvalid?: boolean;
}

/** The refs coo writes in a ledger folder: main, the remote's main as last fetched, and the head a remote write last verified. */
const OWN_REFS = new Set([MAIN_REF, ORIGIN_REF, VERIFIED_REF]);

/** How many refs outside main a note names; the rest are counted. */
const NAMED_REFS = 10;

/**
 * The refs of a ledger folder beside main and coo's own (`OWN_REFS`): a branch, a tag, git notes,
 * and `HEAD` when it is at another commit than main's `head` (stock `git log` with no ref shows
 * HEAD's history). A symbolic ref to one of coo's own is that ref by another name, not beside it:
 * stock git clone's `refs/remotes/origin/HEAD` names `refs/remotes/origin/main`.
 */
async function otherRefs(gitdir: string, head: string | null): Promise<string[]> {
  const lines = (await runGit(['--git-dir', gitdir, 'for-each-ref', '--format=%(refname)%00%(symref)'])).toString('utf8').split('\n');
  const refs = lines.filter((line) => line !== '').map((line) => line.split('\0')).filter(([ref, target]) => !OWN_REFS.has(ref!) && !OWN_REFS.has(target!)).map(([ref]) => ref!);
  const at = await runGit(['--git-dir', gitdir, 'rev-parse', '--verify', '--quiet', 'HEAD^{commit}']).then((out) => out.toString('utf8').trim(), () => null);
  return at === null || at === head ? refs : ['HEAD', ...refs];
}

/**
 * What an auditor is told of refs beside main, or null when there are none: coo verify judges main
 * alone, and what a branch, a tag or git notes hold no actor need have signed. Stock `git log`
 * prints the notes of `refs/notes/commits` under main's commits as part of them, so an unsigned
 * line would read as a signed commit's words beside a clean verify.
 */
export function otherRefsNote(refs: readonly string[], judge = 'coo verify'): string | null {
  if (refs.length === 0) return null;
  const named = `${refs.slice(0, NAMED_REFS).join(', ')}${refs.length > NAMED_REFS ? ` and ${refs.length - NAMED_REFS} more` : ''}`;
  const notes = refs.some((ref) => ref.startsWith('refs/notes/')) ? '; stock git log prints git notes under the commits they annotate, as if part of them (git log --no-notes leaves them out)' : '';
  const replaced = refs.some((ref) => ref.startsWith('refs/replace/')) ? "; stock git shows the commit a refs/replace/ ref points at in place of the one it names, main's too (git --no-replace-objects log shows main's own)" : '';
  const head = refs.includes('HEAD') ? "; stock git log with no ref shows HEAD's history, not main's (git log main shows the ledger)" : '';
  return `${judge} judged main only: ${named} ${refs.length === 1 ? 'is' : 'are'} not the ledger, and no actor need have signed what ${refs.length === 1 ? 'it holds' : 'they hold'}${notes}${replaced}${head}`;
}

/** Is `descendant` on the line above `ancestor`? */
async function descends(ledger: Ledger, descendant: string, ancestor: string): Promise<boolean> {
  return isAncestor(ledger.reader.gitdir, ancestor, descendant);
}

/**
 * What a clone's main leaves out of the head it last verified or pushed on its remote (VERIFIED_REF,
 * moved by coo alone), or null when main holds it (a ledger no remote write touched has none). Main
 * behind it is a writer stopped before its main moved (the next sync brings the rest) or main moved
 * back; main aside it is main moved to another history, or a remote that showed this clone two. Either
 * way the commits past main may be in this clone alone (a runner's claims, its paid calls' receipts),
 * and coo verify, which judges main, says nothing of them otherwise.
 */
async function remoteVerifiedNote(ledger: Ledger, gitdir: string, head: string): Promise<string | null> {
  const verified = readRef(gitdir, VERIFIED_REF);
  if (verified === null || (await descends(ledger, head, verified))) return null;
  const list = `git --git-dir ${gitdir} log ${MAIN_REF}..${VERIFIED_REF}`;
  const kept = `the commits of that head past main (${list}) may be in this clone alone, a runner's claims and its paid calls' receipts among them: keep this clone; coo verify judged main only`;
  if (await descends(ledger, verified, head)) {
    return `main (${head.slice(0, 12)}) is behind ${VERIFIED_REF} (${verified.slice(0, 12)}), the head this clone last verified or pushed on its remote: a writer stopped before its main moved (the next write or runner pass through the remote brings the rest), or main was moved back; ${kept}`;
  }
  return `main (${head.slice(0, 12)}) does not descend from ${VERIFIED_REF} (${verified.slice(0, 12)}), the head this clone last verified or pushed on its remote: main was moved to another history, or the remote showed this clone two histories (no clone can tell which one the others were shown); ${kept}`;
}

/**
 * Why the ledger's latest heartbeat does not show it live at `now`, or null when it does, as
 * authority/lease.ts heartbeatReading reads it: dated ahead of this clock by more than the skew
 * allowed between machines (a clock that runs ahead wrote it where no hook judged it, and read by its
 * own dates one a machine a year fast wrote kept a ledger withheld after it fresh for a year), or
 * expired by more than that skew (a runner whose clock runs behind by less dates its beats to expire
 * that much early, and its live ledger read as frozen), unless another runner's latest heartbeat
 * reads live by the same rule. `coo verify`, the forge check and the MCP
 * tool judge freshness by this alone.
 */
export function staleHeartbeat(state: Pick<LedgerState, 'lastHeartbeat' | 'runnerHeartbeats'>, now: Date): string | null {
  const beat = state.lastHeartbeat;
  if (beat === null) return null;
  // Any runner's beat that reads live shows the ledger live: the newest may be one a runner whose
  // clock runs ahead wrote, read as saying nothing, while another runner beat seconds ago.
  for (const other of state.runnerHeartbeats.values()) if (heartbeatReading(other, now).kind === 'live') return null;
  const newest = state.runnerHeartbeats.get(beat.runner);
  // A checkpoint of a build before runners' heartbeats were kept has the expiry alone.
  const reading = heartbeatReading({ createdAt: newest?.seq === beat.seq ? newest.createdAt : null, expiresAt: beat.expiresAt }, now);
  const which = `the latest heartbeat (Ledger-Seq ${beat.seq}, ${beat.runner})`;
  if (reading.kind === 'ahead') {
    return `${which} is dated ${newest!.createdAt}, ${reading.seconds} s ahead of this clock (${isoSeconds(now)}), more than the ${LIMITS.clockSkewSeconds} s allowed between machines: its writer's clock runs ahead, and it says nothing of when the ledger was last live; the ledger may be frozen or withheld`;
  }
  if (reading.kind === 'expired') return `${which} expired at ${beat.expiresAt}, more than the ${LIMITS.clockSkewSeconds} s allowed between machines' clocks ago: the ledger may be frozen or withheld`;
  return null;
}

/**
 * Replays the ledger through the validator and reports every finding: each invalid commit is
 * reported and skipped, and the replay goes on. With a checkpoint, only commits after the last
 * verified head are replayed, and a head that does not descend from it is reported as a rollback
 * or a fork. The latest heartbeat must not have expired.
 */
export async function verifyLedger(gitdir: string, options: VerifyOptions = {}): Promise<VerifyReport> {
  const ledger = Ledger.open(gitdir, { checkpoints: false });
  const now = options.now ?? new Date();
  try {
    const head = ledger.head();
    const findings: Finding[] = [];
    const saved = options.checkpointFile === undefined ? null : loadVerified(options.checkpointFile);
    if (head === null) {
      if (saved !== null) findings.push({ code: 'HISTORY_ROLLBACK', message: `the ledger is empty, but ${saved.head} (Ledger-Seq ${saved.seq}) was verified before` });
      // A pinned trust root asks what genesis names: an empty ledger names nothing, which is no pass.
      const pin = options.trustRoot === undefined ? null : judgePin(emptyState(), null, options.trustRoot.keyId).finding;
      if (pin !== null) findings.push(pin);
      const ledgerPin = options.genesis === undefined ? null : judgeLedgerPin(null, options.genesis);
      if (ledgerPin !== null) findings.push(ledgerPin);
      return { head, seq: 0, commits: 0, replayed: 0, incremental: false, findings, notes: [], otherRefs: await otherRefs(gitdir, null), firstInvalid: null, state: emptyState(), timeline: null };
    }
    let base: { state: LedgerState; tree: string | null } = { state: emptyState(), tree: null };
    let commits: string[] | null = null;
    let incremental = false;
    if (saved !== null) {
      if (await descends(ledger, head, saved.head)) {
        if (options.full !== true && options.timeline !== true && saved.state !== null) {
          commits = await ledger.rangeToReplay(head, saved.head, saved.seq);
          base = { state: cloneState(saved.state), tree: saved.tree };
          incremental = true;
        }
      } else {
        const headSeq = (await readCommitLinks(ledger.reader, head)).seq ?? 0;
        const behind = headSeq < saved.seq && (await descends(ledger, saved.head, head));
        findings.push(
          behind
            ? { code: 'HISTORY_ROLLBACK', commit: head, message: `head is at Ledger-Seq ${headSeq}, behind ${saved.head} (Ledger-Seq ${saved.seq}) verified at ${saved.verifiedAt}` }
            : { code: 'HISTORY_FORK', commit: head, message: `head does not descend from ${saved.head} (Ledger-Seq ${saved.seq}) verified at ${saved.verifiedAt}` },
        );
      }
    }
    const all = commits ?? (await ledger.rangeToReplay(head, null, 0));
    if (all === null) throw new CooError('INTERNAL', `cannot walk the history of ${head}`);
    const recorder = options.timeline === true ? new TimelineRecorder() : null;
    const total = all.length;
    const startSeq = base.state.seq;
    let previous = base.state.head === null ? null : { commit: base.state.head, seq: base.state.seq };
    let firstInvalid: VerifyReport['firstInvalid'] = null;
    const { state } = await ledger.replay(base, all, {
      ...(options.untilInvalid === true ? { untilInvalid: true } : {}),
      onFinding: (finding) => findings.push(finding),
      onCommit: (facts, verdict, next) => {
        recorder?.record(facts, verdict, next);
        if (firstInvalid === null && verdict.findings.length > 0) firstInvalid = { commit: facts.oid, seq: next.seq, lastValid: previous };
        previous = { commit: facts.oid, seq: next.seq };
        options.onProgress?.(next.seq - startSeq, total);
      },
    });
    if (state.genesis !== null && saved !== null && saved.genesis !== state.genesis) {
      findings.push({ code: 'TRUST_ROOT_MISMATCH', message: `genesis is ${state.genesis}, but ${saved.genesis} was verified before at this path` });
    }
    const notes: string[] = [];
    if (options.trustRoot !== undefined && state.genesis !== null) {
      // Version 1 of the root is write-once: read it as genesis laid it, whatever came later.
      const bytes = await ledger.readFile(trustPath('root', 1), state.genesis);
      const pin = judgePin(state, bytes === null ? null : readDocument('trust_root.v0', bytes, trustPath('root', 1)), options.trustRoot.keyId);
      if (pin.finding !== null) findings.push(pin.finding);
      if (pin.note !== null) notes.push(pin.note);
    }
    const ledgerPin = options.genesis === undefined ? null : judgeLedgerPin(state.genesis, options.genesis);
    if (ledgerPin !== null) findings.push(ledgerPin);
    const dropped = await remoteVerifiedNote(ledger, gitdir, head);
    if (dropped !== null) notes.push(dropped);
    const stale = staleHeartbeat(state, now);
    if (stale !== null) findings.push({ code: 'HEARTBEAT_EXPIRED', message: stale });
    if (options.checkpointFile !== undefined && findings.length === 0 && state.genesis !== null) {
      const tree = (await readCommitLinks(ledger.reader, head)).tree;
      saveVerified(options.checkpointFile, { genesis: state.genesis, seq: state.seq, head, tree, verifiedAt: isoSeconds(now), state });
    }
    return { head, seq: state.seq, commits: state.seq, replayed: all.length, incremental, findings, notes, otherRefs: await otherRefs(gitdir, head), firstInvalid, state, timeline: recorder?.timeline() ?? null };
  } finally {
    ledger.close();
  }
}
