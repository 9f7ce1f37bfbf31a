import { z } from 'zod';
import { relativePath, timestamp } from './common.js';
import { DOCUMENTS, type DocumentKind } from './documents.js';

/**
 * The JSON Schema (draft 2020-12) export. zod states the shape; what its refinements check in code
 * is added here wherever JSON Schema can say it, so a consumer that trusts only the schema refuses
 * what coo refuses. schemas/README.md lists, per kind, the rules that remain in code only, and
 * test/integration/schema-conformance.test.ts runs ajv and Python's jsonschema over every vector.
 * Patterns use only syntax that ECMA-262 and Python's `re` read alike (no `\d`, no lookbehind).
 */

type Json = Record<string, unknown>;

/** One path segment that is neither `.` nor `..` and holds no `/`, `\` or NUL. */
const SEGMENT = String.raw`(?:[^/\\\x00.][^/\\\x00]*|\.[^/\\\x00.][^/\\\x00]*|\.\.[^/\\\x00]+)`;

/** common.ts `relativePath`: `/`-separated, never absolute, no empty, `.` or `..` segment, no `\` or NUL. */
export const RELATIVE_PATH_PATTERN = `^${SEGMENT}(?:/${SEGMENT})*$`;

const DAY = '(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))';
const LEAP_YEAR = '(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)';

/**
 * common.ts `timestamp`: RFC 3339 UTC with `Z` and at most three fraction digits, and a real date and
 * time (days per month, 29 February in leap years of the proleptic Gregorian calendar, hour 00-23,
 * no second 60), in the pattern itself: draft 2020-12 makes `format` an annotation unless a
 * validator is told to assert it, and Python's FormatChecker has no `date-time` without an extra
 * package.
 */
export const TIMESTAMP_PATTERN = `^(?:[0-9]{4}-${DAY}|${LEAP_YEAR}-02-29)T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]{1,3})?Z$`;

function override(ctx: { zodSchema: unknown; jsonSchema: Json }): void {
  // Python's `re` (jsonschema) lets `$` match before a final newline; the lookahead makes it mean
  // the end of the string there too, and changes nothing in ECMA-262.
  const pattern = ctx.jsonSchema['pattern'];
  if (typeof pattern === 'string' && pattern.endsWith('$')) ctx.jsonSchema['pattern'] = `${pattern}(?!\\n)`;
  if (ctx.zodSchema === relativePath) ctx.jsonSchema['pattern'] = `${RELATIVE_PATH_PATTERN}(?!\\n)`;
  if (ctx.zodSchema === timestamp) {
    ctx.jsonSchema['format'] = 'date-time';
    ctx.jsonSchema['pattern'] = `${TIMESTAMP_PATTERN}(?!\\n)`;
    ctx.jsonSchema['description'] = 'RFC 3339 date-time in UTC (Z), at most millisecond precision; the pattern also requires a real calendar date and time';
  }
}

/** `if` the property `name` is the JSON value `value` (and present). */
function when(name: string, value: unknown): Json {
  return { properties: { [name]: { const: value } }, required: [name] };
}

/** Two nullable fields that are both null or both set. */
function together(a: string, b: string): Json {
  return { if: { properties: { [a]: { type: 'null' } }, required: [a] }, then: { properties: { [b]: { type: 'null' } } }, else: { properties: { [b]: { not: { type: 'null' } } } } };
}

/** receipt.ts `checkStatus`: succeeded ends the message with no blockers; any other status names a blocker. */
const STATUS_RULES: Json[] = [
  { if: when('status', 'succeeded'), then: { properties: { blockers: { type: 'array', maxItems: 0 }, next_attempt_at: { type: 'null' } } }, else: { properties: { blockers: { type: 'array', minItems: 1 } } } },
];

/** The rules of each kind's refinements that JSON Schema can state, added to its exported schema. */
const EXPRESSIBLE: Partial<Record<DocumentKind, (schema: Json) => Json>> = {
  'aa_receipt.v0': (schema) => ({
    ...schema,
    allOf: [
      ...STATUS_RULES,
      {
        if: when('status', 'succeeded'),
        then: { properties: { output_ref: { type: 'string' }, output_hash: { type: 'string' }, output_validation: { type: 'object', properties: { status: { const: 'pass' } } } } },
      },
      together('output_ref', 'output_hash'),
    ],
  }),
  'ea_receipt.v0': (schema) => ({
    ...schema,
    allOf: [
      ...STATUS_RULES,
      // A nonzero inner exit code forces failed or timed_out: so succeeded and blocked have only zeros.
      { if: { properties: { status: { enum: ['succeeded', 'blocked'] } }, required: ['status'] }, then: { properties: { inner_exit_codes: { type: 'array', items: { const: 0 } } } } },
    ],
  }),
  'actor_registry.v0': (schema) => {
    const properties = schema['properties'] as Json;
    const actors = properties['actors'] as Json;
    const item = actors['items'] as Json;
    // Advisory agents, and only they, have a transport.
    const transport = { if: when('class', 'advisory_agent'), then: { properties: { transport: { type: 'object' } }, required: ['transport'] }, else: { not: { properties: { transport: {} }, required: ['transport'] } } };
    return { ...schema, properties: { ...properties, actors: { ...actors, items: { ...item, ...transport } } } };
  },
  'coo_message.v0': (schema) => {
    // `intent` selects the branch with if/then, so a validator's errors name that branch only,
    // where a bare oneOf reports every branch that failed.
    const branches = schema['oneOf'] as Json[];
    const rest = Object.fromEntries(Object.entries(schema).filter(([key]) => key !== 'oneOf'));
    const intentOf = (branch: Json): string => ((branch['properties'] as Json)['intent'] as Json)['const'] as string;
    const withRules = (branch: Json): Json => (intentOf(branch) === 'ea_dispatch' ? { ...branch, ...together('payload_ref', 'payload_hash') } : branch);
    return {
      ...rest,
      type: 'object',
      properties: { intent: { type: 'string', enum: branches.map(intentOf) } },
      required: ['intent'],
      allOf: branches.map((branch) => ({ if: when('intent', intentOf(branch)), then: withRules(branch) })),
    };
  },
};

/** JSON Schema (draft 2020-12) of one kind, as written to schemas/. */
export function toJsonSchema(kind: DocumentKind): Record<string, unknown> {
  const schema = z.toJSONSchema(DOCUMENTS[kind], { target: 'draft-2020-12', io: 'input', unrepresentable: 'any', override: (ctx) => override(ctx as { zodSchema: unknown; jsonSchema: Json }) });
  const full: Json = { $id: `https://coo-commons.dev/schemas/${kind}.json`, title: kind, ...schema };
  return EXPRESSIBLE[kind]?.(full) ?? full;
}
