import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { describe, expect } from 'vitest';
import { attack } from '../helpers/attack-kit.js';
import { agentScript, codesOf, dispatchTo, FIX, hostilePlaces, receiptsFor, watchOnce, type HostilePlace } from '../helpers/hostile-agent.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * The dispatch lane against a hostile execution agent, round twenty-five: the names of its work that
 * spell a folder of the runner's machine, which every receipt records by that folder's marker; the
 * key it was handed written into its work, which the target repository's objects kept though no branch
 * carried it (and which the sandbox of every later agent of the repository reads); the git folders of
 * its worktree, which the runner's own git reads after it; and the terminal sequences of its stream,
 * which the runner's output echoes. Each agent is a script in place of the executor
 * that does one hostile thing, under bubblewrap.
 */

const dir = tempDir('dispatch-redteam-25');

async function attempted(where: HostilePlace, name: string, action: string, stream?: string, dispatch: Parameters<typeof dispatchTo>[2] = {}) {
  const { messageId } = await dispatchTo(where, name, dispatch);
  const watch = watchOnce(where, agentScript(where.world.dir, action, stream), { timeoutMs: 40_000 });
  const [receipt] = watch.hung ? [] : await receiptsFor(where, messageId);
  return { watch, receipt, unreceipted: watch.hung ? 'hung' : `no receipt (exit ${watch.status}) ${watch.stderr.slice(-300)}` };
}

/** The names of the files a commit of the target holds. */
function namesAt(where: HostilePlace, commit: string): string[] {
  return git(['ls-tree', '-r', '-z', '--name-only', commit], { cwd: where.repo }).split('\0').filter((name) => name !== '');
}

/** What the attempt's branch points at, or null when it is not there. */
function branchAt(where: HostilePlace, branch: string): string | null {
  try {
    return git(['rev-parse', '--verify', '--quiet', `refs/heads/${branch}`], { cwd: where.repo }).trim();
  } catch {
    return null;
  }
}

describe("a hostile agent's work named with a folder of the runner's machine in it", () => {
  const place = hostilePlaces(dir, 'names');

  /**
   * What a receipt says of work whose names spell a folder: a receipt records every path of the runner's machine by
   * its marker, so one that succeeds names and hashes files its commit does not hold.
   */
  function judged(where: HostilePlace, receipt: Record<string, unknown>, spelled: readonly string[]): string {
    const named = receipt['files_changed'] as string[];
    const head = receipt['head_sha'] as string | null;
    const held = head === null ? [] : namesAt(where, head);
    if (receipt['status'] === 'succeeded') {
      return `accepted: the receipt names ${JSON.stringify(named.filter((name) => !name.startsWith('src/add')))}, its commit holds ${JSON.stringify(spelled.filter((name) => held.includes(name)))}`;
    }
    if (receipt['branch'] !== null || branchAt(where, `coo/${String(receipt['message_id'])}`) === head) return `receipted as ${String(receipt['status'])} with the work on its branch`;
    const detail = (receipt['blockers'] as Array<{ code: string; detail: string }>).find((blocker) => blocker.code === 'scope_violation' && blocker.detail.includes("spells a folder of the runner's machine"));
    if (detail === undefined) return `receipted as ${String(receipt['status'])} ${codesOf(receipt).join(', ')}`;
    // The receipt holds no folder of the machine: its markers stand in their place.
    expect(JSON.stringify(receipt)).not.toContain(`@${homedir()}`);
    return 'refused';
  }

  attack("a hostile agent: beside a right fix, src/@<its home folder>/a.js and src/@<its worktree>/b.js, each name holding the folder's whole path", 'runner', 'refused', async () => {
    const where = await place('folders');
    // The runner's home, as the sandbox shows it in /etc/passwd and /home; its own HOME is a folder of the attempt.
    const home = homedir();
    const action = `${FIX}; mkdir -p "src/@${home}" "src/@$(pwd)" && echo a > "src/@${home}/a.js" && echo b > "src/@$(pwd)/b.js"`;
    const { receipt, unreceipted } = await attempted(where, 'folders', action);
    if (receipt === undefined) return unreceipted;
    return judged(where, receipt, [`src/@${homedir()}/a.js`]);
  });

  attack("a hostile agent: beside a right fix, two files the receipt would record under one name (src/@<home>/a.js and src/@[home]/a.js)", 'runner', 'refused', async () => {
    const where = await place('twins');
    const home = homedir();
    const action = `${FIX}; mkdir -p "src/@${home}" "src/@[home]" && echo real > "src/@${home}/a.js" && echo decoy > "src/@[home]/a.js"`;
    const { receipt, unreceipted } = await attempted(where, 'twins', action);
    if (receipt === undefined) return unreceipted;
    return judged(where, receipt, [`src/@${homedir()}/a.js`, 'src/@[home]/a.js']);
  });

  attack('a hostile agent: a name with a folder after a path character (src/x/tmp/a.js) is its own name, recorded as it is', 'runner', 'succeeded', async () => {
    // Guard: only a folder's whole path after a character no path holds is a folder; the fix leaves every other name alone.
    const where = await place('plain');
    const { receipt, unreceipted } = await attempted(where, 'plain', `${FIX}; mkdir -p src/x/tmp src/root && echo a > src/x/tmp/a.js && echo r > src/root/r.js`);
    if (receipt === undefined) return unreceipted;
    expect(receipt['files_changed']).toEqual(['src/add.js', 'src/root/r.js', 'src/x/tmp/a.js']);
    return String(receipt['status']);
  });
});

describe('a hostile agent that writes the key it was handed into its work', () => {
  const place = hostilePlaces(dir, 'key');

  attack("a hostile agent: beside a right fix, src/config.js holding its provider key, for the target's objects that a later agent's sandbox reads", 'runner', 'refused', async () => {
    const where = await place('objects');
    const HANDED = 'sk-proj-HandedToTheAgent0123456789abcdefXYZ';
    const { messageId } = await dispatchTo(where, 'objects', {});
    const watch = watchOnce(where, agentScript(where.world.dir, `${FIX}; printf 'export const key = "%s";\\n' "$OPENAI_API_KEY" > src/config.js`), { env: { OPENAI_API_KEY: HANDED } });
    const [receipt] = await receiptsFor(where, messageId);
    if (receipt === undefined) return `no receipt (exit ${watch.status}) ${watch.stderr.slice(-300)}`;
    // Every object of the target, reachable or not: the worktree of each later attempt reads them from inside its sandbox.
    const objects = git(['cat-file', '--batch-all-objects', '--batch'], { cwd: where.repo });
    if (objects.includes(HANDED)) return `accepted: the target's objects hold the key (the receipt names ${String(receipt['head_sha'])}, status ${String(receipt['status'])})`;
    if (receipt['status'] !== 'failed' || receipt['branch'] !== null || !codesOf(receipt).includes('scope_violation')) return `receipted as ${String(receipt['status'])} ${codesOf(receipt).join(', ')}`;
    // Nothing of the work was committed or verified: the receipt names no commit, and says why, the file named.
    expect(receipt['head_sha']).toBeNull();
    expect(receipt['tests_run']).toEqual([]);
    expect(JSON.stringify(receipt['blockers'])).toContain('src/config.js');
    expect(codesOf(receipt)).not.toContain('needs_decision');
    return 'refused';
  });
});

describe("a hostile agent that writes its worktree's git folders for the git the runner runs after it (under bubblewrap)", () => {
  const place = hostilePlaces(dir, 'git');

  /** The bytes of each file under a folder, by its path there. */
  function filesUnder(root: string): Record<string, string> {
    const out: Record<string, string> = {};
    const walk = (folder: string): void => {
      for (const entry of fs.readdirSync(folder, { withFileTypes: true })) {
        const path = join(folder, entry.name);
        if (entry.isDirectory()) walk(path);
        else out[path.slice(root.length + 1)] = createHash('sha256').update(fs.readFileSync(path)).digest('hex');
      }
    };
    walk(root);
    return out;
  }

  attack("a hostile agent: it writes the per-worktree config, HEAD, commondir and index, the shared config, a hook, info/attributes and alternates, and a .gitattributes naming a filter", 'runner', 'refused', async () => {
    // Guard: the sandbox sees the target's git folder read-only, and the runner reads the work itself, never through git.
    const where = await place('folders');
    const marks = join(where.world.dir, 'marks');
    const common = join(where.repo, '.git');
    const before = Object.entries(filesUnder(common)).filter(([path]) => !path.startsWith('worktrees/') && !path.startsWith('logs/') && !path.startsWith('objects/') && !path.startsWith('refs/') && path !== 'index' && path !== 'ORIG_HEAD');
    const program = `${marks}/ran`;
    const writes = [
      ['worktree-config', `printf '[core]\\n\\tfsmonitor = ${program}\\n' >> "$own/config.worktree"`],
      ['worktree-head', 'echo 0000000000000000000000000000000000000000 > "$own/HEAD"'],
      ['worktree-commondir', `echo ${marks} > "$own/commondir"`],
      ['worktree-index', 'echo x > "$own/index"'],
      ['config', `printf '[core]\\n\\tfsmonitor = ${program}\\n\\thooksPath = ${marks}\\n[filter "x"]\\n\\tclean = ${program}\\n\\tsmudge = ${program}\\n' >> "$common/config"`],
      ['hook', `printf '#!/bin/sh\\n${program}\\n' > "$common/hooks/post-checkout" && chmod +x "$common/hooks/post-checkout"`],
      ['attributes', `echo '* filter=x' >> "$common/info/attributes"`],
      ['alternates', `echo ${marks} > "$common/objects/info/alternates"`],
    ];
    const action = [
      FIX,
      'own="$(sed -n "s/^gitdir: //p" .git)"; common="${own%/worktrees/*}"',
      "printf '* filter=x diff=x\\n' > src/.gitattributes",
      ...writes.map(([name, command]) => `if ( ${command} ) 2>/dev/null; then echo ${name} >> src/written.txt; fi`),
      'touch src/written.txt',
    ].join('\n');
    fs.mkdirSync(marks);
    fs.writeFileSync(program, `#!/bin/sh\ntouch ${marks}/ran-outside\ncat >/dev/null 2>&1 || true\n`, { mode: 0o755 });
    const { receipt, unreceipted } = await attempted(where, 'folders', action);
    if (receipt === undefined) return unreceipted;
    const head = receipt['head_sha'] as string | null;
    const written = head === null ? '(no commit)' : git(['show', `${head}:src/written.txt`], { cwd: where.repo }).trim();
    if (written !== '') return `accepted: the agent wrote ${written.split('\n').join(', ')}`;
    if (fs.existsSync(join(marks, 'ran-outside'))) return 'accepted: a program it named ran outside the sandbox';
    const after = filesUnder(common);
    const changed = before.filter(([path, hash]) => after[path] !== hash).map(([path]) => path);
    if (changed.length > 0) return `accepted: ${changed.join(', ')} changed`;
    // The work (its .gitattributes included) is committed and verified as its bytes are; a .gitattributes naming a filter
    // for the work's files is not work (dispatch-redteam-50), as a checkout would not write them as verified.
    expect(receipt['inner_exit_codes']).toEqual([0]);
    expect(receipt['status']).toBe('failed');
    expect(JSON.stringify(receipt['blockers'])).toContain('src/.gitattributes (checkout_attributes: filter=x on src/.gitattributes; filter=x on src/add.js; filter=x on src/written.txt)');
    return 'refused';
  });
});

describe("a hostile agent's stream and output carrying terminal sequences", () => {
  const place = hostilePlaces(dir, 'terminal');
  const event = (value: unknown): string => `printf '%s\\n' '${JSON.stringify(value)}'`;
  // The clipboard write of OSC 52, a window title, a cleared screen and hidden text.
  const SEQUENCES = '\u001b]52;c;Y29vIGFwcHJvdmU=\u0007\u001b]0;owned\u0007\u001b[2J\u001b[8m';

  attack("a hostile agent: its thread id, a command, the command's output and its final message carry a clipboard write and a cleared screen, and it writes them to its stderr", 'runner', 'refused', async () => {
    // Guard: what the runner prints of a run (its events with --json, its stderr) is its own words, never the agent's sequences.
    const where = await place('sequences');
    const stream = [
      event({ type: 'thread.started', thread_id: `thread${SEQUENCES}` }),
      event({ type: 'turn.started' }),
      event({ type: 'item.completed', item: { id: 'i0', type: 'command_execution', command: `ls${SEQUENCES}`, aggregated_output: SEQUENCES, exit_code: 0, status: 'completed' } }),
      event({ type: 'item.completed', item: { id: 'i1', type: 'agent_message', text: `Done.${SEQUENCES}` } }),
      event({ type: 'turn.completed', usage: { input_tokens: 100, cached_input_tokens: 0, output_tokens: 10 } }),
    ].join('\n');
    const { watch, receipt, unreceipted } = await attempted(where, 'sequences', `${FIX}; printf '\\033]52;c;aGk=\\007\\033[2J' >&2`, stream);
    if (receipt === undefined) return unreceipted;
    const printed = watch.stdout + watch.stderr;
    if (printed.includes('\u001b') || printed.includes('\u0007')) return `accepted: the runner printed ${JSON.stringify(printed.slice(printed.indexOf('\u001b') - 40, printed.indexOf('\u001b') + 40))}`;
    return 'refused';
  });
});
