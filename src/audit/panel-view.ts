import { CooError } from '../errors.js';
import { laneStateOf, type LedgerState, type MessageRecord } from '../authority/state.js';
import { readAnswerBlock } from '../consult/answer.js';
import type { Ledger } from '../ledger/ledger.js';
import { readDocument } from '../schema/documents.js';
import { adviceOf, comparePanel, type MemberAdvice, type PanelComparison, type PanelMemberFacts } from './panel-comparison.js';

/** The panel a message belongs to, or the panel an id names; null for a message of no panel. */
export function panelIdOf(state: LedgerState, id: string): string | null {
  if (state.panels.has(id)) return id;
  return state.messages.get(id)?.panel ?? null;
}

/** A member's facts, read from the ledger: its latest receipt, and the advice of its answer when that receipt succeeded. */
async function memberFacts(ledger: Ledger, record: MessageRecord): Promise<PanelMemberFacts> {
  const last = [...record.attempts].reverse().find((attempt) => attempt.receipt !== null);
  let advice: MemberAdvice | null = null;
  if (last?.receipt?.status === 'succeeded') {
    const bytes = await ledger.readFile(last.receipt.path);
    const receipt = bytes === null ? null : readDocument('aa_receipt.v0', bytes, last.receipt.path);
    const answer = receipt?.output_ref == null ? null : await ledger.readFile(receipt.output_ref);
    const read = answer === null ? null : readAnswerBlock(answer.toString('utf8'));
    advice = read !== null && 'answer' in read ? adviceOf(read.answer) : null;
  }
  return {
    actor: record.target,
    messageId: record.id,
    state: laneStateOf(record),
    receipt: last?.receipt == null ? null : { path: last.receipt.path, attempt: last.number, status: last.receipt.status, blockers: last.receipt.blockers },
    spentUsd: record.attempts.reduce((sum, attempt) => sum + (attempt.receipt?.costUsd ?? 0), 0),
    advice,
  };
}

/** A panel's comparison, as `coo show` and the MCP `show` tool give it. */
export async function viewPanel(ledger: Ledger, state: LedgerState, panelId: string): Promise<PanelComparison> {
  const panel = state.panels.get(panelId);
  if (panel === undefined) throw new CooError('NOT_FOUND', `${panelId} is not a panel of this ledger`);
  const records = panel.messages.map((id) => state.messages.get(id)!);
  return comparePanel(panelId, panel.name, await Promise.all(records.map((record) => memberFacts(ledger, record))));
}
