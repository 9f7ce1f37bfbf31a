import { renameSync } from 'node:fs';
import { join } from 'node:path';
import { loadPrivateKey } from '../../src/cli/common.js';
import { enqueueConsult } from '../../src/consult/enqueue.js';
import { startFakeModelServer, type FakeModelServer } from '../../src/offline/fake-model-server.js';
import { OracleCli } from '../../src/consult/oracle.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { RemoteLedger } from '../../src/remote/publish.js';
import { Runner, type RunnerEvent, type RunnerOptions } from '../../src/runner/runner.js';
import type { ActorPolicy } from '../../src/schema/policy.js';
import { startGitHttp, type GitHttpServer } from './git-http.js';
import { startBounded, type BoundedResult } from './damage.js';
import { makeServedLedger, makeWriter, type ServedLedger, type Writer } from './remote-ledger.js';

/**
 * Runners on separate machines in one test process: a served ledger behind git http-backend, the
 * loopback model, and machines, each its own HOME, clone and state folder, whose runners work
 * through the remote. What they open is closed by the `closers` the caller runs after its tests.
 */

export interface Machine {
  readonly name: string;
  readonly gitdir: string;
  readonly ledger: Ledger;
  readonly remote: RemoteLedger;
  readonly stateDir: string;
  readonly events: RunnerEvent[];
  runner(options?: Partial<RunnerOptions>): Runner;
}

export interface Case {
  readonly dir: string;
  readonly served: ServedLedger;
  readonly url: string;
  readonly model: FakeModelServer;
  machine(name: string): Promise<Machine>;
  /** The COO's machine enqueues one consult through the remote; its message id. */
  consult(): Promise<string>;
}

let cases = 0;

/** A served ledger behind git http-backend, the loopback model, and machines: each its own HOME and clone. */
export async function makeCase(dir: string, closers: Array<() => Promise<void> | void>, policy?: ActorPolicy): Promise<Case> {
  cases += 1;
  const caseDir = join(dir, `case-${cases}`);
  const served = await makeServedLedger(caseDir, undefined, policy);
  const http: GitHttpServer = await startGitHttp(served.root);
  closers.push(() => http.close());
  const url = http.url(served.name);
  const model = await startFakeModelServer(['ok']);
  closers.push(() => model.close());
  const key = loadPrivateKey(served.keys.coo);
  const machine = async (name: string): Promise<Machine> => {
    const writer = await makeWriter(caseDir, name, served, url);
    const ledger = Ledger.open(writer.gitdir);
    closers.push(() => ledger.close());
    const remote = new RemoteLedger(ledger, { remote: url });
    const events: RunnerEvent[] = [];
    const stateDir = join(writer.home, 'state');
    return {
      name,
      gitdir: writer.gitdir,
      ledger,
      remote,
      stateDir,
      events,
      runner: (options = {}) => {
        const transport = new OracleCli({ route: { baseUrl: `${model.url}/v1` }, env: { OPENAI_API_KEY: 'sk-test-key' }, hide: [writer.gitdir] });
        const runner = new Runner({ ledger, key, repo: served.target, stateDir, transport, remote, onEvent: (event) => events.push(event), ...options });
        closers.push(() => runner.close());
        return runner;
      },
    };
  };
  let cooMachine: Machine | null = null;
  return {
    dir: caseDir,
    served,
    url,
    model,
    machine,
    consult: async () => {
      cooMachine ??= await machine('coo');
      const published = await cooMachine.remote.write((ledger) =>
        enqueueConsult({ ledger, key, now: new Date(), target: 'aa.chatgpt', repo: served.target, patterns: ['README.md'], question: 'Is add() correct for NaN?', maxRuntimeSeconds: 60 }),
      );
      return published.result.messageId;
    },
  };
}

/** The receipts the remote holds for a message: attempt number and blockers. */
export async function remoteReceipts(served: ServedLedger, messageId: string): Promise<Array<{ attempt: number; status: string; blockers: readonly string[] }>> {
  const ledger = Ledger.open(served.gitdir);
  try {
    const record = (await ledger.state()).messages.get(messageId)!;
    return record.attempts.flatMap((attempt) => (attempt.receipt === null ? [] : [{ attempt: attempt.number, status: attempt.receipt.status, blockers: attempt.receipt.blockers }]));
  } finally {
    ledger.close();
  }
}

export function types(events: readonly RunnerEvent[]): string[] {
  return events.map((event) => event.type);
}

/** A transport whose call is paid and whose answer is then held until `release`. */
export function holdAnswers(real: OracleCli): { transport: OracleCli; paid: Promise<void>; release: () => void } {
  let release: () => void = () => undefined;
  const held = new Promise<void>((resolve) => (release = resolve));
  let paid: () => void = () => undefined;
  const answered = new Promise<void>((resolve) => (paid = resolve));
  const transport = Object.assign(Object.create(real) as OracleCli, {
    run: async (request: Parameters<OracleCli['run']>[0]) => {
      const run = await real.run(request);
      paid();
      await held;
      return run;
    },
  });
  return { transport, paid: answered, release };
}

/** `holdAnswers` for a machine of a case, against the case's model. */
export function heldTransport(world: Case, machine: Machine): { transport: OracleCli; paid: Promise<void>; release: () => void } {
  return holdAnswers(new OracleCli({ route: { baseUrl: `${world.model.url}/v1` }, env: { OPENAI_API_KEY: 'sk-test-key' }, hide: [machine.gitdir] }));
}

/** A runner of `machine` inside its paid call, its answer held: the runner, its pass, and the release. */
export async function holdingRunner(world: Case, machine: Machine, options: Partial<RunnerOptions> = {}): Promise<{ runner: Runner; running: Promise<unknown>; release: () => void }> {
  const slow = heldTransport(world, machine);
  const runner = machine.runner({ ...options, transport: slow.transport });
  const running = runner.runOnce();
  await slow.paid;
  return { runner, running, release: slow.release };
}

/**
 * The events of a runner on `machine`, recorded as they come, with the remote taken away once the
 * call is paid and before its receipt is published (the served ledger's folder moved to `away`;
 * move it back to bring the remote back).
 */
export function awayOncePaid(world: Case, machine: Machine): { readonly away: string; readonly onEvent: (event: RunnerEvent) => void } {
  const away = `${world.served.gitdir}.away`;
  const onEvent = (event: RunnerEvent): void => {
    machine.events.push(event);
    if (event.type === 'oracle_ended') renameSync(world.served.gitdir, away);
  };
  return { away, onEvent };
}

/** The CLI run to its end without blocking this process (servers and the model live here); stdin is closed, so coo mcp ends once it serves. */
export function cliEnded(args: readonly string[], env: NodeJS.ProcessEnv): Promise<BoundedResult> {
  return startBounded(args, { OPENAI_API_KEY: 'sk-test-key', ...env }).ended;
}

/** The entry points that start a runner, `coo watch --once` and `coo mcp --run`, through `writer`'s remote, consulting the model at `modelUrl`. */
export function runnerEntryPoints(writer: Writer, served: ServedLedger, stateDir: string, modelUrl: string): Array<readonly string[]> {
  const common = ['--remote', writer.url, '--ledger', writer.gitdir, '--key', served.keys.coo, '--repo', served.target, '--state-dir', stateDir, '--oracle-base-url', `${modelUrl}/v1`, '--isolation', 'none'];
  return [
    ['watch', '--once', ...common],
    ['mcp', '--run', ...common],
  ];
}
