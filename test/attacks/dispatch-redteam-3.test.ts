import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { endMarked, newRunMarks, notePipes } from '../../src/util/leftovers.js';
import { gitObjectId } from '../../src/dispatch/git-tree.js';
import { snapshotWork } from '../../src/dispatch/snapshot.js';
import { removeTree } from '../../src/util/remove-tree.js';
import { processStartTime } from '../../src/util/process.js';
import { attack } from '../helpers/attack-kit.js';
import { agentScript, codesOf, dispatchTo, FIX, hostilePlaces, receiptsFor, watchOnce, type HostilePlace } from '../helpers/hostile-agent.js';
import { tempDir } from '../helpers/tmp.js';
import { COO } from '../helpers/cli.js';

/**
 * The dispatch lane against a hostile execution agent, third round: an agent that leaves processes
 * behind it, and code of the agent's that the runner's verification runs, reaching for the runner's
 * own folders. Each agent is a script in place of Codex that does one hostile thing.
 */

const dir = tempDir('dispatch-redteam-3');

/** The pids of processes whose command line is exactly `argv` (a marker no other process has). */
function processesRunning(argv: readonly string[]): number[] {
  const wanted = `${argv.join('\0')}\0`;
  const found: number[] = [];
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (fs.readFileSync(join('/proc', name, 'cmdline'), 'latin1') === wanted) found.push(Number(name));
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

/** Ends what a test's agent left (by pid), and says whether there was any. */
function endLeftovers(argv: readonly string[]): boolean {
  const left = processesRunning(argv);
  for (const pid of left) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  return left.length > 0;
}

async function attempted(place: (name: string) => Promise<HostilePlace>, name: string, action: string, options: Parameters<typeof watchOnce>[2] & { dispatch?: Parameters<typeof dispatchTo>[2] } = {}) {
  const where = await place(name);
  const { messageId } = await dispatchTo(where, name, options.dispatch);
  const watch = watchOnce(where, agentScript(where.world.dir, action), options);
  const [receipt] = watch.hung ? [] : await receiptsFor(where, messageId);
  return { where, messageId, watch, receipt, unreceipted: watch.hung ? 'hung' : `no receipt (exit ${watch.status})` };
}

describe('a hostile agent that leaves a process running after it exits', () => {
  const place = hostilePlaces(dir, 'left');

  /**
   * An agent that starts `marker` in a session of its own (`redirect` says where its output goes) and
   * exits once it runs there (setsid execs it only after leaving the agent's session and group).
   */
  async function leftBehind(name: string, marker: readonly string[], redirect: string, isolation?: 'none', prefix = ''): Promise<string> {
    const wait = `until [ -n "$(ps -C sleep -o args= | grep -x '${marker.join(' ')}')" ]; do sleep 0.05; done`;
    try {
      const { receipt, unreceipted } = await attempted(place, name, `${FIX}; setsid ${prefix}${marker.join(' ')} ${redirect} &\n${wait}`, { timeoutMs: 40_000, ...(isolation === undefined ? {} : { isolation }) });
      if (receipt === undefined) return unreceipted;
      if (processesRunning(marker).length > 0) return `receipted as ${String(receipt['status'])}, its child still running`;
      return receipt['status'] === 'succeeded' ? 'refused' : `receipted as ${String(receipt['status'])} ${codesOf(receipt).join(', ')}`;
    } finally {
      endLeftovers(marker);
    }
  }

  attack("a hostile agent: without bubblewrap, a child in a session of its own holding the runner's pipes", 'runner', 'refused', () => leftBehind('held-pipes', ['sleep', '3141'], '', 'none'));

  attack("a hostile agent: without bubblewrap, a child in a session of its own and an empty environment, holding the runner's pipes", 'runner', 'refused', () =>
    leftBehind('bare-pipes', ['sleep', '3147'], '', 'none', 'env -i '),
  );

  attack('a hostile agent: without bubblewrap, a child in a session of its own, its output away from the runner', 'runner', 'refused', () =>
    leftBehind('daemon', ['sleep', '3143'], '</dev/null >/dev/null 2>&1', 'none'),
  );

  attack("a hostile agent: without bubblewrap, its test script, run by the verification, leaves a child in a session of its own holding the runner's pipes", 'runner', 'refused', async () => {
    const marker = ['sleep', '3144'];
    const wait = `until [ -n "$(ps -C sleep -o args= | grep -x '${marker.join(' ')}')" ]; do sleep 0.05; done`;
    try {
      const script = `setsid ${marker.join(' ')} &\n${wait}\ngrep -q "a + b" src/add.js\n`;
      const { receipt, unreceipted } = await attempted(place, 'verify-pipes', `${FIX}; cat > test.sh <<'EOF'\n${script}EOF`, { isolation: 'none', timeoutMs: 40_000, dispatch: { scope: ['src/**', 'test.sh'] } });
      if (receipt === undefined) return unreceipted;
      if (processesRunning(marker).length > 0) return `receipted as ${String(receipt['status'])}, its child still running`;
      return receipt['status'] === 'succeeded' ? 'refused' : `receipted as ${String(receipt['status'])} ${codesOf(receipt).join(', ')}`;
    } finally {
      endLeftovers(marker);
    }
  });

  attack('a hostile agent: without bubblewrap, a child in a session of its own, left when its runner crashed, found by the runner that recovers the attempt', 'runner', 'refused', async () => {
    const marker = ['sleep', '3148'];
    const where = await place('crashed');
    const ready = join(where.world.dir, 'child-ready');
    const wait = `until [ -n "$(ps -C sleep -o args= | grep -x '${marker.join(' ')}')" ]; do sleep 0.05; done`;
    const agent = agentScript(where.world.dir, `setsid ${marker.join(' ')} </dev/null >/dev/null 2>&1 &\n${wait}\n: > ${ready}\nexec sleep 3149`);
    const { messageId } = await dispatchTo(where, 'crashed');
    try {
      // The runner dies as its executor starts; the agent runs on, and leaves its child in a session of its own.
      const first = watchOnce(where, agent, { isolation: 'none', env: { COO_FAILPOINT: 'during-executor' } });
      if (first.signal !== 'SIGKILL') return `the runner did not crash (exit ${first.status})`;
      while (!fs.existsSync(ready)) await new Promise((resolve) => setTimeout(resolve, 50));
      watchOnce(where, agent, { isolation: 'none' });
      const [receipt] = await receiptsFor(where, messageId);
      if (receipt === undefined) return 'no receipt';
      if (processesRunning(marker).length > 0) return `receipted as ${codesOf(receipt).join(', ')}, its child still running`;
      return codesOf(receipt).join() === 'interrupted' ? 'refused' : `receipted as ${codesOf(receipt).join(', ')}`;
    } finally {
      endLeftovers(marker);
      endLeftovers(['sleep', '3149']);
    }
  });

  attack('a hostile agent: under bubblewrap, a child in a session of its own, its output away from the runner', 'runner', 'refused', () =>
    leftBehind('bwrap-daemon', ['sleep', '3142'], '</dev/null >/dev/null 2>&1'),
  );
});

describe('what the runner ends after a command it started', () => {
  it('a process that was running before the command is never ended, though the command handed it one of its pipes', async () => {
    // A process of this test's that holds a pipe's write end, as a daemon would hold one handed to it over a socket.
    const daemon = spawn('sleep', ['3145'], { stdio: ['ignore', 'pipe', 'ignore'] });
    // Start times are in clock ticks: the command starts once the daemon's tick is over.
    const ticks = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim());
    const daemonStart = Number(processStartTime(daemon.pid!));
    while (Number(fs.readFileSync('/proc/uptime', 'utf8').split(' ')[0]) * ticks <= daemonStart + 1) await new Promise((resolve) => setTimeout(resolve, 5));
    const command = spawn('sleep', ['3146'], { stdio: ['ignore', 'pipe', 'ignore'] });
    try {
      const marks = newRunMarks();
      notePipes(marks, command);
      // The daemon's pipe counts as the command's: only its start before the command keeps it alive.
      const pipe = fs.readlinkSync(`/proc/${daemon.pid}/fd/1`);
      marks.pipes.add(pipe);
      expect(marks.since).not.toBeNull();
      expect(endMarked(marks)).toBe(1);
      await new Promise((resolve) => command.once('exit', resolve));
      expect(processesRunning(['sleep', '3145'])).toEqual([daemon.pid]);
    } finally {
      daemon.kill('SIGKILL');
      command.kill('SIGKILL');
    }
  });
});

describe('a folder of the work the runner cannot open', () => {
  it('is not read as its tracked files deleted: what it holds is not known to be gone', async () => {
    // A worktree whose path is long enough that one tracked folder's path is past what the system takes
    // whole, as a folder its agent made unreadable is to a runner that is not root: the runner's walk cannot look at it.
    const top = fs.mkdtempSync(join(dir, 'unopened-'));
    const name = 'l'.repeat(250);
    // A root of 3,860 bytes: its src folder (3,864) can be looked at, the folder in it (4,115) cannot.
    const steps = Math.floor((3860 - top.length - 51) / 201);
    const last = 'q'.repeat(3860 - top.length - steps * 201 - 1);
    const made = spawnSync('sh', ['-c', `cd "$0" && for i in $(seq 1 ${steps}); do mkdir ${'r'.repeat(200)} && cd ${'r'.repeat(200)} || exit 1; done && mkdir ${last} && cd ${last} && mkdir -p src && printf 'x\\n' > src/add.js && mkdir src/${name} && printf 'y\\n' > src/${name}/a.js && pwd -P`, top], { encoding: 'utf8' });
    try {
      expect(made.status).toBe(0);
      const root = made.stdout.trim();
      expect(root.length).toBe(3860);
      const blob = (text: string): string => gitObjectId('blob', Buffer.from(text));
      const baseFiles = [
        { path: Buffer.from('src/add.js'), mode: '100644', oid: blob('x\n') },
        { path: Buffer.from(`src/${name}/a.js`), mode: '100644', oid: blob('y\n') },
      ];
      const snapshot = await snapshotWork({ gitdir: '', worktreeGitdir: '', path: root, branch: 'b', base: '0'.repeat(40), gitLink: '' }, {
        baseFiles,
        rules: { ignored: (paths) => Promise.resolve(paths.map(() => false)), close: () => undefined },
        objects: { write: () => Promise.resolve('') },
      });
      expect(snapshot.refused).toEqual([{ path: `src/${name}`, why: 'unreadable' }]);
      expect(snapshot.changes).toEqual([]);
    } finally {
      removeTree(top);
    }
  });
});

describe("the agent's code run by the verification, reaching for the runner's folders", () => {
  const place = hostilePlaces(dir, 'verify');

  attack("a hostile agent: its test script lists the ledger's git folder from inside the verification", 'runner', 'refused', async () => {
    const where = await place('ledger');
    // The agent knows where the ledger is (a guess, a search): its test script, run by the verification, looks.
    const action = `${FIX}; printf 'ls -a %s > src/seen.txt 2>&1; cat src/seen.txt; grep -q "a + b" src/add.js\\n' '${where.world.gitdir}' > test.sh`;
    const { messageId } = await dispatchTo(where, 'ledger', { scope: ['src/**', 'test.sh'] });
    const watch = watchOnce(where, agentScript(where.world.dir, action));
    if (watch.hung) return 'hung';
    const [receipt] = await receiptsFor(where, messageId);
    if (receipt === undefined) return `no receipt (exit ${watch.status})`;
    const log = (receipt['attachments'] as Array<{ path: string }>).find((item) => item.path.endsWith('verify-01.log'));
    if (log === undefined) return `no verification log (${codesOf(receipt).join(', ')})`;
    const text = (await where.world.ledger.readFile(log.path))!.toString('utf8');
    return /\bHEAD\b/.test(text) ? 'accepted' : 'refused';
  });
});

describe("a hostile agent that writes its repository's git configuration and hooks (without bubblewrap, where it can)", () => {
  const place = hostilePlaces(dir, 'config');

  /** Every way a repository's configuration or hooks name a program git runs, each program leaving a file named after its way in `marks`. */
  function plantAll(marks: string): string {
    const program = (name: string): string => `${marks}/bin/${name}`;
    const names = ['fsmonitor', 'hooks-path', 'ssh', 'pager', 'diff-external', 'clean', 'smudge', 'process', 'textconv', 'editor', 'askpass', 'credential', 'alternate-refs', 'gpg', 'include', 'worktree-fsmonitor'];
    const hooks = ['reference-transaction', 'post-checkout', 'post-index-change', 'pre-auto-gc', 'post-commit', 'pre-commit', 'post-rewrite', 'pre-push', 'fsmonitor-watchman', 'post-merge'];
    const lines = [
      'set -e',
      'common="$(sed -n "s/^gitdir: //p" .git)"; own="$common"; common="${common%/worktrees/*}"',
      `mkdir -p ${marks}/bin ${marks}/hooks`,
      ...[...names, ...hooks.map((hook) => `hook-${hook}`)].map((name) => `printf '#!/bin/sh\\ntouch ${marks}/ran-${name}\\ncat >/dev/null 2>&1 || true\\n' > ${program(name)}; chmod +x ${program(name)}`),
      ...hooks.map((hook) => `cp ${program(`hook-${hook}`)} "$common/hooks/${hook}"; cp ${program(`hook-${hook}`)} ${marks}/hooks/${hook}`),
      `printf '[core]\\n\\tfsmonitor = ${program('fsmonitor')}\\n' > ${marks}/included`,
      `cat >> "$common/config" <<CONF
[core]
\tfsmonitor = ${program('fsmonitor')}
\thooksPath = ${marks}/hooks
\tsshCommand = ${program('ssh')}
\tpager = ${program('pager')}
\teditor = ${program('editor')}
\taskPass = ${program('askpass')}
\talternateRefsCommand = ${program('alternate-refs')}
\tuntrackedCache = true
[diff]
\texternal = ${program('diff-external')}
[diff "x"]
\ttextconv = ${program('textconv')}
[filter "x"]
\tclean = ${program('clean')}
\tsmudge = ${program('smudge')}
\tprocess = ${program('process')}
\trequired = true
[credential]
\thelper = ${program('credential')}
[gpg]
\tprogram = ${program('gpg')}
[commit]
\tgpgSign = true
[gc]
\tauto = 1
\tautoDetach = false
[include]
\tpath = ${marks}/included
[extensions]
\tworktreeConfig = true
CONF`,
      `printf '[core]\\n\\tfsmonitor = ${program('worktree-fsmonitor')}\\n' > "$own/config.worktree"`,
      "printf '* filter=x diff=x\\n' > .gitattributes",
      "printf '* filter=x diff=x\\n' > \"$common/info/attributes\"",
    ];
    return lines.join('\n');
  }

  attack('a hostile agent: every program a repository configuration or hook can name, for the git the runner runs after it and at the next attempt', 'runner', 'refused', async () => {
    const where = await place('all');
    const marks = join(where.world.dir, 'marks');
    const { messageId } = await dispatchTo(where, 'config', { scope: ['src/**', '.gitattributes'] });
    const first = watchOnce(where, agentScript(where.world.dir, `${FIX}\n${plantAll(marks)}`), { isolation: 'none' });
    if (first.hung) return 'hung';
    const [receipt] = await receiptsFor(where, messageId);
    if (receipt === undefined) return `no receipt (exit ${first.status}) ${first.stderr.slice(-500)}`;
    // A next attempt in the same repository, whose agent does nothing hostile.
    const next = await dispatchTo(where, 'after', {});
    const second = watchOnce(where, agentScript(where.world.dir, FIX), { isolation: 'none' });
    if (second.hung) return 'hung';
    const [after] = await receiptsFor(where, next.messageId);
    const ran = fs.readdirSync(marks).filter((name) => name.startsWith('ran-'));
    if (ran.length > 0) return `accepted: git ran ${ran.join(', ')}`;
    return after === undefined ? `no receipt for the next attempt (exit ${second.status})` : 'refused';
  });
});

describe('a hostile agent that leaves work past what a path or the runner can hold', () => {
  const place = hostilePlaces(dir, 'bounds');

  /** Whether the attempt's folder is gone from the runner's state folder once its receipt is written. */
  function attemptFoldersLeft(where: HostilePlace): string[] {
    const root = join(where.stateDir, 'dispatch');
    return fs.existsSync(root) ? fs.readdirSync(root) : [];
  }

  attack('a hostile agent: in-scope files named with a line break, an escape sequence, a carriage return and a bell', 'runner', 'refused', async () => {
    const { where, receipt, unreceipted } = await attempted(place, 'controls', `${FIX}; for n in "$(printf 'a\\nb')" "$(printf '\\033[31mred')" "$(printf 'c\\rd')" "$(printf 'e\\af')"; do printf 'x\\n' > "src/$n.js"; done`);
    if (receipt === undefined) return unreceipted;
    // Each name as it is, none lost or changed; the ones the scope's patterns do not take (a line break) fail the attempt.
    const named = JSON.stringify(receipt['files_changed']) === JSON.stringify(['src/\u001b[31mred.js', 'src/a\nb.js', 'src/add.js', 'src/c\rd.js', 'src/e\u0007f.js']);
    if (!named) return `receipted as ${JSON.stringify(receipt['files_changed'])}`;
    const left = attemptFoldersLeft(where);
    if (left.length > 0) return `receipted as ${String(receipt['status'])}, its folders left: ${left.join(', ')}`;
    return receipt['status'] === 'failed' && codesOf(receipt).includes('scope_violation') ? 'refused' : `receipted as ${String(receipt['status'])} ${codesOf(receipt).join(', ')}`;
  });

  attack('a hostile agent: folders nested 1,200 deep, a path far past what the system takes whole', 'runner', 'refused', async () => {
    const { where, receipt, unreceipted } = await attempted(place, 'deep', `${FIX}; cd src; i=0; while [ $i -lt 1200 ]; do mkdir dddd && cd dddd || break; i=$((i+1)); done; printf 'x\\n' > deep.js`, { timeoutMs: 60_000 });
    if (receipt === undefined) return unreceipted;
    const left = attemptFoldersLeft(where);
    if (left.length > 0) return `receipted as ${String(receipt['status'])}, its folders left: ${left.join(', ')}`;
    return receipt['status'] === 'failed' && codesOf(receipt).includes('scope_violation') ? 'refused' : `receipted as ${String(receipt['status'])} ${codesOf(receipt).join(', ')}`;
  });
});

/** Whether this machine lets a process mount a tmpfs of its own (root in a mount namespace of its own): the disk-full attacks need one. */
function canMountTmpfs(): boolean {
  const probe = spawnSync('unshare', ['-m', 'sh', '-c', 'd=$(mktemp -d) && mount -t tmpfs -o size=1m tmpfs "$d" && umount "$d"; s=$?; rmdir "$d"; exit $s'], { stdio: 'ignore', timeout: 10_000 });
  return probe.status === 0;
}

describe.skipIf(!canMountTmpfs())("a hostile agent that fills the disk of the runner's state folder", () => {
  const place = hostilePlaces(dir, 'full');

  /** `coo watch --once` as watchOnce runs it, with the state folder on a tmpfs of `megabytes` of its own. */
  function watchOnSmallDisk(where: HostilePlace, agent: string, megabytes: number): { status: number | null; hung: boolean; stderr: string } {
    fs.mkdirSync(where.stateDir, { recursive: true });
    const result = spawnSync(
      'unshare',
      ['-m', 'sh', '-c', `mount -t tmpfs -o size=${megabytes}m,mode=0700 tmpfs "$0" && exec "$@"`, where.stateDir, process.execPath, COO, 'watch', '--once', '--json', '--ledger', where.world.gitdir, '--key', where.keyFile, '--repo', where.repo, '--state-dir', where.stateDir, '--ea-command', agent],
      { env: { ...process.env, OPENAI_API_KEY: 'sk-hostile-test' }, encoding: 'utf8', timeout: 90_000, killSignal: 'SIGKILL', maxBuffer: 64 * 1024 * 1024 },
    );
    return { status: result.status, hung: (result.error as NodeJS.ErrnoException | undefined)?.code === 'ETIMEDOUT', stderr: result.stderr ?? '' };
  }

  /** `coo watch --once` with the ledger and the state folder on one tmpfs of `megabytes`: the ledger is copied there and back. */
  function watchWithLedgerOnSmallDisk(where: HostilePlace, agent: string, megabytes: number): { status: number | null; hung: boolean; stderr: string } {
    const disk = join(where.world.dir, 'disk');
    fs.mkdirSync(disk, { recursive: true });
    const script = [
      'mount -t tmpfs -o size="$2"m tmpfs "$1" || exit 90',
      'cp -a "$3" "$1/ledger" || exit 91',
      'shift 3',
      '"$@" --ledger "$D/ledger" --state-dir "$D/state"; s=$?',
      'rm -rf "$L" && cp -a "$D/ledger" "$L" || exit 92',
      'exit $s',
    ].join('\n');
    const result = spawnSync(
      'unshare',
      ['-m', 'sh', '-c', script, 'sh', disk, String(megabytes), where.world.gitdir, process.execPath, COO, 'watch', '--once', '--json', '--key', where.keyFile, '--repo', where.repo, '--ea-command', agent],
      { env: { ...process.env, OPENAI_API_KEY: 'sk-hostile-test', D: disk, L: where.world.gitdir }, encoding: 'utf8', timeout: 90_000, killSignal: 'SIGKILL', maxBuffer: 64 * 1024 * 1024 },
    );
    return { status: result.status, hung: (result.error as NodeJS.ErrnoException | undefined)?.code === 'ETIMEDOUT', stderr: `${result.stdout}${result.stderr}` };
  }

  attack('a hostile agent: it fills the disk its runner\'s ledger and state folder share, then exits', 'runner', 'refused', async () => {
    const where = await place('shared');
    const { messageId } = await dispatchTo(where, 'shared');
    const watch = watchWithLedgerOnSmallDisk(where, agentScript(where.world.dir, `${FIX}; cat /dev/zero > src/fill.bin 2>/dev/null; true`), 24);
    if (watch.hung) return 'hung';
    const [receipt] = await receiptsFor(where, messageId);
    if (receipt === undefined) return `no receipt (exit ${watch.status}): ${watch.stderr.slice(-300)}`;
    return receipt['status'] === 'failed' ? 'refused' : `receipted as ${String(receipt['status'])} ${codesOf(receipt).join(', ')}`;
  });

  attack('a hostile agent: it writes until the state folder\'s disk is full, then exits', 'runner', 'refused', async () => {
    const where = await place('fill');
    const { messageId } = await dispatchTo(where, 'fill');
    const watch = watchOnSmallDisk(where, agentScript(where.world.dir, `${FIX}; cat /dev/zero > src/fill.bin 2>/dev/null; true`), 24);
    if (watch.hung) return 'hung';
    const [receipt] = await receiptsFor(where, messageId);
    if (receipt === undefined) return `no receipt (exit ${watch.status}): ${watch.stderr.slice(-300)}`;
    return receipt['status'] === 'failed' ? 'refused' : `receipted as ${String(receipt['status'])} ${codesOf(receipt).join(', ')}`;
  });
});
