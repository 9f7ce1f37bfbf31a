import type { LaneState } from '../authority/state.js';
import type { AaAnswer } from '../schema/aa-answer.js';

/**
 * A panel's members side by side, computed by the runner's own code from the members' signed
 * receipts and the aa_answer blocks that passed judgement; never by a model. Which members answered,
 * where their verdicts agree and differ, and each member's objections and findings. Pure.
 */

/** What one member's answer says, when its receipt succeeded (an answer that passed judgement is advice; a refused one is not). */
export interface MemberAdvice {
  readonly verdict: AaAnswer['verdict'];
  readonly confidence: number;
  readonly summary: string;
  readonly objections: readonly string[];
  /** How many findings of each severity the answer lists. */
  readonly findings: Readonly<Partial<Record<AaAnswer['findings'][number]['severity'], number>>>;
}

export interface PanelMemberFacts {
  readonly actor: string;
  readonly messageId: string;
  readonly state: LaneState;
  /** The member's latest receipt; null while it has none. */
  readonly receipt: { readonly path: string; readonly attempt: number; readonly status: string; readonly blockers: readonly string[] } | null;
  /** What all its attempts cost. */
  readonly spentUsd: number;
  readonly advice: MemberAdvice | null;
}

export interface PanelComparison {
  readonly panel_id: string;
  readonly name: string;
  readonly members: ReadonlyArray<{
    readonly actor: string;
    readonly message_id: string;
    readonly state: LaneState;
    readonly receipt_path: string | null;
    readonly attempt: number | null;
    readonly cost_usd: number;
    readonly verdict: string | null;
    readonly confidence: number | null;
    readonly summary: string | null;
    readonly objections: readonly string[];
    readonly findings: MemberAdvice['findings'];
    /** Why it gave no advice (still running, refused, blocked), when it gave none. */
    readonly no_advice: string | null;
  }>;
  /** Members whose answer passed judgement, in panel order. */
  readonly answered: readonly string[];
  /** Each verdict given, with the members that gave it, the most given first. */
  readonly verdicts: ReadonlyArray<{ readonly verdict: string; readonly members: readonly string[] }>;
  /** `unanimous`: every member answered with one verdict; `split`: the answers differ; `partial`: those that answered agree, others gave no advice; `none`: no advice yet. */
  readonly agreement: 'unanimous' | 'split' | 'partial' | 'none';
  /** Every objection raised, each with the member that raised it. */
  readonly objections: ReadonlyArray<{ readonly actor: string; readonly objection: string }>;
  readonly total_cost_usd: number;
}

/** An aa_answer reduced to what the comparison reads. */
export function adviceOf(answer: AaAnswer): MemberAdvice {
  const findings: Partial<Record<AaAnswer['findings'][number]['severity'], number>> = {};
  for (const finding of answer.findings) findings[finding.severity] = (findings[finding.severity] ?? 0) + 1;
  return { verdict: answer.verdict, confidence: answer.confidence, summary: answer.summary, objections: answer.objections, findings };
}

function noAdvice(member: PanelMemberFacts): string | null {
  if (member.advice !== null) return null;
  if (member.receipt === null) return member.state;
  return member.receipt.blockers.length > 0 ? `${member.state}: ${member.receipt.blockers.join(', ')}` : member.state;
}

export function comparePanel(panelId: string, name: string, members: readonly PanelMemberFacts[]): PanelComparison {
  const answered = members.filter((member) => member.advice !== null);
  const byVerdict = new Map<string, string[]>();
  for (const member of answered) byVerdict.set(member.advice!.verdict, [...(byVerdict.get(member.advice!.verdict) ?? []), member.actor]);
  const verdicts = [...byVerdict].map(([verdict, actors]) => ({ verdict, members: actors })).sort((a, b) => b.members.length - a.members.length);
  const agreement = answered.length === 0 ? 'none' : verdicts.length > 1 ? 'split' : answered.length === members.length ? 'unanimous' : 'partial';
  return {
    panel_id: panelId,
    name,
    members: members.map((member) => ({
      actor: member.actor,
      message_id: member.messageId,
      state: member.state,
      receipt_path: member.receipt?.path ?? null,
      attempt: member.receipt?.attempt ?? null,
      cost_usd: member.spentUsd,
      verdict: member.advice?.verdict ?? null,
      confidence: member.advice?.confidence ?? null,
      summary: member.advice?.summary ?? null,
      objections: member.advice?.objections ?? [],
      findings: member.advice?.findings ?? {},
      no_advice: noAdvice(member),
    })),
    answered: answered.map((member) => member.actor),
    verdicts,
    agreement,
    objections: answered.flatMap((member) => member.advice!.objections.map((objection) => ({ actor: member.actor, objection }))),
    total_cost_usd: Math.round(members.reduce((sum, member) => sum + member.spentUsd, 0) * 1e6) / 1e6,
  };
}
