import { inert } from '../audit/cite.js';
import type { EaReceipt } from '../schema/receipt.js';
import { invisibleCharacters, pathText } from '../util/invisible.js';

/**
 * The body of an attempt's pull request: the receipt's evidence as Markdown. Pure. Everything the
 * agent chose (file names, commands) is shown as literal code spans, so it cannot render HTML,
 * links or @-mentions, break out of its line, or hide behind bidirectional controls.
 */

export interface PullRequestEvidence {
  /** The COO-signed receipt of the attempt, as committed to the ledger. */
  readonly receipt: EaReceipt;
  /** Where the receipt is in the ledger, and the sha256 of its bytes (`sha256:<hex>`). */
  readonly receiptPath: string;
  readonly receiptSha256: string;
  /** The ledger commit that holds the receipt, when known. */
  readonly receiptCommit?: string;
  /** The attempt's branch in the target repository. */
  readonly branch: string;
  /** The pinned base commit the attempt started from. */
  readonly baseSha?: string;
  /** The changed files from the COO's snapshot, each with its sha256 (null when deleted); else the receipt's paths alone. */
  readonly files?: ReadonlyArray<{ readonly path: string; readonly status?: string; readonly sha256: string | null }>;
  /** The attempt's cost, and whether the executor reported its usage or it was estimated. */
  readonly cost?: { readonly usd: number; readonly reported: boolean };
  /** The issue the dispatch works on: linked, never closed by the pull request. */
  readonly issueNumber?: number;
  /** The dispatch's acceptance criteria, as the COO wrote them. */
  readonly acceptance?: readonly string[];
  /** The fingerprint of the COO key that signed the head commit. */
  readonly signer?: string;
}

/**
 * Bounds that keep the largest receipt under GitHub's 65,536-character body: a count and a share of
 * the body for each list (its items' text escaped and fenced), and a cut for each item but a path.
 */
export const BODY_LIMITS = { files: 100, fileChars: 22_000, commands: 50, commandChars: 12_000, criteria: 20, criteriaChars: 10_000, codeChars: 200, textChars: 300 } as const;

/** The hidden line that makes opening idempotent: one pull request per attempt. */
export function pullRequestMarker(attemptId: string): string {
  return `<!-- coo-commons:dispatch ${attemptId} -->`;
}

/** Controls, zero-width and bidirectional characters, shown as their code point instead of acting. */
const INVISIBLE = invisibleCharacters();

/**
 * Untrusted text as one CommonMark code span: literal, on one line, with a backtick fence longer
 * than any run of backticks inside it, and `|` escaped so a table cell cannot be split.
 */
export function codeSpan(text: string, max: number = BODY_LIMITS.codeChars, shown: (char: string) => string = codePointTag): string {
  const chars = [...text.replace(INVISIBLE, shown)];
  const value = (chars.length > max ? `${chars.slice(0, max - 1).join('')}…` : chars.join('')).replace(/\|/g, '\\|');
  if (value === '') return '(empty)';
  const fence = '`'.repeat(Math.max(0, ...(value.match(/`+/g) ?? []).map((run) => run.length)) + 1);
  // A span that starts or ends with a backtick or a space keeps it only when padded by one space.
  const pad = /^[` ]|[` ]$/.test(value) ? ' ' : '';
  return `${fence}${pad}${value}${pad}${fence}`;
}

/** An acting character in text as `<U+202E>`. */
function codePointTag(char: string): string {
  return `<U+${char.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}>`;
}

/**
 * A path of the ledger (relativePath: at most 512 characters, never a backslash) as a code span that
 * names one file: never cut, as two names cut at one length read alike, and each character that
 * draws nothing or as another name does as `\u202e` (pathText), which no path spells itself, where
 * `<U+202E>` is also a file's name.
 */
function pathSpan(path: string): string {
  return codeSpan(pathText(path), PATH_CHARS);
}

/** Longer than any path the receipt schema takes (schema/common.ts relativePath), escapes included. */
const PATH_CHARS = 512 * 10;

/**
 * The lines of the first `maxItems` of `items`, as many as fit `maxChars` with their line ends: an
 * item is never cut to fit its section, so fewer are listed, and the receipt holds them all.
 */
function fitting<T>(items: readonly T[], maxItems: number, maxChars: number, line: (item: T, index: number) => string): string[] {
  const out: string[] = [];
  let used = 0;
  for (const [index, item] of items.slice(0, maxItems).entries()) {
    const text = line(item, index);
    used += text.length + 1;
    if (used > maxChars) break;
    out.push(text);
  }
  return out;
}

function more(total: number, shown: number, where: string): string[] {
  return total > shown ? [`- and ${total - shown} more (${where})`] : [];
}

function section(title: string, items: readonly string[]): string[] {
  return items.length === 0 ? [] : ['', `**${title}**`, ...items];
}

function exit(code: number | undefined): string {
  return code === undefined ? 'exit unknown' : code === -1 ? 'no exit code' : `exit ${code}`;
}

/** The pull request's title: one line, bounded, with each acting character shown as its code point. */
export function pullRequestTitle(receipt: EaReceipt, summary?: string): string {
  // A title is plain text on the forge: a bidirectional override or a tag character in it would act there too.
  const text = (summary ?? '').replace(/\s+/g, ' ').replace(INVISIBLE, codePointTag).trim();
  const title = text === '' ? `${receipt.target_actor}: work of ${receipt.message_id} (attempt ${receipt.attempt_number})` : text;
  return [...title].slice(0, 200).join('');
}

/** The pull request's body: the receipt's evidence, marked with the attempt. */
export function renderPullRequestBody(evidence: PullRequestEvidence): string {
  const { receipt } = evidence;
  const commands = receipt.commands_run;
  const codes = receipt.inner_exit_codes;
  // The receipt lists the EA's commands, then the verification commands (outcome.ts): the tests' codes are the last ones.
  const testsFrom = commands.length - receipt.tests_run.length;
  const files: NonNullable<PullRequestEvidence['files']> = evidence.files ?? receipt.files_changed.map((path) => ({ path, sha256: null }));
  const lines = [
    pullRequestMarker(receipt.attempt_id),
    '> [!NOTE]',
    '> **Work of an execution agent, checked by the COO.** The evidence below is what the COO gathered itself after the agent exited (the changed files from git, its own verification run, its signed commit) and recorded in a COO-signed receipt in the coo-commons ledger; the agent\'s own account of its work is not part of it.',
    '',
    `**${receipt.target_actor}** on \`${receipt.message_id}\`, attempt ${receipt.attempt_number} (\`${receipt.attempt_id}\`): **${receipt.status}**`,
    '',
    `Head ${receipt.head_sha === null ? 'none' : `\`${receipt.head_sha}\``} on ${codeSpan(evidence.branch)}${evidence.baseSha === undefined ? '' : `, base \`${evidence.baseSha}\``}${evidence.issueNumber === undefined ? '' : `. Refs #${evidence.issueNumber}`}`,
  ];
  const criteria = fitting(evidence.acceptance ?? [], BODY_LIMITS.criteria, BODY_LIMITS.criteriaChars, (item) => `- ${inert([...item].slice(0, BODY_LIMITS.textChars).join(''))}`);
  lines.push(...section('Acceptance criteria', [...criteria, ...more(evidence.acceptance?.length ?? 0, criteria.length, 'in the dispatch')]));
  // Whole paths, as many as fit the section's share of the body: a path is never cut, so fewer are listed.
  const fileLines = fitting(files, BODY_LIMITS.files, BODY_LIMITS.fileChars, (file) => `- ${pathSpan(file.path)}${file.status === undefined ? '' : ` ${file.status}`}${file.sha256 === null ? '' : `, \`${file.sha256}\``}`);
  lines.push(...section(`Files changed (${files.length})`, [...fileLines, ...more(files.length, fileLines.length, 'the receipt lists them all')]));
  const agentCommands = commands.slice(0, Math.max(0, testsFrom));
  const agentLines = fitting(agentCommands, BODY_LIMITS.commands, BODY_LIMITS.commandChars, (command, i) => `- ${codeSpan(command)}: ${exit(codes[i])}`);
  lines.push(...section('Commands the agent ran, in order', [...agentLines, ...more(agentCommands.length, agentLines.length, 'the receipt lists them all')]));
  const testLines = fitting(receipt.tests_run, BODY_LIMITS.commands, BODY_LIMITS.commandChars, (command, i) => `- ${codeSpan(command)}: ${testsFrom < 0 ? 'exit unknown' : exit(codes[testsFrom + i])}`);
  lines.push(...section('Verification, run by the COO in the attempt\'s worktree', [...testLines, ...more(receipt.tests_run.length, testLines.length, 'the receipt lists them all')]));
  if (receipt.tests_run.length === 0) lines.push('', '**Verification**: none ran.');
  const cost = evidence.cost;
  lines.push(
    '',
    '| evidence | value |',
    '| --- | --- |',
    `| head commit | ${receipt.head_sha === null ? 'none' : `\`${receipt.head_sha}\`, signed by the COO (SSH${evidence.signer === undefined ? '' : `, key ${codeSpan(evidence.signer)}`}): \`git log --format=%G?\` with the ledger's allowed signers shows \`G\``} |`,
    `| receipt | ${pathSpan(evidence.receiptPath)} \`${evidence.receiptSha256}\`${evidence.receiptCommit === undefined ? '' : ` in ledger commit \`${evidence.receiptCommit.slice(0, 12)}\``} |`,
    `| cost | ${cost === undefined ? 'not recorded' : `$${cost.usd}${cost.reported ? '' : ' (estimated: the executor reported no usage)'}`} |`,
    `| created | ${receipt.created_at} |`,
  );
  return `${lines.join('\n')}\n`;
}
