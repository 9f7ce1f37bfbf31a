import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cloneState, type LedgerState } from '../../src/authority/state.js';
import { validateCommit } from '../../src/authority/validate-commit.js';
import { isCooError } from '../../src/errors.js';
import type { CommitFacts } from '../../src/ledger/commit-facts.js';
import { gatherFacts, readCommitLinks } from '../../src/ledger/history.js';
import type { Ledger } from '../../src/ledger/ledger.js';
import { readDocument } from '../../src/schema/documents.js';
import { readStrictYaml, toYaml } from '../../src/schema/strict-yaml.js';
import { dispatchEnvelope, messageFiles, makeLedger, T0 } from '../helpers/ledger.js';
import { tally } from '../helpers/tally.js';
import { tempDir } from '../helpers/tmp.js';

const dir = tempDir();
let parentState: LedgerState;
let facts: CommitFacts;
let ledger: Ledger;
const RUNS = Number(process.env['COO_PROPERTY_RUNS'] ?? 300);

beforeAll(async () => {
  const made = await makeLedger(dir);
  ledger = made.ledger;
  parentState = cloneState(await ledger.state());
  await ledger.append({ files: [...messageFiles(dispatchEnvelope())], key: made.actors.coo, summary: 'property base', now: T0 });
  const head = await readCommitLinks(ledger.reader, ledger.head()!);
  const parent = await readCommitLinks(ledger.reader, head.parents[0]!);
  facts = await gatherFacts(ledger.reader, ledger.trees, head, parent.tree);
});
afterAll(() => ledger.close());

function flip(bytes: Buffer, index: number, mask: number): Buffer {
  const copy = Buffer.from(bytes);
  copy[index % copy.length] = copy[index % copy.length]! ^ mask;
  return copy;
}

describe('signed bytes', () => {
  it('accepts the unmodified commit (the property below is about changes only)', () => {
    expect(validateCommit(cloneState(parentState), facts).findings).toEqual([]);
  });

  it('rejects any byte flip in an entry, its signature or the commit', () => {
    const targets = ['commit', ...facts.blobs.keys()];
    fc.assert(
      fc.property(fc.constantFrom(...targets), fc.nat(), fc.integer({ min: 1, max: 255 }), (target, index, mask) => {
        const mutated: CommitFacts =
          target === 'commit'
            ? { ...facts, raw: flip(facts.raw, index, mask) }
            : { ...facts, blobs: new Map([...facts.blobs].map(([path, bytes]) => [path, path === target ? flip(bytes, index, mask) : bytes])) };
        const verdict = validateCommit(cloneState(parentState), mutated);
        expect(verdict.findings.length).toBeGreaterThan(0);
      }),
      { numRuns: RUNS },
    );
    tally('properties', { property: 'byte flip in a signed entry or commit is rejected', runs: RUNS });
  });
});

describe('random YAML as an envelope', () => {
  it('gives a coded error, never a crash and never an acceptance', () => {
    const valid = readFileSync(join(import.meta.dirname, '..', 'vectors', 'coo_message.v0', 'valid', 'ea-dispatch.yaml'));
    const base = readStrictYaml(valid, 'base') as Record<string, unknown>;
    const keys = Object.keys(base);
    const mutation = fc.oneof(
      fc.constantFrom(...keys).map((key) => ({ kind: 'delete' as const, key })),
      fc.tuple(fc.constantFrom(...keys), fc.jsonValue()).map(([key, value]) => ({ kind: 'replace' as const, key, value })),
      fc.tuple(fc.string({ minLength: 1, maxLength: 12 }), fc.jsonValue()).map(([key, value]) => ({ kind: 'add' as const, key, value })),
    );
    const document = fc.oneof(
      fc.dictionary(fc.string({ maxLength: 20 }), fc.jsonValue(), { maxKeys: 30 }).map((value) => toYaml(value)),
      fc.string({ maxLength: 400 }),
      mutation.map((change) => {
        const copy: Record<string, unknown> = { ...base };
        if (change.kind === 'delete') delete copy[change.key];
        else if (change.kind === 'add') copy[keys.includes(change.key) ? `${change.key}_x` : change.key] = change.value;
        else copy[change.key] = change.value;
        return toYaml(copy);
      }),
    );
    let rejected = 0;
    let accepted = 0;
    fc.assert(
      fc.property(document, (text) => {
        try {
          const parsed = readDocument('coo_message.v0', Buffer.from(text), 'random.yaml');
          // A replacement can land on a value that is valid by chance: then nothing was dropped or coerced on the way.
          expect(parsed).toEqual(readStrictYaml(Buffer.from(text), 'random.yaml'));
          accepted += 1;
        } catch (error) {
          if (!isCooError(error)) throw error;
          expect(error.code).toMatch(/^(YAML_|SCHEMA_)/);
          rejected += 1;
        }
      }),
      { numRuns: RUNS * 3 },
    );
    expect(rejected).toBeGreaterThan(RUNS * 2);
    tally('properties', { property: 'random YAML gives a coded error, never a crash', runs: RUNS * 3, accepted_valid_by_chance: accepted });
  });
});

describe('strict reading then writing', () => {
  it('changes no signed byte of any frozen valid document', () => {
    const root = join(import.meta.dirname, '..', 'vectors');
    let checked = 0;
    for (const kind of readdirSync(root)) {
      for (const file of readdirSync(join(root, kind, 'valid'))) {
        const bytes = readFileSync(join(root, kind, 'valid', file));
        expect(toYaml(readStrictYaml(bytes, file))).toBe(bytes.toString('utf8'));
        checked += 1;
      }
    }
    for (const [path, bytes] of facts.blobs) {
      if (!path.endsWith('.yaml')) continue;
      expect(Buffer.from(toYaml(readStrictYaml(bytes, path))).equals(bytes)).toBe(true);
      checked += 1;
    }
    tally('properties', { property: 'strict read then write changes no signed byte', runs: checked });
  });
});
