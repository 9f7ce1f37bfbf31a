import { scopeMatcher } from '../authority/scope.js';
import { MAX_PROPOSALS, proposal, type Proposal } from '../schema/aa-answer.js';
import { LIMITS } from '../limits.js';
import { relativePath } from '../schema/common.js';
import { COMMAND_PATTERNS, LEDGER_NAMES, ledgerDocumentShape, patternText } from './answer-patterns.js';

/**
 * Judging an answer's proposals, each on its own. Pure. A proposal is advice a COO may adopt; one
 * that tries to carry authority (a field for an actor, an approval, a budget; text addressed to an
 * actor or naming an approval; a scope that covers the whole repository; a command that has no
 * place in advice) is stripped with a finding, and the rest of the answer stands.
 */

export interface ProposalJudgement {
  readonly kept: readonly Proposal[];
  /** One line per stripped proposal, numbered as the answer gave them. */
  readonly stripped: readonly string[];
}

const FIELDS = new Set(Object.keys(proposal.shape));

/** Text that addresses an actor, by id, by class or by role. */
const ADDRESSED = /\b((ea|aa|coo)\.[a-z0-9_]+|ceo|coo|execution agents?|advisory agents?|the EA|the AA)\b/i;

/**
 * Text that names an approval: an approval id, or an approval or an adoption claimed for it (by the
 * proposal of itself, or as a status), or none said to be needed. Said of other things (`check the
 * request is approved`), the words are a task's.
 */
const APPROVAL = new RegExp(
  [
    '\\bapr_[0-9A-HJKMNP-TV-Z]{26}\\b',
    '\\bpre-?(approved|authori[sz]ed|adopted)\\b',
    '\\balready (been )?(approved|adopted|authori[sz]ed|signed off)\\b',
    '\\b(this( (proposal|change|work|task|plan|fix|patch))?|the (proposal|change|work|task|plan|fix|patch)) (is|was|has been|had been) (already )?(approved|adopted|authori[sz]ed|signed off)\\b',
    '\\b(status|approved|adopted|approval|authori[sz]ed)\\s*:\\s*(yes|true|granted|approved|adopted|authori[sz]ed)\\b',
    '\\bwithout (an? )?(approval|adoption|review)\\b',
    '\\bno (approval|adoption|review) (is )?(needed|required)\\b',
  ].join('|'),
  'i',
);

/**
 * Paths no scope names, at the root and below it, plain and dotted: an entry that matches one of them
 * as the runner matches a scope (authority/scope.ts) matches whatever is there, however it is spelled
 * (`*?`, `{**,src}`, `+(*)`, `!(src)`).
 */
const ANY_PATHS = ['zz-any-path-0', '.zz-any-path-0', 'zz-any-path-0/zz-any-path-0'];

function matchesAnyPath(entry: string): boolean {
  try {
    const inScope = scopeMatcher([entry]);
    return ANY_PATHS.some((path) => inScope(path));
  } catch {
    // A glob the matcher cannot read bounds nothing anyone can check.
    return true;
  }
}

/** Characters that make a path segment a glob rather than a name. */
const GLOB = /[*?[\]{}()!+@]/;

/** A segment that names what it matches: a plain name, or a brace list of plain names (`{src,test}`). */
function named(segment: string): boolean {
  if (!GLOB.test(segment)) return true;
  const alternatives = /^\{([^{}]+)\}$/.exec(segment)?.[1]?.split(',');
  return alternatives !== undefined && alternatives.every((name) => name !== '' && !GLOB.test(name));
}

/**
 * A scope bounds its work by what it names, not by what it happens to miss: its first segment is a
 * name (or a brace list of names) of a folder or file at the root, or it is the root's files of one
 * extension (`*.md`). A glob there (`[a-y]*`, `@(s|t)*`, `**\/*.ts`) reaches whatever the repository
 * holds under names it never says, however few names a probe could show it missing.
 */
function namedAtRoot(trimmed: string): boolean {
  const segments = trimmed.split('/');
  return named(segments[0]!) || (segments.length === 1 && /^\*\.[A-Za-z0-9_-]+$/.test(segments[0]!));
}

/** A scope entry that is no bound at all: the whole repository, or a path that leaves it. */
function unbounded(entry: string): boolean {
  const trimmed = patternText(entry).trim().replace(/\/+$/, '');
  return trimmed === '' || /^[*/.]+$/.test(trimmed) || trimmed.startsWith('/') || trimmed.split('/').includes('..') || trimmed.includes('\\') || !namedAtRoot(trimmed) || matchesAnyPath(entry) || matchesAnyPath(trimmed);
}

function textsOf(item: Proposal): string[] {
  return [item.task, ...item.scope, ...item.acceptance, ...item.verification].map(patternText);
}

function whyStripped(raw: unknown): string | null {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return 'it is not an object';
  const extra = Object.keys(raw).filter((key) => !FIELDS.has(key));
  if (extra.length > 0) return `it carries fields a proposal has no place for (${extra.slice(0, 5).join(', ')}): no actor, approval, budget or branch rides on advice`;
  const parsed = proposal.safeParse(raw);
  if (!parsed.success) return `it is malformed (${parsed.error.issues.slice(0, 3).map((issue) => `${issue.path.join('.') || '(root)'}: ${issue.message}`).join('; ')})`;
  const item = parsed.data;
  // Adopted as written, each field reaches the executor as an argument, and the scope the envelope as paths: neither can hold a NUL.
  const fields: Array<[string, readonly string[]]> = [['task', [item.task]], ['scope', item.scope], ['acceptance', item.acceptance], ['verification', item.verification]];
  const nul = fields.find(([, texts]) => texts.some((text) => text.includes('\0')));
  if (nul !== undefined) return `its ${nul[0]} holds a NUL character (U+0000), which no argument of a process and no path can carry: it could never be adopted as written`;
  // The executor's argument holds every field as written (the task's trailing space aside), so these bytes alone bound it from below.
  const bytes = Buffer.byteLength([item.task.trimEnd(), ...item.scope, ...item.acceptance, ...item.verification].join(''));
  if (bytes > LIMITS.executorPromptBytes) return `its task, scope, acceptance and verification come to ${bytes} bytes, over the ${LIMITS.executorPromptBytes} an executor takes as its task: it could never be adopted as written`;
  for (const text of textsOf(item)) {
    const addressed = ADDRESSED.exec(text);
    if (addressed !== null) return `it addresses an actor (${JSON.stringify(addressed[0])}): a proposal is addressed to no one`;
    if (APPROVAL.test(text)) return 'it names an approval: only the CEO approves, in the ledger, and only the COO adopts a proposal, by a dispatch it signs';
    for (const [pattern, what] of COMMAND_PATTERNS) if (pattern.test(text)) return `it carries a command that ${what}`;
    const shaped = ledgerDocumentShape(text);
    if (shaped !== null) return `it ${shaped}: a proposal is work in a repository, never a message of the ledger`;
    const named = LEDGER_NAMES.exec(text);
    if (named !== null) return `it names the ledger's ${named[0]}: a proposal is work in a repository, and writing the ledger's messages is the actors' own`;
  }
  const wide = item.scope.find(unbounded);
  if (wide !== undefined) return `its scope ${JSON.stringify(wide)} is no bound: a proposal names the paths its work may change`;
  // A dispatch's scope is relative paths (schema/common.ts relativePath); an entry that is not one is refused on adoption.
  const loose = item.scope.find((entry) => !relativePath.safeParse(entry).success);
  if (loose !== undefined) return `its scope ${JSON.stringify(loose)} is not a path relative to the repository root (no leading "/", no "\\", no ".", ".." or empty segment): it could never be adopted as written`;
  return null;
}

export function judgeProposals(raw: unknown): ProposalJudgement {
  if (raw === undefined) return { kept: [], stripped: [] };
  if (!Array.isArray(raw)) return { kept: [], stripped: ['proposals is not a list: none kept'] };
  const kept: Proposal[] = [];
  const stripped: string[] = [];
  raw.forEach((item, index) => {
    if (index >= MAX_PROPOSALS) {
      stripped.push(`proposal ${index + 1} stripped: an answer carries at most ${MAX_PROPOSALS}`);
      return;
    }
    const why = whyStripped(item);
    if (why === null) kept.push(proposal.parse(item));
    else stripped.push(`proposal ${index + 1} stripped: ${why}`);
  });
  return { kept, stripped };
}
