import { resolve } from 'node:path';
import type { Command } from 'commander';
import { defaultAuditDir } from '../audit/checkpoint.js';
import { Ledger } from '../ledger/ledger.js';
import { CooError } from '../errors.js';
import { LIMITS } from '../limits.js';
import { serverScrubber } from '../mcp/results.js';
import { RunnerProblems } from '../mcp/runner-problems.js';
import { createCooMcpServer, serveStdio, TOOL_SUMMARIES } from '../mcp/server.js';
import { GuardedStdioTransport, loadWireSchemas } from '../mcp/stdio.js';
import { Runner, type RunnerErrorEvent, type RunnerEvent } from '../runner/runner.js';
import { onStopSignal, stopOnSignal } from './stop.js';
import { watchLedger, watchRemote } from '../runner/watch.js';
import { requireRemoteOfClone } from '../remote/git-remote.js';
import { RemoteLedger } from '../remote/publish.js';
import { remoteOption, requireRemoteOfWrites } from './remote-option.js';
import { printable } from './show.js';
import { keyOption, ledgerOption, loadPrivateKey, MAX_FETCH_HELP, maxFetchFlag, packingNote, required, requireGivenWith, runnerSeconds } from './common.js';
import { defaultStateDir, describeEvent, executorsFromFlags, oracleFromFlags, runnerLaneFlags, startRunnerLanes, pullRequestsFromFlags, withExecutorOptions, withOracleOptions, type ExecutorFlags, type OracleFlags } from './watch.js';
import { servingProblems, syncForStartup, writerFolderProblems } from '../runner/startup.js';
import { planStartup } from '../runner/readiness.js';
import { keyFolders, registerPrivateFolders } from '../util/runner-folders.js';

type McpOptions = OracleFlags & ExecutorFlags & { ledger?: string; key?: string; repo?: string; run?: boolean; stateDir?: string; heartbeat?: boolean; remote?: string; pollInterval: string; maxFetch?: string };

/** The tools, one line each, for `coo mcp --help`. */
function toolsHelp(): string {
  const width = Math.max(...TOOL_SUMMARIES.map(([name]) => name.length));
  return `\nTools:\n${TOOL_SUMMARIES.map(([name, summary]) => `  ${name.padEnd(width)}  ${summary}`).join('\n')}\n\nResources: coo://messages/<id>/envelope, /receipt and /answer.\n`;
}

export function mcpVerb(program: Command): void {
  const command = program
    .command('mcp')
    .description(`serve the ledger's lanes to an agent as MCP tools over stdio (${TOOL_SUMMARIES.map(([name]) => name).join(', ')}); logs go to stderr`)
    .addHelpText('after', toolsHelp())
    .addOption(ledgerOption())
    .addOption(keyOption('the COO private key the server signs consults with (never shown to the agent); default $COO_KEY'))
    .option('--repo <path>', 'the repository consults pin their context in (fixed for the agent)')
    .option('--run', 'also run the runner in this process, as `coo watch` does')
    .option('--state-dir <dir>', 'where attempt sandboxes live, with --run (default ~/.local/state/coo-commons/runner/<ledger>)');
  withExecutorOptions(withOracleOptions(command, 'Oracle engine, with --run: only "api" is accepted'))
    .option('--heartbeat', 'with --run: append signed heartbeats at the policy interval (always on with --remote)')
    .addOption(remoteOption())
    .option('--poll-interval <seconds>', 'with --run and --remote: seconds between looks at the remote (git ls-remote)', '2')
    .option('--max-fetch <MiB>', `with --remote: ${MAX_FETCH_HELP}`)
    .action(async (opts: McpOptions, self: Command) => {
      const gitdir = resolve(required(opts.ledger, '--ledger', 'the ledger path or $COO_LEDGER'));
      const keyPath = resolve(required(opts.key, '--key', 'the COO private key or $COO_KEY'));
      const repo = resolve(required(opts.repo, '--repo', 'the repository consults pin their context in'));
      const pollSeconds = runnerSeconds('--poll-interval', opts.pollInterval, 2);
      const maxFetchBytes = maxFetchFlag(opts.maxFetch);
      // The runner's flags without --run would be left unused: the operator meant a runner, and none would run.
      requireGivenWith(self, ['--state-dir', '--heartbeat', '--poll-interval', ...runnerLaneFlags()], '--run', opts.run === true);
      requireGivenWith(self, ['--max-fetch', '--poll-interval'], '--remote', opts.remote !== undefined && opts.remote !== '');
      const oracle = opts.run === true ? oracleFromFlags(opts, [gitdir, ...keyFolders(keyPath)]) : null;
      const key = loadPrivateKey(keyPath);
      const ledger = Ledger.open(gitdir);
      const stateDir = resolve(opts.stateDir ?? defaultStateDir(gitdir));
      const auditDir = defaultAuditDir();
      // One line each, with what acts on a terminal shown as code points: lines carry what the client sent (a method, a path).
      const log = (line: string): void => void process.stderr.write(`coo mcp: ${printable(line, Number.POSITIVE_INFINITY)}\n`);
      const note = packingNote(gitdir);
      if (note !== null) log(`note: ${note}`);
      const remoteUrl = opts.remote === undefined || opts.remote === '' ? undefined : opts.remote;
      // The server writes (the agent's consults, adoptions, acknowledgements) with or without --run.
      if (opts.run === true) requireRemoteOfClone(gitdir, remoteUrl, 'coo mcp --run');
      else requireRemoteOfWrites(gitdir, remoteUrl, 'coo mcp');
      const scrubber = serverScrubber({
        key,
        env: process.env,
        places: [
          { name: 'ledger', path: gitdir },
          { name: 'key', path: keyPath },
          ...keyFolders(keyPath).map((path) => ({ name: 'key-folder', path })),
          { name: 'repo', path: repo },
          { name: 'runner-state', path: stateDir },
          { name: 'audit-state', path: auditDir },
        ],
        ...(remoteUrl === undefined ? {} : { remoteUrl }),
        repositories: [gitdir, repo],
      });
      const remote = remoteUrl === undefined ? undefined : new RemoteLedger(ledger, { remote: remoteUrl, shareConnection: true, ...(maxFetchBytes === undefined ? {} : { maxFetchBytes }) });
      const hide = keyFolders(keyPath);
      const problems = new RunnerProblems();
      const executors = oracle === null ? null : executorsFromFlags(opts, [gitdir, stateDir, ...hide]);
      const controller = new AbortController();
      let runner: Runner | null = null;
      let release = (): void => undefined;
      let observe: (event: RunnerEvent) => void = () => undefined;
      try {
        // The server signs the agent's consults with this key: a key that is not the active COO's is refused at start, with or without --run,
        // judged on the remote's head when there is one. With --run, the runner's start-up checks judge it, as coo watch's do, after the
        // folders: a clone this process cannot write is said as such, not as the sync's failure to write it.
        if (oracle === null || executors === null) {
          // The folder first, as the runner's start does: a clone this server cannot write is said as such, not as the sync's failure to write it.
          const folders = writerFolderProblems(ledger);
          if (folders.length === 0) await syncForStartup(remote);
          // A ledger holding an invalid commit, rolled back or forked, stops the start (exit 3) as it stops the runner's: the server builds on its head.
          const shared = [...(await servingProblems(await ledger.intactState(), { ledger, key, keyLabel: keyPath, repo })), ...folders];
          const plan = planStartup({ shared, isolation: 'bwrap', targets: [] });
          if (plan.kind === 'refuse') throw new CooError(plan.code, plan.message);
        } else {
          const started = await startRunnerLanes({ ledger, key, keyPath, repo, stateDir, isolation: opts.isolation, oracle, executors, remote }, (line) => log(scrubber.text(line)));
          release = started.release;
          // Once the start passed (a refused --state-dir is no runner's folder), before any sandbox: every other runner's sandboxes on this machine hide this one's folders too.
          registerPrivateFolders([stateDir, ...hide]);
          const pullRequests = pullRequestsFromFlags(opts, (line) => log(scrubber.text(line)));
          runner = new Runner({
            ledger,
            key,
            repo,
            stateDir,
            ...started.lanes,
            hide,
            onEvent: (event) => {
              observe(event);
              problems.observe(event);
              log(scrubber.text(describeEvent(event)));
            },
            ...(pullRequests === undefined ? {} : { pullRequests }),
            ...(remote === undefined ? {} : { remote }),
          });
        }
        const stdio = new GuardedStdioTransport(process.stdin, process.stdout, await loadWireSchemas(), LIMITS.mcpMessageBytes);
        const server = await createCooMcpServer({ ledger, key, repo, auditDir, clock: () => new Date(), scrubber, version: program.version() ?? '0.0.0', log, inputEnded: stdio.inputEnded, ...(remote === undefined ? {} : { remote }), ...(runner === null ? {} : { runnerProblems: problems }) });
        // A message over the limit ends the session: the transport keeps why (stdio.overLimit), the verb's error once the server has
        // closed; one line says now why the process goes on. Any other line refused (mcp/wire.ts) is answered to the client and logged here.
        stdio.onerror = (error) => {
          if (error === stdio.overLimit) log(`a line over the ${LIMITS.mcpMessageBytes}-byte limit: nothing more is read, and the session ends once the calls in hand are done`);
          else log(scrubber.text(error instanceof CooError ? `${error.code}: ${error.message}` : error.message));
        };
        stdio.onclose = () => controller.abort();
        // The session ends once what was read is answered: the client closing our stdin (the MCP stdio transport's shutdown), a line
        // over the limit, the client's end of stdout closed, or a signal (below).
        void stdio.finished.then(() => controller.abort());
        // Ctrl-C stops the runner as it stops coo watch: the attempt in flight ends interrupted, and one line says so.
        // It ends the session as a client closing stdin does: the calls in hand are done first (a write under way was cut, its ref lock left).
        // A second signal, of any kind, ends the process at once (stop.ts). One line says why it has not ended yet.
        const end = (signal: NodeJS.Signals): void => {
          log(`stopped by ${signal}: nothing more is read, and the session ends once the calls in hand are done (a second signal ends it at once)`);
          stdio.end();
        };
        const stop = runner === null ? null : stopOnSignal(runner, end);
        if (stop !== null) observe = stop.observe;
        if (stop === null) onStopSignal(end);
        await serveStdio(server, stdio);
        log(`serving ${runner === null ? 'without a runner (run coo watch beside it)' : `with runner ${runner.runnerId}`} on stdio${remote === undefined ? '' : `, through ${remote.url}`}`);
        const policy = (await ledger.state()).policy?.doc;
        const heartbeat = (opts.heartbeat === true || remote !== undefined) && policy !== undefined ? { heartbeatSeconds: policy.heartbeat.interval_seconds } : {};
        const onError = (event: RunnerErrorEvent): void => log(`${event.code}: ${event.message}`);
        const watching =
          runner === null
            ? Promise.resolve()
            : remote === undefined
              ? watchLedger(runner, gitdir, { signal: controller.signal, ...heartbeat, onIdle: () => ledger.checkpoint(64), onError })
              : watchRemote(runner, { remote, signal: controller.signal, pollSeconds, ...heartbeat, onIdle: () => ledger.checkpoint(64), onError });
        // A runner that stops on its own (a remote that no longer verifies) ends the session, and its
        // error is the verb's, said as one coded line after the server closes: never an unhandled rejection.
        let stopped: unknown = null;
        watching.catch((error: unknown) => {
          stopped = error;
          controller.abort();
        });
        await new Promise<void>((done) => {
          if (controller.signal.aborted) done();
          controller.signal.addEventListener('abort', () => done(), { once: true });
        });
        await watching.catch(() => undefined);
        await server.close();
        if (stop !== null) {
          const messages = (await ledger.state()).messages;
          for (const line of stop.closing((id) => messages.get(id)?.intent)) log(line);
          stop.dispose();
        }
        if (stopped !== null) throw stopped;
        if (stdio.overLimit !== null) throw stdio.overLimit;
      } finally {
        runner?.close();
        release();
        remote?.close();
        ledger.close();
      }
    });
}
