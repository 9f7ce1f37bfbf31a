import {
  CST,
  Document,
  Lexer,
  isAlias,
  isCollection,
  isMap,
  isPair,
  isScalar,
  isSeq,
  parseAllDocuments,
  Scalar,
  visit,
  type CreateNodeOptions,
  type DocumentOptions,
  type Node,
  type ParseOptions,
  type SchemaOptions,
  type ScalarTag,
  type ToStringOptions,
} from 'yaml';
import { CooError, type ErrorCode } from '../errors.js';
import { LIMITS } from '../limits.js';
import { readCanonicalYaml } from './canonical-yaml.js';
import { numberProblem } from './portable-number.js';

/** Tags a strict document may carry: YAML 1.2 core, nothing custom. */
const CORE_TAGS = new Set([
  'tag:yaml.org,2002:str',
  'tag:yaml.org,2002:int',
  'tag:yaml.org,2002:float',
  'tag:yaml.org,2002:bool',
  'tag:yaml.org,2002:null',
  'tag:yaml.org,2002:map',
  'tag:yaml.org,2002:seq',
]);

const PARSE_OPTIONS: ParseOptions & DocumentOptions & SchemaOptions = {
  version: '1.2',
  schema: 'core',
  uniqueKeys: true,
  merge: false,
  strict: true,
  prettyErrors: false,
  customTags: [],
};

export interface StrictYamlOptions {
  /** Byte cap; LIMITS.yamlBytes unless given. */
  readonly maxBytes?: number;
  /**
   * Refuse a plain string that a YAML 1.1 reader reads as another type (what the writer
   * double-quotes: `off`, `1:20`, `2026-12-04`): for entries judged as new, so an auditor's PyYAML
   * reads the values coo validated, and a raw tab, which PyYAML refuses between tokens. History is
   * read without it: entries written before the writer quoted keep their signed bytes.
   */
  readonly sameInYaml11?: boolean;
}

/** `line L, column C` (1-based, as editors count) of a character offset in `text`. */
function lineColumn(text: string, offset: number): string {
  const before = text.slice(0, Math.max(0, offset));
  const line = before.split('\n').length;
  return `line ${line}, column ${offset - (before.lastIndexOf('\n') + 1) + 1}`;
}

/** Where in the text a refusal points, for a person with an editor: ` (line L, column C)`, or nothing. */
function at(text: string | undefined, offset: number | undefined): string {
  return text === undefined || offset === undefined ? '' : ` (${lineColumn(text, offset)})`;
}

function fail(code: ErrorCode, file: string, path: string, reason: string, position = ''): never {
  const where = path === '' ? file : `${file}:${path}`;
  throw new CooError(code, `${where}: ${reason}${position}`, { where });
}

/**
 * The position of the node at `path` in a YAML document (or of the deepest part of the path that
 * is there: the mapping a missing key belongs in), for messages about a document that parsed but
 * does not fit its schema. Null when the text does not parse.
 */
export function yamlPosition(bytes: Uint8Array, path: ReadonlyArray<PropertyKey>): string | null {
  const text = new TextDecoder('utf-8').decode(bytes);
  let docs: ReturnType<typeof parseAllDocuments>;
  try {
    docs = parseAllDocuments(text, PARSE_OPTIONS);
  } catch {
    return null;
  }
  if (!Array.isArray(docs) || docs.length !== 1) return null;
  let node = docs[0]!.contents as Node | null;
  let offset = node?.range?.[0];
  for (const part of path) {
    if (node === null) break;
    if (isMap(node)) {
      const pair = node.items.find((item) => isScalar(item.key) && item.key.value === part);
      if (pair === undefined) break;
      offset = (pair.key as Node).range?.[0] ?? offset;
      node = pair.value as Node | null;
      continue;
    }
    if (isSeq(node) && typeof part === 'number') {
      const item = node.items[part] as Node | undefined;
      if (item === undefined) break;
      node = item;
      offset = item.range?.[0] ?? offset;
      continue;
    }
    break;
  }
  return offset === undefined ? null : lineColumn(text, offset);
}

function childPath(parent: string, key: string | number): string {
  if (typeof key === 'number') return `${parent}[${key}]`;
  return parent === '' ? key : `${parent}.${key}`;
}

/** A plain string scalar that YAML 1.1 readers retype, when the document must read the same to them. */
function retypedPlain(node: Scalar, sameInYaml11: boolean): boolean {
  return sameInYaml11 && node.type === Scalar.PLAIN && typeof node.value === 'string' && RETYPED_BY_YAML_1_1.test(node.value);
}

/**
 * In a double-quoted scalar's source: an escaped backslash (skipped, so its second character starts
 * no escape), a `\u` or `\U` escape of a UTF-16 surrogate (group 1 or 2), or an escaped line break
 * with the white space after it, which joins the text on either side of it.
 */
const QUOTED_ESCAPES = /\\(?:\\|u([dD][89a-fA-F][0-9a-fA-F]{2})|U0000([dD][89a-fA-F][0-9a-fA-F]{2})|\r?\n[ \t\r\n]*)/g;

interface QuotedProblem {
  readonly code: ErrorCode;
  readonly offset: number;
  readonly reason: string;
}

/**
 * Escapes in `source` (a double-quoted scalar) that this reader and PyYAML read as different
 * strings, or null. coo's writer writes neither (it writes characters themselves, on one line), so
 * refusing them costs no entry coo wrote.
 * - An escaped high surrogate that an escaped low one follows: this reader joins the two into one
 *   character (`\ud83d\ude00` is U+1F600, as JSON reads it); PyYAML keeps two code points that no
 *   UTF-8 text can hold, so an auditor reads another string, or cannot encode it at all.
 * - An escaped line break that empty lines follow: each empty line is a line feed (YAML 1.2 spec
 *   7.3.1, s-double-escaped), as PyYAML reads it; this reader folds them all to one space.
 */
function quotedProblem(source: string): QuotedProblem | null {
  let highStart = -1;
  let highEnd = -1;
  for (const found of source.matchAll(QUOTED_ESCAPES)) {
    const start = found.index;
    const end = start + found[0].length;
    const unit = found[1] ?? found[2];
    if (unit !== undefined) {
      const value = parseInt(unit, 16);
      if (value >= 0xdc00 && start === highEnd) {
        return { code: 'YAML_INVALID_UTF8', offset: highStart, reason: 'a pair of escaped UTF-16 surrogates reads as one character here and as two (which UTF-8 cannot hold) to YAML 1.1 readers; write the character itself' };
      }
      [highStart, highEnd] = value < 0xdc00 ? [start, end] : [-1, -1];
      continue;
    }
    if (found[0] === '\\\\') continue;
    if (found[0].indexOf('\n') !== found[0].lastIndexOf('\n')) {
      return { code: 'YAML_SYNTAX', offset: start, reason: 'an escaped line break followed by an empty line reads as a space here and as a line feed to other readers; write \\n' };
    }
    if (start === highEnd) highEnd = end;
  }
  return null;
}

function refuseQuotedProblem(node: Scalar, file: string, path: string, text: string): void {
  if (node.type !== Scalar.QUOTE_DOUBLE || node.range === undefined || node.range === null) return;
  const problem = quotedProblem(text.slice(node.range[0], node.range[1]));
  if (problem !== null) fail(problem.code, file, path, problem.reason, at(text, node.range[0] + problem.offset));
}

function checkNode(node: Node | null, file: string, path: string, depth: number, text: string, sameInYaml11: boolean): void {
  if (node === null) return;
  const here = at(text, node.range?.[0]);
  if (isAlias(node)) fail('YAML_ALIAS', file, path, 'aliases are not allowed', here);
  if (node.anchor !== undefined) fail('YAML_ALIAS', file, path, 'anchors are not allowed', here);
  if (node.tag !== undefined && !CORE_TAGS.has(node.tag)) fail('YAML_TAG', file, path, `tag ${node.tag} is not allowed`, here);
  if (isScalar(node)) {
    const value = node.value;
    if (typeof value === 'number' && !Number.isFinite(value)) fail('YAML_NON_JSON', file, path, 'infinite or NaN numbers are not allowed', here);
    if (typeof value === 'number' && Number.isInteger(value) && !Number.isSafeInteger(value)) {
      fail('YAML_NON_JSON', file, path, 'integer exceeds 2^53 and would lose precision', here);
    }
    // The text signed, not only the value read: YAML 1.1 readers must read the same number from it.
    const problem = typeof value === 'number' && typeof node.source === 'string' ? numberProblem(node.source, value) : null;
    if (problem !== null) fail('YAML_NON_JSON', file, path, problem, here);
    if (typeof value === 'bigint' || typeof value === 'symbol' || typeof value === 'function') {
      fail('YAML_NON_JSON', file, path, 'value has no JSON form', here);
    }
    refuseQuotedProblem(node, file, path, text);
    if (retypedPlain(node, sameInYaml11)) fail('YAML_NON_JSON', file, path, `the plain string ${JSON.stringify(value)} reads as another value (a boolean, number, date or null) in YAML 1.1 readers; write it double-quoted`, here);
    return;
  }
  if (!isCollection(node)) fail('YAML_NON_JSON', file, path, 'unsupported node', here);
  if (depth >= LIMITS.yamlDepth) fail('YAML_DEPTH', file, path, `nesting deeper than ${LIMITS.yamlDepth}`, here);
  if (isSeq(node)) {
    node.items.forEach((item, index) => checkNode(item as Node | null, file, childPath(path, index), depth + 1, text, sameInYaml11));
    return;
  }
  if (isMap(node)) {
    for (const pair of node.items) {
      if (!isPair(pair)) fail('YAML_NON_JSON', file, path, 'malformed mapping', here);
      const key = pair.key as Node | null;
      const keyAt = at(text, key?.range?.[0]);
      if (key === null || !isScalar(key) || typeof key.value !== 'string') {
        fail('YAML_NON_JSON', file, path, 'mapping keys must be plain strings', keyAt);
      }
      if (key.anchor !== undefined || (key.tag !== undefined && key.tag !== 'tag:yaml.org,2002:str')) {
        fail('YAML_TAG', file, path, 'mapping keys may not carry tags or anchors', keyAt);
      }
      const name = key.value;
      if (name === '__proto__') fail('YAML_NON_JSON', file, path, 'key "__proto__" is not allowed', keyAt);
      refuseQuotedProblem(key, file, path, text);
      if (retypedPlain(key, sameInYaml11)) fail('YAML_NON_JSON', file, path, `the plain key ${JSON.stringify(name)} reads as another value in YAML 1.1 readers; write it double-quoted`, keyAt);
      checkNode(pair.value as Node | null, file, childPath(path, name), depth + 1, text, sameInYaml11);
    }
  }
}

/**
 * Refuses flow collections (`[`, `{`) nested deeper than the depth bound from the lexer's tokens,
 * before the parser sees them: the parser and composer recurse once a level, and a document of
 * 200,000 `[` would take seconds to fail on the stack rather than on the bound.
 */
function refuseDeepFlow(text: string, file: string): void {
  let depth = 0;
  let offset = 0;
  for (const token of new Lexer().lex(text)) {
    const type = CST.tokenType(token);
    if (type === 'flow-map-start' || type === 'flow-seq-start') {
      depth += 1;
      if (depth > LIMITS.yamlDepth) fail('YAML_DEPTH', file, '', `flow collections nested deeper than ${LIMITS.yamlDepth}`, at(text, offset));
    } else if ((type === 'flow-map-end' || type === 'flow-seq-end') && depth > 0) {
      depth -= 1;
    }
    offset += token.length;
  }
}

/**
 * Characters that YAML 1.1 readers (PyYAML) take otherwise than the `yaml` package does, raw in the
 * text: NEL (U+0085), the line and paragraph separators (U+2028, U+2029) and a carriage return
 * without its line feed are line breaks to PyYAML, where they end a comment, a plain scalar or a
 * sequence item (`a: x # note<U+2028>status: done` is one key to the package, two to PyYAML), and
 * content to the package; and the characters no YAML version allows in a document (the C0 controls
 * but tab, line feed and carriage return, DEL, the C1 controls, U+FFFE, U+FFFF), which the package
 * reads as content and PyYAML refuses. The writer escapes all of them inside double quotes.
 */
// eslint-disable-next-line no-control-regex -- control characters are what this finds
const UNREADABLE = /[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029\ufffe\uffff]|\r(?!\n)/;

function refuseUnreadableCharacters(text: string, file: string): void {
  const found = UNREADABLE.exec(text);
  if (found === null) return;
  const code = `U+${found[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}`;
  const what = /[\r\x85\u2028\u2029]/.test(found[0]) ? 'a line break to YAML 1.1 readers and content to this one' : 'a control character YAML does not allow';
  fail('YAML_SYNTAX', file, '', `character ${code} is not allowed raw (${what}); write it as an escape inside double quotes`, at(text, found.index));
}

/**
 * The one reader for every untrusted YAML document: bounded size, valid UTF-8 without BOM, no raw
 * character a YAML 1.1 reader takes otherwise (refuseUnreadableCharacters), exactly
 * one YAML 1.2 core document, unique keys, no anchors, aliases or custom tags, bounded depth, and
 * only values JSON can hold. Every violation is a CooError naming `file` and the path inside it.
 */
export function readStrictYaml(bytes: Uint8Array, file: string, options: StrictYamlOptions = {}): unknown {
  return readYaml(bytes, file, options, true);
}

/** The general path only (no canonical fast path): what the differential test compares against. */
export function readStrictYamlGeneral(bytes: Uint8Array, file: string, options: StrictYamlOptions = {}): unknown {
  return readYaml(bytes, file, options, false);
}

function readYaml(bytes: Uint8Array, file: string, options: StrictYamlOptions, fast: boolean): unknown {
  const maxBytes = options.maxBytes ?? LIMITS.yamlBytes;
  if (bytes.length > maxBytes) fail('YAML_TOO_LARGE', file, '', `${bytes.length} bytes exceeds the ${maxBytes}-byte limit`);
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    fail('YAML_INVALID_UTF8', file, '', 'not valid UTF-8');
  }
  if (text.startsWith('\uFEFF')) fail('YAML_INVALID_UTF8', file, '', 'a byte-order mark is not allowed');
  // The layout our own writer produces reads about 20x faster; anything else takes the general path.
  // It cannot tell a plain string from a quoted one, so a document held to YAML 1.1 takes the general path.
  const canonical = fast && options.sameInYaml11 !== true ? readCanonicalYaml(text, LIMITS.yamlDepth - 2) : null;
  if (canonical !== null) return canonical.value;
  refuseUnreadableCharacters(text, file);
  // PyYAML refuses a tab as indentation or as the space between tokens; the writer escapes every tab.
  const tab = options.sameInYaml11 === true ? text.indexOf('\t') : -1;
  if (tab >= 0) fail('YAML_SYNTAX', file, '', 'a raw tab is not allowed in a new entry (YAML 1.1 readers refuse it between tokens); write \\t inside double quotes', at(text, tab));
  refuseDeepFlow(text, file);
  let docs: ReturnType<typeof parseAllDocuments>;
  try {
    docs = parseAllDocuments(text, PARSE_OPTIONS);
  } catch (error) {
    fail('YAML_SYNTAX', file, '', error instanceof Error ? error.message.split('\n')[0] ?? 'syntax error' : 'syntax error');
  }
  if (!Array.isArray(docs) || docs.length === 0) fail('YAML_SYNTAX', file, '', 'empty document');
  if (docs.length > 1) fail('YAML_MULTI_DOCUMENT', file, '', 'exactly one YAML document is allowed');
  const doc = docs[0]!;
  for (const error of doc.errors) {
    const code: ErrorCode = error.code === 'DUPLICATE_KEY' ? 'YAML_DUPLICATE_KEY' : 'YAML_SYNTAX';
    fail(code, file, '', error.message.split('\n')[0] ?? error.code, at(text, error.pos[0]));
  }
  for (const warning of doc.warnings) {
    const code: ErrorCode = warning.code === 'TAG_RESOLVE_FAILED' ? 'YAML_TAG' : 'YAML_SYNTAX';
    fail(code, file, '', warning.message.split('\n')[0] ?? warning.code, at(text, warning.pos[0]));
  }
  const directives = doc.directives;
  if (directives !== undefined && (directives.yaml.explicit || Object.keys(directives.tags).some((handle) => handle !== '!!'))) {
    fail('YAML_SYNTAX', file, '', 'YAML directives are not allowed');
  }
  checkNode(doc.contents as Node | null, file, '', 0, text, options.sameInYaml11 === true);
  return doc.toJS({ maxAliasCount: 0 }) as unknown;
}

/**
 * Plain scalars that a YAML 1.1 reader (PyYAML, Go's yaml.v2) may read as something other than a
 * string, beyond what the yaml-1.1 compat schema already quotes: PyYAML's value tag `=`, the merge
 * key `<<`, and, to be sure, anything number- or date-like in any of their dialects (underscores,
 * sexagesimal `1:20`, radix prefixes, dates with one-digit fields) and every case of the boolean
 * and null words (`y`, `n`, `on`, `off`, `yes`, `no`, `~`). Quoting more than needed is harmless:
 * a double-quoted scalar is a string in every YAML version.
 */
const RETYPED_BY_YAML_1_1 =
  /^(=|<<|~|[yYnN]|(on|off|yes|no|true|false|null)|[-+]?\.(inf|nan)|[-+]?[0-9._][0-9_.:eE+-]*|[-+]?0[xXoObB][0-9a-fA-F_]*|[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}([Tt \t].*)?)$/i;

/**
 * Characters a YAML 1.1 reader does not take inside a plain scalar the way YAML 1.2 does: PyYAML
 * refuses a tab before an indicator such as `!` (found by the round-trip property: `(\t!`), and
 * control and line-break characters are best escaped. Such strings are double-quoted.
 */
// eslint-disable-next-line no-control-regex -- control characters are what this finds
const UNPLAIN_IN_YAML_1_1 = /[\t\x00-\x1f\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff]/;

/**
 * Fractions in a form both versions read as a float: YAML 1.1 needs a `.` and a signed exponent,
 * so `1e-7` (a string to PyYAML) is written `1.0e-7`. Placed first, it wins over the core float tag.
 */
const PORTABLE_FLOAT: ScalarTag = {
  identify: (value) => typeof value === 'number' && Number.isFinite(value) && !Number.isInteger(value),
  default: true,
  tag: 'tag:yaml.org,2002:float',
  test: /^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$/,
  resolve: (text) => Number(text),
  stringify: ({ value }) => {
    const text = String(value);
    const e = text.indexOf('e');
    return e < 0 || text.slice(0, e).includes('.') ? text : `${text.slice(0, e)}.0${text.slice(e)}`;
  },
};

const WRITE_OPTIONS: DocumentOptions & SchemaOptions & CreateNodeOptions & ToStringOptions = {
  version: '1.2',
  compat: 'yaml-1.1',
  customTags: (tags) => [PORTABLE_FLOAT, ...tags],
  lineWidth: 0,
  minContentWidth: 0,
  aliasDuplicateObjects: false,
  indentSeq: true,
};

/**
 * The one writer: deterministic YAML 1.2 that readStrictYaml reads back to the same value, and that
 * YAML 1.1 readers read to the same value too (every string they would retype is double-quoted).
 * Entries are signed over the bytes this returns; nothing ever re-serializes a signed entry, so
 * entries written before the quoting keep their bytes, and the reader (YAML 1.2 core) still takes
 * their plain `2026-11-30T08:00:00Z` and `on` as the strings they always were.
 */
export function toYaml(value: unknown): string {
  const doc = new Document(value, WRITE_OPTIONS);
  visit(doc, {
    Scalar(_key, node) {
      if (typeof node.value === 'string' && (RETYPED_BY_YAML_1_1.test(node.value) || UNPLAIN_IN_YAML_1_1.test(node.value))) node.type = Scalar.QUOTE_DOUBLE;
    },
  });
  // Inside double quotes the library leaves DEL, the C1 controls and the Unicode line separators
  // raw, and U+FFFE and U+FFFF, which PyYAML and readStrictYaml refuse: every such character is in a scalar forced to
  // double quotes above, so each is written as a \u escape, which both versions read back.
  return doc.toString(WRITE_OPTIONS).replace(/[\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
