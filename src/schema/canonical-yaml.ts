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

interface Line {
  readonly indent: number;
  readonly text: string;
}

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
      if (!Number.isFinite(value) || Object.is(value, -0) || (Number.isInteger(value) && !Number.isSafeInteger(value))) return DECLINE;
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
    if (c === '"' || code < 0x20 || code === 0x7f) return DECLINE;
    if (c !== '\\') {
      out += c;
      continue;
    }
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

class Reader {
  private index = 0;

  constructor(
    private readonly lines: readonly Line[],
    private readonly maxDepth: number,
  ) {}

  done(): boolean {
    return this.index >= this.lines.length;
  }

  private peek(): Line | undefined {
    return this.lines[this.index];
  }

  /** A block mapping whose keys sit at `indent`; `first` is the rest of a line already consumed (`- key: value`). */
  mapping(indent: number, depth: number, first?: string): Record<string, Value> | typeof DECLINE {
    if (depth > this.maxDepth) return DECLINE;
    const out: Record<string, Value> = {};
    let pendingFirst = first;
    for (;;) {
      let text: string;
      if (pendingFirst !== undefined) {
        text = pendingFirst;
        pendingFirst = undefined;
      } else {
        const line = this.peek();
        if (line === undefined || line.indent < indent) return out;
        if (line.indent > indent || line.text.startsWith('- ')) return DECLINE;
        this.index += 1;
        text = line.text;
      }
      const colon = text.indexOf(':');
      if (colon <= 0) return DECLINE;
      const key = text.slice(0, colon);
      // KEY admits only a letter or `_` first, so NUMERIC cannot match a key KEY accepts.
      if (!KEY.test(key) || (mayBeSpecial(key.charCodeAt(0)) && SPECIAL.test(key)) || key === '__proto__' || Object.hasOwn(out, key)) return DECLINE;
      const rest = text.slice(colon + 1);
      let value: Value | typeof DECLINE;
      if (rest === '') value = this.nested(indent, depth + 1);
      else if (rest.startsWith(' ') && rest.length > 1 && !rest.startsWith('  ')) value = scalar(rest.slice(1));
      else return DECLINE;
      if (value === DECLINE) return DECLINE;
      out[key] = value;
    }
  }

  /** What follows `key:` at the end of a line: a sequence or a mapping indented two more. */
  private nested(indent: number, depth: number): Value | typeof DECLINE {
    const line = this.peek();
    if (line === undefined || line.indent !== indent + 2) return DECLINE;
    return line.text.startsWith('- ') ? this.sequence(indent + 2, depth) : this.mapping(indent + 2, depth);
  }

  sequence(indent: number, depth: number): Value[] | typeof DECLINE {
    if (depth > this.maxDepth) return DECLINE;
    const out: Value[] = [];
    for (;;) {
      const line = this.peek();
      if (line === undefined || line.indent < indent) return out;
      if (line.indent > indent || !line.text.startsWith('- ')) return DECLINE;
      this.index += 1;
      const item = line.text.slice(2);
      if (item.startsWith('- ') || item.startsWith(' ') || item === '') return DECLINE;
      const colon = item.indexOf(':');
      const looksLikePair = colon > 0 && (item.length === colon + 1 || item[colon + 1] === ' ') && !item.startsWith('"');
      const value = looksLikePair ? this.mapping(indent + 2, depth + 1, item) : scalar(item);
      if (value === DECLINE) return DECLINE;
      out.push(value);
    }
  }
}

/** Returns the value of `text` if it is in the canonical layout, else null (the strict reader then decides). */
export function readCanonicalYaml(text: string, maxDepth: number): { value: unknown } | null {
  if (text.length === 0 || !text.endsWith('\n') || text.includes('\r') || text.includes('\t')) return null;
  const raw = text.slice(0, -1).split('\n');
  const lines: Line[] = [];
  for (const entry of raw) {
    if (entry === '' || entry.endsWith(' ')) return null;
    let indent = 0;
    while (entry.charCodeAt(indent) === 0x20) indent += 1;
    if (indent % 2 !== 0) return null;
    const body = entry.slice(indent);
    if (body.startsWith('#') || body.startsWith('---') || body.startsWith('...') || body.startsWith('%') || body.includes(' #')) return null;
    lines.push({ indent, text: body });
  }
  if (lines[0]?.indent !== 0) return null;
  const reader = new Reader(lines, maxDepth);
  const value = reader.mapping(0, 1);
  if (value === DECLINE || !reader.done()) return null;
  return { value };
}
