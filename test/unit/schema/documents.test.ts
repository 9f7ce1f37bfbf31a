import { describe, expect, it } from 'vitest';
import { isCooError } from '../../../src/errors.js';
import { readAnyDocument, readDocument } from '../../../src/schema/documents.js';

const refusal = (read: () => unknown): { code: string; message: string } => {
  try {
    read();
  } catch (error) {
    if (isCooError(error)) return { code: error.code, message: error.message };
    throw error;
  }
  throw new Error('read without a refusal');
};

describe('a schema_version this build does not read', () => {
  const later = Buffer.from('schema_version: actor_policy.v1\nversion: 2\n');

  it('says a newer coo-commons wrote a later version of a kind it reads, and to upgrade', () => {
    for (const read of [() => readDocument('actor_policy.v0', later, 'trust/policy/000002.yaml'), () => readAnyDocument(later, 'trust/policy/000002.yaml')]) {
      const { code, message } = refusal(read);
      expect(code).toBe('SCHEMA_UNKNOWN');
      expect(message).toContain('"actor_policy.v1"');
      expect(message).toMatch(/later version than this coo reads \(actor_policy\.v0\), written by a newer coo-commons; upgrade coo/);
    }
  });

  it('says so of any later kind where no kind is asked for (a ledger file read for what it is)', () => {
    expect(refusal(() => readAnyDocument(Buffer.from('schema_version: heartbeat.v1\n'), 'x.yaml')).message).toMatch(/later version than this coo reads \(heartbeat\.v0\)/);
  });

  it('says nothing of an upgrade for an older or foreign version, another kind, or a name that is no version', () => {
    const cases: Array<[string, () => unknown]> = [];
    for (const declared of ['actor_policy.v0', 'actor_policy.vx', 'stranger.v9', 'actor_policy.v1.0', 'heartbeat.v1']) {
      const bytes = Buffer.from(`schema_version: ${declared}\n`);
      cases.push([declared, () => readDocument('actor_registry.v0', bytes, 'x.yaml')]);
    }
    cases.push(['stranger.v9 (any)', () => readAnyDocument(Buffer.from('schema_version: stranger.v9\n'), 'x.yaml')]);
    for (const [declared, read] of cases) {
      const { code, message } = refusal(read);
      // heartbeat.v1 is a later heartbeat, but where a registry is expected it is a file of the wrong kind: no upgrade mends it.
      expect(code, declared).toBe('SCHEMA_UNKNOWN');
      expect(/upgrade coo/.test(message), declared).toBe(false);
    }
  });
});
