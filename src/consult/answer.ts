import { aaAnswer, type AaAnswer, type Proposal } from '../schema/aa-answer.js';
import type { BlockerCode } from '../schema/receipt.js';
import { lineEnds } from '../util/invisible.js';
import { jsonShapeProblem } from '../util/json-shape.js';
import { COMMAND_PATTERNS, ledgerDocumentShape, patternText } from './answer-patterns.js';
import { judgeProposals } from './proposals.js';

/** Judging an advisory answer. Pure: text in, verdict out. */

const MAX_BLOCK_BYTES = 64 * 1024;
/** aa_answer.v0 nests four levels (a proposal's scope, a finding's refs); a block nested deeper is no answer. */
const MAX_BLOCK_DEPTH = 8;
const BLOCK = /```aa_answer[ \t]*\n([\s\S]*?)\n```/g;
/**
 * A line a Markdown reader opens as a code block tagged aa_answer (CommonMark 4.5: up to three spaces,
 * three or more backticks or tildes, spaces, an info string whose first word is the tag), in any case,
 * whether or not BLOCK reads it as one.
 */
const SHOWN_BLOCK = /^ {0,3}(`{3,}|~{3,})[ \t]*aa_answer/gim;

export type AnswerJudgement =
  /** `proposals` are the ones kept; `errors` say which were stripped and why (findings that do not fail the answer). */
  | { readonly status: 'pass'; readonly answer: AaAnswer; readonly proposals: readonly Proposal[]; readonly errors: readonly string[] }
  | { readonly status: 'fail'; readonly blocker: Extract<BlockerCode, 'output_invalid' | 'output_injection'>; readonly errors: readonly string[] };


/** Wording that addresses an actor instead of advising the COO. */
const ADDRESSING = /\b(ea\.[a-z0-9_]+|aa\.[a-z0-9_]+|execution agents?|the EA)\b/i;

/** Every string of the answer a reader is shown (a citation lists each finding's refs too), so no field of it goes unjudged. */
function texts(answer: AaAnswer): string[] {
  return [
    answer.summary,
    ...answer.findings.flatMap((finding) => [finding.title, finding.detail, ...finding.refs]),
    ...answer.recommendations,
    ...answer.objections,
  ].map(patternText);
}

function normalize(text: string): string {
  return patternText(text).toLowerCase().replace(/[^a-z0-9]+/g, ' ').trim();
}

export interface JudgeInput {
  readonly text: string;
  readonly canary: string;
  /** Steering lines found in the pinned context (prompt.ts suspiciousLines). */
  readonly steering: readonly string[];
}

/**
 * Pass only when the answer holds exactly one aa_answer block that is valid aa_answer.v0, echoes
 * this attempt's canary, addresses no actor, carries no command-shaped text, and repeats no
 * steering line of the context. Malformed is `output_invalid` (retried); the rest is
 * `output_injection` (never retried: the same context would steer the model again).
 */
/** The one aa_answer block of an answer, parsed and checked against aa_answer.v0; the errors when there is not exactly one valid block. */
export function readAnswerBlock(text: string): { readonly answer: AaAnswer; readonly rawProposals: unknown } | { readonly errors: readonly string[] } {
  const blocks = [...text.matchAll(BLOCK)].map((match) => match[1] ?? '');
  if (blocks.length !== 1) return { errors: [blocks.length === 0 ? 'no aa_answer block' : `${blocks.length} aa_answer blocks; exactly one is allowed`] };
  // A second block fenced another way (tildes, a space before the tag, words after it, CRLF, a look-alike letter in the
  // tag) is shown to whoever reads the answer, the cross-checker among them, as this agent's answer: one verdict recorded, another shown.
  const shown = [...patternText(text).replace(lineEnds(), '\n').matchAll(SHOWN_BLOCK)].length;
  if (shown > 1) return { errors: [`${shown} aa_answer blocks as Markdown shows them (fenced with backticks or tildes, however the tag is spaced, spelled or followed); exactly one is allowed`] };
  const block = blocks[0]!;
  if (Buffer.byteLength(block) > MAX_BLOCK_BYTES) return { errors: ['aa_answer block too large'] };
  let value: unknown;
  try {
    value = JSON.parse(block);
  } catch (error) {
    return { errors: [`aa_answer block is not JSON: ${(error as Error).message}`] };
  }
  // A key twice reads as its last occurrence here and as its first to whoever reads the answer: one verdict recorded, another shown.
  const shape = jsonShapeProblem(block, MAX_BLOCK_DEPTH);
  if (shape !== null) return { errors: [`aa_answer block is refused: ${shape}`] };
  // Proposals are judged one by one (proposals.ts): one that carries authority is stripped, never the answer.
  let rawProposals: unknown;
  if (value !== null && typeof value === 'object' && !Array.isArray(value) && 'proposals' in value) {
    const { proposals, ...rest } = value as Record<string, unknown>;
    rawProposals = proposals;
    value = rest;
  }
  const parsed = aaAnswer.safeParse(value);
  if (!parsed.success) return { errors: parsed.error.issues.slice(0, 10).map((issue) => `${issue.path.join('.') || '(root)'}: ${issue.message}`) };
  return { answer: parsed.data, rawProposals };
}

export function judgeAnswer(input: JudgeInput): AnswerJudgement {
  const read = readAnswerBlock(input.text);
  if ('errors' in read) return { status: 'fail', blocker: 'output_invalid', errors: read.errors };
  const answer = read.answer;
  const errors: string[] = [];
  if (answer.canary !== input.canary) errors.push("the answer does not carry this attempt's canary: it was not written to this prompt's rules");
  for (const text of texts(answer)) {
    const addressed = ADDRESSING.exec(text);
    if (addressed !== null) errors.push(`advice addresses an actor (${JSON.stringify(addressed[0])}): advice goes to the COO only`);
    for (const [pattern, what] of COMMAND_PATTERNS) if (pattern.test(text)) errors.push(`advice carries a command that ${what}`);
    const shaped = ledgerDocumentShape(text);
    if (shaped !== null) errors.push(`advice ${shaped}: an answer is advice to the COO, never a message of the ledger`);
    const normalized = normalize(text);
    for (const line of input.steering) {
      const needle = normalize(line);
      if (needle.split(' ').length >= 5 && normalized.includes(needle)) errors.push('advice repeats a steering line of the pinned context');
    }
  }
  if (errors.length > 0) return { status: 'fail', blocker: 'output_injection', errors: [...new Set(errors)] };
  const proposals = judgeProposals(read.rawProposals);
  return { status: 'pass', answer: proposals.kept.length === 0 ? answer : { ...answer, proposals: [...proposals.kept] }, proposals: proposals.kept, errors: proposals.stripped };
}
