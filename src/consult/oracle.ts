import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { readBounded } from '../util/bounded-read.js';
import { CooError } from '../errors.js';
import { loopbackAddress, type LoopbackAddress } from '../lane/endpoint.js';
import { providerKeyProblem } from '../lane/provider-key.js';
import { LIMITS } from '../limits.js';
import { bwrapArgs, commandFiles, findBwrap, killGroup, resolveIsolation, type Isolation } from '../util/bubblewrap.js';
import { trackGroup } from '../util/children.js';
import { findExecutable, isReadableFile, startProblem } from '../util/executable.js';
import { environmentSecrets, MIN_SECRET_CHARS, type Secret } from '../util/scrub.js';
import { displayUrl, urlSecrets } from '../util/display-url.js';
import { formatProcessRecord, machineMonotonic, processStartTime, recordedBoot } from '../util/process.js';
import { dotenvArgumentProblem, oraclePathProblem } from '../lane/oracle-inputs.js';
import { readFigure } from '../lane/usage-figure.js';
import type { AaTransportEntry } from '../schema/registry.js';
import type { OracleRun, OracleSessionMeta } from './outcome.js';
import { planRoute } from './providers/routes.js';
import type { OracleEndpoints, RoutePlan } from './providers/provider.js';
import type { AttemptRecordFile, Sandbox } from './sandbox.js';
import { wholeLinesOf } from '../util/bytes.js';
import { sandboxFellText, standingCommand, untilSandboxStands } from '../util/sandbox-start.js';
import { createOwnFile, openOwnFile, writeOwnFile } from '../util/own-write.js';
import { SANDBOX_REMEDY } from './sandbox.js';
import { NO_REDIRECTS_NODE_OPTIONS } from './no-redirects.js';

/**
 * The AA transport: Oracle's CLI, API engine only. The only place the lane starts a process.
 * Every call runs in its attempt's sandbox with an allow-listed environment, under its own kill
 * timer, and under bubblewrap (unless `none` was chosen) with every path but the sandbox read-only
 * and the ledger, the key folder and the real HOME hidden.
 */

/** The OpenAI route's endpoint, when it is not OpenAI's own. */
export interface OracleRoute {
  /** An OpenAI-compatible base URL (`--base-url`); a loopback one marks the receipt as offline. */
  readonly baseUrl?: string;
  /** Azure OpenAI (`--azure-endpoint`, `--azure-deployment`): Oracle's Responses API path. */
  readonly azure?: { readonly endpoint: string; readonly deployment: string };
}

export interface OracleConfig {
  /** The command to run; by default this package's pinned @steipete/oracle under the current node. */
  readonly command?: readonly string[];
  /** The OpenAI route's endpoint. */
  readonly route?: OracleRoute;
  /** The other routes' endpoints, gateways and host pins (providers/provider.ts). */
  readonly endpoints?: Omit<OracleEndpoints, 'openaiBaseUrl' | 'azure'>;
  /** Extra Oracle arguments; anything that selects the browser, a remote, a follow-up or what the lane owns is refused. */
  readonly extraArgs?: readonly string[];
  /** Bubblewrap by default, and required then (util/bubblewrap.ts); `none` must be asked for. */
  readonly isolation?: Isolation;
  /** Paths hidden from Oracle entirely (the ledger, the key folder). */
  readonly hide?: readonly string[];
  /** Where provider keys are read from; the runner's environment by default. */
  readonly env?: NodeJS.ProcessEnv;
}

/** One attempt for the transport; the prompt is the sandbox's prompt file. */
export interface TransportRequest {
  readonly sandbox: Sandbox;
  readonly model: string;
  readonly slug: string;
  /** Pinned files, relative to the sandbox's work folder. */
  readonly files: readonly string[];
  readonly maxOutputTokens: number;
  readonly runtimeSeconds: number;
  /** The route the call takes (plan): its one key, its endpoint's variables and arguments. */
  readonly route: RoutePlan;
}

/** The port the runner uses; tests may put a fake executable behind OracleCli, never a fake in the lane itself. */
export interface AaTransport {
  /** True when the OS enforces the sandbox (bubblewrap): everything but the sandbox is read-only. */
  readonly isolated: boolean;
  /**
   * The route of a call to the advisory agent a registry entry describes, with its provider key
   * present in the runner's environment; ORACLE_CONFIG when it cannot be made here (the consult
   * then stays queued: the runner's configuration, not the consult's fault).
   */
  plan(entry: AaTransportEntry): RoutePlan;
  /**
   * The secret values a run hands the child: the value of `providerKeyEnv`, or with none named,
   * every provider key and token the transport could hand (util/scrub.ts scrubs output of them).
   */
  handedSecrets(providerKeyEnv?: string): readonly Secret[];
  run(request: TransportRequest): Promise<OracleRun>;
}

const FORBIDDEN_ARGS = [
  /^--browser/,
  /^--remote/,
  /^--followup/,
  /^--(engine|mode|models?|slug|write-output|prompt|message|file|files|include|path|paths|exec-session|session|render|copy|chatgpt-url|youtube|generate-image|edit-image|output|aspect|gemini|copy-profile|base-url|azure|provider|wait|no-wait|status|preview|dry-run)(=|$|-)/,
  /^-[empf]$/,
];

/** Refuses configuration that would leave the API engine, take over what the lane decides, or feed dotenv an option. */
export function checkOracleArgs(args: readonly string[]): void {
  for (const arg of args) {
    if (FORBIDDEN_ARGS.some((pattern) => pattern.test(arg))) {
      throw new CooError('ORACLE_CONFIG', `Oracle argument ${arg} is not allowed: the lane runs the API engine only, and owns model, prompt, files, output and session`);
    }
    const dotenv = dotenvArgumentProblem(arg);
    if (dotenv !== null) throw new CooError('ORACLE_CONFIG', dotenv);
  }
}

function defaultCommand(): string[] {
  const require = createRequire(import.meta.url);
  const pkg = require.resolve('@steipete/oracle/package.json');
  return [process.execPath, join(dirname(pkg), 'dist', 'bin', 'oracle-cli.js')];
}

/** The last bytes of a file: untrusted subprocess output is never read whole, a link never followed, a FIFO never waited on. */
function tailOf(path: string, max = 4000): string {
  try {
    const fd = fs.openSync(path, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK | fs.constants.O_NOFOLLOW);
    try {
      const stats = fs.fstatSync(fd);
      if (!stats.isFile()) return '';
      const size = stats.size;
      const length = Math.min(size, max);
      const buffer = Buffer.alloc(length);
      fs.readSync(fd, buffer, 0, length, size - length);
      // Cut: its first line began before the tail, so it is dropped rather than kept in part.
      return size > max ? wholeLinesOf(buffer, 'start').toString('utf8') : buffer.toString('utf8');
    } finally {
      fs.closeSync(fd);
    }
  } catch {
    return '';
  }
}

/**
 * A file's whole bytes when it holds at most `max`, otherwise only its size; null when it cannot
 * be read or is not a regular file. Oracle writes these files in a folder it may change: a link
 * there is never followed (to the runner's key or another's files), a FIFO never blocks the
 * runner, and a file that grows while it is read is still seen as over the limit (util/bounded-read.ts).
 */
export function readWithin(path: string, max: number): { readonly bytes: Buffer | null; readonly size: number } | null {
  const read = readBounded(path, { maxBytes: max });
  switch (read.kind) {
    case 'file':
      return { bytes: read.bytes, size: read.bytes.length };
    case 'too_large':
      return { bytes: null, size: read.size };
    default:
      return null;
  }
}

/** A JSON object from bytes; null when they are not one. */
function parseObject(bytes: Buffer): Record<string, unknown> | null {
  try {
    const value = JSON.parse(bytes.toString('utf8')) as unknown;
    return value !== null && typeof value === 'object' ? (value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

const str = (value: unknown): string | null => (typeof value === 'string' ? value : null);

/** The usage Oracle recorded, each figure as it reads (lane/usage-figure.ts); null when it recorded none. */
function readUsage(usage: unknown): OracleSessionMeta['usage'] {
  if (usage === undefined || usage === null) return null;
  const record = usage !== null && typeof usage === 'object' && !Array.isArray(usage) ? (usage as Record<string, unknown>) : {};
  let implausible = record !== usage;
  const figure = (name: string, kind: 'count' | 'usd' = 'count'): number | null => {
    const read = readFigure(record[name], kind);
    implausible ||= !read.plain;
    return read.value;
  };
  const inputTokens = figure('inputTokens') ?? 0;
  const outputTokens = figure('outputTokens') ?? 0;
  const reasoningTokens = figure('reasoningTokens') ?? 0;
  const totalTokens = figure('totalTokens') ?? 0;
  const cost = figure('cost', 'usd');
  return { inputTokens, outputTokens, reasoningTokens, totalTokens, cost, implausible };
}

/** The fields of Oracle's session record the lane reads, from the record's bytes; everything else is ignored. */
function sessionMetaOf(bytes: Buffer): OracleSessionMeta | null {
  const raw = parseObject(bytes);
  if (raw === null) return null;
  const transport = raw['transport'] as Record<string, unknown> | undefined;
  const error = raw['error'] as Record<string, unknown> | undefined;
  const response = raw['response'] as Record<string, unknown> | undefined;
  return {
    status: str(raw['status']),
    usage: readUsage(raw['usage']),
    errorMessage: str(raw['errorMessage']) ?? str(error?.['message']),
    transportReason: str(transport?.['reason']),
    errorCategory: str(error?.['category']),
    incompleteReason: str(response?.['incompleteReason']),
    responseId: str(response?.['responseId']),
  };
}

/** Largest Oracle session record kept with a receipt; a larger one is left out, never cut. */
const SESSION_ATTACHMENT_BYTES = 256 * 1024;

/** Oracle's session record as read once: the fields the lane reads, and its bytes to keep with the receipt (null when absent or over SESSION_ATTACHMENT_BYTES). */
export interface OracleSession {
  readonly meta: OracleSessionMeta | null;
  readonly record: Buffer | null;
}

/**
 * Oracle's session record, read once. The record lies in the folder Oracle writes, and a process it
 * left behind may rewrite it after its run: what is judged, charged and kept is what was read here.
 */
export function readSession(oracleHome: string, slug: string): OracleSession {
  const bytes = readWithin(join(oracleHome, 'sessions', slug, 'meta.json'), LIMITS.sessionRecordBytes)?.bytes ?? null;
  if (bytes === null) return { meta: null, record: null };
  return { meta: sessionMetaOf(bytes), record: bytes.length > SESSION_ATTACHMENT_BYTES ? null : bytes };
}

/** The answer file: its whole bytes within the artifact limit, otherwise only its size (0 when there is none). */
export function readAnswer(path: string): { readonly bytes: Buffer | null; readonly size: number } {
  return readWithin(path, LIMITS.artifactBytes) ?? { bytes: null, size: 0 };
}

/**
 * What an Oracle that no runner saw end left in its sandbox: the run to judge when its session, as
 * `session` read it (readSession, once: the recovery's other uses of the record are of the same
 * bytes), completed and it wrote an answer file (whole or over the limit), otherwise null.
 */
export function harvestRun(sandbox: Sandbox, attempt: Pick<AttemptRecordFile, 'slug' | 'max_output_tokens'>, session: OracleSession): OracleRun | null {
  const { meta, record } = session;
  const answer = readAnswer(sandbox.answerPath);
  if (meta?.status !== 'completed' || answer.size === 0) return null;
  return {
    exitCode: 0,
    signal: null,
    killedByTimer: false,
    elapsedMs: 0,
    sessionId: attempt.slug,
    meta,
    sessionRecord: record,
    answer: answer.bytes,
    answerBytes: answer.size,
    maxOutputTokens: attempt.max_output_tokens,
    startError: null,
    stdoutTail: '',
    stderrTail: '',
  };
}

/** The PATH Oracle runs with: this Node's folder and the system's, nothing from the caller. */
function oraclePath(): string[] {
  return [dirname(process.execPath), '/usr/local/bin', '/usr/bin', '/bin'];
}

function isNode(executable: string): boolean {
  return /(^|\/)node(js)?$/.test(executable) || resolve(executable) === process.execPath;
}

/** A host name the sandbox may resolve to a pinned address: a DNS name, and an IPv4 or IPv6 address. */
const HOST_NAME = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/i;
const HOST_ADDRESS = /^(\d{1,3}(\.\d{1,3}){3}|[0-9a-f:]+)$/i;

export class OracleCli implements AaTransport {
  private readonly command: readonly string[];
  private readonly isolation: 'bwrap' | 'none';
  private readonly endpoints: OracleEndpoints;

  constructor(private readonly config: OracleConfig = {}) {
    checkOracleArgs(config.extraArgs ?? []);
    const route = config.route ?? {};
    if (route.baseUrl !== undefined && route.azure !== undefined) throw new CooError('ORACLE_CONFIG', 'give a base URL or an Azure endpoint, not both');
    this.endpoints = {
      ...config.endpoints,
      ...(route.baseUrl === undefined ? {} : { openaiBaseUrl: route.baseUrl }),
      ...(route.azure === undefined ? {} : { azure: route.azure }),
    };
    this.isolation = resolveIsolation(config.isolation ?? 'bwrap');
    for (const pin of this.endpoints.hosts ?? []) {
      if (!HOST_NAME.test(pin.name) || !HOST_ADDRESS.test(pin.address)) throw new CooError('ORACLE_CONFIG', `--oracle-host ${pin.name}=${pin.address}: give a host name and an IP address`);
    }
    // Oracle starts in its sandbox's folder: a relative executable, or Node's script, means the caller's folder.
    this.command = (config.command ?? defaultCommand()).map((part, index) =>
      (index === 0 && part.includes('/')) || (index === 1 && isNode(config.command?.[0] ?? '') && !part.startsWith('-')) ? resolve(part) : part,
    );
  }

  get isolated(): boolean {
    return this.isolation === 'bwrap';
  }

  /**
   * Why Oracle's command cannot be started, or null: its executable is missing, not executable or
   * not on the PATH Oracle is given, or the script Node is asked to run is missing. Checked before
   * every start; a command that vanishes mid-run is caught by the start itself.
   */
  commandProblem(): string | null {
    const [executable, script] = this.command;
    if (executable === undefined || executable === '') return 'the Oracle command is empty';
    const found = findExecutable(executable, oraclePath().join(':'));
    if (found === null) {
      return executable.includes('/') ? `${executable} is missing or not executable` : `${executable} is not on Oracle's PATH (${oraclePath().join(':')})`;
    }
    const problem = startProblem(found, oraclePath().join(':'));
    if (problem !== null) return problem;
    if (isNode(executable) && script !== undefined && !script.startsWith('-') && !isReadableFile(resolve(script))) return `${script} (Oracle's entry script) is missing`;
    return null;
  }

  plan(entry: AaTransportEntry): RoutePlan {
    const plan = planRoute(entry, this.endpoints);
    if (typeof plan === 'string') throw new CooError('ORACLE_CONFIG', plan);
    // A host pin is a hosts file bound over /etc/hosts inside the sandbox: without bubblewrap nothing enforces it, and the call would go to the real host.
    const host = plan.endpoint === null ? null : new URL(plan.endpoint).hostname;
    if (this.isolation !== 'bwrap' && (this.endpoints.hosts ?? []).some((pin) => pin.name === host)) {
      throw new CooError('ORACLE_CONFIG', `${displayUrl(plan.endpoint!)} relies on the host pin ${host}, which needs bubblewrap: without it Oracle would reach the real ${host}`);
    }
    // A consult needs its provider key; without it the lane fails closed before claiming anything.
    const keyProblem = providerKeyProblem(plan.keyEnv, (this.config.env ?? process.env)[plan.keyEnv], plan.endpoint === null);
    if (keyProblem !== null) throw new CooError('ORACLE_CONFIG', keyProblem);
    return plan;
  }

  /** Where a client connects to reach a plan's endpoint when it is on this machine (loopback, or a host pinned to it), or null. */
  loopbackOf(plan: RoutePlan): LoopbackAddress | null {
    return plan.endpoint === null ? null : loopbackAddress(plan.endpoint, this.endpoints.hosts);
  }

  handedSecrets(providerKeyEnv?: string): Secret[] {
    const source = this.config.env ?? process.env;
    const endpoints = this.endpoints;
    const inUrls = urlSecrets([endpoints.openaiBaseUrl, endpoints.azure?.endpoint, endpoints.anthropic, endpoints.google, endpoints.openrouter, ...Object.values(endpoints.gateways ?? {})], 'endpoint credentials', MIN_SECRET_CHARS);
    if (providerKeyEnv === undefined) return [...environmentSecrets(source), ...inUrls];
    const value = source[providerKeyEnv];
    return [...(value === undefined || value === '' ? [] : [{ name: providerKeyEnv, value }]), ...inUrls];
  }

  private environment(request: TransportRequest): NodeJS.ProcessEnv {
    const source = this.config.env ?? process.env;
    return {
      PATH: oraclePath().join(':'),
      HOME: request.sandbox.home,
      ORACLE_HOME_DIR: request.sandbox.oracleHome,
      TMPDIR: request.sandbox.tmp,
      LANG: 'C.UTF-8',
      NO_COLOR: '1',
      FORCE_COLOR: '0',
      ORACLE_NOTIFY: '0',
      ORACLE_NO_OSC_PROGRESS: '1',
      // Oracle imports dotenv/config first, which loads a .env from its working folder: the pinned
      // files. Pointed at an empty file, it loads nothing (the pinned .env stays context only).
      DOTENV_CONFIG_PATH: '/dev/null',
      // The route's endpoint, then its one key: no other provider's key, so Oracle cannot fall back to another route.
      ...request.route.env,
      // Oracle's fetch follows no redirect: the key goes to that endpoint alone (no-redirects.ts).
      NODE_OPTIONS: NO_REDIRECTS_NODE_OPTIONS,
      [request.route.keyEnv]: source[request.route.keyEnv] ?? '',
    };
  }

  private argv(request: TransportRequest): string[] {
    for (const file of request.files) {
      const problem = oraclePathProblem(file);
      if (problem !== null) throw new CooError('CONTEXT_INVALID', `${file}: ${problem}`);
    }
    return [
      '--engine', 'api',
      '--model', request.model,
      '--wait',
      '--no-notify',
      '--heartbeat', '0',
      '--search', 'off',
      '--slug', request.slug,
      '--force',
      '--write-output', request.sandbox.answerPath,
      '--max-output', String(request.maxOutputTokens),
      '--timeout', String(request.runtimeSeconds),
      ...request.route.args,
      ...(this.config.extraArgs ?? []),
      '-p', '-',
      ...(request.files.length === 0 ? [] : ['--file', ...request.files]),
    ];
  }

  /**
   * The command line of one start. Under bubblewrap the sandbox is planned now (the folders it hides
   * listed now), and a shell inside says on fd 3 that it stands before it becomes Oracle (util/sandbox-start.ts).
   */
  private wrap(request: TransportRequest, argv: readonly string[]): string[] {
    const command = [...this.command, ...argv];
    if (this.isolation === 'none') return command;
    // Keep visible what Oracle needs to run: the sandbox and the executable files of the command.
    const keep = commandFiles([this.command]);
    const hosts = this.endpoints.hosts ?? [];
    const overlays = hosts.length === 0 ? [] : [{ source: this.hostsFile(request.sandbox), target: '/etc/hosts' }];
    return [...bwrapArgs(findBwrap()!, { writable: [request.sandbox.root], readOnly: [request.sandbox.work], hide: this.config.hide ?? [], keep, overlays, chdir: request.sandbox.work }), ...standingCommand(command)];
  }

  /** The hosts file Oracle resolves names with when hosts are pinned: localhost and the pins, nothing else. */
  private hostsFile(sandbox: Sandbox): string {
    const path = join(sandbox.root, 'hosts');
    const lines = ['127.0.0.1 localhost', '::1 localhost', ...(this.endpoints.hosts ?? []).map((pin) => `${pin.address} ${pin.name}`)];
    writeOwnFile(path, `${lines.join('\n')}\n`, { mode: 0o444, what: "the sandbox's hosts file", remedy: SANDBOX_REMEDY, code: 'IO_ERROR' });
    return path;
  }

  /**
   * Runs one attempt. Standard input is the prompt file and output goes to files in the sandbox,
   * not pipes: if the runner dies, Oracle finishes the answer that is being paid for, and the next
   * runner harvests it instead of buying it again.
   */
  async run(request: TransportRequest): Promise<OracleRun> {
    const argv = this.argv(request);
    const started = machineMonotonic();
    const stdoutPath = `${request.sandbox.root}/oracle.stdout`;
    const stderrPath = `${request.sandbox.root}/oracle.stderr`;
    const ended = (start: OracleStart, startError: string | null): OracleRun => {
      const answer = readAnswer(request.sandbox.answerPath);
      const session = readSession(request.sandbox.oracleHome, request.slug);
      return {
        exitCode: start.exitCode,
        signal: start.signal,
        killedByTimer: start.killedByTimer,
        elapsedMs: Math.round(machineMonotonic() - started),
        sessionId: request.slug,
        meta: session.meta,
        sessionRecord: session.record,
        answer: answer.bytes,
        answerBytes: answer.size,
        maxOutputTokens: request.maxOutputTokens,
        startError,
        stdoutTail: tailOf(stdoutPath),
        stderrTail: tailOf(stderrPath),
      };
    };
    const problem = this.commandProblem();
    if (problem !== null) return ended({ exitCode: null, signal: null, killedByTimer: false, startError: problem, stood: false }, problem);
    // Each try plans its sandbox again. A plan git cannot make (what of its configuration to hide, util/credential-files.ts)
    // starts nothing and is said so, at no cost: never an error out of the transport after the claim, which would leave the
    // attempt to a recovery that charges for a call never made.
    const planned = (): string[] | string => {
      try {
        return this.wrap(request, argv);
      } catch (error) {
        if (!(error instanceof CooError) || error.code !== 'RUNNER_CONFIG') throw error;
        return error.message;
      }
    };
    const unplanned = (why: string): OracleStart => ({ exitCode: null, signal: null, killedByTimer: false, startError: why, stood: false });
    const first = planned();
    if (typeof first === 'string') return ended(unplanned(first), first);
    let plan: string[] | string | null = first;
    const once = (): Promise<OracleStart> => {
      const argvNow = plan ?? planned();
      plan = null;
      return typeof argvNow === 'string' ? Promise.resolve(unplanned(argvNow)) : this.start(request, argvNow, stdoutPath, stderrPath);
    };
    if (this.isolation === 'none') {
      const start = await once();
      return ended(start, start.startError);
    }
    // A sandbox that did not stand ran nothing: it is set up again; one that never stands fails the attempt, at no cost.
    const { run: start, tries, fell } = await untilSandboxStands(once, (one) => ({ stood: one.stood, exitedByItself: one.exitCode !== null && one.signal === null && !one.killedByTimer }));
    return ended(start, fell ? sandboxFellText(tries, tailOf(stderrPath)) : start.startError);
  }

  /**
   * One start of Oracle, resolved when it ended. Standard input is the prompt file and output goes to
   * files in the sandbox, not pipes: if the runner dies, Oracle finishes the answer that is being paid
   * for, and the next runner harvests it instead of buying it again. Under bubblewrap fd 3 is a pipe the
   * shell inside closes before it becomes Oracle; the start is judged once that pipe is closed too.
   */
  private start(request: TransportRequest, argv: readonly string[], stdoutPath: string, stderrPath: string): Promise<OracleStart> {
    const isolated = this.isolation === 'bwrap';
    // Opened never through a link nor waiting on a FIFO: Oracle could write the sandbox's folder in a start before this one.
    const files: number[] = [];
    try {
      files.push(openOwnFile(request.sandbox.promptPath, { what: "the sandbox's prompt", remedy: SANDBOX_REMEDY, code: 'IO_ERROR' }));
      files.push(createOwnFile(stdoutPath, { what: "Oracle's output file", remedy: SANDBOX_REMEDY, code: 'IO_ERROR' }));
      files.push(createOwnFile(stderrPath, { what: "Oracle's error file", remedy: SANDBOX_REMEDY, code: 'IO_ERROR' }));
    } catch (error) {
      // The ones opened before the one that failed are closed: a runner that goes on leaks none.
      for (const fd of files) fs.closeSync(fd);
      throw error;
    }
    return new Promise((resolvePromise) => {
      let killedByTimer = false;
      let settled = false;
      let stood = !isolated;
      // detached: its own session and process group, with no controlling terminal. Oracle stays in
      // that group (no --new-session), so killing the group ends every process of the attempt, and
      // it outlives a crashed runner (no --die-with-parent), so its answer can still be harvested.
      const child = spawn(argv[0]!, argv.slice(1), { cwd: request.sandbox.work, env: this.environment(request), detached: true, stdio: [...files, isolated ? 'pipe' : 'ignore'] });
      for (const fd of files) fs.closeSync(fd);
      const marker = child.stdio[3];
      let markerClosed = marker == null;
      marker?.on('data', () => (stood = true));
      const untrack = trackGroup(child.pid);
      const timer = setTimeout(() => {
        killedByTimer = true;
        if (child.pid !== undefined) killGroup(child.pid);
      }, request.runtimeSeconds * 1000);
      // The attempt's folder removed under a running Oracle (an operator cleaning the state folder): what it writes has
      // nowhere to go, and a process inside may spin on the folder it cannot make again (node's recursive mkdir under a
      // bound folder that is gone), so it is ended now rather than at its runtime budget; the lane receipts it interrupted.
      const folderWatch = setInterval(() => {
        if (!fs.existsSync(request.sandbox.root) && child.pid !== undefined) killGroup(child.pid);
      }, FOLDER_CHECK_MS);
      folderWatch.unref();
      let exit: { readonly exitCode: number | null; readonly signal: string | null; readonly startError: string | null } | null = null;
      const settle = (): void => {
        if (settled || exit === null || !markerClosed) return;
        settled = true;
        resolvePromise({ ...exit, killedByTimer, stood });
      };
      const finish = (exitCode: number | null, signal: string | null, startError: string | null = null): void => {
        if (exit !== null) return;
        exit = { exitCode, signal, startError };
        clearTimeout(timer);
        clearInterval(folderWatch);
        // Whatever is left in the group ends, so the pipe's last holder is gone and it closes.
        if (child.pid !== undefined) killGroup(child.pid);
        untrack();
        if (startError !== null) markerClosed = true;
        settle();
      };
      marker?.on('close', () => {
        markerClosed = true;
        settle();
      });
      child.on('error', (error) => finish(null, null, error.message));
      child.on('exit', (code, signal) => finish(code, signal));
      // The pid with its start time: a runner recovering this attempt ends the group only while the pid is still this process.
      // Written by a fresh file and a rename: a link or a FIFO left at its name is replaced, never written through or waited on.
      if (child.pid !== undefined) {
        try {
          writeOwnFile(request.sandbox.pidPath, formatProcessRecord({ pid: child.pid, start: processStartTime(child.pid), ...recordedBoot() }), { what: "Oracle's pid file", remedy: SANDBOX_REMEDY, code: 'IO_ERROR' });
        } catch (error) {
          // Without its pid on record Oracle is not run: a runner after a crash could not end it.
          finish(null, null, error instanceof Error ? error.message : String(error));
        }
      }
    });
  }
}

/** How often a running Oracle's attempt folder is looked for (Oracle.start). */
const FOLDER_CHECK_MS = 1000;

/** How one start of Oracle ended. */
interface OracleStart {
  readonly exitCode: number | null;
  readonly signal: string | null;
  readonly killedByTimer: boolean;
  readonly startError: string | null;
  /** Under bubblewrap, the shell inside said the sandbox stood; always true without it. */
  readonly stood: boolean;
}
