import { CooError } from '../../errors.js';
import type { CooMessage } from '../../schema/message.js';
import type { ActorPolicy } from '../../schema/policy.js';
import type { CommitCheck } from '../commit-check.js';
import { isRunnerIntent } from '../runnable.js';
import { isTerminal, type MessageRecord } from '../state.js';

/**
 * The loop controls beside hops and budgets, at write time: the largest fan-out of one message (the
 * work naming one parent: consults, dispatches, cross-checks; a panel's members are held to it in
 * rules/panel.ts) and how many messages of one correlation may be in flight at once. A policy that states neither (one written
 * before panels) limits neither.
 */
export function checkFanout(check: CommitCheck, doc: CooMessage, policy: ActorPolicy, where: string): void {
  // Both count work (a runner intent), which is what a loop spends: a blocker, notice, command or acknowledgement runs
  // nothing, and one an agent hung under its own dispatch took a place the COO's work under it was refused for.
  if (!isRunnerIntent(doc.intent)) return;
  const parent = doc.parent_message_id;
  if (parent !== null) {
    const children = (check.children.get(parent) ?? check.state.children.get(parent) ?? 0) + 1;
    const limit = policy.limits.max_fanout;
    if (limit !== undefined && children > limit) {
      throw new CooError('POLICY_LIMIT', `${where}: ${parent} would have ${children} consults, dispatches or cross-checks naming it as their parent, over the policy's max_fanout ${limit} (policy v${policy.version})`, { where: `${where}:parent_message_id` });
    }
    check.children.set(parent, children);
  }
  const correlation = doc.correlation_id;
  const known = check.openByCorrelation.get(correlation) ?? check.state.openByCorrelation.get(correlation) ?? [];
  const records = known.map((id) => check.message(id)).filter((record): record is MessageRecord => record !== undefined);
  const inFlight = records.filter((record) => !isTerminal(record));
  const limit = policy.limits.max_in_flight_per_correlation;
  if (limit !== undefined && inFlight.length + 1 > limit) {
    throw new CooError('POLICY_LIMIT', `${where}: ${correlation} has ${inFlight.length} messages in flight, and the policy allows ${limit} at once (policy v${policy.version}); wait for one to end`, { where: `${where}:correlation_id` });
  }
  // An ended consult never runs again and leaves the list; a dispatch may be reopened by a CEO-approved retry, so it stays.
  check.openByCorrelation.set(correlation, [...records.filter((record) => !isTerminal(record) || record.intent === 'ea_dispatch').map((record) => record.id), doc.message_id]);
}
