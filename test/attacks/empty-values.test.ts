import { describe, expect, it } from 'vitest';
import { buildProgram } from '../../src/cli/program.js';
import { isCooError } from '../../src/errors.js';

/**
 * The empty-value rule of every verb (cli/program.ts): each way a command line can give a flag or
 * an argument an empty value is refused as USAGE before the verb runs, guarded against a verb that
 * adds its own parsing.
 */

async function refused(argv: readonly string[]): Promise<string> {
  try {
    await buildProgram().parseAsync(['node', 'coo', ...argv]);
  } catch (error) {
    if (isCooError(error)) {
      expect(error.code, argv.join(' ')).toBe('USAGE');
      return error.message;
    }
    throw error;
  }
  throw new Error(`not refused: coo ${argv.join(' ')}`);
}

describe('an empty value on the command line', () => {
  it('is USAGE in the --flag= form, for a short flag, in a repeatable flag and for an argument after --', async () => {
    expect(await refused(['watch', '--state-dir=', '--ledger', '/nonexistent/ledger'])).toMatch(/^--state-dir was given an empty value/);
    expect(await refused(['log', '-n', '', '--ledger', '/nonexistent/ledger'])).toMatch(/^--limit was given an empty value/);
    expect(await refused(['dispatch', '--to', 'ea.codex', '--scope', 'src', '--scope', ' ', '--ledger', '/nonexistent/ledger'])).toMatch(/^--scope was given an empty value/);
    expect(await refused(['clone', '--', '', '/nonexistent/dir'])).toMatch(/^the argument <url> was given empty/);
    expect(await refused(['show', '\t', '--ledger', '/nonexistent/ledger'])).toMatch(/^the argument <target> was given empty/);
  });
});
