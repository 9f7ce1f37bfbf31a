import { describe, expect, it } from 'vitest';
import { checkOracleArgs } from '../../../src/consult/oracle.js';
import { oraclePathProblem } from '../../../src/lane/oracle-inputs.js';
import { codeOf } from '../../helpers/codes.js';

describe('which pinned names Oracle may be handed', () => {
  it.each([
    ['src/add.ts', null],
    ['.env', null],
    ['docs/dotenv_config_override=true', null],
    ['.oracle/notes.md', null],
    ['dotenv_config_override=true', /dotenv/],
    ['DOTENV_CONFIG_PATH=/etc/passwd', /dotenv/],
    ['Dotenv_Config_quiet=false', /dotenv/],
    ['.oracle/config.json', /configuration/],
    [' notes.md', /trims/],
    ['notes.md\t', /trims/],
    ['a,b.md', /pattern/],
    ['-rf', /pattern/],
    ['src/*.ts', /pattern/],
    ['line\nbreak', /pattern/],
  ])('%j: %s', (path, expected) => {
    const problem = oraclePathProblem(path);
    if (expected === null) expect(problem).toBeNull();
    else expect(problem).toMatch(expected);
  });

  it('refuses an operator --oracle-arg that dotenv would read as its option', () => {
    expect(codeOf(() => checkOracleArgs(['dotenv_config_path=/root/.env']))).toBe('ORACLE_CONFIG');
    expect(codeOf(() => checkOracleArgs(['--verbose']))).toBe('no error');
  });
});
