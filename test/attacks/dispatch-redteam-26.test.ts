import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect } from 'vitest';
import { attack } from '../helpers/attack-kit.js';
import { coo } from '../helpers/cli.js';
import { agentScript, codesOf, dispatchTo, FIX, hostilePlaces, receiptsFor, watchOnce, type HostilePlace } from '../helpers/hostile-agent.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * The dispatch lane against a hostile execution agent, round twenty-six: the names of its work that
 * hold the key it was handed, which a tree object of the target repository keeps though no branch
 * carries it (and which the sandbox of every later agent of the repository reads). Each agent is a
 * script in place of the executor that does one hostile thing, under bubblewrap.
 */

const dir = tempDir('dispatch-redteam-26');

async function attempted(where: HostilePlace, name: string, action: string, env: NodeJS.ProcessEnv = {}) {
  const { messageId } = await dispatchTo(where, name);
  const watch = watchOnce(where, agentScript(where.world.dir, action), { timeoutMs: 40_000, env });
  const [receipt] = watch.hung ? [] : await receiptsFor(where, messageId);
  return { watch, receipt, unreceipted: watch.hung ? 'hung' : `no receipt (exit ${watch.status}) ${watch.stderr.slice(-300)}` };
}

describe('a hostile agent that names its work after the key it was handed, for the target repository\'s objects', () => {
  const place = hostilePlaces(dir, 'names');
  // No slash in it, so that it can stand in a name.
  const HANDED = 'sk-proj-NamedInTheTree0123456789abcdefXYZ';
  const forms = { written: HANDED, base64url: Buffer.from(HANDED).toString('base64url'), hex: Buffer.from(HANDED).toString('hex') };

  /** What the target's objects and the receipt make of work whose names hold the key in `form`. */
  async function judged(name: string, action: string, form: keyof typeof forms): Promise<string> {
    const where = await place(name);
    const { receipt, unreceipted } = await attempted(where, name, action, { OPENAI_API_KEY: HANDED });
    if (receipt === undefined) return unreceipted;
    // Every object of the target, reachable or not: the worktree of each later attempt reads them from inside its sandbox.
    const objects = git(['cat-file', '--batch-all-objects', '--batch'], { cwd: where.repo });
    if (objects.includes(forms[form])) return `accepted: the target's objects hold the key ${form} (the receipt names ${String(receipt['head_sha'])}, status ${String(receipt['status'])})`;
    if (receipt['status'] !== 'failed' || receipt['branch'] !== null || !codesOf(receipt).includes('scope_violation')) return `receipted as ${String(receipt['status'])} ${codesOf(receipt).join(', ')}`;
    // Nothing of the work was committed or verified, and the receipt says so: it names no commit, the base's neither.
    expect(receipt['head_sha']).toBeNull();
    expect(receipt['tests_run']).toEqual([]);
    expect(codesOf(receipt)).not.toContain('needs_decision');
    expect(JSON.stringify(receipt)).toContain('[removed: OPENAI_API_KEY');
    expect(JSON.stringify(receipt)).not.toContain(forms[form]);
    return 'refused';
  }

  attack('a hostile agent: beside a right fix, src/<its provider key>.js', 'runner', 'refused', () => judged('file', `${FIX}; printf 'x\\n' > "src/$OPENAI_API_KEY.js"`, 'written'));

  attack('a hostile agent: beside a right fix, a folder named after its provider key in base64url holding one file', 'runner', 'refused', () =>
    judged('folder', `${FIX}; d="src/$(printf %s "$OPENAI_API_KEY" | base64 -w0 | tr '+/' '-_' | tr -d =)"; mkdir -p "$d" && printf 'x\\n' > "$d/a.js"`, 'base64url'),
  );

  attack('a hostile agent: beside a right fix, a link named after its provider key in hex', 'runner', 'refused', () =>
    judged('link', `${FIX}; ln -s add.js "src/$(printf %s "$OPENAI_API_KEY" | od -An -tx1 | tr -d ' \\n')"`, 'hex'),
  );
});

describe('a hostile agent that puts the key it was handed in git of its own, under bubblewrap', () => {
  const place = hostilePlaces(dir, 'git');
  const HANDED = 'sk-proj-InGitOfItsOwn0123456789abcdefXYZ';

  attack("a hostile agent: beside a right fix, a commit of its own with the key as its message and author, a tag, a branch and a note named after it", 'runner', 'refused', async () => {
    // Guard: the sandbox sees the target's git folder read-only, and the runner commits the work itself, never the agent's commits.
    const where = await place('own');
    const key = '"$OPENAI_API_KEY"';
    const action = [
      FIX,
      `git -c user.name=${key} -c user.email=a@example.com commit -qam ${key} 2>/dev/null`,
      `git tag "t-$OPENAI_API_KEY" 2>/dev/null`,
      `git branch "b-$OPENAI_API_KEY" 2>/dev/null`,
      `git notes add -m ${key} 2>/dev/null`,
      'true',
    ].join('\n');
    const { receipt, unreceipted } = await attempted(where, 'own', action, { OPENAI_API_KEY: HANDED });
    if (receipt === undefined) return unreceipted;
    const objects = git(['cat-file', '--batch-all-objects', '--batch'], { cwd: where.repo });
    const refs = git(['for-each-ref', '--format=%(refname)'], { cwd: where.repo });
    if (objects.includes(HANDED) || refs.includes(HANDED)) return "accepted: the target's objects or refs hold the key";
    // The work is the runner's commit of the fix, landed as an honest agent's is.
    expect(receipt['status']).toBe('succeeded');
    expect(receipt['files_changed']).toEqual(['src/add.js']);
    return 'refused';
  });
});

describe("a hostile agent's two files that its receipt records under one name, for coo attest", () => {
  const place = hostilePlaces(dir, 'attest');
  const HANDED = 'sk-proj-TwoFilesOneName0123456789abcdefXYZ';

  attack("a hostile agent: beside a right fix, src/<its provider key>.js and src/[removed: OPENAI_API_KEY].js, the name the receipt records the first by", 'verify', 'refused', async () => {
    const where = await place('twins');
    const action = `${FIX}; printf 'real\\n' > "src/$OPENAI_API_KEY.js"; printf 'decoy\\n' > 'src/[removed: OPENAI_API_KEY].js'`;
    const { messageId } = await dispatchTo(where, 'twins');
    const watch = watchOnce(where, agentScript(where.world.dir, action), { timeoutMs: 40_000, env: { OPENAI_API_KEY: HANDED } });
    const [receipt] = watch.hung ? [] : await receiptsFor(where, messageId);
    if (receipt === undefined) return `no receipt (exit ${watch.status}) ${watch.stderr.slice(-300)}`;
    const named = (receipt['file_hashes'] as Array<{ path: string; sha256: string | null }>).filter((file) => file.path === 'src/[removed: OPENAI_API_KEY].js');
    // The receipt names both files by one name, each with its own hash: what the attestation says of that name is the question.
    expect(named).toHaveLength(2);
    const out = join(where.world.dir, 'attestation.json');
    const attested = coo(['attest', messageId, '--ledger', where.world.gitdir, '--key', where.keyFile, '--out', out]);
    if (attested.status !== 0) return `attest exited ${attested.status}: ${attested.stderr.slice(0, 300)}`;
    const envelope = JSON.parse(readFileSync(out, 'utf8')) as { payload: string };
    const statement = JSON.parse(Buffer.from(envelope.payload, 'base64').toString('utf8')) as { subject: Array<{ name: string; digest: Record<string, string> }>; predicate: { files: Array<{ path: string; sha256: string | null }> } };
    const names = statement.subject.map((item) => item.name);
    const twice = names.filter((name, index) => names.indexOf(name) !== index);
    if (twice.length > 0) return `accepted: the attestation names ${JSON.stringify(twice)} as two subjects with two digests`;
    // Left to the predicate, which lists both as the receipt does; the rest of the work keeps its subject.
    expect(statement.predicate.files.filter((file) => file.path === 'src/[removed: OPENAI_API_KEY].js')).toHaveLength(2);
    expect(names).toContain('src/add.js');
    return 'refused';
  });
});

describe("a hostile agent's work named with its worktree's folder, for coo attest", () => {
  const place = hostilePlaces(dir, 'spelled');

  attack("a hostile agent: beside a right fix, src/@<its worktree>/b.js, which its receipt records as src/@[worktree]/b.js", 'verify', 'refused', async () => {
    const where = await place('worktree');
    const { receipt, unreceipted } = await attempted(where, 'worktree', `${FIX}; mkdir -p "src/@$(pwd)" && printf 'b\\n' > "src/@$(pwd)/b.js"`);
    if (receipt === undefined) return unreceipted;
    expect(receipt['files_changed']).toContain('src/@[worktree]/b.js');
    const out = join(where.world.dir, 'attestation.json');
    const attested = coo(['attest', String(receipt['message_id']), '--ledger', where.world.gitdir, '--key', where.keyFile, '--out', out]);
    if (attested.status !== 0) return `attest exited ${attested.status}: ${attested.stderr.slice(0, 300)}`;
    const envelope = JSON.parse(readFileSync(out, 'utf8')) as { payload: string };
    const statement = JSON.parse(Buffer.from(envelope.payload, 'base64').toString('utf8')) as { subject: Array<{ name: string; digest: Record<string, string> }> };
    const head = statement.subject.find((item) => item.digest['gitCommit'] !== undefined)?.digest['gitCommit'];
    // Each file subject is the hash of that file at the head commit the statement names, as docs/attestation.md says.
    const held = head === undefined ? [] : git(['ls-tree', '-r', '-z', '--name-only', head], { cwd: where.repo }).split('\0');
    const missing = statement.subject.filter((item) => item.digest['sha256'] !== undefined && !item.name.startsWith('messages/') && head !== undefined && !held.includes(item.name));
    if (missing.length > 0) return `accepted: the statement names ${JSON.stringify(missing.map((item) => item.name))} at ${head}, which holds no such file`;
    expect(receipt['status']).toBe('failed');
    expect(receipt['head_sha']).toBeNull();
    return 'refused';
  });
});
