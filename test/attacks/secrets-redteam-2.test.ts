import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { OracleCli } from '../../src/consult/oracle.js';
import { credentialFileSecrets } from '../../src/util/credential-files.js';
import { Scrubber } from '../../src/util/scrub.js';
import { coo } from '../helpers/cli.js';
import { agentScript, dispatchTo, hostilePlaces, receiptsFor, watchOnce } from '../helpers/hostile-agent.js';
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
  'a zero-width character inside as git quotes a path (octal escapes)': `"src/${KEY.slice(0, 9)}\\342\\200\\213${KEY.slice(9)}.txt"`,
  'every character an octal escape': each(KEY, (char) => `\\${code(char).toString(8).padStart(3, '0')}`),
  'a zero-width character inside as Rust prints it (\\u{200b})': `${KEY.slice(0, 9)}\\u{200b}${KEY.slice(9)}`,
};

describe('a secret written in an encoding a reader decodes', () => {
  for (const [name, form] of Object.entries(FORMS)) {
    it(`is found as ${name}, in text, bytes and a JSON string`, () => {
      const cleaned = scrub.text(`key: ${form} end`);
      expect(cleaned).toContain(MARKER);
      expect(pieces(cleaned)).toEqual([]);
      expect(scrub.bytes(Buffer.from(`key: ${form} end`)).toString('utf8')).toBe(cleaned);
      expect(JSON.parse(scrub.text(JSON.stringify({ text: `key: ${form} end` })))).toEqual({ text: cleaned });
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
const places = hostilePlaces(dir, 'place');

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

describe('a secret the runner keeps in a file, never in its environment', () => {
  /** A provider key `codex login` wrote, a forge token `gh` keeps, a token in ~/.git-credentials. */
  const FILED = { codex: 'sk-proj-FromCodexAuthFile0123456789abcdef', gh: 'gho_FromGhHostsFile0123456789abcdefXYZ', git: 'ghp_GitStoreToken0123456789abcdefQRS' };

  it('is known to the scrubber: an execution agent that reads the files and echoes them leaves no part of them in the ledger', async () => {
    const place = await places('filed-secrets');
    const home = join(place.world.dir, 'operator-home');
    mkdirSync(join(home, '.codex'), { recursive: true });
    mkdirSync(join(home, '.config', 'gh'), { recursive: true });
    writeFileSync(join(home, '.codex', 'auth.json'), JSON.stringify({ OPENAI_API_KEY: FILED.codex, tokens: null }));
    writeFileSync(join(home, '.config', 'gh', 'hosts.yml'), `github.com:\n    user: op\n    oauth_token: ${FILED.gh}\n    git_protocol: https\n`);
    writeFileSync(join(home, '.git-credentials'), `https://op:${FILED.git}@github.com\n`);
    const { messageId } = await dispatchTo(place, 'filed-secrets');
    const files = ['.codex/auth.json', '.config/gh/hosts.yml', '.git-credentials'].map((file) => join(home, file)).join(' ');
    const stream = [
      `printf '%s\\n' '{"type":"thread.started","thread_id":"thread-filed"}'`,
      `printf '{"type":"item.completed","item":{"id":"i2","type":"agent_message","text":"found: %s"}}\\n' "$(cat ${files} | tr -d '"{}\\\\\\n')"`,
      `printf '%s\\n' '{"type":"turn.completed","usage":{"input_tokens":100,"cached_input_tokens":0,"output_tokens":10}}'`,
    ].join('\n');
    const watch = watchOnce(place, agentScript(place.world.dir, 'true', stream), { env: { HOME: home }, isolation: 'none' });
    const [receipt] = await receiptsFor(place, messageId);
    expect(receipt, watch.stderr).toBeDefined();
    const ledger = git(['--git-dir', place.world.gitdir, 'cat-file', '--batch-all-objects', '--batch']);
    expect(ledger).toContain('[removed: codex auth.json]');
    for (const value of Object.values(FILED)) expect(Array.from({ length: value.length - 7 }, (_, at) => value.slice(at, at + 8)).filter((piece) => ledger.includes(piece)), value).toEqual([]);
  }, 120_000);
});

describe('the credential files a runner or the MCP server learns secrets from', () => {
  it('reads a key, a token or a password from each, and no other field nor a word in a secret-named one, in JSON, netrc and npmrc form', () => {
    const home = join(dir, 'credential-home');
    mkdirSync(join(home, '.claude'), { recursive: true });
    writeFileSync(join(home, '.claude', '.credentials.json'), JSON.stringify({ claudeAiOauth: { accessToken: 'sk-ant-oat01-AccessToken0123456789', refreshToken: 'sk-ant-ort01-RefreshToken012345678', scopes: ['user:inference'], subscriptionType: 'professional' } }));
    writeFileSync(join(home, '.claude.json'), JSON.stringify({ primaryApiKey: 'sk-ant-api03-Primary0123456789', keyStatus: 'completed', projects: { '/work/monkey': { allowedTools: ['Bash(git status)'], lastKeyHint: 'a word or two' } } }));
    writeFileSync(join(home, '.netrc'), 'machine api.example.com login operator password NetrcPassword0123456\n');
    writeFileSync(join(home, '.npmrc'), '//registry.npmjs.org/:_authToken=npm_NpmToken0123456789abcdef\nregistry=https://registry.npmjs.org/\n');
    const values = credentialFileSecrets({}, home).map((secret) => `${secret.name}=${secret.value}`);
    expect(values.sort()).toEqual(['.claude.json=sk-ant-api03-Primary0123456789', '.netrc=NetrcPassword0123456', '.npmrc=npm_NpmToken0123456789abcdef', 'claude .credentials.json=sk-ant-oat01-AccessToken0123456789', 'claude .credentials.json=sk-ant-ort01-RefreshToken012345678']);
  });
});

describe('a COO that writes a secret its process holds into what it signs through the CLI', () => {
  it('is refused before anything is written, as the MCP server refuses it: a consult question holding the provider key, as written or in HTML references', async () => {
    const place = await places('cli-question');
    const before = git(['--git-dir', place.world.gitdir, 'rev-parse', 'refs/heads/main']).trim();
    for (const question of [`Why is ${KEY} refused?`, `Why is ${each(KEY, (char) => `&#${code(char)};`)} refused?`]) {
      const result = coo(['consult', '--ledger', place.world.gitdir, '--key', place.keyFile, '--to', 'aa.chatgpt', '--repo', place.repo, '--file', 'src/add.js', '--prompt', question], { env: { OPENAI_API_KEY: KEY } });
      expect(result.status, result.stderr).toBe(2);
      expect(result.stderr).toContain('USAGE');
      expect(result.stderr).not.toContain(KEY.slice(8, 20));
    }
    expect(git(['--git-dir', place.world.gitdir, 'rev-parse', 'refs/heads/main']).trim()).toBe(before);
    // The same question without the key is written.
    expect(coo(['consult', '--ledger', place.world.gitdir, '--key', place.keyFile, '--to', 'aa.chatgpt', '--repo', place.repo, '--file', 'src/add.js', '--prompt', 'Why is my key refused?'], { env: { OPENAI_API_KEY: KEY } }).status).toBe(0);
  }, 60_000);

  it('is refused in a kill switch\'s reason, which its commit message quotes too, the key percent-encoded', async () => {
    const place = await places('cli-kill-switch');
    const before = git(['--git-dir', place.world.gitdir, 'rev-parse', 'refs/heads/main']).trim();
    const result = coo(['kill-switch', 'on', '--ledger', place.world.gitdir, '--key', place.keyFile, '--reason', `leaked ${encodeURIComponent(KEY).replace(/^s/, '%73')}`], { env: { OPENAI_API_KEY: KEY } });
    expect(result.status, result.stderr).toBe(2);
    expect(result.stderr).toContain('commit message');
    expect(git(['--git-dir', place.world.gitdir, 'rev-parse', 'refs/heads/main']).trim()).toBe(before);
  }, 60_000);
});

describe("a token in the URL of a remote of the target repository", () => {
  const TOKEN = 'ghp_RepoRemoteToken0123456789abcdefJKL';

  it('is known to the scrubber: an execution agent that runs git remote -v in its worktree and echoes it leaves no part of the token in the ledger', async () => {
    const place = await places('remote-token');
    git(['remote', 'add', 'origin', `https://x-access-token:${TOKEN}@github.com/acme/work.git`], { cwd: place.repo });
    const { messageId } = await dispatchTo(place, 'remote-token');
    const stream = [
      `printf '%s\\n' '{"type":"thread.started","thread_id":"thread-remote"}'`,
      `printf '{"type":"item.completed","item":{"id":"i2","type":"agent_message","text":"remotes: %s"}}\\n' "$(git remote -v | tr -d '"\\\\\\n\\t')"`,
      `printf '%s\\n' '{"type":"turn.completed","usage":{"input_tokens":100,"cached_input_tokens":0,"output_tokens":10}}'`,
    ].join('\n');
    // Without bubblewrap, which hands the agent the repository's configuration without its credentials: here the agent reads them, and the scrubber must find them.
    const watch = watchOnce(place, agentScript(place.world.dir, 'true', stream), { isolation: 'none' });
    const [receipt] = await receiptsFor(place, messageId);
    expect(receipt, watch.stderr).toBeDefined();
    const ledger = git(['--git-dir', place.world.gitdir, 'cat-file', '--batch-all-objects', '--batch']);
    expect(ledger).toContain('remotes: ');
    expect(Array.from({ length: TOKEN.length - 7 }, (_, at) => TOKEN.slice(at, at + 8)).filter((piece) => ledger.includes(piece))).toEqual([]);
  }, 120_000);
});
