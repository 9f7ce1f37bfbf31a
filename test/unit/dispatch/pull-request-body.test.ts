import { describe, expect, it } from 'vitest';
import { BODY_LIMITS, codeSpan, pullRequestMarker, pullRequestTitle, renderPullRequestBody, type PullRequestEvidence } from '../../../src/dispatch/pull-request-body.js';
import { eaReceipt, type EaReceipt } from '../../../src/schema/receipt.js';

const HEAD = 'c0ffee'.padEnd(40, '0');
const BASE = 'ba5e'.padEnd(40, '1');
const SHA = `sha256:${'5a'.repeat(32)}`;

function receipt(fields: Partial<EaReceipt> = {}): EaReceipt {
  return eaReceipt.parse({
    schema_version: 'ea_receipt.v0',
    message_id: 'msg_01JDX0000000000000000000AB',
    attempt_id: 'ea_attempt_BODY_1',
    attempt_number: 2,
    target_actor: 'ea.codex',
    status: 'succeeded',
    created_at: '2026-12-01T12:00:05Z',
    blockers: [],
    next_attempt_at: null,
    commands_run: ['npm ci', 'npm run build', 'npm test', 'sh test.sh'],
    inner_exit_codes: [0, 0, 0, 0],
    files_changed: ['src/add.js', 'src/old.js'],
    tests_run: ['npm test', 'sh test.sh'],
    head_sha: HEAD,
    executor: 'codex',
    executor_session_id: 'thread-1',
    model: 'gpt-5.5',
    base_sha: 'b'.repeat(40),
    branch: 'coo/body',
    file_hashes: ((fields['files_changed'] as string[] | undefined) ?? ['src/add.js', 'src/old.js']).map((path) => ({ path, sha256: `sha256:${'1'.repeat(64)}` })),
    attachments: [],
    policy_decision_ref: 'trust/policy/000001.yaml@sha256:0',
    usage: null,
    actual_cost_usd: 0,
    warnings: [],
    ...fields,
  });
}

/** The evidence with `fields` replacing its own; a field given as undefined is left out. */
function evidence(fields: { [K in keyof PullRequestEvidence]?: PullRequestEvidence[K] | undefined } = {}): PullRequestEvidence {
  const full: Record<string, unknown> = {
    receipt: receipt(),
    receiptPath: 'receipts/2026/12/01/msg_01JDX0000000000000000000AB/ea_attempt_BODY_1.yaml',
    receiptSha256: SHA,
    receiptCommit: 'def0'.padEnd(40, '2'),
    branch: 'coo/fix-add',
    baseSha: BASE,
    files: [
      { path: 'src/add.js', status: 'modified', sha256: SHA },
      { path: 'src/old.js', status: 'deleted', sha256: null },
    ],
    cost: { usd: 0.0125, reported: false },
    issueNumber: 12,
    acceptance: ['add(2, 3) returns 5', 'ping @octocat <img src=x>'],
    signer: 'SHA256:abc',
    ...fields,
  };
  return Object.fromEntries(Object.entries(full).filter(([, value]) => value !== undefined)) as unknown as PullRequestEvidence;
}

describe('pull request body', () => {
  it('opens with the attempt\'s marker and states actor, message, attempt, status, head, branch, base and issue', () => {
    const body = renderPullRequestBody(evidence());
    const lines = body.split('\n');
    expect(lines[0]).toBe(pullRequestMarker('ea_attempt_BODY_1'));
    expect(lines[0]).toBe('<!-- coo-commons:dispatch ea_attempt_BODY_1 -->');
    expect(body).toContain('**ea.codex** on `msg_01JDX0000000000000000000AB`, attempt 2 (`ea_attempt_BODY_1`): **succeeded**');
    expect(body).toContain(`Head \`${HEAD}\` on \`coo/fix-add\`, base \`${BASE}\`. Refs #12`);
    expect(body).not.toMatch(/\b(closes|fixes|resolves) #/i);
  });

  it('lists each changed file with its status and sha256, the agent\'s commands and the COO\'s verification with their exit codes', () => {
    const body = renderPullRequestBody(evidence());
    expect(body).toContain(`**Files changed (2)**\n- \`src/add.js\` modified, \`${SHA}\`\n- \`src/old.js\` deleted\n`);
    expect(body).toContain('**Commands the agent ran, in order**\n- `npm ci`: exit 0\n- `npm run build`: exit 0\n');
    expect(body).toContain('**Verification, run by the COO in the attempt\'s worktree**\n- `npm test`: exit 0\n- `sh test.sh`: exit 0\n');
  });

  it('gives the receipt\'s ledger path, sha256 and commit, the signed head, and the cost marked estimated when the executor reported no usage', () => {
    const body = renderPullRequestBody(evidence());
    expect(body).toContain(`| receipt | \`receipts/2026/12/01/msg_01JDX0000000000000000000AB/ea_attempt_BODY_1.yaml\` \`${SHA}\` in ledger commit \`def022222222\` |`);
    expect(body).toContain(`| head commit | \`${HEAD}\`, signed by the COO (SSH, key \`SHA256:abc\`)`);
    expect(body).toContain('| cost | $0.0125 (estimated: the executor reported no usage) |');
    expect(renderPullRequestBody(evidence({ cost: { usd: 0.5, reported: true } }))).toContain('| cost | $0.5 |');
    expect(renderPullRequestBody(evidence({ cost: undefined }))).toContain('| cost | not recorded |');
  });

  it('falls back to the receipt\'s paths when the snapshot\'s hashes are not given', () => {
    const body = renderPullRequestBody(evidence({ files: undefined }));
    expect(body).toContain('**Files changed (2)**\n- `src/add.js`\n- `src/old.js`\n');
  });

  it('shows an agent\'s file names and commands as literal code spans that cannot render, mention, break the line or hide behind bidi controls', () => {
    const hostile = ['a`b``c', '@octocat', '<script>x</script>', 'two\nlines', 'evil\u202Etxt.js', '| cell |', '`start', 'end `', ' spaced '];
    const body = renderPullRequestBody(
      evidence({
        receipt: receipt({ commands_run: [...hostile, 'sh test.sh'], inner_exit_codes: hostile.map(() => 0).concat(0), tests_run: ['sh test.sh'] }),
        files: hostile.map((path) => ({ path, sha256: null })),
      }),
    );
    expect(body).toContain('- ```a`b``c```');
    expect(body).toContain('- `@octocat`');
    expect(body).toContain('- `<script>x</script>`');
    // A file's name shows each acting character as its code point, which no path spells (a path holds no backslash); a command as <U+...>.
    expect(body).toContain('- `two\\u000alines`');
    expect(body).toContain('- `evil\\u202etxt.js`');
    expect(body).toContain('- `two<U+000A>lines`: exit 0');
    expect(body).toContain('- `evil<U+202E>txt.js`: exit 0');
    expect(body).toContain('- `\\| cell \\|`');
    expect(body).toContain('- `` `start ``');
    expect(body).toContain('- `` end ` ``');
    expect(body).toContain('- `  spaced  `');
    expect(body).not.toContain('\u202E');
    // Every hostile item stays on one list line of its own.
    expect(body.split('\n').filter((line) => line.startsWith('- ')).length).toBe(hostile.length * 2 + 1 + 2);
  });

  it('names each changed file whole: two long names that share their first 200 characters, and a name that spells a code point, stay apart', () => {
    const stem = `src/${'n'.repeat(250)}`;
    const names = [`${stem}/a.js`, `${stem}/b.js`, 'src/evil<U+202E>.js', 'src/evil\u202E.js'];
    const body = renderPullRequestBody(evidence({ receipt: receipt({ files_changed: names }), files: names.map((path) => ({ path, sha256: SHA })) }));
    const listed = body.split('\n').filter((line) => line.startsWith('- `src/'));
    expect(listed).toEqual([`- \`${stem}/a.js\`, \`${SHA}\``, `- \`${stem}/b.js\`, \`${SHA}\``, `- \`src/evil<U+202E>.js\`, \`${SHA}\``, `- \`src/evil\\u202e.js\`, \`${SHA}\``]);
  });

  it('lists fewer files, never a cut one, when their whole names would not fit the body', () => {
    const files = Array.from({ length: 300 }, (_, i) => ({ path: `${i}/${'\u{E0041}'.repeat(254)}`, sha256: SHA }));
    const body = renderPullRequestBody(evidence({ receipt: receipt({ files_changed: files.map((file) => file.path) }), files }));
    const listed = body.split('\n').filter((line) => /^- `\d+\//.test(line));
    expect(listed.length).toBeGreaterThan(0);
    expect(listed.length).toBeLessThan(BODY_LIMITS.files);
    for (const line of listed) expect(line).toContain('\\u{e0041}'.repeat(254));
    expect(body).toContain(`- and ${300 - listed.length} more (the receipt lists them all)`);
    expect(body.length).toBeLessThan(65_536);
  });

  it('makes the dispatch\'s acceptance criteria inert text', () => {
    const body = renderPullRequestBody(evidence());
    expect(body).toContain('**Acceptance criteria**\n- add\\(2\\, 3\\) returns 5\n- ping \\@\u200boctocat \\<img src\\=x\\>\n');
  });

  it('keeps the largest receipt the schema allows under GitHub\'s 65,536-character body, saying how many items it left out', () => {
    const long = 'x'.repeat(2000);
    const files = Array.from({ length: 10_000 }, (_, i) => ({ path: `${'d/'.repeat(200)}${i}`.slice(-512), sha256: SHA }));
    const body = renderPullRequestBody(
      evidence({
        receipt: receipt({ commands_run: Array.from({ length: 200 }, () => long), inner_exit_codes: Array.from({ length: 200 }, () => 0), files_changed: files.map((file) => file.path), tests_run: Array.from({ length: 100 }, () => long) }),
        files,
        acceptance: Array.from({ length: 100 }, () => long),
        branch: 'b'.repeat(200),
      }),
    );
    expect(body.length).toBeLessThan(65_536);
    const listed = body.split('\n').filter((line) => line.startsWith('- `d/'));
    expect(listed.length).toBeGreaterThan(0);
    expect(listed.length).toBeLessThanOrEqual(BODY_LIMITS.files);
    expect(body).toContain(`- and ${10_000 - listed.length} more (the receipt lists them all)`);
    expect(body).toContain(`- and ${100 - BODY_LIMITS.commands} more (the receipt lists them all)`);
    expect(body).toContain(`- and ${100 - BODY_LIMITS.criteria} more (in the dispatch)`);
  });

  it('stays under GitHub\'s 65,536-character body when every list is as long and as escaped as the schema lets it be', () => {
    const tag = '\u{E0041}';
    const fence = '`'.repeat(200);
    const commands = Array.from({ length: 200 }, () => fence);
    const files = Array.from({ length: 10_000 }, (_, i) => ({ path: `${i}/${tag.repeat(250)}`, sha256: SHA }));
    const body = renderPullRequestBody(
      evidence({
        receipt: receipt({ commands_run: commands, inner_exit_codes: commands.map(() => 0), files_changed: files.map((file) => file.path), tests_run: commands.slice(0, 100) }),
        files,
        acceptance: Array.from({ length: 100 }, () => tag.repeat(1000)),
        branch: fence,
        signer: fence,
      }),
    );
    expect(body.length).toBeLessThan(65_536);
    for (const title of ['**Acceptance criteria**', '**Files changed (10000)**', '**Commands the agent ran, in order**', "**Verification, run by the COO in the attempt's worktree**"]) expect(body).toContain(title);
    const items = body.split('\n').filter((line) => line.startsWith('- ') && !line.startsWith('- and '));
    expect(items.length).toBeGreaterThan(4);
    expect(body.match(/^- and \d+ more/gm)).toHaveLength(4);
  });

  it('renders the same bytes for the same evidence', () => {
    expect(renderPullRequestBody(evidence())).toBe(renderPullRequestBody(evidence()));
  });

  it('titles the pull request on one bounded line', () => {
    expect(pullRequestTitle(receipt())).toBe('ea.codex: work of msg_01JDX0000000000000000000AB (attempt 2)');
    expect(pullRequestTitle(receipt(), 'Fix\nadd()  ')).toBe('Fix add()');
    expect(pullRequestTitle(receipt(), 'Fix \u202Eevil\u202C add()\u{E0041}')).toBe('Fix <U+202E>evil<U+202C> add()<U+E0041>');
    expect([...pullRequestTitle(receipt(), 'y'.repeat(500))].length).toBe(200);
  });

  it('writes code spans CommonMark reads back as the text', () => {
    expect(codeSpan('plain')).toBe('`plain`');
    expect(codeSpan('')).toBe('(empty)');
    expect(codeSpan('x'.repeat(300))).toBe(`\`${'x'.repeat(BODY_LIMITS.codeChars - 1)}…\``);
  });
});
