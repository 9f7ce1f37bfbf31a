import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect } from 'vitest';
import { attack } from '../helpers/attack-kit.js';
import { coo } from '../helpers/cli.js';
import { agentScript, dispatchTo, FIX, hostilePlaces, receiptsFor, watchOnce, type HostilePlace } from '../helpers/hostile-agent.js';
import { git, gitEnv, tempDir } from '../helpers/tmp.js';

/**
 * The dispatch lane against a hostile execution agent, round twenty-eight: an agent that leaves a
 * process rewriting its work while the runner reads it, and work named so that what `coo show` says
 * of it names no one file. Each agent is a script in place of the executor that does one hostile
 * thing, under bubblewrap; each case judges the receipt, then what `coo verify`, `coo attest` or
 * `coo show` say of it.
 */

const dir = tempDir('dispatch-redteam-28');

async function attempted(where: HostilePlace, name: string, action: string) {
  const { messageId } = await dispatchTo(where, name);
  const watch = watchOnce(where, agentScript(where.world.dir, action), { timeoutMs: 40_000 });
  const [receipt] = watch.hung ? [] : await receiptsFor(where, messageId);
  return { messageId, receipt, unreceipted: watch.hung ? 'hung' : `no receipt (exit ${watch.status}) ${watch.stderr.slice(-300)}` };
}

const sha256 = (bytes: Buffer): string => `sha256:${createHash('sha256').update(bytes).digest('hex')}`;

/** A blob of the target at `commit`, as git holds it; null when the commit holds no file there. */
function blobAt(where: HostilePlace, commit: string, path: string): Buffer | null {
  const listed = git(['ls-tree', '-z', commit, '--', path], { cwd: where.repo });
  if (listed === '') return null;
  const oid = listed.split('\t')[0]!.split(' ')[2]!;
  return execFileSync('git', ['cat-file', 'blob', oid], { cwd: where.repo, env: gitEnv() });
}

describe('a hostile agent that leaves a process rewriting its work while the runner reads it', () => {
  const place = hostilePlaces(dir, 'race');

  attack("a hostile agent: a child in a session of its own, with no environment and none of the runner's pipes, rewrites src/add.js and adds and removes a file in a loop after the agent exits", 'verify', 'refused', async () => {
    // Guard: under bubblewrap the child ends with the agent (its PID namespace), so what the runner reads is what it signs.
    const where = await place('rewriter');
    const loop = `while :; do printf 'export const add = (a, b) => a - b;\\n' > src/add.js; printf 'late\\n' > src/late.js; ${FIX}; rm -f src/late.js; done`;
    const action = `${FIX}\nsetsid env -i PATH=/usr/bin:/bin sh -c "${loop.replace(/"/g, '\\"')}" </dev/null >/dev/null 2>&1 &\nsleep 0.3`;
    const { messageId, receipt, unreceipted } = await attempted(where, 'rewriter', action);
    if (receipt === undefined) return unreceipted;
    const head = receipt['head_sha'] as string | null;
    if (head === null) return `no commit named (status ${String(receipt['status'])})`;
    // Every hash the receipt names is the blob its commit holds at that path, and the commit changes no other file.
    const files = receipt['file_hashes'] as Array<{ path: string; sha256: string | null }>;
    for (const file of files) {
      const blob = blobAt(where, head, file.path);
      if ((blob === null ? null : sha256(blob)) !== file.sha256) return `accepted: the receipt names ${file.path} as ${String(file.sha256)}, its commit holds ${blob === null ? 'no such file' : sha256(blob)}`;
    }
    const changed = git(['diff', '--name-only', '-z', String(receipt['base_sha']), head], { cwd: where.repo }).split('\0').filter((path) => path !== '');
    expect(changed.sort()).toEqual(files.map((file) => file.path).sort());
    // The ledger verifies, and the attestation's file subjects are the commit's blobs.
    expect(coo(['verify', '--ledger', where.world.gitdir, '--no-checkpoint']).status).toBe(0);
    const out = join(where.world.dir, 'attestation.json');
    expect(coo(['attest', messageId, '--ledger', where.world.gitdir, '--key', where.keyFile, '--out', out]).status).toBe(0);
    const envelope = JSON.parse(readFileSync(out, 'utf8')) as { payload: string };
    const statement = JSON.parse(Buffer.from(envelope.payload, 'base64').toString('utf8')) as { subject: Array<{ name: string; digest: Record<string, string> }> };
    expect(statement.subject[0]!.digest['gitCommit']).toBe(head);
    for (const subject of statement.subject.filter((item) => item.digest['sha256'] !== undefined && !item.name.startsWith('messages/'))) {
      expect(`sha256:${subject.digest['sha256']!}`).toBe(sha256(blobAt(where, head, subject.name)!));
    }
    return 'refused';
  });
});

describe("a hostile agent's work named so that coo show names no one file", () => {
  const place = hostilePlaces(dir, 'names');

  attack('a hostile agent: beside a right fix, two new files whose paths agree over their first 240 characters', 'cli', 'refused', async () => {
    const where = await place('long');
    const folder = `src/${'a'.repeat(240)}`;
    const action = `${FIX}\nmkdir -p ${folder} && printf 'one\\n' > ${folder}/x.js && printf 'two\\n' > ${folder}/y.js`;
    const { messageId, receipt, unreceipted } = await attempted(where, 'long', action);
    if (receipt === undefined) return unreceipted;
    // The receipt names each file whole, with its own hash: the work is in scope and succeeds.
    expect(receipt['status']).toBe('succeeded');
    expect(receipt['files_changed']).toEqual(expect.arrayContaining([`${folder}/x.js`, `${folder}/y.js`]));
    const shown = coo(['show', messageId, '--ledger', where.world.gitdir]);
    expect(shown.status).toBe(0);
    const changed = shown.stdout.split('\n').filter((line) => line.trimStart().startsWith('changed '));
    expect(changed).toHaveLength(3);
    // Each line names one file: two lines that read alike would say one file changed twice, with two hashes.
    if (new Set(changed.map((line) => line.trim().split(' ')[1])).size !== changed.length) return `accepted: coo show names two files alike: ${changed.map((line) => line.trim().slice(0, 60)).join(' | ')}`;
    for (const file of receipt['file_hashes'] as Array<{ path: string; sha256: string }>) expect(changed).toContain(`    changed ${file.path} ${file.sha256}`);
    return 'refused';
  });

  attack('a hostile agent: beside a right fix, src/a<line break>b.js and src/a ⏎ b.js, the name coo show gave the first', 'cli', 'refused', async () => {
    const where = await place('break');
    const action = `${FIX}\nprintf 'one\\n' > "src/$(printf 'a\\nb').js" && printf 'two\\n' > 'src/a ⏎ b.js'`;
    const { messageId, receipt, unreceipted } = await attempted(where, 'break', action);
    if (receipt === undefined) return unreceipted;
    expect(receipt['files_changed']).toEqual(expect.arrayContaining(['src/a\nb.js', 'src/a ⏎ b.js']));
    const shown = coo(['show', messageId, '--ledger', where.world.gitdir]);
    expect(shown.status).toBe(0);
    const changed = shown.stdout.split('\n').filter((line) => line.trimStart().startsWith('changed '));
    expect(changed).toHaveLength(3);
    const names = changed.map((line) => line.trim().slice('changed '.length).replace(/ (sha256:[0-9a-f]{64}|\(deleted\))$/, ''));
    if (new Set(names).size !== names.length) return `accepted: coo show names two files alike: ${names.join(' | ')}`;
    // The line break as its code point, which no path spells (a path holds no backslash); the other name as it is.
    expect(names).toEqual(expect.arrayContaining(['src/a\\u000ab.js', 'src/a ⏎ b.js']));
    return 'refused';
  });

  attack('a hostile agent: beside a right fix, files outside the scope whose names fill the blocker past 200 characters, the last one the file that matters', 'cli', 'refused', async () => {
    const where = await place('scope');
    const folder = `lib/${'b'.repeat(120)}`;
    const action = `${FIX}\nmkdir -p ${folder} && printf 'one\\n' > ${folder}/one.js && printf 'two\\n' > ${folder}/two.js && printf 'evil\\n' > ${folder}/payload.js`;
    const { messageId, receipt, unreceipted } = await attempted(where, 'scope', action);
    if (receipt === undefined) return unreceipted;
    const blockers = receipt['blockers'] as Array<{ code: string; detail: string }>;
    const scope = blockers.find((blocker) => blocker.detail.includes(`${folder}/payload.js`));
    expect(scope, JSON.stringify(blockers)).toBeDefined();
    expect(scope!.detail.length).toBeGreaterThan(200);
    const shown = coo(['show', messageId, '--ledger', where.world.gitdir]);
    expect(shown.status).toBe(0);
    // What the receipt says is shown whole: cut at 200 characters, the line named none of the files beyond the first.
    const line = shown.stdout.split('\n').find((each) => each.trimStart().startsWith(`blocker ${scope!.code}:`));
    expect(line).toBeDefined();
    if (!line!.includes(`${folder}/payload.js`)) return `accepted: coo show's blocker line hides which files broke the scope: ${line!.slice(0, 300)}`;
    return 'refused';
  });
});
