import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cooBounded, headOf, refusal } from '../helpers/damage.js';
import { agentScript, dispatchTo, hostilePlaces, receiptsFor, watchOnce } from '../helpers/hostile-agent.js';
import { laneState } from '../helpers/startup.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * A careless operator, round 26: a program built for another machine given as the executor or as
 * Oracle (a macOS or Windows build, an ELF binary of another architecture).
 */

const dir = tempDir('operator-redteam-26-');

/** The first bytes of a program built for another machine than this one: enough for the kernel to refuse it, and for the runner to tell which. */
function foreignBinaries(): Array<[string, Buffer, RegExp]> {
  const elf = (machine: number): Buffer => {
    const header = Buffer.alloc(64);
    header.write('\x7fELF', 0, 'latin1');
    header[4] = 2; // 64-bit
    header[5] = 1; // little-endian
    header[6] = 1;
    header.writeUInt16LE(2, 16); // an executable
    header.writeUInt16LE(machine, 18);
    return header;
  };
  // Another architecture than this machine's: aarch64 on x86-64, x86-64 elsewhere.
  const other = process.arch === 'x64' ? 183 : 62;
  const macho = Buffer.concat([Buffer.from([0xcf, 0xfa, 0xed, 0xfe, 0x0c, 0x00, 0x00, 0x01]), Buffer.alloc(56)]);
  const pe = Buffer.concat([Buffer.from('MZ', 'latin1'), Buffer.alloc(62)]);
  return [
    ['an ELF binary of another architecture', elf(other), /is an ELF program for another machine \(\S+\), not this one's \(\S+\)/],
    ['a macOS build (Mach-O)', macho, /is a macOS program \(Mach-O\)/],
    ['a Windows build (an .exe)', pe, /is a Windows program \(\.exe\)/],
  ];
}

describe('an --ea-command or --oracle-command built for another machine', () => {
  const places = hostilePlaces(join(dir, 'places'), 'foreign');

  it('leaves the dispatch queued and unclaimed, said at start, never claimed and receipted as the work\'s failure; Oracle\'s command is judged by the same rule', async () => {
    const place = await places('start');
    const { messageId } = await dispatchTo(place, 'foreign-start');
    const before = headOf(place.world.gitdir);
    for (const [what, bytes, said] of foreignBinaries()) {
      const agent = join(place.world.dir, `agent-${what.replace(/\W+/g, '-')}`);
      writeFileSync(agent, bytes, { mode: 0o755 });
      const run = watchOnce(place, agent, { isolation: 'none' });
      expect(run.status, `${what}: ${run.stderr}`).toBe(0);
      expect(run.stderr, what).toMatch(new RegExp(`dispatches to ea\\.codex wait, queued and unclaimed: .*${said.source}`));
      expect(run.stdout, what).not.toContain('"claimed"');
      expect(laneState(place.world, messageId), what).toBe('queued');
      expect(await receiptsFor(place, messageId), what).toEqual([]);
    }
    expect(headOf(place.world.gitdir)).toBe(before);
    const [, macho] = foreignBinaries()[1]!;
    const oracle = join(place.world.dir, 'oracle-macos');
    writeFileSync(oracle, macho, { mode: 0o755 });
    const foreign = join(place.world.dir, 'agent-macos');
    writeFileSync(foreign, macho, { mode: 0o755 });
    const refused = refusal(cooBounded(['watch', '--once', '--ledger', place.world.gitdir, '--key', place.keyFile, '--repo', place.repo, '--state-dir', place.stateDir, '--isolation', 'none', '--oracle-command', oracle, '--ea-command', foreign], { env: { OPENAI_API_KEY: 'sk-test-key' } }));
    expect(refused).toMatch(/^coo: ORACLE_CONFIG: no lane can run here, so nothing is claimed: consults to aa\.chatgpt: Oracle cannot be started: \S+oracle-macos is a macOS program \(Mach-O\)/);
    expect(headOf(place.world.gitdir)).toBe(before);
    // A program that can start is run as ever.
    const run = watchOnce(place, agentScript(place.world.dir, 'true'), { isolation: 'none' });
    expect(run.stdout, run.stderr).toContain('"claimed"');
  });
});
