import { join } from 'node:path';
import { CooError } from '../errors.js';
import { checkoutFold } from '../lane/raw-tree.js';
import type { TreeFile } from './git-tree.js';
import { isNamed, isRulesFile, rulesEnvironment, rulesFolder } from './ignore-rules.js';
import { foldersOf, foldsOf } from './snapshot.js';
import { keyOf } from './work-walk.js';
import { safeGit } from './worktree.js';

/**
 * Whether the work changes how git writes the commit's files on checkout. The runner hashes, commits
 * and verifies the blobs as stored (checkout.ts writes them byte for byte), but every stock checkout
 * of the commit (a reviewer's, CI's, a deploy's) and every archive the forge makes applies the
 * commit's `.gitattributes`: `ident` writes `$Id$` as `$Id: <blob> $`, `eol=crlf` adds a CR to each
 * line, `working-tree-encoding` re-encodes, `export-subst` and `export-ignore` change an archive. An
 * agent's `.gitattributes` so had code pass the verification on bytes no checkout holds (a line
 * whose behaviour turns on `'$Id$'.length`). git itself judges (`git check-attr`) which attributes
 * the base's rules and the commit's give each file, each set of `.gitattributes` files alone in a
 * folder of the runner's with a private empty repository and no attributes of the system's or the
 * user's, as ignore-rules.ts does for `.gitignore`; the ways of writing those mean (conversionsOf) are
 * compared, and only a way the base's rules do not give a file is a change. No filter runs: git is
 * asked what applies, not to apply it.
 */

/** The attributes by which git writes a file other than as its blob on checkout, or in an archive. */
export const CHECKOUT_ATTRIBUTES = ['text', 'eol', 'crlf', 'ident', 'working-tree-encoding', 'filter', 'export-subst', 'export-ignore'] as const;

/**
 * Which of `paths` (the work's changed paths) are attributes files: `judged`, named `.gitattributes`, which
 * git here reads; `unjudged`, which git here cannot judge as a macOS or Windows checkout reads them: one named
 * as such a checkout opens for `.gitattributes` (checkoutFold: `.GITATTRIBUTES`, `.gitattributes.`), which git
 * here never reads, and a `.gitattributes` in a folder that such a checkout holds as one with another folder of
 * the commit (`files`) spelt otherwise (`src/Fix/` and `src/fix/`, snapshot.ts keeps both), whose rules there
 * apply to the files of both and here to those of its own spelling only.
 */
export async function attributesFiles(
  paths: readonly Buffer[],
  files: readonly TreeFile[],
  readBlobs: (oids: readonly string[]) => Promise<Buffer[]>,
): Promise<{ readonly judged: Buffer[]; readonly unjudged: Array<{ readonly path: Buffer; readonly detail: string }> }> {
  const named = paths.filter((path) => checkoutFold(path.subarray(path.lastIndexOf(0x2f) + 1).toString('utf8')) === '.gitattributes');
  // Most work changes none: the commit's folders (100,000 files take half a second) are then not read at all.
  if (named.length === 0) return { judged: [], unjudged: [] };
  // Each folder of the commit (and of the attributes files, a removed one's too) by its fold, with its spellings.
  const spellings = new Map<string, Set<string>>();
  for (const key of [...files.map((file) => keyOf(file.path)), ...named.map(keyOf)]) {
    const folds = foldsOf(key);
    foldersOf(key).forEach((folder, at) => spellings.set(folds[at]!, (spellings.get(folds[at]!) ?? new Set()).add(folder)));
  }
  const spelt = (path: Buffer): boolean => {
    const folds = foldsOf(keyOf(path));
    return folds.length > 1 && spellings.get(folds.at(-2)!)!.size > 1;
  };
  const candidates = named.filter((path) => isNamed(path, '.gitattributes') && !spelt(path));
  const unreadable = await unreadableRules(candidates, files, readBlobs);
  const judged = candidates.filter((path) => !unreadable.has(path));
  const unjudged = named
    .filter((path) => !judged.includes(path))
    .map((path) => ({
      path,
      detail: unreadable.has(path)
        ? `${unreadable.get(path)!}: not judged`
        : isNamed(path, '.gitattributes')
          ? 'in a folder a macOS or Windows checkout holds as one with another folder of the commit spelt otherwise: not judged'
          : 'read as .gitattributes by a macOS or Windows checkout: not judged',
    }));
  return { judged, unjudged };
}

/** The length from which git (attr.c's ATTR_MAX_LINE_LENGTH, since 2.39.1) ignores a rules line, a CR before its LF counted. */
const MAX_RULES_LINE = 2048;

/**
 * An attribute of CHECKOUT_ATTRIBUTES given the literal value `set`, `unset` or `unspecified`: `git check-attr`
 * reports it as that state, while a checkout reads it as a value (`text=unset eol=crlf` converts line ends, where
 * `-text` would not).
 */
const LITERAL_STATE = new RegExp(`(?:^|[ \\t\\r])(${CHECKOUT_ATTRIBUTES.join('|')})=(set|unset|unspecified)(?=[ \\t\\r]|$)`, 'm');

/**
 * Which of `paths` (`.gitattributes` of the commit's `files`; a removed one has none) git here reads otherwise than
 * another reader of the commit, each with why: one with a line of MAX_RULES_LINE bytes or more, which git 2.39.1 and
 * later ignore and older git and libgit2 read whole (`*.js<2039 spaces>ident`), or with a NUL, where git stops
 * reading the file; one that gives `filter` or `working-tree-encoding` the literal value `set`, `unset` or
 * `unspecified`, which `git check-attr` reports as the state of that name and a checkout reads as a driver's or an
 * encoding's name (`working-tree-encoding=unspecified`: every checkout errs, failing to encode the file).
 */
async function unreadableRules(paths: readonly Buffer[], files: readonly TreeFile[], readBlobs: (oids: readonly string[]) => Promise<Buffer[]>): Promise<Map<Buffer, string>> {
  const rules = files.filter((file) => isRulesFile(file, '.gitattributes') && paths.some((path) => path.equals(file.path)));
  const why = new Map<Buffer, string>();
  // A link: git here reads no rules from it, but a checkout and an archive read its target's text as the rules, and a
  // checkout without links (Windows) writes that text as the file.
  for (const file of files) {
    const path = file.mode === '120000' ? paths.find((candidate) => candidate.equals(file.path)) : undefined;
    if (path !== undefined) why.set(path, 'is a link, whose target text a checkout and an archive read as rules');
  }
  if (rules.length === 0) return why;
  const blobs = await readBlobs(rules.map((file) => file.oid));
  const unreadable = (blob: Buffer): string | null => {
    const overlong = `holds a NUL or a line of ${MAX_RULES_LINE} bytes or more, which git 2.39.1 and later ignore and older git and libgit2 read`;
    if (blob.includes(0)) return overlong;
    for (let start = 0; start < blob.length; ) {
      const end = blob.indexOf(0x0a, start);
      if ((end < 0 ? blob.length : end) - start >= MAX_RULES_LINE) return overlong;
      start = end < 0 ? blob.length : end + 1;
    }
    const literal = LITERAL_STATE.exec(blob.toString('latin1'));
    return literal === null ? null : `gives ${literal[1]!} the value ${literal[2]!}, which git check-attr reports as that state and a checkout reads as a value`;
  };
  rules.forEach((file, index) => {
    const found = unreadable(blobs[index]!);
    const path = paths.find((candidate) => candidate.equals(file.path));
    if (found !== null && path !== undefined) why.set(path, found);
  });
  return why;
}

/**
 * How a checkout or an archive writes a file other than as its blob, by the values of CHECKOUT_ATTRIBUTES
 * (in that order) git gives it, as git's convert.c and archive.c read them: each way it converts, named, with
 * null where it does not. Line ends are judged apart (eolGrowth): how they are written turns on the reader too.
 */
function conversionsOf(values: readonly string[]): Record<string, string | null> {
  const [, , , ident, encoding, filter, subst, ignore] = values as [string, string, string, string, string, string, string, string];
  return {
    ident: ident === 'set' ? 'ident' : null,
    'working-tree-encoding': encodingOf(encoding),
    filter: driverOf(filter),
    'export-subst': subst === 'set' ? 'export-subst' : null,
    'export-ignore': ignore === 'set' ? 'export-ignore' : null,
  };
}

/**
 * The stock readers of a commit by how they write line ends: git's defaults on Linux and macOS (`core.autocrlf`
 * false, LF native), and Git for Windows' (`core.autocrlf=true`, which its installer sets by default).
 */
const EOL_READERS = [
  { name: 'Linux and macOS checkouts', autocrlf: false },
  { name: 'Windows checkouts (core.autocrlf=true)', autocrlf: true },
] as const;

/** What a reader writes of a file's line ends, each taking in what the one before does (an index into this). */
const EOL_OUTCOMES = ['the blob as stored', 'CRLF for files detected as text', 'CRLF for every file'] as const;

/**
 * What each of EOL_READERS writes of a file's line ends by the values of CHECKOUT_ATTRIBUTES git gives it, as
 * git's convert.c (convert_attrs, output_eol) reads `text` (else the legacy `crlf`), then `eol`, then the reader's
 * `core.autocrlf`: an index into EOL_OUTCOMES. A file given nothing a Windows checkout writes as `text=auto`.
 */
function eolOutcomes(values: readonly string[]): number[] {
  const [text, eol, crlf] = values as [string, string, string];
  const actionOf = (value: string): 'text' | 'binary' | 'input' | 'auto' | null => (value === 'set' ? 'text' : value === 'unset' ? 'binary' : value === 'input' ? 'input' : value === 'auto' ? 'auto' : null);
  let action = actionOf(text) ?? actionOf(crlf) ?? 'undefined';
  if (action !== 'binary' && (eol === 'lf' || eol === 'crlf')) action = action === 'auto' ? `auto-${eol}` : eol === 'lf' ? 'input' : 'crlf';
  return EOL_READERS.map(({ autocrlf }) => {
    if (action === 'crlf') return 2;
    if (action === 'auto-crlf') return 1;
    if (action === 'text') return autocrlf ? 2 : 0;
    if (action === 'auto' || action === 'undefined') return autocrlf ? 1 : 0;
    return 0;
  });
}

/**
 * How the line ends of a file given the attributes `now` (the commit's) are written in a new way, where `was` are
 * those of the base's rules: per reader of EOL_READERS whose outcome grows, the rule and what that reader then writes
 * (`text=auto: CRLF for files detected as text on Linux and macOS checkouts`); null where none grows. A reader that
 * writes what it wrote, or less, writes what was verified or what the operator chose.
 */
function eolGrowth(was: readonly string[], now: readonly string[]): string | null {
  const [before, after] = [eolOutcomes(was), eolOutcomes(now)];
  const grown = EOL_READERS.flatMap((reader, at) => (after[at]! > before[at]! ? [`${EOL_OUTCOMES[after[at]!]} on ${reader.name}`] : []));
  if (grown.length === 0) return null;
  const every = grown.length === EOL_READERS.length && after.every((outcome) => outcome === after[0]) ? `${EOL_OUTCOMES[after[0]!]} on every checkout` : grown.join(' and ');
  const [text, eol, crlf] = now as [string, string, string];
  const shown = (name: string, value: string): string[] => (value === 'unspecified' ? [] : [value === 'set' ? name : value === 'unset' ? `-${name}` : `${name}=${value}`]);
  const rule = [...shown('text', text), ...shown('crlf', crlf), ...shown('eol', eol)].join(' ') || 'no text or eol attribute';
  return `${rule}: ${every}`;
}

/**
 * The filter driver a `filter` attribute (`value`, as `git check-attr` gives it) names, as git's convert.c reads it:
 * only a driver's name names one; `filter` set, unset or unspecified names none.
 */
const driverOf = (value: string): string | null => (value === 'set' || value === 'unset' || value === 'unspecified' ? null : value);

/**
 * How a checkout re-encodes a file by its `working-tree-encoding` (`value`, as `git check-attr` gives it), as git's
 * convert.c reads it: none where unspecified, empty or UTF-8 (any case, `UTF8` too: git's same_encoding); where set
 * or unset alone, no encoding is named and every checkout and archive of the commit dies (`true/false are no valid
 * working-tree-encodings`); else the encoding named.
 */
function encodingOf(value: string): string | null {
  if (value === 'unspecified' || value === '' || /^utf-?8$/i.test(value)) return null;
  return value === 'set' || value === 'unset' ? `${value === 'set' ? 'true' : 'false'} (every checkout fails)` : value;
}

/**
 * Where `paths` are cut into the batches of one `git check-attr` each for the attributes `names`, under rules files
 * (`rules`, their bytes) whose longest line is the longest value git can give: per attribute the path, the name and a
 * value, each ended by a NUL, so that git's answers for a batch never pass ANSWER_BATCH_BYTES. Each batch's end.
 */
export function answerBatches(paths: readonly Buffer[], names: readonly string[], rules: readonly Buffer[]): number[] {
  // No value is longer than the line that gives it, nor than `unspecified`, git's word for none.
  let value = 'unspecified'.length;
  for (const blob of rules) {
    for (let start = 0; start < blob.length; ) {
      const end = blob.indexOf(0x0a, start) < 0 ? blob.length : blob.indexOf(0x0a, start);
      // A longer line gives no value: git here ignores it (and a work file holding one is refused unjudged).
      value = Math.max(value, Math.min(end - start, MAX_RULES_LINE - 1));
      start = end + 1;
    }
  }
  const answerBytes = (path: Buffer): number => names.reduce((sum, name) => sum + path.length + name.length + value + 3, 0);
  const ends: number[] = [];
  for (let start = 0; start < paths.length; start = ends.at(-1)!) {
    let end = start;
    for (let bytes = 0; end < paths.length && (end === start || bytes + answerBytes(paths[end]!) <= ANSWER_BATCH_BYTES); end += 1) bytes += answerBytes(paths[end]!);
    ends.push(end);
  }
  return ends;
}

/** The most of git's answers one `git check-attr` is asked for: well under safeGit's bound on its output. */
const ANSWER_BATCH_BYTES = 16 * 1024 * 1024;

/**
 * How git reads the patterns of `.gitattributes`: byte for byte, as here, and regardless of case, as a macOS or
 * Windows checkout does (git sets `core.ignorecase` there), where `*.JS ident` gives `ident` to `add.js`.
 */
const READINGS = [{ ignoreCase: false }, { ignoreCase: true }] as const;

/**
 * The values of the attributes `names` that the `.gitattributes` files of `files` give each of `paths`, in that
 * order, with patterns read regardless of case when `ignoreCase`.
 */
async function attributesOf(files: readonly TreeFile[], folder: string, paths: readonly Buffer[], names: readonly string[], ignoreCase: boolean, readBlobs: (oids: readonly string[]) => Promise<Buffer[]>): Promise<string[][]> {
  const rules = files.filter((file) => isRulesFile(file, '.gitattributes'));
  const blobs = await readBlobs(rules.map((file) => file.oid));
  const { gitdir, tree } = await rulesFolder(rules, folder, () => Promise.resolve(blobs));
  const values: string[][] = [];
  // In batches, so that git's answers for a commit of many files never pass the bound on its output.
  let start = 0;
  for (const end of answerBatches(paths, names, blobs)) {
    values.push(...(await checkAttr(gitdir, tree, paths.slice(start, end), names, ignoreCase)));
    start = end;
  }
  return values;
}

/** One `git check-attr` over `paths` in a rules folder: the values of `names` for each. */
async function checkAttr(gitdir: string, tree: string, paths: readonly Buffer[], names: readonly string[], ignoreCase: boolean): Promise<string[][]> {
  const out = await safeGit([`--git-dir=${gitdir}`, `--work-tree=${tree}`, '-c', 'core.attributesFile=/dev/null', '-c', `core.ignorecase=${ignoreCase}`, 'check-attr', '-z', '--stdin', ...names], {
    env: { ...rulesEnvironment(tree), GIT_ATTR_NOSYSTEM: '1' },
    isolated: true,
    input: Buffer.concat(paths.flatMap((path) => [path, Buffer.from([0])])),
  });
  // PATH, ATTRIBUTE, VALUE for each attribute of each path, in the order asked.
  const fields: Buffer[] = [];
  for (let start = 0, nul = out.indexOf(0); nul >= 0; start = nul + 1, nul = out.indexOf(0, start)) fields.push(out.subarray(start, nul));
  const per = names.length * 3;
  if (fields.length !== paths.length * per) throw new CooError('GIT_FAILED', `git check-attr answered ${fields.length} fields for ${paths.length} paths`);
  return paths.map((_, index) =>
    fields
      .slice(index * per, (index + 1) * per)
      .filter((_, at) => at % 3 === 2)
      .map((value) => value.toString('latin1')),
  );
}

/** A file of a commit that a checkout or an archive writes in a new way, and how (`ident`, `eol=crlf`, `filter=lfs`, ...), or a folder (`src/`) an archive leaves out (`export-ignore`). */
export interface Conversion {
  readonly path: Buffer;
  readonly conversions: readonly string[];
}

/**
 * The files of `after` (a commit's) that a checkout or an archive writes in a way the rules of `before`
 * (the base's) do not, and the folders of `after` an archive newly leaves out, where `changed` are the
 * `.gitattributes` paths the work added, changed or removed: only what is in their folders is asked about. A way of writing the base's rules already give a file (the
 * operator's choice) is no change, nor is one the work takes away: a file written as its blob, or as before,
 * is what was verified, or what the operator chose. Judged in `folder`, the runner's own.
 */
export async function checkoutAttributeChanges(
  before: readonly TreeFile[],
  after: readonly TreeFile[],
  changed: readonly Buffer[],
  folder: string,
  readBlobs: (oids: readonly string[]) => Promise<Buffer[]>,
): Promise<Conversion[]> {
  const folders = changed.map(folderOf);
  const files = after.filter((file) => file.mode !== '160000').map((file) => file.path);
  // A link is written as its target, as stored, by every checkout and archive: of a link only `export-ignore` plays a part.
  const links = new Set(after.filter((file) => file.mode === '120000').map((file) => file.path.toString('latin1')));
  // An archive leaves out a folder given `export-ignore` with all in it: each folder is asked about too, as `folder/`.
  const subfolders = [...new Set(files.flatMap((path) => foldersOf(keyOf(path))))].map((key) => Buffer.from(`${key}/`, 'latin1'));
  const paths = [...files, ...subfolders].filter((path) => folders.some((prefix) => within(path, prefix)));
  if (paths.length === 0) return [];
  // Each reading of the patterns apart: the base's rules against the commit's as one checkout reads both.
  const found = paths.map(() => new Set<string>());
  for (const { ignoreCase } of READINGS) {
    const where = (side: string): string => join(folder, ignoreCase ? `${side}-ignorecase` : side);
    const [was, now] = await Promise.all([attributesOf(before, where('base'), paths, CHECKOUT_ATTRIBUTES, ignoreCase, readBlobs), attributesOf(after, where('work'), paths, CHECKOUT_ATTRIBUTES, ignoreCase, readBlobs)]);
    paths.forEach((path, index) => {
      const old = conversionsOf(was[index]!);
      // Of a folder, only `export-ignore` plays a part: no checkout writes a folder's bytes.
      const asked = path.at(-1) === 0x2f || links.has(path.toString('latin1')) ? ['export-ignore'] : ['eol', ...Object.keys(old)];
      const eol = asked.includes('eol') ? eolGrowth(was[index]!, now[index]!) : null;
      if (eol !== null) found[index]!.add(eol);
      for (const [name, value] of Object.entries(conversionsOf(now[index]!))) if (asked.includes(name) && value !== null && value !== old[name]) found[index]!.add(value === name ? name : `${name}=${value}`);
    });
  }
  return paths.flatMap((path, index) => (found[index]!.size === 0 ? [] : [{ path, conversions: [...found[index]!] }]));
}

/**
 * The changed `.gitattributes` (`changed`) that a checkout or an archive writes files of in a new way by
 * (`converted`, checkoutAttributeChanges): each one in whose folder such a file is, with which files and how.
 */
export function attributesRefusals(changed: readonly Buffer[], converted: readonly Conversion[]): Array<{ readonly path: Buffer; readonly detail: string }> {
  return changed.flatMap((path) => {
    const mine = converted.filter((file) => within(file.path, folderOf(path)));
    if (mine.length === 0) return [];
    const shown = mine.slice(0, 3).map((file) => `${file.conversions.join(', ')} on ${file.path.toString('utf8')}`);
    return [{ path, detail: `${shown.join('; ')}${mine.length > 3 ? `; and ${mine.length - 3} more file(s)` : ''}` }];
  });
}

/** The folder of a path, with its trailing slash (empty at the top). */
const folderOf = (path: Buffer): Buffer => path.subarray(0, path.lastIndexOf(0x2f) + 1);

/** Whether `path` is in the folder `prefix` (folderOf), at any depth. */
const within = (path: Buffer, prefix: Buffer): boolean => path.subarray(0, prefix.length).equals(prefix);

/**
 * The files of the work (`written`: paths it added or changed in `after`, a commit's files) that the
 * commit's rules give a filter (`filter=lfs`, whatever the base's rules say). Such a file is held in its
 * stored form, in the agent's worktree as in the verification's checkout, and a checkout writes what the
 * filter makes of it: an LFS pointer becomes the bytes the server it names (`.lfsconfig`) holds, which no
 * verification read. Judged in `folder`, the runner's own; no filter runs.
 */
export async function filteredChanges(after: readonly TreeFile[], written: readonly Buffer[], folder: string, readBlobs: (oids: readonly string[]) => Promise<Buffer[]>): Promise<Buffer[]> {
  const rules = after.filter((file) => isRulesFile(file, '.gitattributes'));
  if (written.length === 0 || rules.length === 0) return [];
  // No rules file that says `filter` (nor a macro that does) gives one: git is then not asked, twice over, for every written file.
  const blobs = new Map((await readBlobs(rules.map((file) => file.oid))).map((blob, index) => [rules[index]!.oid, blob]));
  if (![...blobs.values()].some((blob) => blob.includes('filter'))) return [];
  const read = (oids: readonly string[]): Promise<Buffer[]> => Promise.resolve(oids.map((oid) => blobs.get(oid)!));
  const readings = await Promise.all(READINGS.map(({ ignoreCase }) => attributesOf(after, join(folder, ignoreCase ? 'ignorecase' : 'exact'), written, ['filter'], ignoreCase, read)));
  return written.filter((_, index) => readings.some((values) => driverOf(values[index]![0]!) !== null));
}
