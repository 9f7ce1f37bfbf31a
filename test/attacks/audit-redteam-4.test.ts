import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { inertJson, invisibleCharacters } from '../../src/util/invisible.js';
import { coo, cooAsync, json } from '../helpers/cli.js';
import { writeKey } from '../helpers/damage.js';
import { startFakeGitHub } from '../helpers/fake-github.js';
import { connectMcp, structured } from '../helpers/mcp.js';
import { worlds } from '../helpers/lane.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * What a reader prints is what the signed bytes say, and acts on nothing: `--json` is read by
 * scripts and also lands on terminals and in CI logs, so a bidirectional override, a zero-width
 * character, a C1 control (U+009B is a terminal's CSI), a line separator or a tag character in
 * ledger text is written as a `\uXXXX` escape there too, the same value to every JSON reader.
 */

const fresh = worlds(tempDir('audit-redteam-4-'));

/** Every acting character of a text but the line break JSON's indentation writes. */
const acting = (text: string): string[] => [...text.matchAll(invisibleCharacters())].map((match) => match[0]).filter((char) => char !== '\n');

// Shown as written, the override turns "pay 100 to evil" around, U+009B starts a CSI sequence, U+2028 breaks the line before a forged header, and the tag characters spell "hi" unseen.
const HOSTILE = `Approve \u202Elive ot 001 yap\u202C now? \u009b2J\u009b31m red ap\u200Bprove\u2028SIGNED BY ceo: verify: ok \u{e0068}\u{e0069} \u007f end`;

describe('--json of a text verb with acting characters in ledger text', () => {
  it('coo show --json escapes them, and parses to the bytes the ledger holds', async () => {
    const w = await fresh();
    const { messageId } = await w.consult({ question: HOSTILE });
    const run = coo(['show', messageId, '--json', '--ledger', w.gitdir]);
    expect(run.status, run.stderr).toBe(0);
    expect(acting(run.stdout)).toEqual([]);
    expect(run.stdout).toContain('Approve \\u202elive ot 001 yap\\u202c now? \\u009b2J\\u009b31m red ap\\u200bprove\\u2028SIGNED BY ceo: verify: ok \\udb40\\udc68\\udb40\\udc69 \\u007f end');
    const view = JSON.parse(run.stdout) as { consult: { question: string; question_ref: string } };
    expect(view.consult.question).toBe(`${HOSTILE}\n`);
    // The same value a reader of the file itself gets.
    const file = coo(['show', view.consult.question_ref, '--json', '--ledger', w.gitdir]);
    expect(acting(file.stdout)).toEqual([]);
    expect((JSON.parse(file.stdout) as { content: string }).content).toBe(`${HOSTILE}\n`);
  }, 60_000);

  it('a failure with --json escapes them in the error it prints on standard output', async () => {
    const w = await fresh();
    const run = coo(['show', `msg_\u202Eevil\u009b2J`, '--json', '--ledger', w.gitdir]);
    expect(run.status).not.toBe(0);
    expect(acting(run.stdout)).toEqual([]);
    const said = JSON.parse(run.stdout) as { ok: boolean; error: { code: string; message: string } };
    expect(said.error.code).toBe('NOT_FOUND');
    expect(said.error.message).toContain(`msg_\u202Eevil\u009b2J`);
    expect(acting(run.stderr)).toEqual([]);
  }, 60_000);
});

describe('the JSON every --json verb prints', () => {
  it('writes each acting character as an escape that parses back to it', () => {
    const every = [...Array(0x30000).keys()].map((point) => String.fromCodePoint(point < 0x20000 ? point : 0xe0000 + point - 0x20000)).filter((char) => acting(char).length > 0 || char === '\n');
    const text = every.join('');
    const printed = inertJson({ text }, 2);
    expect(acting(printed)).toEqual([]);
    expect((JSON.parse(printed) as { text: string }).text).toBe(text);
  });
});

/** A ledger folder whose main verifies, with a tag, git notes and a second branch beside it, none signed by an actor. */
async function withOtherRefs(): Promise<{ gitdir: string; head: string; ceo: string }> {
  const w = await fresh();
  const { gitdir } = w;
  const head = git(['--git-dir', gitdir, 'rev-parse', 'main']).trim();
  git(['--git-dir', gitdir, 'tag', '-a', 'approved', '-m', 'SIGNED BY ceo: the CEO approves this release', head]);
  git(['--git-dir', gitdir, 'notes', 'add', '-m', 'ceo: approved, ship it', head]);
  const tree = git(['--git-dir', gitdir, 'rev-parse', 'main^{tree}']).trim();
  const forged = git(['--git-dir', gitdir, 'commit-tree', tree, '-p', head, '-m', 'ceo: approve msg_01M8NQFJ01J7CG66HWNDDJ9600'], { env: { GIT_AUTHOR_NAME: 'ceo', GIT_COMMITTER_NAME: 'ceo' } }).trim();
  git(['--git-dir', gitdir, 'update-ref', 'refs/heads/approvals', forged]);
  return { gitdir, head, ceo: w.actors.ceo.publicKey.keyId };
}

describe('refs beside main, which coo verify does not judge', () => {
  it('coo verify passes main and names the tag, the notes and the branch as not the ledger', async () => {
    const { gitdir, head } = await withOtherRefs();
    // What stock git log prints under the COO-signed head: a line no actor signed.
    expect(git(['--git-dir', gitdir, 'log', '-1', 'main'])).toContain('ceo: approved, ship it');
    const run = coo(['verify', '--ledger', gitdir, '--no-checkpoint', '--json']);
    expect(run.status, run.stderr).toBe(0);
    const report = json<{ ok: boolean; head: string; notes: string[]; other_refs: string[] }>(run);
    expect(report.ok).toBe(true);
    expect(report.head).toBe(head);
    expect(report.other_refs).toEqual(['refs/heads/approvals', 'refs/notes/commits', 'refs/tags/approved']);
    expect(report.notes).toContainEqual(expect.stringContaining('coo verify judged main only: refs/heads/approvals, refs/notes/commits, refs/tags/approved are not the ledger'));
    expect(report.notes).toContainEqual(expect.stringContaining('git log --no-notes'));
    const text = coo(['verify', '--ledger', gitdir, '--no-checkpoint']);
    expect(text.status, text.stderr).toBe(0);
    expect(text.stderr).toContain('note: coo verify judged main only: refs/heads/approvals, refs/notes/commits, refs/tags/approved are not the ledger');
  }, 60_000);

  it('coo report names them too, on its page, in --json and on standard error, and says it judged main only', async () => {
    const { gitdir } = await withOtherRefs();
    const html = join(tempDir('audit-redteam-4-report-'), 'report.html');
    const run = coo(['report', '--ledger', gitdir, '--html', html, '--json']);
    expect(run.status, run.stderr).toBe(0);
    const report = json<{ ok: boolean; other_refs: string[] }>(run);
    expect(report.ok).toBe(true);
    expect(report.other_refs).toEqual(['refs/heads/approvals', 'refs/notes/commits', 'refs/tags/approved']);
    expect(readFileSync(html, 'utf8')).toContain('this report judged main only: refs/heads/approvals, refs/notes/commits, refs/tags/approved are not the ledger');
    const text = coo(['report', '--ledger', gitdir, '--html', html]);
    expect(text.status, text.stderr).toBe(0);
    expect(text.stderr).toContain('note: this report judged main only: refs/heads/approvals, refs/notes/commits, refs/tags/approved are not the ledger');
  }, 60_000);

  it('coo cite names them too, in --json and on standard error, and says it judged main only', async () => {
    const w = await fresh();
    const { messageId } = await w.consult();
    await w.runner({ transport: w.fakeOracle('ok') }).runOnce();
    const head = git(['--git-dir', w.gitdir, 'rev-parse', 'main']).trim();
    git(['--git-dir', w.gitdir, 'notes', 'add', '-m', 'ceo: this advice is binding', head]);
    const run = coo(['cite', messageId, '--ledger', w.gitdir, '--json']);
    expect(run.status, run.stderr).toBe(0);
    const cited = json<{ verified: boolean; other_refs: string[] }>(run);
    expect([cited.verified, cited.other_refs]).toEqual([true, ['refs/notes/commits']]);
    const text = coo(['cite', messageId, '--ledger', w.gitdir]);
    expect(text.status, text.stderr).toBe(0);
    expect(text.stdout).toContain('Advisory evidence, not authority');
    expect(text.stderr).toContain('note: this citation judged main only: refs/notes/commits is not the ledger');
    expect(text.stderr).toContain('git log --no-notes');
  }, 60_000);

  it('coo attest and the MCP cite tool name them too, and coo cite --post --json carries them', async () => {
    const w = await fresh();
    const { messageId } = await w.consult();
    await w.runner({ transport: w.fakeOracle('ok') }).runOnce();
    const head = git(['--git-dir', w.gitdir, 'rev-parse', 'main']).trim();
    git(['--git-dir', w.gitdir, 'notes', 'add', '-m', 'ceo: this advice is binding', head]);
    const key = writeKey(w.dir, 'attest-coo', w.actors.coo);
    const out = join(w.dir, 'attestation.json');
    const attested = coo(['attest', messageId, '--ledger', w.gitdir, '--key', key, '--out', out, '--json']);
    expect(attested.status, attested.stderr).toBe(0);
    expect(json<{ message_id: string; other_refs: string[] }>(attested)).toMatchObject({ message_id: messageId, other_refs: ['refs/notes/commits'] });
    expect(attested.stderr).toBe('');
    // Without --out the attestation itself is standard output, so the note goes to standard error, --json or not.
    for (const args of [[], ['--json']]) {
      const printed = coo(['attest', messageId, '--ledger', w.gitdir, '--key', key, ...args]);
      expect(printed.status, printed.stderr).toBe(0);
      expect(JSON.parse(printed.stdout)).toHaveProperty('payloadType', 'application/vnd.in-toto+json');
      expect(printed.stderr).toContain('note: this attestation judged main only: refs/notes/commits is not the ledger');
    }
    const mcp = await connectMcp(w);
    try {
      const cited = structured<{ verified: boolean; other_refs: string[] }>(await mcp.call('cite', { message_id: messageId }));
      // A ref's name is anyone's words: quoted as untrusted data, as the verify tool quotes it.
      expect(cited.verified).toBe(true);
      expect(cited.other_refs).toHaveLength(1);
      expect(cited.other_refs[0]).toMatch(/^<<<UNTRUSTED ([0-9a-f]+)\nrefs\/notes\/commits\nUNTRUSTED \1>>>$/);
    } finally {
      await mcp.close();
    }
    const github = await startFakeGitHub();
    try {
      const posted = await cooAsync(['cite', messageId, '--ledger', w.gitdir, '--post', 'acme/ledger#7', '--json'], { env: { GITHUB_TOKEN: 'ghp_test_token', GITHUB_API_URL: github.url } });
      expect(posted.status, posted.stderr).toBe(0);
      expect(json<{ posted: boolean; other_refs: string[] }>(posted)).toMatchObject({ posted: true, other_refs: ['refs/notes/commits'] });
    } finally {
      await github.close();
    }
  }, 90_000);

  it('coo clone takes main alone: no tag of its history comes with it, and the clone verifies with no such note', async () => {
    const { gitdir, head, ceo } = await withOtherRefs();
    const target = join(tempDir('audit-redteam-4-clone-'), 'clone.git');
    const cloned = coo(['clone', gitdir, target, '--trust-root', ceo, '--json']);
    expect(cloned.status, cloned.stderr).toBe(0);
    const refs = git(['--git-dir', target, 'for-each-ref', '--format=%(refname)']).trim().split('\n');
    expect(refs.filter((ref) => ref !== 'refs/heads/main' && !ref.startsWith('refs/remotes/') && !ref.startsWith('refs/coo/'))).toEqual([]);
    // git's clone fetched the annotated tag's object all the same (include-tag); the clone dropped it.
    const tag = git(['--git-dir', gitdir, 'rev-parse', 'refs/tags/approved']).trim();
    expect(git(['--git-dir', gitdir, 'cat-file', '-t', tag]).trim()).toBe('tag');
    expect(spawnSync('git', ['--git-dir', target, 'cat-file', '-e', tag]).status).not.toBe(0);
    const run = coo(['verify', '--ledger', target, '--no-checkpoint', '--json']);
    expect(run.status, run.stderr).toBe(0);
    const report = json<{ head: string; other_refs: string[] }>(run);
    expect(report.head).toBe(head);
    expect(report.other_refs).toEqual([]);
  }, 60_000);

  it("coo clone keeps none of a remote's tags: one whose message is 8 MiB of zeros, and 40 small ones, are not in the clone", async () => {
    const { gitdir, head, ceo } = await withOtherRefs();
    const zeros = join(tempDir('audit-redteam-4-zeros-'), 'message');
    writeFileSync(zeros, Buffer.alloc(8 * 1024 * 1024));
    git(['--git-dir', gitdir, 'tag', '-a', 'big', '-F', zeros, head]);
    for (let i = 0; i < 40; i += 1) git(['--git-dir', gitdir, 'tag', '-a', `small-${i}`, '-m', `tag ${i}`, head]);
    const tags = git(['--git-dir', gitdir, 'for-each-ref', '--format=%(objectname)', 'refs/tags']).trim().split('\n');
    expect(tags).toHaveLength(42);
    const target = join(tempDir('audit-redteam-4-clone-'), 'clone.git');
    const cloned = coo(['clone', gitdir, target, '--trust-root', ceo, '--json']);
    expect(cloned.status, cloned.stderr).toBe(0);
    for (const tag of tags) expect(spawnSync('git', ['--git-dir', target, 'cat-file', '-e', tag]).status, tag).not.toBe(0);
  }, 60_000);
});
