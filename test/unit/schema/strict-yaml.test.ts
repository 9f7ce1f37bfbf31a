import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CooError, isCooError } from '../../../src/errors.js';
import { readDocument } from '../../../src/schema/documents.js';
import { readStrictYaml, readStrictYamlGeneral, toYaml } from '../../../src/schema/strict-yaml.js';
import { codeOf } from '../../helpers/codes.js';

const read = (text: string | Buffer): unknown => readStrictYaml(typeof text === 'string' ? Buffer.from(text) : text, 'entry.yaml');

describe('the strict YAML reader', () => {
  const malformed: Array<[string, string | Buffer, string]> = [
    ['an alias', 'a: &x 1\nb: *x\n', 'YAML_ALIAS'],
    ['an anchor alone', 'a: &x 1\n', 'YAML_ALIAS'],
    ['a billion-laughs bomb', 'a: &a [x, x]\nb: &b [*a, *a]\nc: [*b, *b]\n', 'YAML_ALIAS'],
    ['a merge key', 'base: &b {x: 1}\nc:\n  <<: *b\n', 'YAML_ALIAS'],
    ['a duplicate key', 'a: 1\na: 2\n', 'YAML_DUPLICATE_KEY'],
    ['a custom tag', 'a: !shell rm -rf /\n', 'YAML_TAG'],
    ['a js function tag', 'a: !!js/function "x"\n', 'YAML_TAG'],
    ['a %TAG directive', '%TAG !e! tag:example.com,2000:\n---\na: !e!x 1\n', 'YAML_TAG'],
    ['a %YAML 1.1 directive (yes would become true)', '%YAML 1.1\n---\na: yes\n', 'YAML_SYNTAX'],
    ['two documents', 'a: 1\n---\nb: 2\n', 'YAML_MULTI_DOCUMENT'],
    ['infinity', 'a: .inf\n', 'YAML_NON_JSON'],
    ['not a number', 'a: .nan\n', 'YAML_NON_JSON'],
    ['an integer beyond 2^53', 'a: 123456789012345678901\n', 'YAML_NON_JSON'],
    ['a non-string key', '1: one\n', 'YAML_NON_JSON'],
    ['a complex key', '? [a, b]\n: c\n', 'YAML_NON_JSON'],
    ['a __proto__ key', '__proto__: {polluted: true}\n', 'YAML_NON_JSON'],
    ['invalid UTF-8', Buffer.from([0x61, 0x3a, 0x20, 0xff, 0xfe, 0x0a]), 'YAML_INVALID_UTF8'],
    ['a byte-order mark', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('a: 1\n')]), 'YAML_INVALID_UTF8'],
    ['a syntax error', 'a: [1, 2\n', 'YAML_SYNTAX'],
    ['bad indentation', 'a:\n  b: 1\n c: 2\n', 'YAML_SYNTAX'],
    ['an empty file', '', 'YAML_SYNTAX'],
    ['deep nesting', `${'a:\n'.split('\n')[0]}${' ['.repeat(40)}${']'.repeat(40)}\n`, 'YAML_DEPTH'],
    ['an enormous file', `a: "${'x'.repeat(300 * 1024)}"\n`, 'YAML_TOO_LARGE'],
  ];
  for (const [name, input, code] of malformed) {
    it(`refuses ${name} with ${code}`, () => {
      expect(codeOf(() => read(input))).toBe(code);
    });
  }

  it('names the file and the path inside it', () => {
    try {
      read('outer:\n  list:\n    - ok\n    - .inf\n');
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(CooError);
      expect((error as CooError).where).toBe('entry.yaml:outer.list[1]');
      expect((error as CooError).message).toContain('entry.yaml:outer.list[1]');
    }
  });

  it('says the line and column of what it refuses, as an editor counts them, and so does the schema check after it', () => {
    const message = (text: string): string => {
      try {
        readDocument('claim.v0', Buffer.from(text), 'claim.yaml');
      } catch (error) {
        if (isCooError(error)) return error.message;
      }
      return 'accepted';
    };
    expect(message('schema_version: claim.v0\nmessage_id: msg_X\nmessage_id: msg_Y\n')).toBe('claim.yaml: Map keys must be unique (line 3, column 1)');
    expect(message('schema_version: claim.v0\nrunner_id: &r x\n')).toBe('claim.yaml:runner_id: anchors are not allowed (line 2, column 15)');
    expect(message('schema_version: claim.v0\nattempt_number: [1,\n')).toMatch(/^claim\.yaml: .* \(line 3, column 1\)$/);
    expect(message('schema_version: claim.v0\nmessage_id: msg_01M8NQFJ01J7CG66HWNDDJ8485\n  \nattempt_number: -1\n')).toMatch(/^claim\.yaml:\S+: .* \(line \d+, column 1\)$/);
    expect(message('schema_version: claim.v0\nmessage_id: nope\n')).toMatch(/^claim\.yaml:message_id: message ids look like msg_ .* \(line 2, column 1\)$/);
  });

  it('reads plain YAML 1.2 core values, where yes and on stay strings', () => {
    expect(read('a: yes\nb: on\nc: true\nd: null\ne: 1.5\nf: "x"\ng: [1, {h: i}]\n')).toEqual({
      a: 'yes',
      b: 'on',
      c: true,
      d: null,
      e: 1.5,
      f: 'x',
      g: [1, { h: 'i' }],
    });
  });

  it('still reads an entry written before the writer quoted, plain timestamps and on as the strings they were, on both paths', () => {
    const old = 'schema_version: kill_switch.v0\nversion: 1\nstate: on\nreason: y\nset_by: ceo\ncreated_at: 2026-11-30T08:00:00Z\n';
    const value = { schema_version: 'kill_switch.v0', version: 1, state: 'on', reason: 'y', set_by: 'ceo', created_at: '2026-11-30T08:00:00Z' };
    expect(read(old)).toEqual(value);
    expect(readStrictYamlGeneral(Buffer.from(old), 'entry.yaml')).toEqual(value);
  });

  it('writes double-quoted every string a YAML 1.1 reader would retype, and fractions with a dot and a signed exponent', () => {
    const hazards = ['2026-11-30T08:00:00Z', '2026-11-30', 'on', 'Off', 'YES', 'n', 'Y', '~', '=', '<<', '1:20', '0755', '0o17', '0x1F', '0b101', '1_000', '.inf', '1e5', '+1', ''];
    const text = toYaml({ hazards, small: 1e-7, plain: ['deadbeef', 'gpt-5.5', 'coo.hermes', 'budget review'] });
    expect(text).toBe(
      [
        'hazards:',
        ...hazards.map((hazard) => `  - ${JSON.stringify(hazard)}`),
        'small: 1.0e-7',
        'plain:',
        '  - deadbeef',
        '  - gpt-5.5',
        '  - coo.hermes',
        '  - budget review',
        '',
      ].join('\n'),
    );
    expect(read(text)).toEqual({ hazards, small: 1e-7, plain: ['deadbeef', 'gpt-5.5', 'coo.hermes', 'budget review'] });
  });

  it('gives a coded error or a value for any input, never a crash', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string({ maxLength: 200 }), fc.uint8Array({ maxLength: 200 }).map((bytes) => Buffer.from(bytes))), (input) => {
        try {
          read(input);
        } catch (error) {
          if (!isCooError(error)) throw error;
          expect(error.code).toMatch(/^YAML_/);
        }
      }),
      { numRuns: 2000 },
    );
  });

  it('reads back exactly what the writer wrote, for any JSON value', () => {
    const json = fc.letrec((tie) => ({
      value: fc.oneof(
        { depthSize: 'small' },
        fc.string(),
        fc.integer(),
        fc.double({ noNaN: true, min: -1e12, max: 1e12 }).filter((n) => !Object.is(n, -0)),
        fc.boolean(),
        fc.constant(null),
        fc.array(tie('value'), { maxLength: 4 }),
        fc.dictionary(fc.string({ minLength: 1 }).filter((key) => key !== '__proto__'), tie('value'), { maxKeys: 4 }),
      ),
    })).value;
    fc.assert(
      fc.property(fc.dictionary(fc.string({ minLength: 1 }).filter((key) => key !== '__proto__'), json, { maxKeys: 6 }), (value) => {
        const text = toYaml(value);
        expect(read(text)).toEqual(value);
        expect(toYaml(read(text))).toBe(text);
      }),
      { numRuns: 500 },
    );
  });
});

describe('found by the properties at full strength', () => {
  it('declines, on the fast path, a double-quoted scalar whose last escape takes its closing quote, and refuses it as the general reader does', async () => {
    const { readCanonicalYaml } = await import('../../../src/schema/canonical-yaml.js');
    const text = 'a: "2026-11-30T08:00:\\"\nb: c\n';
    expect(readCanonicalYaml(text, 64)).toBeNull();
    expect(codeOf(() => readStrictYaml(Buffer.from(text), 'x.yaml'))).toBe(codeOf(() => readStrictYamlGeneral(Buffer.from(text), 'x.yaml')));
  });

  it('double-quotes a string with a tab, which PyYAML refuses before an indicator in a plain scalar', () => {
    expect(toYaml({ value: '(\t!' })).toBe('value: "(\\t!"\n');
    expect(readStrictYaml(Buffer.from(toYaml({ value: '(\t!' })), 'x.yaml')).toEqual({ value: '(\t!' });
  });
});

describe('characters PyYAML will not take raw', () => {
  it('writes DEL, C1 controls and the Unicode line separators as escapes, and reads them back', () => {
    const value = { value: '\u007f', list: ['\u0085\u2028'], map: { '\u009f': '\u2029\ufeff' } };
    const text = toYaml(value);
    expect(text).not.toMatch(/[\u007f-\u009f\u2028\u2029\ufeff]/);
    expect(readStrictYaml(Buffer.from(text), 'x.yaml')).toEqual(value);
    expect(readStrictYamlGeneral(Buffer.from(text), 'x.yaml')).toEqual(value);
  });

  it('writes U+FFFE and U+FFFF, which the reader refuses raw, as escapes, and reads them back: a path an agent names so is a receipt still', () => {
    const value = { files_changed: ['src/.git\ufffe/hooks/post-checkout', 'src/a\uffff.js'], map: { 'k\ufffe': 'v' } };
    const text = toYaml(value);
    expect(text).not.toMatch(/[\ufffe\uffff]/);
    expect(readStrictYaml(Buffer.from(text), 'x.yaml')).toEqual(value);
    expect(readStrictYamlGeneral(Buffer.from(text), 'x.yaml')).toEqual(value);
  });

  it.each([
    ['a line separator that ends a comment to PyYAML', 'a: x # note\u2028b: y\n'],
    ['NEL, which PyYAML folds to a space inside double quotes', 'a: "x\u0085y"\n'],
    ['a paragraph separator in a plain scalar', 'a: x\u2029\n'],
    ['a carriage return without its line feed', 'a: x\rb: y\n'],
    ['NUL', 'a: x\u0000\n'],
    ['an escape character inside double quotes', 'a: "\u001b[2J"\n'],
    ['a C1 control inside double quotes', 'a: "x\u0090"\n'],
    ['the non-character U+FFFF', 'a: x\uffff\n'],
  ])('refuses %s raw, on both paths', (_name, text) => {
    expect(codeOf(() => readStrictYaml(Buffer.from(text), 'x.yaml'))).toBe('YAML_SYNTAX');
    expect(codeOf(() => readStrictYamlGeneral(Buffer.from(text), 'x.yaml'))).toBe('YAML_SYNTAX');
  });

  it.each([
    ['a boolean word', 'a: [x, off]\n', 'a[1]'],
    ['a sexagesimal number', 'a: 1:20\n', 'a'],
    ['a date', 'a: 2026-12-04\n', 'a'],
    ['a timestamp', 'a: 2026-11-30T07:00:00Z\n', 'a'],
    ['a key', 'on: x\n', ''],
  ])('refuses in a new entry %s written plain, which YAML 1.1 retypes, and takes it quoted or in history', (_name, text, path) => {
    let error: unknown;
    try {
      readStrictYaml(Buffer.from(text), 'entry.yaml', { sameInYaml11: true });
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(CooError);
    expect((error as CooError).code).toBe('YAML_NON_JSON');
    expect((error as CooError).message).toContain(path === '' ? 'entry.yaml: the plain key' : `entry.yaml:${path}: the plain string`);
    expect(() => read(text)).not.toThrow();
    const quoted = text.replace(/(off|1:20|2026-[0-9T:-]+Z?|on)/, '"$1"');
    expect(readStrictYaml(Buffer.from(quoted), 'entry.yaml', { sameInYaml11: true })).toEqual(read(quoted));
  });

  it('refuses in a new entry a raw tab, which PyYAML refuses between tokens, and reads it in history', () => {
    expect(codeOf(() => readStrictYaml(Buffer.from('a:\tx\n'), 'entry.yaml', { sameInYaml11: true }))).toBe('YAML_SYNTAX');
    expect(read('a:\tx\n')).toEqual({ a: 'x' });
    expect(readStrictYaml(Buffer.from(toYaml({ a: 'x\ty' })), 'entry.yaml', { sameInYaml11: true })).toEqual({ a: 'x\ty' });
  });

  it('still reads CRLF line ends, a tab and a byte-order mark inside a string, and no-break spaces', () => {
    expect(read('a: x\r\nb:\r\n  - "y\tz"\r\n')).toEqual({ a: 'x', b: ['y\tz'] });
    expect(read('a: x\ufeffy\u00a0z\n')).toEqual({ a: 'x\ufeffy\u00a0z' });
  });
});
