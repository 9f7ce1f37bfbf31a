import { spawn, type ChildProcess } from 'node:child_process';
import { renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { formatPrivateKey } from '../../src/crypto/keys.js';
import { COO } from './cli.js';
import { FAKE_ORACLE, type World } from './lane.js';

/** A `coo watch --once` subprocess whose Oracle is the fake one in `http` mode (or the real CLI: `realOracle`) against the world's loopback model. */
export function startRunner(world: World, options: { failpoint?: string; stateDir?: string; realOracle?: boolean } = {}): ChildProcess {
  const keyFile = join(world.dir, 'runner-coo.key');
  writeFileSync(keyFile, formatPrivateKey(world.actors.coo), { mode: 0o600 });
  // Written beside and renamed into place: an Oracle a killed runner left behind may still be
  // executing the wrapper, and writing a running script in place fails with ETXTBSY.
  const wrapper = join(world.dir, 'oracle-http.sh');
  const temp = `${wrapper}.${process.pid}.tmp`;
  writeFileSync(temp, `#!/bin/sh\nexec "${process.execPath}" "${FAKE_ORACLE}" --fake-mode http "$@"\n`, { mode: 0o755 });
  renameSync(temp, wrapper);
  return spawn(
    process.execPath,
    [COO, 'watch', '--once', '--json', '--ledger', world.gitdir, '--key', keyFile, '--repo', world.target, '--state-dir', options.stateDir ?? join(world.dir, 'state'), ...(options.realOracle === true ? [] : ['--oracle-command', wrapper]), '--oracle-base-url', `${world.server.url}/v1`],
    { env: { ...process.env, OPENAI_API_KEY: 'sk-test-key', ...(options.failpoint === undefined ? {} : { COO_FAILPOINT: options.failpoint }) }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
}

export function finished(child: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }> {
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  child.stdout?.resume();
  return new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal, stderr })));
}
