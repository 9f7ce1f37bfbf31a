import { isUtf8 } from 'node:buffer';
import { CooError } from '../errors.js';
import { LIMITS } from '../limits.js';

/**
 * Raw git commit objects, rendered and parsed byte for byte. The parser is stricter than git:
 * an allow-list of headers in git's order, exactly one `gpgsig`, no `gpgsig-sha256`, `mergetag`
 * or `encoding`, no CR, and the payload is cut from the raw bytes, never re-rendered (each of
 * these variants passes `git verify-commit`; see the gitsign duplicate-tree and gittuf
 * multiple-signature-block lessons). Nor does it take what `git fsck` refuses and `git verify-commit`
 * does not check: a NUL byte, a zero-padded date.
 */

export interface CommitFields {
  readonly tree: string;
  readonly parents: readonly string[];
  readonly author: string;
  readonly committer: string;
  readonly message: string;
}

export interface ParsedCommit extends CommitFields {
  /** The armored SSH signature from the single gpgsig header, with its trailing newline. */
  readonly gpgsig: string;
  /** The exact bytes git verifies: the raw object without the gpgsig header lines. */
  readonly payload: Buffer;
  /** Ledger-Seq from the message trailer. */
  readonly seq: number;
}

const OID = /^[0-9a-f]{40}$/;
/** Name, email, seconds without a leading zero (git fsck's zeroPaddedDate is an error), zone. */
const IDENT = /^[^<>\n]+ <[^<>\n]*> (0|[1-9]\d{0,11}) [+-]\d{4}$/;
const SEQ_TRAILER = /^Ledger-Seq: ([1-9]\d{0,15})$/;

export function formatIdent(name: string, email: string, epochSeconds: number): string {
  return `${name} <${email}> ${epochSeconds} +0000`;
}

/** The payload to sign: what git will later hand to `ssh-keygen -Y verify`. */
export function renderCommitPayload(fields: CommitFields): Buffer {
  return Buffer.from(renderHeaders(fields).join('') + '\n' + fields.message, 'utf8');
}

function renderHeaders(fields: CommitFields): string[] {
  return [
    `tree ${fields.tree}\n`,
    ...fields.parents.map((parent) => `parent ${parent}\n`),
    `author ${fields.author}\n`,
    `committer ${fields.committer}\n`,
  ];
}

/** The signed object: headers, `gpgsig` with the armor indented by one space, blank line, message. */
export function renderSignedCommit(fields: CommitFields, armoredSignature: string): Buffer {
  const lines = armoredSignature.replace(/\n$/, '').split('\n');
  const gpgsig = `gpgsig ${lines.join('\n ')}\n`;
  return Buffer.from(renderHeaders(fields).join('') + gpgsig + '\n' + fields.message, 'utf8');
}

/**
 * The words in a commit message for which GitHub runs no push workflow (its documented forms:
 * [skip ci], [ci skip], [no ci], [skip actions], [actions skip], and a `skip-checks: true` trailer),
 * in any case and spacing. A ledger commit holds none: with them, one valid commit of a push (a
 * rollback's) would keep the forge's check from running on it (ledger/github/coo-verify.yml).
 */
const FORGE_SKIP = /\[\s*(?:skip\s*ci|ci\s*skip|no\s*ci|skip\s*actions|actions\s*skip)\s*\]|skip-checks\s*:\s*true/gi;

/** The first of the forge's skip words (FORGE_SKIP) a commit message holds, or null. */
export function forgeSkipWords(message: string): string | null {
  return new RegExp(FORGE_SKIP.source, 'i').exec(message)?.[0] ?? null;
}

/** A commit message: summary, blank line, the `Ledger-Seq` trailer. */
export function ledgerMessage(summary: string, seq: number): string {
  // Line breaks and the other controls, NUL among them, which the parser refuses, become spaces;
  // the forge's skip words, which the validator refuses, lose their brackets and colon.
  // eslint-disable-next-line no-control-regex -- control characters are what this replaces
  let clean = summary.replace(/[\x00-\x1f\x7f]+/g, ' ');
  // Until none is left: `[[skip ci]]` loses its inner brackets, and its outer ones make the words again.
  while (forgeSkipWords(clean) !== null) clean = clean.replace(FORGE_SKIP, (words) => words.replace(/[[\]:]/g, ' '));
  clean = clean.trim().slice(0, 200);
  return `${clean}\n\nLedger-Seq: ${seq}\n`;
}

function malformed(reason: string): never {
  throw new CooError('COMMIT_MALFORMED', `commit: ${reason}`);
}

/** Reads the sequence number from a message's last paragraph; exactly one trailer. */
export function parseSeq(message: string): number {
  const paragraphs = message.replace(/\n+$/, '').split('\n\n');
  let found: RegExpExecArray | null = null;
  let count = 0;
  for (const line of (paragraphs[paragraphs.length - 1] ?? '').split('\n')) {
    const match = SEQ_TRAILER.exec(line);
    if (match === null) continue;
    found = match;
    count += 1;
  }
  if (found === null || count !== 1 || message.split('Ledger-Seq:').length !== 2) {
    throw new CooError('COMMIT_SEQ', 'commit message must end with exactly one "Ledger-Seq: N" trailer');
  }
  return Number(found[1]);
}

export function parseCommit(raw: Buffer): ParsedCommit {
  if (raw.length > LIMITS.commitBytes) malformed('object too large');
  if (!isUtf8(raw)) malformed('not valid UTF-8');
  const text = raw.toString('utf8');
  if (text.includes('\r')) malformed('carriage return in commit');
  // git fsck refuses a NUL in a commit (nulInHeader, nulInCommit), and git log cuts the message there.
  if (text.includes('\0')) malformed('NUL byte in commit');
  const split = text.indexOf('\n\n');
  if (split < 0) malformed('no blank line before the message');
  const headerLines = text.slice(0, split).split('\n');
  const message = text.slice(split + 2);
  if (!message.endsWith('\n')) malformed('message must end with a newline');

  let tree: string | undefined;
  const parents: string[] = [];
  let author: string | undefined;
  let committer: string | undefined;
  let gpgsig: string | undefined;
  let gpgsigStart = -1;
  let gpgsigEnd = -1;
  let stage = 0; // 0 tree, 1 parents, 2 author, 3 committer, 4 gpgsig, 5 done
  let offset = 0;

  for (let i = 0; i < headerLines.length; i += 1) {
    const line = headerLines[i]!;
    const lineStart = offset;
    offset += Buffer.byteLength(line, 'utf8') + 1;
    const space = line.indexOf(' ');
    const name = space < 0 ? line : line.slice(0, space);
    const value = space < 0 ? '' : line.slice(space + 1);
    if (line.startsWith(' ')) malformed('continuation line outside gpgsig');
    switch (name) {
      case 'tree':
        if (stage !== 0 || !OID.test(value)) malformed('tree header must come first, once, with a full id');
        tree = value;
        stage = 1;
        break;
      case 'parent':
        if (stage !== 1 || !OID.test(value)) malformed('parent headers follow tree');
        parents.push(value);
        break;
      case 'author':
        if (stage !== 1 || !IDENT.test(value)) malformed('author header missing, repeated or malformed');
        author = value;
        stage = 2;
        break;
      case 'committer':
        if (stage !== 2 || !IDENT.test(value)) malformed('committer header missing, repeated or malformed');
        committer = value;
        stage = 3;
        break;
      case 'gpgsig': {
        if (stage !== 3) malformed('gpgsig must follow committer, exactly once');
        const lines = [value];
        gpgsigStart = lineStart;
        while (i + 1 < headerLines.length && headerLines[i + 1]!.startsWith(' ')) {
          i += 1;
          lines.push(headerLines[i]!.slice(1));
          offset += Buffer.byteLength(headerLines[i]!, 'utf8') + 1;
        }
        gpgsigEnd = offset;
        gpgsig = lines.join('\n') + '\n';
        stage = 4;
        break;
      }
      default:
        malformed(`header ${JSON.stringify(name)} is not allowed`);
    }
  }
  if (tree === undefined || author === undefined || committer === undefined) malformed('missing tree, author or committer');
  if (gpgsig === undefined) throw new CooError('COMMIT_UNSIGNED', 'commit carries no gpgsig signature');
  const payload = Buffer.concat([raw.subarray(0, gpgsigStart), raw.subarray(gpgsigEnd)]);
  return { tree, parents, author, committer, message, gpgsig, payload, seq: parseSeq(message) };
}

/** Seconds since the epoch from an ident line. */
export function identTime(ident: string): number {
  const parts = ident.split(' ');
  return Number(parts[parts.length - 2]);
}
