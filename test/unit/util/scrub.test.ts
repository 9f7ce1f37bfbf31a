import { homedir } from 'node:os';
import { describe, expect, it } from 'vitest';
import { formatPrivateKey, generatePrivateKey } from '../../../src/crypto/keys.js';
import { displayUrl, withoutUserInfo } from '../../../src/util/display-url.js';
import { environmentSecrets, privateKeySecrets, runnerPlaces, Scrubber } from '../../../src/util/scrub.js';

const KEY = 'sk-live-0123456789abcdef';

describe('the scrubber', () => {
  it('replaces a secret with a marker that names it, in text, bytes and nested values', () => {
    const scrub = new Scrubber([{ name: 'OPENAI_API_KEY', value: KEY }]);
    expect(scrub.text(`Incorrect API key provided: ${KEY}.`)).toBe('Incorrect API key provided: [removed: OPENAI_API_KEY].');
    expect(scrub.bytes(Buffer.from(`{"error":"${KEY}"}\n`)).toString()).toBe('{"error":"[removed: OPENAI_API_KEY]"}\n');
    expect(scrub.value({ a: [KEY, 1, null], [KEY]: Buffer.from(KEY), at: new Date(0) })).toEqual({ a: ['[removed: OPENAI_API_KEY]', 1, null], '[removed: OPENAI_API_KEY]': Buffer.from('[removed: OPENAI_API_KEY]'), at: new Date(0) });
  });

  it('finds a secret holding a quote, a backslash or a control character as JSON escapes it', () => {
    const odd = 'k"e\\y\u0001-0123456789';
    const scrub = new Scrubber([{ name: 'TOKEN', value: odd }]);
    const json = JSON.stringify({ said: `the key ${odd} is wrong` });
    expect(json).not.toContain(odd);
    const cleaned = scrub.text(json);
    expect(cleaned).not.toContain(JSON.stringify(odd).slice(1, -1));
    expect(JSON.parse(cleaned)).toEqual({ said: 'the key [removed: TOKEN] is wrong' });
    expect(scrub.value({ said: odd })).toEqual({ said: '[removed: TOKEN]' });
  });

  it('makes a folder of the runner relative to the place it names, and only where its name ends', () => {
    const scrub = new Scrubber([], [
      { name: 'runner-state', path: '/home/op/.local/state/coo' },
      { name: 'sandbox', path: '/home/op/.local/state/coo/sandboxes/aa_1/' },
      { name: 'home', path: '/home/op' },
    ]);
    expect(scrub.text('cwd=/home/op/.local/state/coo/sandboxes/aa_1/work/README.md')).toBe('cwd=[sandbox]/work/README.md');
    expect(scrub.text('/home/op/.local/state/coo/journal /home/op/x /home/opal /home/op')).toBe('[runner-state]/journal [home]/x /home/opal [home]');
    const root = new Scrubber([], [{ name: 'home', path: '/root' }]);
    expect(root.text('trust/root/000001.yaml at /root/x and "/root"')).toBe('trust/root/000001.yaml at [home]/x and "[home]"');
    // A path on the next line of a command's output, inside a JSON event: after the escape \n.
    expect(root.text(JSON.stringify({ out: 'ok\n/root/work\n' }))).toBe('{"out":"ok\\n[home]/work\\n"}');
  });

  it('leaves bytes that are not UTF-8 as they were, and returns the same buffer when nothing was found', () => {
    const scrub = new Scrubber([{ name: 'K', value: KEY }]);
    const binary = Buffer.from([0xff, 0xfe, 0x00, ...Buffer.from(KEY), 0xc3]);
    expect([...scrub.bytes(binary)]).toEqual([0xff, 0xfe, 0x00, ...Buffer.from('[removed: K]'), 0xc3]);
    const clean = Buffer.from('nothing here');
    expect(scrub.bytes(clean)).toBe(clean);
  });

  it('ignores values too short to be told from ordinary text', () => {
    const scrub = new Scrubber([{ name: 'K', value: 'abc' }], [{ name: 'root', path: '/' }]);
    expect(scrub.text('abc / abc')).toBe('abc / abc');
  });

  it('takes provider keys and tokens from an environment, and nothing else', () => {
    expect(environmentSecrets({ OPENAI_API_KEY: 'sk-live-123456', GITHUB_TOKEN: 'ghp_abcdefgh', HOME: '/home/op', SHORT_KEY: 'abc' }).map((secret) => secret.name).sort()).toEqual(['GITHUB_TOKEN', 'OPENAI_API_KEY']);
  });

  it("removes a private key's secret part from any file of it, whole or line by line, and its seed", () => {
    const key = generatePrivateKey('coo.hermes');
    const scrub = new Scrubber(privateKeySecrets(key));
    const file = formatPrivateKey(key);
    const cleaned = scrub.text(file);
    const lines = file.split('\n').slice(1, -2);
    // The first lines hold the public half and the check integers; every line from the secret half on is gone.
    expect(cleaned).not.toContain(lines[lines.length - 1]!);
    expect(cleaned).toContain('[removed: coo key]');
    expect(cleaned).not.toContain(Buffer.from(key.seed).toString('hex'));
    const other = formatPrivateKey(key);
    expect(scrub.text(other.split('\n').join(''))).not.toContain(other.split('\n').slice(1, -2).join('').slice(-100));
    expect(scrub.text(Buffer.from(key.seed).toString('hex'))).toBe('[removed: coo key]');
  });

  it("names the runner's folders, the user's home last", () => {
    expect(runnerPlaces({ stateDir: '/s', ledger: '/l', repo: '/r', hidden: ['/k'] }).map((place) => place.name)).toEqual(['runner-state', 'ledger', 'repo', 'hidden', 'home']);
    expect(runnerPlaces({ stateDir: '/s', ledger: '/l', repo: '/r' }).at(-1)!.path).toBe(homedir());
  });
});

describe('a remote URL shown to people and machines', () => {
  it('has the user info that can carry a credential removed: all of it over http(s), the password over ssh', () => {
    expect(displayUrl('http://user:TOKEN@127.0.0.1:8080/L.git')).toBe('http://127.0.0.1:8080/L.git');
    expect(displayUrl('https://x-access-token:ghs_abc@github.com/o/r.git')).toBe('https://github.com/o/r.git');
    expect(displayUrl('ssh://git@host:22/srv/L.git')).toBe('ssh://git@host:22/srv/L.git');
    expect(displayUrl('ssh://git:secret@host/srv/L.git')).toBe('ssh://git@host/srv/L.git');
    expect(displayUrl('https://ghp_TokenAsUserName@github.com/o/r.git')).toBe('https://github.com/o/r.git');
    expect(displayUrl('https://a%40b:p@ss@host/L.git')).toBe('https://host/L.git');
    expect(displayUrl('git@github.com:o/r.git')).toBe('git@github.com:o/r.git');
    expect(displayUrl('/srv/ledger.git')).toBe('/srv/ledger.git');
  });

  it("is removed from git's own messages, wherever the URL stands in them", () => {
    expect(withoutUserInfo("fatal: unable to access 'http://user:TOKEN@127.0.0.1:1/L.git/': Failed to connect")).toBe("fatal: unable to access 'http://127.0.0.1:1/L.git/': Failed to connect");
    expect(withoutUserInfo('from https://u:p@a/x and http://v:q@b/y and ssh://git:s@c/z')).toBe('from https://a/x and http://b/y and ssh://git@c/z');
  });
});
