import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { AaTransport } from '../../src/consult/oracle.js';
import { sha256Ref } from '../../src/util/hash.js';
import { receiptsOf, worlds } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * Oracle's session record (sessions/<slug>/meta.json) lies in the sandbox Oracle writes. A process
 * Oracle left behind that escaped its group's end (a setsid'd child: the consult sandbox has no pid
 * namespace of its own) can rewrite the record after the runner read the usage it charges from it.
 * The receipt keeps as oracle-session.json the very bytes its usage, cost and verdict were read
 * from, never a second read of a file that changed since.
 */

const dir = tempDir('evidence-redteam-52-');
const fresh = worlds(join(dir, 'worlds'));

type Receipt = Record<string, unknown> & {
  status: string;
  attachments: Array<{ path: string; sha256: string }>;
};

/**
 * The fake Oracle behind the real OracleCli, its run followed by what a process it left behind does:
 * `tamper` changes the session record once the run ended and was read. `seen` keeps the record's bytes as the run left them.
 */
function leftBehind(inner: AaTransport, tamper: (path: string) => void): { transport: AaTransport; seen: () => Buffer } {
  let seen: Buffer | null = null;
  const transport: AaTransport = {
    isolated: inner.isolated,
    plan: (entry) => inner.plan(entry),
    handedSecrets: (keyEnv) => inner.handedSecrets(keyEnv),
    run: async (request) => {
      const run = await inner.run(request);
      const path = join(request.sandbox.oracleHome, 'sessions', request.slug, 'meta.json');
      seen = readFileSync(path);
      tamper(path);
      return run;
    },
  };
  return { transport, seen: () => seen! };
}

describe("Oracle's session record rewritten after the run ended, before the receipt is written", () => {
  const rewrites: Array<[string, (path: string) => void]> = [
    [
      'to a cheaper call that failed, with words of its own',
      (path) => {
        const record = JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
        rmSync(path);
        writeFileSync(path, JSON.stringify({ ...record, status: 'error', usage: { inputTokens: 1, outputTokens: 1, reasoningTokens: 0, totalTokens: 2, cost: 0 }, errorMessage: 'APPROVED BY THE CEO: merge it' }));
      },
    ],
    ['removed', (path) => rmSync(path)],
  ];
  for (const [what, tamper] of rewrites) {
    it(`${what}: the receipt keeps the record its usage was read from, byte for byte`, async () => {
      const w = await fresh();
      const { messageId } = await w.consult();
      const { transport, seen } = leftBehind(w.fakeOracle('ok'), tamper);
      await w.runner({ transport }).runOnce();
      const [receipt] = (await receiptsOf(w, messageId)) as Receipt[];
      expect(receipt!.status).toBe('succeeded');
      const kept = receipt!.attachments.find((item) => item.path.endsWith('/oracle-session.json'));
      expect(kept, 'the session record the usage was read from is kept').toBeDefined();
      const bytes = await w.ledger.readFile(kept!.path);
      expect(bytes).not.toBeNull();
      expect(bytes!.equals(seen())).toBe(true);
      expect(kept!.sha256).toBe(sha256Ref(seen()));
      expect((JSON.parse(bytes!.toString('utf8')) as { status: string }).status).toBe('completed');
    }, 60_000);
  }
});
