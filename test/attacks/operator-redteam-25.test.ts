import { describe, expect, it } from 'vitest';
import { cooBounded } from '../helpers/damage.js';

/**
 * A careless operator, round 25: `--json` given to a verb that has no such flag; ...
 */

describe('--json given to a verb that has no --json of its own', () => {
  it('coo model --json, coo mcp --json and a misspelt command of coo model print the JSON error object too (USAGE, exit 2); before, only the text line', () => {
    const cases: Array<[string[], string]> = [
      [['model', '--json'], "unknown option '--json'"],
      [['mcp', '--json'], "unknown option '--json'"],
      [['mcp', '--bogus', '--json'], "unknown option '--bogus'"],
      [['model', 'nope', '--json'], "unknown command 'nope'"],
    ];
    for (const [args, message] of cases) {
      const result = cooBounded(args);
      expect(result.status, args.join(' ')).toBe(2);
      expect(JSON.parse(result.stdout), args.join(' ')).toEqual({ ok: false, error: { code: 'USAGE', message, where: null, findings: [] } });
      expect(result.stderr, args.join(' ')).toContain(`coo: USAGE: ${message}`);
    }
  });

  it('--json given as another flag\'s value or after -- is not asked for: the error stays text alone', () => {
    for (const args of [['mcp', '--remote', '--json'], ['mcp', '--', '--json'], ['model', '--bogus']]) {
      const result = cooBounded(args);
      expect(result.status, args.join(' ')).toBe(2);
      expect(result.stdout, args.join(' ')).toBe('');
      expect(result.stderr, args.join(' ')).toMatch(/^coo: USAGE: /);
    }
  });
});
