import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { OracleCli } from '../../src/consult/oracle.js';
import { Scrubber } from '../../src/util/scrub.js';
import { receiptsOf, worlds } from '../helpers/lane.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * "No secret ever enters the ledger", attacked with the encodings a reader decodes without thinking
 * that the first red team left: HTML character references, YAML escapes and folded lines, percent
 * escapes with an invisible character between them, base64 with a line break and indentation inside.
 */
const KEY = 'sk-proj-Red/Team+0123456789abcdefSECRET';
const scrub = new Scrubber([{ name: 'OPENAI_API_KEY', value: KEY }]);
const MARKER = '[removed: OPENAI_API_KEY]';

const each = (text: string, encode: (char: string) => string): string => [...text].map(encode).join('');
const code = (char: string): number => char.codePointAt(0)!;
/** The base64 of KEY. */
const BASE64 = Buffer.from(KEY).toString('base64');

/** Every run of 8 characters of KEY that `text` still holds. */
const pieces = (text: string): string[] => Array.from({ length: KEY.length - 7 }, (_, at) => KEY.slice(at, at + 8)).filter((piece) => text.includes(piece));

/** The forms an agent or a provider writes the key in, by name. */
const FORMS: Record<string, string> = {
  'HTML decimal references': each(KEY, (char) => `&#${code(char)};`),
  'HTML hex references, upper-case X, no semicolon': each(KEY, (char) => `&#X${code(char).toString(16)}`),
  'one HTML reference (&#115;)': `&#115;${KEY.slice(1)}`,
  'one HTML hex reference (&#x73;)': `&#x73;${KEY.slice(1)}`,
  'HTML named references (&sol; &plus;)': KEY.replace('/', '&sol;').replace('+', '&plus;'),
  'an HTML zero-width reference inside': `${KEY.slice(0, 10)}&ZeroWidthSpace;${KEY.slice(10, 20)}&#8203;${KEY.slice(20)}`,
  'YAML \\x escapes': each(KEY, (char) => `\\x${code(char).toString(16)}`),
  'YAML \\U escapes': `\\U00000073${KEY.slice(1)}`,
  'a YAML escaped line break in a folded string': `${KEY.slice(0, 12)}\\\n    ${KEY.slice(12)}`,
  'a line break and indentation in a folded string': `${KEY.slice(0, 12)}\n    ${KEY.slice(12, 30)}\r\n\t${KEY.slice(30)}`,
  'percent escapes with a zero-width character between': `%73\u200b%6B${KEY.slice(2)}`,
  'percent-encoded zero-width character inside': `${KEY.slice(0, 9)}%E2%80%8B${KEY.slice(9)}`,
};

describe('a secret written in an encoding a reader decodes', () => {
  for (const [name, form] of Object.entries(FORMS)) {
    it(`is found as ${name}, in text, bytes and a JSON string`, () => {
      expect(scrub.text(`key: ${form} end`)).toBe(`key: ${MARKER} end`);
      expect(scrub.bytes(Buffer.from(`key: ${form} end`)).toString('utf8')).toBe(`key: ${MARKER} end`);
      expect(JSON.parse(scrub.text(JSON.stringify({ text: `key: ${form} end` })))).toEqual({ text: `key: ${MARKER} end` });
    });
  }

  it('is found as base64 with a line break and indentation, or an HTML-escaped invisible character, inside', () => {
    for (const form of [`${BASE64.slice(0, 20)}\n      ${BASE64.slice(20)}`, `${BASE64.slice(0, 20)}&shy;${BASE64.slice(20)}`, `${BASE64.slice(0, 20)}%E2%80%8C${BASE64.slice(20)}`]) {
      const cleaned = scrub.text(`blob: ${form}`);
      expect(cleaned, form).toContain('[removed: OPENAI_API_KEY');
      expect(cleaned.replace(/\s|&shy;|%E2%80%8C/g, ''), form).not.toContain(BASE64.slice(8, 24));
    }
  });

  it('leaves a text that decodes to something near it, and references it does not know, as they were', () => {
    for (const text of [`&#115;${KEY.slice(1, -1)}X`, '&notanentity; &#99999999; %ZZ &#x110000;', `${KEY.slice(0, 12)}\n    X${KEY.slice(13)}`]) expect(scrub.text(text)).toBe(text);
    const clean = Buffer.from('a &amp; b %41 \\x41 &#65;');
    expect(scrub.bytes(clean)).toBe(clean);
  });
});

const dir = tempDir('coo-secrets-redteam-2-');
const world = worlds(dir);

/** An Oracle stand-in whose answer writes the key it was handed in every form of FORMS, in its text and in its answer block. */
function encodingOracle(path: string): string {
  writeFileSync(
    path,
    `import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
const args = process.argv.slice(2);
const value = (flag) => args[args.indexOf(flag) + 1];
const prompt = readFileSync(0, 'utf8');
const canary = /"canary" value must be exactly (canary-[a-z0-9-]+)/.exec(prompt)?.[1] ?? 'none';
const key = process.env.OPENAI_API_KEY;
const forms = ${JSON.stringify(FORMS)};
const dir = join(process.env.ORACLE_HOME_DIR, 'sessions', value('--slug'));
mkdirSync(dir, { recursive: true });
writeFileSync(join(dir, 'meta.json'), JSON.stringify({ id: value('--slug'), status: 'completed', model: value('--model'), usage: { inputTokens: 1, outputTokens: 1, reasoningTokens: 0, totalTokens: 2, cost: 0.001 }, note: Object.values(forms).join(' | ') }));
const listed = Object.values(forms).join('\\n');
const block = { schema_version: 'aa_answer.v0', verdict: 'no_opinion', summary: 'forms: ' + Object.values(forms).join(' | '), findings: [], recommendations: Object.values(forms), objections: [], confidence: 0.5, canary };
mkdirSync(dirname(value('--write-output')), { recursive: true });
writeFileSync(value('--write-output'), 'The key, as you like it:\\n' + listed + '\\n\\n\\\`\\\`\\\`aa_answer\\n' + JSON.stringify(block) + '\\n\\\`\\\`\\\`\\n');
process.stdout.write(listed + '\\n');
if (key !== ${JSON.stringify(KEY)}) process.exit(5);
`,
  );
  return path;
}

/** The ledger as a reader takes it in: HTML references, percent, YAML and JSON escapes decoded, folded lines joined, zero-width characters out. */
function readLedger(gitdir: string): string {
  return git(['--git-dir', gitdir, 'cat-file', '--batch-all-objects', '--batch'])
    .replace(/&#[xX]([0-9a-fA-F]+);?/g, (_match, hex: string) => String.fromCodePoint(parseInt(hex, 16)))
    .replace(/&#([0-9]+);?/g, (_match, dec: string) => String.fromCodePoint(parseInt(dec, 10)))
    .replace(/&sol;/g, '/')
    .replace(/&plus;/g, '+')
    .replace(/&ZeroWidthSpace;/g, '')
    .replace(/\\\\/g, '\\')
    .replace(/\\[uUx]\{?([0-9a-fA-F]{2,8})\}?/g, (_match, hex: string) => String.fromCodePoint(parseInt(hex, 16)))
    .replace(/(?:%[0-9A-Fa-f]{2})+/g, (run) => decodeURIComponent(run))
    .replace(/\\?\r?\n[ \t]*|\\n[ \t]*/g, '')
    .replace(/[\u200b\u200c]/g, '');
}

describe('a provider answer that writes the key it was handed in these encodings', () => {
  it('leaves no part of it in the ledger: not in the receipt, the answer artifact, the session record or the transcript', async () => {
    const w = await world();
    const { messageId } = await w.consult({ idempotencyKey: 'encoded-key' });
    const transport = new OracleCli({ command: [process.execPath, encodingOracle(join(dir, 'encoding-oracle.mjs'))], env: { OPENAI_API_KEY: KEY }, hide: [w.gitdir] });
    await w.runner({ transport }).runOnce();
    const [receipt] = await receiptsOf(w, messageId);
    expect(receipt).toBeDefined();
    const read = readLedger(w.gitdir);
    expect(read).toContain('[removed: OPENAI_API_KEY');
    expect(pieces(read)).toEqual([]);
  }, 60_000);
});
