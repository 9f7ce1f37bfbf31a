import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { CommitCheck } from '../../src/authority/commit-check.js';
import { emptyState } from '../../src/authority/state.js';
import { isCooError } from '../../src/errors.js';
import { GIT_NAMESPACE, parseSshsig, signSshsig } from '../../src/crypto/sshsig.js';
import type { CommitFacts } from '../../src/ledger/commit-facts.js';
import { ledgerMessage, parseCommit, parseSeq } from '../../src/ledger/commit-format.js';
import { readStrictYaml } from '../../src/schema/strict-yaml.js';
import { attack, firstOr, useKit, type Kit } from '../helpers/attack-kit.js';
import { coo, json } from '../helpers/cli.js';
import { codeOf } from '../helpers/codes.js';
import { loadWithPyYaml } from '../helpers/pyyaml.js';
import { FIXTURE_TASK, fixtureEnvelope } from '../helpers/stock.js';
import { run, tempDir } from '../helpers/tmp.js';

/**
 * What outside readers and stock tools see of a signed entry against what coo accepted: an auditor
 * who loads an entry with PyYAML (YAML 1.1) must read the values coo validated, or be refused by
 * coo first, never read another actor, another count or another key.
 */
const dir = tempDir();
const getKit = useKit(dir);
let kit: Kit;
beforeAll(() => {
  kit = getKit();
});

let n = 0;
const nextId = (): string => `msg_01M8NQFJ01J7CG66HWNDDJ${String(9600 + (n += 1)).padStart(4, '0')}`;
const folder = (id: string): string => `messages/2026-11/30/07/${id}`;

/** What PyYAML reads from `text`: the value, or `{ error }`. */
function pyLoad(text: string): unknown {
  const [loaded] = loadWithPyYaml([text]);
  return 'value' in loaded! ? loaded.value : { error: loaded!.error };
}

/** A fixture dispatch whose text `edit` changed, pushed by the COO with stock git and ssh-keygen through the hook. */
async function pushEnvelope(edit: (text: string) => string): Promise<string> {
  const id = nextId();
  return kit.push({ [`${folder(id)}/envelope.yaml`]: edit(fixtureEnvelope(id, id)), [`${folder(id)}/prompt.md`]: FIXTURE_TASK }, { key: kit.keys.coo.file });
}

/** The same commit written behind the hook: the first finding of `coo verify`, or 'accepted'. */
async function verifyEnvelope(edit: (text: string) => string, wanted: string): Promise<string> {
  const id = nextId();
  let code = '';
  await kit.bypass({ [`${folder(id)}/envelope.yaml`]: edit(fixtureEnvelope(id, id)), [`${folder(id)}/prompt.md`]: FIXTURE_TASK }, { key: kit.keys.coo.file }, () => {
    code = firstOr(kit.verifyCodes(), wanted);
  });
  return code;
}

/** `coo append` of a fixture dispatch edited by `edit`: the code, or 'accepted'. */
function appendEnvelope(edit: (text: string) => string): string {
  const id = nextId();
  mkdirSync(join(dir, id));
  const file = join(dir, id, 'envelope.yaml');
  writeFileSync(file, edit(fixtureEnvelope(id, id)));
  writeFileSync(join(dir, id, 'prompt.md'), FIXTURE_TASK);
  const result = coo(['append', '--ledger', kit.world.gitdir, '--key', kit.keys.coo.file, file, join(dir, id, 'prompt.md'), '--json']);
  if (result.status === 0) return 'accepted';
  return json<{ error: { code: string } }>(result).error.code;
}

/** The target line followed, after a comment, by a YAML 1.1 line break and a second target. */
const hiddenTarget = (lineBreak: string) => (text: string): string => text.replace('target_actor: ea.codex\n', `target_actor: ea.codex # routine${lineBreak}target_actor: ea.intruder\n`);

describe('characters that are line breaks to a YAML 1.1 reader and content to coo', () => {
  it('PyYAML reads a second target where coo reads a comment', () => {
    for (const lineBreak of ['\u2028', '\u2029', '\u0085', '\r']) {
      const text = hiddenTarget(lineBreak)(fixtureEnvelope('msg_01M8NQFJ01J7CG66HWNDDJ9600', 'k'));
      expect((pyLoad(text) as { target_actor: string }).target_actor).toBe('ea.intruder');
    }
  });

  attack('a dispatch whose comment hides a second target behind U+2028', 'hook', 'YAML_SYNTAX', () => pushEnvelope(hiddenTarget('\u2028')));
  attack('a dispatch whose comment hides a second target behind NEL (U+0085)', 'hook', 'YAML_SYNTAX', () => pushEnvelope(hiddenTarget('\u0085')));
  attack('a dispatch whose comment hides a second target behind a lone carriage return', 'hook', 'YAML_SYNTAX', () => pushEnvelope(hiddenTarget('\r')));
  attack('a dispatch whose comment hides a second target behind U+2029, written behind the hook', 'verify', 'YAML_SYNTAX', () => verifyEnvelope(hiddenTarget('\u2029'), 'YAML_SYNTAX'));
  attack('a dispatch whose comment hides a second target behind U+2028, through coo append', 'cli', 'YAML_SYNTAX', () => appendEnvelope(hiddenTarget('\u2028')));

  attack('a verification command list that is one command to coo and two to PyYAML', 'hook', 'YAML_SYNTAX', async () => {
    const edit = (text: string): string => text.replace('verification_commands: [npm test]', 'verification_commands:\n    - npm test # quick\u2028    - npm run deploy');
    expect((pyLoad(edit(fixtureEnvelope('msg_01M8NQFJ01J7CG66HWNDDJ9600', 'k'))) as { dispatch: { verification_commands: string[] } }).dispatch.verification_commands).toEqual(['npm test', 'npm run deploy']);
    return pushEnvelope(edit);
  });

  attack('a branch name whose NEL PyYAML folds to a space inside double quotes', 'hook', 'YAML_SYNTAX', async () => {
    const edit = (text: string): string => text.replace('branch_name: coo/issue-62', 'branch_name: "coo/issue-62\u0085x"');
    expect((pyLoad(edit(fixtureEnvelope('msg_01M8NQFJ01J7CG66HWNDDJ9600', 'k'))) as { dispatch: { branch_name: string } }).dispatch.branch_name).toBe('coo/issue-62 x');
    return pushEnvelope(edit);
  });
});

describe('characters no YAML version allows, which PyYAML refuses', () => {
  for (const [name, character] of [
    ['NUL', '\u0000'],
    ['an escape character', '\u001b'],
    ['DEL', '\u007f'],
    ['a C1 control', '\u009b'],
    ['the non-character U+FFFE', '\ufffe'],
  ] as const) {
    attack(`a dispatch whose comment holds ${name}`, 'hook', 'YAML_SYNTAX', async () => {
      const edit = (text: string): string => text.replace('max_hops: 3\n', `max_hops: 3 # ${character}\n`);
      expect(pyLoad(edit(fixtureEnvelope('msg_01M8NQFJ01J7CG66HWNDDJ9600', 'k')))).toEqual({ error: expect.stringContaining('unacceptable character') });
      return pushEnvelope(edit);
    });
  }
});

describe('plain strings a YAML 1.1 reader reads as another type, in new entries', () => {
  attack('a verification command written off: the string to coo, false to PyYAML', 'hook', 'YAML_NON_JSON', async () => {
    const edit = (text: string): string => text.replace('verification_commands: [npm test]', 'verification_commands: [npm test, off]');
    expect((pyLoad(edit(fixtureEnvelope('msg_01M8NQFJ01J7CG66HWNDDJ9600', 'k'))) as { dispatch: { verification_commands: unknown[] } }).dispatch.verification_commands).toEqual(['npm test', false]);
    return pushEnvelope(edit);
  });

  attack('an idempotency key written 1:20: the string to coo, 80 to PyYAML', 'hook', 'YAML_NON_JSON', async () => {
    const edit = (text: string): string => text.replace(/^idempotency_key: .*$/m, 'idempotency_key: 1:20');
    expect((pyLoad(edit(fixtureEnvelope('msg_01M8NQFJ01J7CG66HWNDDJ9600', 'k'))) as { idempotency_key: unknown }).idempotency_key).toBe(80);
    return pushEnvelope(edit);
  });

  attack('a creation time written plain, a datetime and no string to PyYAML, through coo append', 'cli', 'YAML_NON_JSON', () =>
    appendEnvelope((text) => text.replace('created_at: "2026-11-30T07:00:00Z"', 'created_at: 2026-11-30T07:00:00Z')),
  );

  it('appends the unedited dispatch through coo append, so the refusals above are the edits', () => {
    expect(appendEnvelope((text) => text)).toBe('accepted');
  });

  attack('a tab between a key and its value, which PyYAML refuses', 'hook', 'YAML_SYNTAX', async () => {
    const edit = (text: string): string => text.replace('max_hops: 3', 'max_hops:\t3');
    expect(pyLoad(edit(fixtureEnvelope('msg_01M8NQFJ01J7CG66HWNDDJ9600', 'k')))).toEqual({ error: expect.stringContaining('while scanning') });
    return pushEnvelope(edit);
  });

  it('still verifies history that holds such a plain string: entries written before the writer quoted keep their bytes', async () => {
    let codes: string[] = [];
    await kit.bypass(
      (() => {
        const id = nextId();
        return { [`${folder(id)}/envelope.yaml`]: fixtureEnvelope(id, id).replace('verification_commands: [npm test]', 'verification_commands: [npm test, off]'), [`${folder(id)}/prompt.md`]: FIXTURE_TASK };
      })(),
      { key: kit.keys.coo.file },
      () => {
        codes = kit.verifyCodes();
      },
    );
    expect(codes).toEqual([]);
  });

  it('holds the manifests and proposals a new commit adds beside its entries to the same rule, and history not', () => {
    const facts = { oid: '0'.repeat(40) } as unknown as CommitFacts;
    const text = Buffer.from('schema_version: context_manifest.v0\nsnapshot_of: off\n');
    expect(codeOf(() => new CommitCheck(emptyState(), facts, new Date()).readArtifact('context_manifest.v0', text, 'manifest.yaml'))).toBe('YAML_NON_JSON');
    expect(codeOf(() => new CommitCheck(emptyState(), facts, null).readArtifact('context_manifest.v0', text, 'manifest.yaml'))).toBe('SCHEMA_INVALID');
  });

  it('takes the same entry with the string double-quoted, which PyYAML reads as coo does', async () => {
    const edit = (text: string): string => text.replace('verification_commands: [npm test]', 'verification_commands: [npm test, "off"]');
    expect((pyLoad(edit(fixtureEnvelope('msg_01M8NQFJ01J7CG66HWNDDJ9600', 'k'))) as { dispatch: { verification_commands: unknown[] } }).dispatch.verification_commands).toEqual(['npm test', 'off']);
    expect(await pushEnvelope(edit)).toBe('accepted');
  });
});

describe('any document coo accepts reads to the same value in PyYAML', () => {
  it('holds for edits of a dispatch with line breaks, controls and YAML indicators', () => {
    const base = fixtureEnvelope('msg_01M8NQFJ01J7CG66HWNDDJ9600', 'k');
    const unit = fc.constantFrom('\u0085', '\u2028', '\u2029', '\r', '\r\n', '\n', '\u0000', '\u0007', '\u007f', '\u0090', '\ufffe', '\ufeff', '\u00a0', ' ', '#', ':', '-', '"', 'a', 'b: c');
    const edits = fc.sample(fc.tuple(fc.nat({ max: base.length - 1 }), fc.nat({ max: 2 }), fc.array(unit, { minLength: 1, maxLength: 4 })), { numRuns: 600, seed: 6 });
    const texts = edits.map(([at, remove, parts]) => base.slice(0, at) + parts.join('') + base.slice(at + remove));
    const loaded = loadWithPyYaml(texts);
    let accepted = 0;
    texts.forEach((text, index) => {
      let value: unknown;
      try {
        value = readStrictYaml(Buffer.from(text), 'x.yaml');
      } catch (error) {
        if (!isCooError(error)) throw error;
        return;
      }
      accepted += 1;
      expect(loaded[index], JSON.stringify(text)).toEqual({ value });
    });
    // The edits reach both outcomes: some documents are accepted and compared, the rest refused.
    expect(accepted).toBeGreaterThan(50);
    expect(accepted).toBeLessThan(texts.length);
  });
});

describe('commits git fsck refuses and git verify-commit does not check', () => {
  /** Re-signs the head's commit with its own signer after `mutate` changed its payload; the code coo verify finds, or 'accepted'. */
  async function verifyResigned(mutate: (payload: string) => string, fsckSays: string): Promise<string> {
    const signers = [kit.keys.ceo, kit.keys.coo, kit.keys.codex];
    let code = '';
    await kit.rewriteHead(
      (raw) => {
        const parsed = parseCommit(Buffer.from(raw));
        const signer = signers.find((item) => item.key.publicKey.keyId === parseSshsig(parsed.gpgsig).publicKey.keyId)!;
        const payload = mutate(parsed.payload.toString('utf8'));
        const split = payload.indexOf('\n\n');
        const armored = signSshsig(signer.key, Buffer.from(payload), GIT_NAMESPACE);
        return `${payload.slice(0, split)}\ngpgsig ${armored.replace(/\n$/, '').split('\n').join('\n ')}${payload.slice(split)}`;
      },
      () => {
        expect(run('git', ['--git-dir', kit.world.gitdir, 'fsck', '--no-dangling']).stderr).toContain(fsckSays);
        code = firstOr(kit.verifyCodes(), 'COMMIT_MALFORMED');
      },
    );
    return code;
  }

  attack('a commit whose committer date is zero-padded', 'verify', 'COMMIT_MALFORMED', () => verifyResigned((payload) => payload.replace(/^(committer .*> )(\d+)/m, '$10$2'), 'zeroPaddedDate'));
  attack('a commit whose message hides its Ledger-Seq from git log behind a NUL', 'verify', 'COMMIT_MALFORMED', () => verifyResigned((payload) => payload.replace(/\n\n/, '\n\nsummary\u0000'), 'nulInCommit'));

  it('writes a summary with a NUL or another control as spaces, in a message the parser takes', () => {
    expect(ledgerMessage('a\u0000b\tc\r\nd', 7)).toBe('a b c d\n\nLedger-Seq: 7\n');
    expect(parseSeq(ledgerMessage('a\u0000b', 7))).toBe(7);
  });
});
