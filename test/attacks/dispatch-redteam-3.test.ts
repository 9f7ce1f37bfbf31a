import * as fs from 'node:fs';
import { join } from 'node:path';
import { describe } from 'vitest';
import { attack } from '../helpers/attack-kit.js';
import { agentScript, codesOf, dispatchTo, FIX, hostilePlaces, receiptsFor, watchOnce, type HostilePlace } from '../helpers/hostile-agent.js';
import { tempDir } from '../helpers/tmp.js';

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
  async function leftBehind(name: string, marker: readonly string[], redirect: string, isolation?: 'none'): Promise<string> {
    const wait = `until [ -n "$(ps -C sleep -o args= | grep -x '${marker.join(' ')}')" ]; do sleep 0.05; done`;
    try {
      const { receipt, unreceipted } = await attempted(place, name, `${FIX}; setsid ${marker.join(' ')} ${redirect} &\n${wait}`, { timeoutMs: 40_000, ...(isolation === undefined ? {} : { isolation }) });
      if (receipt === undefined) return unreceipted;
      if (processesRunning(marker).length > 0) return `receipted as ${String(receipt['status'])}, its child still running`;
      return receipt['status'] === 'succeeded' ? 'refused' : `receipted as ${String(receipt['status'])} ${codesOf(receipt).join(', ')}`;
    } finally {
      endLeftovers(marker);
    }
  }

  attack("a hostile agent: without bubblewrap, a child in a session of its own holding the runner's pipes", 'runner', 'refused', () => leftBehind('held-pipes', ['sleep', '3141'], '', 'none'));

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

  attack('a hostile agent: under bubblewrap, a child in a session of its own, its output away from the runner', 'runner', 'refused', () =>
    leftBehind('bwrap-daemon', ['sleep', '3142'], '</dev/null >/dev/null 2>&1'),
  );
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
