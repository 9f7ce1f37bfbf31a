import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { describe, expect, it } from 'vitest';
import { isCooError } from '../../src/errors.js';
import { DOCUMENT_KINDS, readDocument, type DocumentKind } from '../../src/schema/documents.js';
import { readStrictYaml } from '../../src/schema/strict-yaml.js';
import { PYTHON } from '../helpers/pyyaml.js';

/**
 * The exported JSON Schemas, run by tools nobody here wrote (ajv with ajv-formats, and Debian's
 * python3-jsonschema with its FormatChecker), over every frozen vector: they must agree with coo on
 * every vector whose rule JSON Schema can express. The rest are named here, each with the reason,
 * and each must be listed in schemas/README.md.
 */
const root = join(import.meta.dirname, '..', '..');
const vectors = join(root, 'test', 'vectors');

/** Invalid vectors whose rule no JSON Schema can state, by kind/file: schemas/README.md lists the same. */
const NOT_EXPRESSIBLE: Record<string, string> = {
  'coo_message.v0/YAML_TAG--custom-tag.yaml': 'YAML level: tags are refused by the reader, before any schema',
  'coo_message.v0/YAML_ALIAS--anchored-budget.yaml': 'YAML level: anchors and aliases are refused by the reader',
  'coo_message.v0/YAML_DUPLICATE_KEY--two-targets.yaml': 'YAML level: a duplicate key never reaches a schema',
  'coo_message.v0/SCHEMA_INVALID--expires-before-created.yaml': 'compares two fields (expires_at after created_at)',
  'coo_message.v0/SCHEMA_INVALID--hop-count-without-chain.yaml': 'compares two fields (hop_count equals the length of causality_chain)',
  'coo_message.v0/SCHEMA_INVALID--rejection-names-both.yaml': 'fields required or forbidden by the value of another (a rejection names request_hash or about_message_id)',
  'actor_registry.v0/SCHEMA_INVALID--duplicate-actor.yaml': 'uniqueness of one field across array items (actor ids)',
  'actor_registry.v0/SCHEMA_INVALID--revoked-key-still-given.yaml': 'a value in one array must not appear in another (revoked key still given)',
  'actor_registry.v0/SCHEMA_INVALID--active-coo-not-orchestrator.yaml': 'a reference between fields (active_coo names an orchestrator listed in actors)',
  'actor_policy.v0/SCHEMA_INVALID--backoff-inverted.yaml': 'compares two fields (backoff_max_seconds at least backoff_base_seconds)',
  'trust_root.v0/SCHEMA_INVALID--duplicate-key.yaml': 'uniqueness of one field across array items (key_id)',
  'ea_receipt.v0/SCHEMA_INVALID--unequal-lengths.yaml': 'compares two arrays (commands_run and inner_exit_codes have equal length)',
  'ea_receipt.v0/SCHEMA_INVALID--file-hashes-not-the-files-changed.yaml': 'compares two arrays (file_hashes names the files of files_changed)',
  'approval.v0/SCHEMA_INVALID--dispatch-naming-a-message.yaml': 'fields required or forbidden by the value of another (approves)',
  'approval.v0/SCHEMA_INVALID--retry-of-attempt-one.yaml': 'a bound that depends on another field (a retry approves attempt 2 or later)',
  'approval.v0/SCHEMA_INVALID--expires-before-created.yaml': 'compares two fields (expires_at after created_at)',
};

type Verdict = boolean;
interface Vector {
  readonly name: string;
  readonly kind: DocumentKind;
  readonly valid: boolean;
  readonly value: unknown;
}

function load(): Vector[] {
  const out: Vector[] = [];
  for (const kind of DOCUMENT_KINDS) {
    for (const group of ['valid', 'invalid'] as const) {
      for (const file of readdirSync(join(vectors, kind, group))) {
        const bytes = readFileSync(join(vectors, kind, group, file));
        let value: unknown;
        try {
          value = readStrictYaml(bytes, file);
        } catch (error) {
          if (!isCooError(error)) throw error;
          value = undefined;
        }
        out.push({ name: `${kind}/${file}`, kind, valid: group === 'valid', value });
      }
    }
  }
  return out;
}

function cooVerdict(vector: Vector): Verdict {
  const file = join(vectors, vector.kind, vector.valid ? 'valid' : 'invalid', vector.name.split('/')[1]!);
  try {
    readDocument(vector.kind, readFileSync(file), file);
    return true;
  } catch (error) {
    if (!isCooError(error)) throw error;
    return false;
  }
}

const schemas = Object.fromEntries(DOCUMENT_KINDS.map((kind) => [kind, JSON.parse(readFileSync(join(root, 'schemas', `${kind}.json`), 'utf8')) as object]));

function ajvVerdicts(list: readonly Vector[]): Verdict[] {
  const ajv = new Ajv2020({ strict: true, allErrors: true });
  addFormats.default(ajv);
  const validators = Object.fromEntries(DOCUMENT_KINDS.map((kind) => [kind, ajv.compile(schemas[kind]!)]));
  return list.map((vector) => validators[vector.kind]!(vector.value) === true);
}

const JSONSCHEMA = String.raw`
import json, sys
from jsonschema import Draft202012Validator, FormatChecker
job = json.load(sys.stdin)
checker = FormatChecker()
validators = {kind: Draft202012Validator(schema, format_checker=checker) for kind, schema in job['schemas'].items()}
for schema in job['schemas'].values():
    Draft202012Validator.check_schema(schema)
json.dump([validators[doc['kind']].is_valid(doc['value']) for doc in job['docs']], sys.stdout)
`;

function pythonVerdicts(list: readonly Vector[]): Verdict[] {
  const input = JSON.stringify({ schemas, docs: list.map((vector) => ({ kind: vector.kind, value: vector.value })) });
  const result = spawnSync(PYTHON, ['-c', JSONSCHEMA], { input, encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`python3-jsonschema failed: ${result.stderr}`);
  return JSON.parse(result.stdout) as Verdict[];
}

describe('the exported JSON Schemas in outside validators', () => {
  const all = load();
  const parsed = all.filter((vector) => vector.value !== undefined);
  const ajv = ajvVerdicts(parsed);
  const python = pythonVerdicts(parsed);
  const verdicts = new Map(parsed.map((vector, index) => [vector.name, { ajv: ajv[index]!, python: python[index]! }]));

  it.each(all.map((vector) => [vector.name, vector] as const))('%s: ajv and jsonschema agree with coo, or the rule is named as not expressible', (name, vector) => {
    const coo = cooVerdict(vector);
    expect(coo, 'coo reads the vector as its folder says').toBe(vector.valid);
    const seen = verdicts.get(name);
    if (Object.hasOwn(NOT_EXPRESSIBLE, name)) {
      // Named as beyond JSON Schema: the outside validators must indeed let it through (else the table is stale).
      if (seen !== undefined) expect(seen, name).toEqual({ ajv: true, python: true });
      return;
    }
    expect(seen, `${name} reads as YAML`).toBeDefined();
    expect(seen, name).toEqual({ ajv: coo, python: coo });
  });

  it('names the intent\'s branch, and only it, in ajv\'s errors for an envelope', () => {
    const ajvAll = new Ajv2020({ strict: true, allErrors: true });
    addFormats.default(ajvAll);
    const validate = ajvAll.compile(schemas['coo_message.v0']!);
    const vector = all.find((item) => item.name === 'coo_message.v0/SCHEMA_INVALID--missing-context-pin.yaml')!;
    expect(validate(vector.value)).toBe(false);
    const branch = (schemas['coo_message.v0'] as { allOf: Array<{ if: { properties: { intent: { const: string } } } }> }).allOf.findIndex((item) => item.if.properties.intent.const === 'aa_consult');
    expect(validate.errors!.map((error) => error.schemaPath.split('/').slice(0, 3).join('/'))).toEqual(validate.errors!.map(() => `#/allOf/${branch}`));
    expect(validate.errors!.some((error) => error.keyword === 'required' && (error.params as { missingProperty?: string }).missingProperty === 'context_pin')).toBe(true);
  });

  it('names every rule it cannot express in schemas/README.md, and the README names no other vector', () => {
    const readme = readFileSync(join(root, 'schemas', 'README.md'), 'utf8');
    const short = (name: string): string => name.replace(/\.yaml$/, '').split('--')[1]!;
    const listed = readme
      .split('\n')
      .filter((line) => line.startsWith('| ') && !line.startsWith('| kind') && !line.startsWith('| ---'))
      .flatMap((line) => [...(line.split('|').at(-2) ?? '').matchAll(/`([a-z0-9-]+)`/g)].map((match) => match[1]!));
    expect(new Set(listed)).toEqual(new Set(Object.keys(NOT_EXPRESSIBLE).map(short)));
    for (const name of Object.keys(NOT_EXPRESSIBLE)) expect(all.some((vector) => vector.name === name), `${name} exists`).toBe(true);
  });
});
