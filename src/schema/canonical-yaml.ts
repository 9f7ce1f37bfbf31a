import { numberProblem } from './portable-number.js';

/**
 * A fast reader for the one YAML layout coo-commons writes (schema/strict-yaml.ts `toYaml`): block
 * mappings and sequences with two-space indentation, plain or double-quoted single-line scalars,
 * `[]` and `{}`. It is a performance path only, measured at about 20x the general parser: it either
 * returns exactly the value the strict reader would, or declines with null and the strict reader
 * decides (with its coded errors). Anything unusual declines: comments, tabs, anchors, tags, flow
 * collections, block scalars, single quotes, duplicate or non-string keys, directives, documents.
 * A differential property test (test/properties/canonical-yaml.test.ts) holds it to that.
 */

const KEY = /^[A-Za-z_][A-Za-z0-9_.-]*$/;
const NUMBER = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$/;
/** Plain scalars the core schema resolves to null, a boolean, infinity or NaN, or that start with an indicator. */
const SPECIAL = /^(null|Null|NULL|~|true|True|TRUE|false|False|FALSE|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)|[-+.].*)$/;
/** Every number form of the YAML 1.2 core schema (what NUMBER does not read is declined, not read as a string). */
const NUMERIC = /^[-+]?(0o[0-7]+|0x[0-9a-fA-F]+|[0-9]+|(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?)$/;
/** A plain string: no indicator at the start, no `: ` or ` #`, no trailing space. */
const PLAIN = /^[A-Za-z0-9_/][A-Za-z0-9 _./:@+=,()*-]*$/;
/** RFC 3339 times are strings in the YAML 1.2 core schema (it has no timestamp type). */
const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z$/;

const DECLINE = Symbol('decline');
type Value = unknown;

/** Whether `code` is an ASCII digit. */
function isDigit(code: number): boolean {
  return code >= 0x30 && code <= 0x39;
}

/**
 * A plain scalar's value. Regular expressions are tried only where they can match: NUMBER and
 * TIMESTAMP start with a digit or `-`, and SPECIAL and NUMERIC match nothing that starts with a
 * letter other than n, t or f (in either case) or with `_` or `/`, which is how most strings start.
 */
function scalar(text: string): Value | typeof DECLINE {
  if (text === 'null') return null;
  if (text === 'true') return true;
  if (text === 'false') return false;
  if (text === '[]') return [];
  if (text === '{}') return {};
  const first = text.charCodeAt(0);
  if (first === 0x22) return quoted(text);
  if (isDigit(first) || first === 0x2d) {
    if (NUMBER.test(text)) {
      const value = Number(text);
      if (!Number.isFinite(value) || Object.is(value, -0) || (Number.isInteger(value) && !Number.isSafeInteger(value)) || numberProblem(text, value) !== null) return DECLINE;
      return value;
    }
    if (TIMESTAMP.test(text)) return text;
  }
  if (mayBeSpecial(first) && (SPECIAL.test(text) || NUMERIC.test(text))) return DECLINE;
  if (!PLAIN.test(text) || text.includes(': ') || text.includes(' #') || text.endsWith(' ') || text.endsWith(':')) return DECLINE;
  return text;
}

/** Whether a scalar starting with `first` could match SPECIAL or NUMERIC (both need one of these first). */
function mayBeSpecial(first: number): boolean {
  const lower = first | 0x20;
  return !((lower >= 0x61 && lower <= 0x7a && lower !== 0x6e && lower !== 0x74 && lower !== 0x66) || first === 0x5f || first === 0x2f);
}

function quoted(text: string): string | typeof DECLINE {
  if (text.length < 2 || !text.endsWith('"')) return DECLINE;
  let out = '';
  for (let i = 1; i < text.length - 1; i += 1) {
    const c = text[i]!;
    const code = c.charCodeAt(0);
    // Controls, and the characters YAML 1.1 takes as line breaks: the strict reader refuses them raw.
    if (c === '"' || code < 0x20 || (code >= 0x7f && code <= 0x9f) || code === 0x2028 || code === 0x2029 || code >= 0xfffe) return DECLINE;
    if (c !== '\\') {
      out += c;
      continue;
    }
    // An escape that would take the closing quote leaves the scalar open: that is not one line.
    if (i + 1 >= text.length - 1) return DECLINE;
    const next = text[i + 1];
    i += 1;
    if (next === '\\' || next === '"') out += next;
    else if (next === 'n') out += '\n';
    else if (next === 't') out += '\t';
    else if (next === 'r') out += '\r';
    else if (next === 'u' && /^[0-9a-fA-F]{4}$/.test(text.slice(i + 1, i + 5))) {
      const unit = parseInt(text.slice(i + 1, i + 5), 16);
      if (unit >= 0xd800 && unit <= 0xdfff) return DECLINE;
      out += String.fromCharCode(unit);
      i += 4;
    } else return DECLINE;
  }
  return out;
}

/**
 * Reads lines in place: each line stays the string `split` made, with its indentation beside it,
 * and keys and values are cut from it by offset (no per-line objects or intermediate slices).
 */
class Reader {
  private index = 0;

  constructor(
    private readonly lines: readonly string[],
    private readonly indents: readonly number[],
    private readonly maxDepth: number,
  ) {}

  done(): boolean {
    return this.index >= this.lines.length;
  }

  /** Whether line `i`'s content (after its indentation) starts a sequence item. */
  private isItem(i: number): boolean {
    return this.lines[i]!.startsWith('- ', this.indents[i]);
  }

  /**
   * A block mapping whose keys sit at `indent`. `first`, when given, is a pair already under way on
   * a sequence item's line (`- key: value`): that line and where its key starts.
   */
  mapping(indent: number, depth: number, first?: { line: string; start: number }): Record<string, Value> | typeof DECLINE {
    if (depth > this.maxDepth) return DECLINE;
    const out: Record<string, Value> = {};
    let pending = first;
    for (;;) {
      let line: string;
      let start: number;
      if (pending !== undefined) {
        ({ line, start } = pending);
        pending = undefined;
      } else {
        if (this.index >= this.lines.length || this.indents[this.index]! < indent) return out;
        if (this.indents[this.index]! > indent || this.isItem(this.index)) return DECLINE;
        line = this.lines[this.index]!;
        start = indent;
        this.index += 1;
      }
      const colon = line.indexOf(':', start);
      if (colon <= start) return DECLINE;
      const key = line.slice(start, colon);
      // KEY admits only a letter or `_` first, so NUMERIC cannot match a key KEY accepts.
      if (!KEY.test(key) || (mayBeSpecial(key.charCodeAt(0)) && SPECIAL.test(key)) || key === '__proto__' || Object.hasOwn(out, key)) return DECLINE;
      const rest = line.length - colon - 1;
      let value: Value | typeof DECLINE;
      if (rest === 0) value = this.nested(indent, depth + 1);
      else if (line.charCodeAt(colon + 1) === 0x20 && rest > 1 && line.charCodeAt(colon + 2) !== 0x20) value = scalar(line.slice(colon + 2));
      else return DECLINE;
      if (value === DECLINE) return DECLINE;
      out[key] = value;
    }
  }

  /** What follows `key:` at the end of a line: a sequence or a mapping indented two more. */
  private nested(indent: number, depth: number): Value | typeof DECLINE {
    if (this.index >= this.lines.length || this.indents[this.index] !== indent + 2) return DECLINE;
    return this.isItem(this.index) ? this.sequence(indent + 2, depth) : this.mapping(indent + 2, depth);
  }

  sequence(indent: number, depth: number): Value[] | typeof DECLINE {
    if (depth > this.maxDepth) return DECLINE;
    const out: Value[] = [];
    for (;;) {
      if (this.index >= this.lines.length || this.indents[this.index]! < indent) return out;
      if (this.indents[this.index]! > indent || !this.isItem(this.index)) return DECLINE;
      const line = this.lines[this.index]!;
      this.index += 1;
      const start = indent + 2;
      if (line.length === start || line.startsWith('- ', start) || line.charCodeAt(start) === 0x20) return DECLINE;
      const colon = line.indexOf(':', start);
      const looksLikePair = colon > start && (line.length === colon + 1 || line.charCodeAt(colon + 1) === 0x20) && line.charCodeAt(start) !== 0x22;
      const value = looksLikePair ? this.mapping(indent + 2, depth + 1, { line, start }) : scalar(line.slice(start));
      if (value === DECLINE) return DECLINE;
      out.push(value);
    }
  }
}

/** Returns the value of `text` if it is in the canonical layout, else null (the strict reader then decides). */
export function readCanonicalYaml(text: string, maxDepth: number): { value: unknown } | null {
  if (text.length === 0 || !text.endsWith('\n') || text.includes('\r') || text.includes('\t')) return null;
  const lines = text.slice(0, -1).split('\n');
  const indents: number[] = [];
  for (const line of lines) {
    if (line === '' || line.charCodeAt(line.length - 1) === 0x20) return null;
    let indent = 0;
    while (line.charCodeAt(indent) === 0x20) indent += 1;
    if (indent % 2 !== 0) return null;
    const first = line.charCodeAt(indent);
    if (first === 0x23 || first === 0x25 || line.startsWith('---', indent) || line.startsWith('...', indent) || line.includes(' #', indent)) return null;
    indents.push(indent);
  }
  if (indents[0] !== 0) return null;
  const reader = new Reader(lines, indents, maxDepth);
  const value = reader.mapping(0, 1);
  if (value === DECLINE || !reader.done()) return null;
  return { value };
}
