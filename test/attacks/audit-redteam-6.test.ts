import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { readStrictYaml, toYaml } from '../../src/schema/strict-yaml.js';
import { attack, firstOr, useKit, type Kit } from '../helpers/attack-kit.js';
import { coo, json } from '../helpers/cli.js';
import { PYTHON } from '../helpers/pyyaml.js';
import { FIXTURE_TASK, fixtureEnvelope } from '../helpers/stock.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * What an auditor's PyYAML reads of a double-quoted string against what coo read: a pair of
 * escaped UTF-16 surrogates is one character to coo (as JSON reads it) and two code points to
 * PyYAML, which no UTF-8 text can hold; an escaped line break that an empty line follows is a
 * space to coo and a line feed to PyYAML (and to the YAML 1.2 spec). coo refuses both wherever an
 * entry is read.
 */
const dir = tempDir();
const getKit = useKit(dir);
let kit: Kit;
beforeAll(() => {
  kit = getKit();
});

let n = 0;
const nextId = (): string => `msg_01M8NQFJ01J7CG66HWNDDJ${String(9700 + (n += 1)).padStart(4, '0')}`;
const folder = (id: string): string => `messages/2026-11/30/07/${id}`;

/**
 * The code points PyYAML reads for the string at `key` of each text, or the error it raised: JSON
 * cannot carry a lone surrogate back (it would be joined again), so the script prints numbers.
 */
function pyCodePoints(texts: readonly string[], path: readonly (string | number)[]): Array<number[] | string> {
  const script = [
    'import json, sys, yaml',
    'out = []',
    'for text in json.load(sys.stdin):',
    '    try:',
    '        value = yaml.safe_load(text)',
    `        for part in ${JSON.stringify(path)}: value = value[part]`,
    '        out.append([ord(c) for c in value])',
    '    except Exception as error:',
    '        out.append(type(error).__name__)',
    'json.dump(out, sys.stdout)',
  ].join('\n');
  const result = spawnSync(PYTHON, ['-c', script], { input: JSON.stringify(texts), encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`PyYAML failed: ${result.stderr}`);
  return JSON.parse(result.stdout) as Array<number[] | string>;
}

const codePoints = (text: string): number[] => [...text].map((c) => c.codePointAt(0)!);

/** The code of reading `text` as an entry, new (held to YAML 1.1 readers) or in history. */
function readCode(text: string, sameInYaml11: boolean): string {
  try {
    readStrictYaml(Buffer.from(text), 'entry.yaml', { sameInYaml11 });
    return 'accepted';
  } catch (error) {
    return (error as { code?: string }).code ?? String(error);
  }
}

const EMOJI = '\u{1F600}';
/** Each way to write U+1F600 as two escaped surrogates inside double quotes. */
const JOINED = [
  ['\\u escapes', String.raw`"done \ud83d\ude00"`],
  ['\\U escapes', String.raw`"done \U0000D83D\U0000DE00"`],
  ['a \\u and a \\U escape', String.raw`"done \uD83D\U0000de00"`],
  ['escapes either side of an escaped line break', '"done \\ud83d\\\n    \\ude00"'],
] as const;

describe('a pair of escaped surrogates: one character to coo, two to PyYAML', () => {
  it('PyYAML reads two code points where the yaml package reads U+1F600, and cannot write them as UTF-8', () => {
    const texts = JOINED.map(([, quoted]) => `summary: ${quoted}\n`);
    expect(pyCodePoints(texts, ['summary'])).toEqual(texts.map(() => [...codePoints('done '), 0xd83d, 0xde00]));
    const encoded = spawnSync(PYTHON, ['-c', String.raw`import yaml; yaml.safe_load('summary: "\\ud83d\\ude00"\n')['summary'].encode('utf-8')`], { encoding: 'utf8' });
    expect(encoded.status).not.toBe(0);
    expect(encoded.stderr).toContain('surrogates not allowed');
  });

  it('is refused in a new entry and in history, as a value and as a key, with the line it is on', () => {
    for (const [, quoted] of JOINED) {
      // A key spans one line (an implicit key across a line break is a syntax error to both readers).
      const asKey = quoted.includes('\n') ? [] : [`kind: x\n${quoted}: 1\n`];
      for (const text of [`kind: x\nsummary: ${quoted}\n`, `kind: x\nitems:\n  - ${quoted}\n`, ...asKey]) {
        expect([readCode(text, true), readCode(text, false)], text).toEqual(['YAML_INVALID_UTF8', 'YAML_INVALID_UTF8']);
      }
    }
    expect(() => readStrictYaml(Buffer.from(`kind: x\nsummary: ${JOINED[0][1]}\n`), 'entry.yaml')).toThrow(/entry\.yaml:summary: a pair of escaped UTF-16 surrogates .*\(line 2, column 16\)/);
  });

  it('takes what PyYAML reads the same: the character itself, a \\U escape of it, a lone surrogate, escaped backslashes, a pair kept apart', () => {
    const cases = [
      [`"done ${EMOJI}"`, `done ${EMOJI}`],
      [`done ${EMOJI}`, `done ${EMOJI}`],
      [String.raw`"done \U0001F600"`, `done ${EMOJI}`],
      [String.raw`"done \ud83d"`, 'done \ud83d'],
      [String.raw`"done \\ud83d\\ude00"`, String.raw`done \ud83d\ude00`],
      [String.raw`"done \ud83d\\ude00"`, String.raw`done ` + '\ud83d' + String.raw`\ude00`],
      [String.raw`"done \ud83d \ude00"`, 'done \ud83d \ude00'],
      ['"done \\ud83d\n    \\ude00"', 'done \ud83d \ude00'],
    ] as const;
    const texts = cases.map(([written]) => `summary: ${written}\n`);
    const python = pyCodePoints(texts, ['summary']);
    cases.forEach(([, value], index) => {
      const read = readStrictYaml(Buffer.from(texts[index]!), 'entry.yaml') as { summary: string };
      expect(read.summary, texts[index]).toBe(value);
      expect(python[index], texts[index]).toEqual(codePoints(value));
    });
  });

  it("coo's writer writes neither a pair nor anything the reader refuses for a string holding U+1F600 or a lone surrogate", () => {
    for (const value of [`done ${EMOJI}`, 'done \ud83d', 'done \ude00\ud83d', `\ud83d${EMOJI}\ude00`]) {
      const text = toYaml({ summary: value });
      expect(readStrictYaml(Buffer.from(text), 'entry.yaml', { sameInYaml11: true }), text).toEqual({ summary: value });
    }
  });
});

/** A fixture dispatch whose acceptance criteria hold `quoted`. */
const withCriterion = (quoted: string) => (text: string): string => text.replace('acceptance_criteria: [tests pass]', `acceptance_criteria: [${quoted}]`);

function files(edit: (text: string) => string): Record<string, string> {
  const id = nextId();
  return { [`${folder(id)}/envelope.yaml`]: edit(fixtureEnvelope(id, id)), [`${folder(id)}/prompt.md`]: FIXTURE_TASK };
}

describe('a dispatch whose acceptance criterion holds the pair', () => {
  attack('pushed by the COO with stock git through the hook', 'hook', 'YAML_INVALID_UTF8', () => kit.push(files(withCriterion(JOINED[0][1])), { key: kit.keys.coo.file }));

  attack('written behind the hook, found by coo verify', 'verify', 'YAML_INVALID_UTF8', async () => {
    let code = '';
    await kit.bypass(files(withCriterion(JOINED[1][1])), { key: kit.keys.coo.file }, () => {
      code = firstOr(kit.verifyCodes(), 'YAML_INVALID_UTF8');
    });
    return code;
  });

  attack('given to coo append', 'cli', 'YAML_INVALID_UTF8', () => {
    const id = nextId();
    mkdirSync(join(dir, id));
    const file = join(dir, id, 'envelope.yaml');
    writeFileSync(file, withCriterion(JOINED[3][1])(fixtureEnvelope(id, id)));
    writeFileSync(join(dir, id, 'prompt.md'), FIXTURE_TASK);
    const result = coo(['append', '--ledger', kit.world.gitdir, '--key', kit.keys.coo.file, file, join(dir, id, 'prompt.md'), '--json']);
    return result.status === 0 ? 'accepted' : json<{ error: { code: string } }>(result).error.code;
  });

  it('is taken with the character itself, which PyYAML reads as coo does', async () => {
    const edit = withCriterion(`"tests pass ${EMOJI}"`);
    expect(pyCodePoints([edit(fixtureEnvelope(nextId(), 'k'))], ['dispatch', 'acceptance_criteria', 0])).toEqual([codePoints(`tests pass ${EMOJI}`)]);
    expect(await kit.push(files(edit), { key: kit.keys.coo.file })).toBe('accepted');
  });
});

describe('an escaped line break that an empty line follows: a space to coo, a line feed to PyYAML', () => {
  /** Each way to write it: one empty line, two, a line of spaces, CRLF line ends. */
  const FOLDED = ['"npm test\\\n\n        && npm run deploy"', '"npm test\\\n\n\n        && npm run deploy"', '"npm test\\\n      \n        && npm run deploy"', '"npm test\\\r\n\r\n        && npm run deploy"'];

  it('PyYAML reads a line feed for each empty line, as the YAML 1.2 spec does', () => {
    const texts = FOLDED.map((quoted) => `command: ${quoted}\n`);
    expect(pyCodePoints(texts, ['command'])).toEqual([
      codePoints('npm test\n&& npm run deploy'),
      codePoints('npm test\n\n&& npm run deploy'),
      codePoints('npm test\n&& npm run deploy'),
      codePoints('npm test\n&& npm run deploy'),
    ]);
  });

  it('is refused in a new entry and in history, with the line it is on', () => {
    for (const quoted of FOLDED) {
      for (const text of [`kind: x\ncommand: ${quoted}\n`, `kind: x\ncommands:\n  - ${quoted}\n`]) {
        expect([readCode(text, true), readCode(text, false)], text).toEqual(['YAML_SYNTAX', 'YAML_SYNTAX']);
      }
    }
    expect(() => readStrictYaml(Buffer.from(`kind: x\ncommand: ${FOLDED[0]}\n`), 'entry.yaml')).toThrow(/entry\.yaml:command: an escaped line break followed by an empty line .*\(line 2, column 19\)/);
  });

  it('takes an escaped line break with text on the next line, and an empty line without the escape, which PyYAML reads the same', () => {
    const cases = [
      ['"npm test\\\n        && npm run deploy"', 'npm test&& npm run deploy'],
      ['"npm test \\\n        && npm run deploy"', 'npm test && npm run deploy'],
      ['"npm test\n\n        && npm run deploy"', 'npm test\n&& npm run deploy'],
      ['"npm test\\\\\n\n        && npm run deploy"', 'npm test\\\n&& npm run deploy'],
    ] as const;
    const texts = cases.map(([written]) => `command: ${written}\n`);
    const python = pyCodePoints(texts, ['command']);
    cases.forEach(([, value], index) => {
      expect((readStrictYaml(Buffer.from(texts[index]!), 'entry.yaml') as { command: string }).command, texts[index]).toBe(value);
      expect(python[index], texts[index]).toEqual(codePoints(value));
    });
  });

  attack('a verification command holding it, pushed by the COO with stock git through the hook', 'hook', 'YAML_SYNTAX', () =>
    kit.push(files((text) => text.replace('verification_commands: [npm test]', `verification_commands:\n    - ${FOLDED[0]}`)), { key: kit.keys.coo.file }),
  );
});
