import { createHash } from 'node:crypto';
import { join, resolve } from 'node:path';
import { Command, Option } from 'commander';
import { CooError } from '../errors.js';
import { checkOracleArgs, OracleCli, type OracleConfig } from '../consult/oracle.js';
import { Ledger } from '../ledger/ledger.js';
import { Runner, type RunnerEvent, type RunnerOptions } from '../runner/runner.js';
import { watchLedger, watchRemote } from '../runner/watch.js';
import { requireRemoteOfClone } from '../remote/git-remote.js';
import { RemoteLedger } from '../remote/publish.js';
import { DEFAULT_LEASE_GRACE_SECONDS } from '../runner/runner.js';
import { resolveOracleCommand } from '../runner/oracle-check.js';
import { stopOnSignal } from './stop.js';
import { startLanes } from '../runner/startup.js';
import type { PrivateKey } from '../crypto/keys.js';
import { ISOLATIONS, type Isolation } from '../util/bubblewrap.js';
import { collectPairs, keyOption, ledgerOption, loadPrivateKey, MAX_FETCH_HELP, maxFetchFlag, packingNote, required, requireGivenWith, runnerSeconds, splitPair } from './common.js';
import { executorFactory } from '../dispatch/executors.js';
import type { ExecutorFactory } from '../dispatch/executor.js';
import type { PullRequestConfig } from '../dispatch/runner-lane.js';
import { writeErr } from './terminal.js';
import { providerKeyProblem } from '../lane/provider-key.js';
import { keyFolders, registerPrivateFolders, stateRoot } from '../util/runner-folders.js';
import { inertJson } from '../util/invisible.js';

/** The runner refreshes the state cache when idle once this many commits came since the last one. */
const IDLE_CHECKPOINT_COMMITS = 64;

export function defaultStateDir(gitdir: string): string {
  return join(stateRoot(), 'runner', createHash('sha256').update(resolve(gitdir)).digest('hex').slice(0, 16));
}

export function describeEvent(event: RunnerEvent): string {
  switch (event.type) {
    case 'claimed':
      return `claimed ${event.messageId} attempt ${event.attempt}`;
    case 'oracle_started':
      return `consulting for ${event.messageId} attempt ${event.attempt}`;
    case 'oracle_ended': {
      const how = event.killedByTimer ? 'killed at its runtime budget' : event.signal !== null ? `ended by ${event.signal}` : `exit ${event.exitCode}`;
      return `Oracle ended for ${event.messageId} attempt ${event.attempt} after ${(event.elapsedMs / 1000).toFixed(1)} s (${how})`;
    }
    case 'oracle_orphan':
      return `waiting for the Oracle (pid ${event.pid}) of ${event.messageId} attempt ${event.attempt}, left running by the runner ${event.runner} that stopped, to end: until ${event.until} at most (its runtime budget), then it is ended and the attempt recovered; to end it now: kill -- -${event.pid}`;
    case 'receipt':
      return `receipt ${event.messageId} attempt ${event.attempt}: ${event.status}${event.blockers.length > 0 ? ` (${event.blockers.join(', ')})` : ''}${event.retryAt === null ? '' : `, next attempt after ${event.retryAt}`}`;
    case 'skipped':
      return `skipped ${event.messageId}: ${event.reason}`;
    case 'heartbeat':
      return `heartbeat at Ledger-Seq ${event.seq}`;
    case 'error':
      return `error${event.messageId === null ? '' : ` on ${event.messageId}`}: ${event.code}: ${event.message}`;
    case 'executor_started':
      return `dispatching ${event.messageId} attempt ${event.attempt} to ${event.executor} on branch ${event.branch}`;
    case 'executor_ended':
      return `executor ended for ${event.messageId} attempt ${event.attempt} after ${(event.elapsedMs / 1000).toFixed(1)} s (${event.killedBy === null ? `exit ${event.exitCode ?? 'by a signal'}` : `killed: ${event.killedBy}`})`;
    case 'verified':
      return `verified ${event.messageId} attempt ${event.attempt}: ${event.commands - event.failed} of ${event.commands} command(s) passed`;
    case 'late_result':
      return `late result for ${event.messageId} attempt ${event.attempt}: ${event.detail}`;
    case 'pull_request':
      return `pull request for ${event.messageId} attempt ${event.attempt}: ${event.url ?? 'none'} (${event.detail})`;
    case 'cut_off':
      return `CUT OFF from ${event.url} since ${event.since}: no new work starts until it answers (${event.detail})`;
    case 'reconnected':
      return `back on ${event.url} at ${event.at} (cut off since ${event.since})`;
    case 'journaled':
      return `receipt ${event.messageId} attempt ${event.attempt} kept in the journal until the remote takes it (${event.detail})`;
    case 'rebuilt':
      return `${event.summary}: published after ${event.conflicts} push conflict(s), ${event.tries} tries`;
    case 'takeover':
      return `taking over ${event.messageId} attempt ${event.attempt} from ${event.runner}: ${event.detail}`;
    case 'clock_skew':
      return `clock skew: ${event.entry} (${event.messageId}, runner ${event.runner}) is dated ${event.aheadSeconds} s ahead of this runner's clock; leases do not read such times, but check that machine's clock`;
    case 'result_kept':
      return `KEPT a paid result for ${event.messageId} attempt ${event.attempt}: the ledger refused its receipt (${event.code}: ${event.detail}); it is kept in ${event.kept} and the attempt stays open; once what refused it is put right (room on the disk, a ledger this user may write, the COO's key), run the runner again on this state folder: it lands the kept result without calling the model again`;
  }
}

export interface OracleFlags {
  engine?: string;
  oracleCommand?: string;
  oracleBaseUrl?: string;
  oracleAzureEndpoint?: string;
  oracleAzureDeployment?: string;
  oracleAnthropicUrl?: string;
  oracleGeminiUrl?: string;
  oracleOpenrouterUrl?: string;
  oracleGateway?: string[];
  oracleHost?: string[];
  oracleArg: string[];
  isolation: string;
}

/**
 * Checks the runner's Oracle flags (the browser engine and its flags, an `--oracle-command` that
 * names nothing, are a config error here, before anything runs) and returns how to make the
 * transport once the start-up checks (runner/startup.ts) know the sandbox.
 */
export function oracleFromFlags(flags: OracleFlags, hide: readonly string[]): (isolation: 'bwrap' | 'none') => OracleCli {
  if (flags.engine !== undefined && flags.engine !== 'api') {
    throw new CooError('ORACLE_CONFIG', `--engine ${flags.engine} is not allowed: the first slice runs Oracle's API engine only`);
  }
  isolationFlag(flags.isolation);
  if ((flags.oracleAzureEndpoint === undefined) !== (flags.oracleAzureDeployment === undefined)) {
    throw new CooError('USAGE', '--oracle-azure-endpoint and --oracle-azure-deployment go together');
  }
  checkOracleArgs(flags.oracleArg);
  const command = flags.oracleCommand === undefined ? undefined : resolveOracleCommand(flags.oracleCommand);
  const given = (value: string | undefined): string | undefined => (value === undefined || value === '' ? undefined : value);
  const anthropic = given(flags.oracleAnthropicUrl);
  const google = given(flags.oracleGeminiUrl);
  const openrouter = given(flags.oracleOpenrouterUrl);
  const config: OracleConfig = {
    ...(command === undefined ? {} : { command: [command] }),
    route: {
      ...(given(flags.oracleBaseUrl) === undefined ? {} : { baseUrl: flags.oracleBaseUrl! }),
      ...(flags.oracleAzureEndpoint === undefined ? {} : { azure: { endpoint: flags.oracleAzureEndpoint, deployment: flags.oracleAzureDeployment! } }),
    },
    endpoints: {
      ...(anthropic === undefined ? {} : { anthropic }),
      ...(google === undefined ? {} : { google }),
      ...(openrouter === undefined ? {} : { openrouter }),
      gateways: Object.fromEntries((flags.oracleGateway ?? []).map((pair) => splitPair(pair, '--oracle-gateway'))),
      hosts: (flags.oracleHost ?? []).flatMap((list) => list.split(/[\s,]+/).filter((pair) => pair !== '')).map((pair) => {
        const [name, address] = splitPair(pair, '--oracle-host');
        return { name, address };
      }),
    },
    extraArgs: flags.oracleArg,
    hide,
  };
  return (isolation) => {
    try {
      return new OracleCli({ ...config, isolation });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'MODULE_NOT_FOUND') throw error;
      throw new CooError('ORACLE_CONFIG', 'the pinned @steipete/oracle is not installed: run npm ci, or give --oracle-command');
    }
  };
}

/** `--isolation`: bwrap (the default, bubblewrap required), none (chosen in so many words), or auto (an older name of bwrap). */
export function isolationFlag(value: string): Isolation {
  if (!(ISOLATIONS as readonly string[]).includes(value)) throw new CooError('USAGE', '--isolation takes bwrap or none');
  return value as Isolation;
}

/** What a verb that runs the runner hands its start-up checks, from its flags. */
export interface RunnerLaneFlags {
  readonly ledger: Ledger;
  readonly key: PrivateKey;
  readonly keyPath: string;
  readonly repo: string;
  readonly stateDir: string;
  readonly isolation: string;
  readonly oracle: (isolation: 'bwrap' | 'none') => OracleCli;
  readonly executors: (isolation: 'bwrap' | 'none') => ExecutorFactory;
  /** The remote the runner works through, if any: synced before the checks. */
  readonly remote?: RemoteLedger | undefined;
  /** A single pass (`coo watch --once`): a model server on this machine that does not answer holds its target for the pass, and refuses the start when no target can run. */
  readonly once?: boolean;
}

/**
 * The start-up checks of a verb that runs the runner (`coo watch`, `coo mcp --run`): refuses the
 * start (exit 2) or returns the lanes, having said once, through `say`, what waits and why.
 */
export async function startRunnerLanes(flags: RunnerLaneFlags, say: (line: string) => void): Promise<{ readonly lanes: Pick<RunnerOptions, 'transport' | 'executors' | 'waiting' | 'looks'>; readonly release: () => void }> {
  // A runner that keeps running looks again at a model server on this machine that did not answer at start; a single pass (--once) cannot.
  const lanes = await startLanes({ ledger: flags.ledger, key: flags.key, keyLabel: flags.keyPath, repo: flags.repo, stateDir: flags.stateDir, isolation: isolationFlag(flags.isolation), consult: flags.oracle, dispatch: flags.executors, looksAgain: flags.once !== true, ...(flags.remote === undefined ? {} : { remote: flags.remote }) });
  for (const note of lanes.notes) say(note.text);
  // A verb that runs the runner serves both lanes: the start-up checks made both.
  return { lanes: { transport: lanes.transport!, executors: lanes.executors!, waiting: lanes.waiting, looks: lanes.looks }, release: lanes.release };
}

/** The Oracle flags every verb that runs the runner takes (`coo watch`, `coo mcp --run`). */
export function withOracleOptions(command: Command, engineHelp: string): Command {
  return command
    .option('--engine <engine>', engineHelp)
    .option('--oracle-command <path>', 'an Oracle executable to run instead of the pinned @steipete/oracle')
    .addOption(new Option('--oracle-base-url <url>', 'an OpenAI-compatible base URL for Oracle (--base-url); default $COO_ORACLE_BASE_URL (coo model serve prints one)').env('COO_ORACLE_BASE_URL'))
    .option('--oracle-azure-endpoint <url>', "an Azure OpenAI endpoint (Oracle's Responses API route)")
    .option('--oracle-azure-deployment <name>', 'the Azure deployment name')
    .addOption(new Option('--oracle-anthropic-url <url>', "the Anthropic route's Messages endpoint (ANTHROPIC_BASE_URL), on api.anthropic.com, ending in /v1/messages; default $COO_ORACLE_ANTHROPIC_URL").env('COO_ORACLE_ANTHROPIC_URL'))
    .addOption(new Option('--oracle-gemini-url <url>', "the Google route's Gemini API base URL (GOOGLE_GEMINI_BASE_URL); default $COO_ORACLE_GEMINI_URL").env('COO_ORACLE_GEMINI_URL'))
    .option('--oracle-openrouter-url <url>', "the OpenRouter route's API base URL")
    .option('--oracle-gateway <name=url>', 'where the OpenAI-compatible gateway a registry entry names is (repeatable)', collectPairs, [])
    .addOption(new Option('--oracle-host <name=address>', 'resolve a host name to this address inside the sandbox (repeatable; needs bubblewrap): an offline model under a provider\'s own host name; default $COO_ORACLE_HOSTS (comma-separated)').argParser(collectPairs).default([]).env('COO_ORACLE_HOSTS'))
    .option('--oracle-arg <arg>', 'an extra Oracle argument (repeatable); browser, remote and follow-up flags are refused', collectPairs, [])
    .option('--isolation <mode>', 'bwrap: every lane runs under bubblewrap, and without it none runs (auto is an older name of it); none: no OS sandbox, only a clean folder and environment, said at start and in every receipt', 'bwrap');
}

/** The execution-agent flags every verb that runs the runner takes (`coo watch`, `coo mcp --run`). */
export interface ExecutorFlags {
  isolation: string;
  eaCommand?: string;
  eaBaseUrl?: string;
  githubTokenEnv?: string;
  pushUrl?: string;
  githubApiUrl?: string;
  prBase?: string;
}

export function withExecutorOptions(command: Command): Command {
  return command
    .option('--ea-command <path>', 'the execution agent executable (default: codex or claude on PATH, else the installed @openai/codex or @anthropic-ai/claude-code, as the registry names)')
    .addOption(new Option('--ea-base-url <url>', "a model API base URL for the execution agent (a gateway or a scripted model); default $COO_EA_BASE_URL (coo model serve prints one), else the provider's own").env('COO_EA_BASE_URL'))
    .option('--github-token-env <name>', 'the environment variable holding the token that pushes branches and opens pull requests for --open-pr dispatches (default GITHUB_TOKEN; the agent never sees it)')
    .option('--push-url <url>', 'where --open-pr branches are pushed (default https://github.com/OWNER/REPO.git)')
    .option('--github-api-url <url>', 'the GitHub API for --open-pr (default $GITHUB_API_URL or https://api.github.com)')
    .option('--pr-base <branch>', 'the branch pull requests ask to merge into (default main)');
}

/** The flags of the Oracle and the execution agents every verb that runs the runner takes, read from where they are defined. */
export function runnerLaneFlags(): string[] {
  return withExecutorOptions(withOracleOptions(new Command(), '')).options.map((option) => option.long!);
}

/**
 * How the runner starts execution agents, from its flags, once the start-up checks know the sandbox
 * (runner/startup.ts), where an --ea-command that names nothing makes the dispatches wait while the
 * consults run. `hide` is what no executor sees.
 */
export function executorsFromFlags(flags: ExecutorFlags, hide: readonly string[]): (isolation: 'bwrap' | 'none') => ExecutorFactory {
  const baseUrl = flags.eaBaseUrl === undefined || flags.eaBaseUrl === '' ? undefined : flags.eaBaseUrl;
  return (isolation) => executorFactory({ hide, isolation, ...(flags.eaCommand === undefined ? {} : { command: [resolve(flags.eaCommand)] }), ...(baseUrl === undefined ? {} : { baseUrl }) });
}

/**
 * The runner's forge credentials for --open-pr dispatches, from its flags and environment; none
 * without a token. A token no forge takes (whitespace, a line end, pasted with its quotes: the rule
 * of provider keys, lane/provider-key.ts) is none too, said once through `say`: such a dispatch
 * waits, queued and unclaimed, instead of being claimed, paid for, and refused at its push.
 */
export function pullRequestsFromFlags(flags: ExecutorFlags, say: (line: string) => void): PullRequestConfig | undefined {
  const name = flags.githubTokenEnv ?? 'GITHUB_TOKEN';
  const token = process.env[name];
  const apiBaseUrl = flags.githubApiUrl ?? process.env['GITHUB_API_URL'];
  if (token === undefined || token === '') return undefined;
  const problem = providerKeyProblem(name, token);
  if (problem !== null) {
    say(`--open-pr dispatches wait, queued and unclaimed: the forge token is unusable: ${problem}`);
    return undefined;
  }
  return { token, base: flags.prBase ?? 'main', ...(flags.pushUrl === undefined ? {} : { pushUrl: flags.pushUrl }), ...(apiBaseUrl === undefined ? {} : { apiBaseUrl }) };
}

export function watchVerb(program: Command): void {
  const command = program
    .command('watch')
    .description('the runner: consult advisory agents and dispatch execution agents for queued envelopes, and commit a COO-signed receipt for every outcome')
    .addOption(ledgerOption())
    .addOption(keyOption('the COO private key that signs claims and receipts; default $COO_KEY'))
    .option('--repo <path>', 'the repository consults pin their context in and dispatches work in');
  withExecutorOptions(command)
    .option('--once', 'process what is ready now and exit')
    .option('--state-dir <dir>', 'where attempt sandboxes live (default ~/.local/state/coo-commons/runner/<ledger>)');
  withOracleOptions(command, 'Oracle engine: only "api" is accepted')
    .option('--heartbeat', 'append signed heartbeats at the policy interval while watching (always on with --remote: they renew the leases of its claims)')
    .option(
      '--remote <url>',
      "work through this remote; --ledger is then a local clone of it (coo clone URL DIR) whose origin must be this URL. Every claim, receipt and heartbeat is published there (a claim counts once the remote took it), each pass starts from the remote's verified head, and a claim another runner left is taken over only once its runner showed no progress (no heartbeat) for its lease and its runtime budget plus --lease-grace has passed since this runner first saw it, both measured on this runner's own clock. Cut off from the remote, the runner starts nothing new and keeps receipts of paid calls in a journal until the remote takes them",
    )
    .option('--poll-interval <seconds>', 'with --remote: seconds between looks at the remote (git ls-remote), growing while idle or failing', '2')
    .option('--poll-max <seconds>', 'with --remote: the longest wait between looks', '30')
    .option('--max-fetch <MiB>', `with --remote: ${MAX_FETCH_HELP}`)
    .option('--lease-grace <seconds>', `with --remote: seconds past a claimed attempt's runtime budget (counted from when this runner first saw the claim) before it may take the attempt over (default ${DEFAULT_LEASE_GRACE_SECONDS})`)
    .option('--keep-sandboxes', 'keep each attempt sandbox after its receipt')
    .option('--json', 'print one JSON event per line')
    .action(async (opts: OracleFlags & ExecutorFlags & { remote?: string; pollInterval: string; pollMax: string; leaseGrace?: string; maxFetch?: string; ledger?: string; key?: string; repo?: string; once?: boolean; stateDir?: string; heartbeat?: boolean; keepSandboxes?: boolean; json?: boolean }, self: Command) => {
      // Paths are made absolute here: Oracle runs in a sandbox folder of the state folder, not here.
      const gitdir = resolve(required(opts.ledger, '--ledger', 'the ledger path or $COO_LEDGER'));
      const keyPath = resolve(required(opts.key, '--key', 'the COO private key or $COO_KEY'));
      const repo = resolve(required(opts.repo, '--repo', 'the repository consults pin their context in'));
      const stateDir = resolve(opts.stateDir ?? defaultStateDir(gitdir));
      const pollSeconds = runnerSeconds('--poll-interval', opts.pollInterval, 2);
      const maxPollSeconds = runnerSeconds('--poll-max', opts.pollMax, 30);
      const leaseGraceSeconds = runnerSeconds('--lease-grace', opts.leaseGrace, DEFAULT_LEASE_GRACE_SECONDS);
      const remoteUrl = opts.remote === undefined || opts.remote === '' ? undefined : opts.remote;
      const maxFetchBytes = maxFetchFlag(opts.maxFetch);
      requireGivenWith(self, ['--lease-grace', '--max-fetch', '--poll-interval', '--poll-max'], '--remote', remoteUrl !== undefined);
      requireGivenWith(self, ['--heartbeat', '--poll-interval', '--poll-max'], 'a watch that keeps running (without --once)', opts.once !== true);
      requireRemoteOfClone(gitdir, remoteUrl, 'coo watch');
      const oracle = oracleFromFlags(opts, [gitdir, ...keyFolders(keyPath)]);
      const key = loadPrivateKey(keyPath);
      const ledger = Ledger.open(gitdir);
      const hide = keyFolders(keyPath);
      const executors = executorsFromFlags(opts, [gitdir, stateDir, ...hide]);
      const remote = remoteUrl === undefined ? undefined : new RemoteLedger(ledger, { remote: remoteUrl, shareConnection: opts.once !== true, ...(maxFetchBytes === undefined ? {} : { maxFetchBytes }) });
      let runner: Runner | undefined;
      let stopSignals = (): void => undefined;
      let release = (): void => undefined;
      try {
        const note = packingNote(gitdir);
        if (note !== null) writeErr(`coo watch: note: ${note}\n`);
        let observe: (event: RunnerEvent) => void = () => undefined;
        const print = (event: RunnerEvent): void => {
          observe(event);
          // Each line says when it was printed (the machine's clock, to the millisecond), so the streams of runners can be laid side by side.
          if (opts.json === true) process.stdout.write(`${inertJson({ ...event, time: new Date().toISOString() })}\n`);
          else writeErr(`coo watch: ${describeEvent(event)}\n`);
        };
        const started = await startRunnerLanes({ ledger, key, keyPath, repo, stateDir, isolation: opts.isolation, oracle, executors, remote, once: opts.once === true }, (line) => writeErr(`coo watch: ${line}\n`));
        release = started.release;
        // Once the start passed (a refused --state-dir is no runner's folder), before any sandbox: every other runner's sandboxes on this machine hide this one's folders too.
        registerPrivateFolders([stateDir, ...hide]);
        const pullRequests = pullRequestsFromFlags(opts, (line) => writeErr(`coo watch: ${line}\n`));
        runner = new Runner({
          ledger,
          key,
          repo,
          stateDir,
          ...started.lanes,
          hide,
          onEvent: print,
          keepSandboxes: opts.keepSandboxes === true,
          ...(pullRequests === undefined ? {} : { pullRequests }),
          // A watching runner shares the queue (runner/runner.ts, QueueSharing): another live runner sees
          // its message within one longest poll, and a claim lands within seconds; a one-shot pass
          // takes what it finds.
          ...(remote === undefined ? {} : { remote, leaseGraceSeconds, ...(opts.once === true ? {} : { share: { handoffMs: Math.max(15_000, (2 * maxPollSeconds + 1) * 1000), staggerMs: (maxPollSeconds + 1) * 1000 } }) }),
        });
        const controller = new AbortController();
        const stop = stopOnSignal(runner, () => controller.abort());
        observe = stop.observe;
        stopSignals = stop.dispose;
        await runLanes();
        if (stop.signal() !== null) {
          const messages = (await ledger.state()).messages;
          const closing = stop.closing((id) => messages.get(id)?.intent);
          for (const line of closing) writeErr(`coo watch: ${line}\n`);
        }

        async function runLanes(): Promise<void> {
          const active = runner!;
          if (opts.once === true) {
            const summary = await active.runOnce();
            const held = summary.held.length > 0 ? `; ${summary.held.length} message(s) stay queued, unclaimed, for what this runner lacks (above)` : '';
            // Only what waits for a retry is said so: a held message's expiry is a time to look again, not a retry.
            const retries = summary.retries ?? [];
            if (opts.json !== true) writeErr(`coo watch: ${summary.receipts} receipt(s) written${retries.length > 0 ? `; ${retries.length} message(s) wait for a retry, the first at ${retries[0]}` : ''}${held}\n`);
            ledger.checkpoint(IDLE_CHECKPOINT_COMMITS);
            // A paid result the ledger would not take is not a pass that went well: a script running --once hears it in the status.
            if (summary.kept.length > 0) {
              throw new CooError('RESULT_KEPT', `${summary.kept.length} paid result(s) kept unlanded because the ledger refused their receipts (above): ${summary.kept.join(', ')}; put right what refused them and run coo watch again on this state folder: it lands them without calling the model again`);
            }
            return;
          }
          const policy = (await ledger.state()).policy?.doc;
          if (remote !== undefined) {
            writeErr(`coo watch: watching ${remote.url} through ${gitdir} as ${active.runnerId} (Ctrl-C stops)\n`);
            await watchRemote(active, {
              remote,
              signal: controller.signal,
              pollSeconds,
              maxPollSeconds,
              ...(policy === undefined ? {} : { heartbeatSeconds: policy.heartbeat.interval_seconds }),
              onIdle: () => ledger.checkpoint(IDLE_CHECKPOINT_COMMITS),
              onError: print,
            });
            return;
          }
          writeErr(`coo watch: watching ${gitdir} as ${active.runnerId} (Ctrl-C stops)\n`);
          await watchLedger(active, gitdir, {
            signal: controller.signal,
            ...(opts.heartbeat === true && policy !== undefined ? { heartbeatSeconds: policy.heartbeat.interval_seconds } : {}),
            onIdle: () => ledger.checkpoint(IDLE_CHECKPOINT_COMMITS),
            onError: print,
          });
        }
      } finally {
        stopSignals();
        runner?.close();
        release();
        remote?.close();
        ledger.close();
      }
    });
}
