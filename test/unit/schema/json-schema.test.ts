import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { schemaFiles } from '../../../src/cli/schemas.js';

describe('JSON Schema files in schemas/', () => {
  const dir = join(import.meta.dirname, '..', '..', '..', 'schemas');

  it('match the zod source exactly (regenerate with: npm run schemas)', () => {
    const expected = schemaFiles();
    expect(readdirSync(dir).sort()).toEqual([...expected.keys()].sort());
    for (const [name, text] of expected) expect(readFileSync(join(dir, name), 'utf8'), name).toBe(text);
  });

  it('are draft 2020-12 and refuse unknown properties on the envelope', () => {
    const schema = JSON.parse(readFileSync(join(dir, 'coo_message.v0.json'), 'utf8')) as Record<string, unknown>;
    expect(schema['$schema']).toBe('https://json-schema.org/draft/2020-12/schema');
    expect(JSON.stringify(schema)).toContain('"additionalProperties":false');
  });
});
