import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { parse } from 'yaml';
import { git } from './tmp.js';

/**
 * Test fixture: runs a GitHub Actions workflow's steps for a push to `main`, locally and the way
 * the hosted runner does. The workflow is read from the pushed commit's own tree (GitHub runs the
 * file of the commit that was pushed); every `run:` step runs as written, in the shell GitHub
 * starts for it, with the environment GitHub gives (GITHUB_WORKSPACE a checkout of the pushed
 * commit, GITHUB_SHA, GITHUB_EVENT_PATH with the push event, RUNNER_TEMP, ...). The two actions
 * it uses are stood in for: `actions/checkout` with `fetch-depth: 0` by the fetch it makes, and
 * `actions/setup-node` by this Node.js. Anything else it cannot stand in for is an error, so a
 * workflow that needs more than this fixture does fails the test rather than passing untested.
 */

export interface StepRun {
  readonly name: string;
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

export interface WorkflowRun {
  /** The steps that ran, in order; GitHub stops at the first that fails. */
  readonly steps: readonly StepRun[];
  readonly ok: boolean;
}

export interface PushRun {
  /** The remote ledger (a bare repository the forge holds). */
  readonly remote: string;
  /** The commit pushed (GITHUB_SHA) and main's head before the push (the event's `before`). */
  readonly after: string;
  readonly before: string;
  readonly workflowPath: string;
  /** A fresh folder for this run's workspace, RUNNER_TEMP and HOME. */
  readonly dir: string;
  /** Settings of this machine the hosted runner has its own of (the npm registry, git's config). */
  readonly machineEnv: Readonly<Record<string, string>>;
  /**
   * A run on the workflow's schedule instead of a push: GitHub runs the file of the default branch's
   * head (`after`, here main's), with that commit as GITHUB_SHA and an event naming the cron line
   * alone (no `before`). `before` is not used then.
   */
  readonly schedule?: boolean;
  /**
   * With `schedule`: the repository's default branch, `main` unless given; `after` is its head. GitHub
   * runs a scheduled workflow on that branch, with GITHUB_REF naming it, and checkout checks it out.
   */
  readonly defaultBranch?: string;
}

type Env = Record<string, string>;

interface Step {
  readonly name?: string;
  readonly uses?: string;
  readonly run?: string;
  readonly with?: Record<string, unknown>;
  readonly env?: Record<string, unknown>;
  readonly [field: string]: unknown;
}

interface Workflow {
  readonly on: { readonly push?: { readonly branches?: readonly string[] }; readonly schedule?: ReadonlyArray<{ readonly cron?: string }> };
  readonly env?: Record<string, unknown>;
  readonly defaults?: { readonly run?: { readonly shell?: string } };
  readonly jobs: Record<string, { readonly env?: Record<string, unknown>; readonly steps: readonly Step[]; readonly defaults?: unknown; readonly [field: string]: unknown }>;
}

const ZERO = '0'.repeat(40);

/** The workflow file as the pushed commit holds it, parsed with the `yaml` package. */
export function workflowAt(remote: string, commit: string, path: string): Workflow {
  return parse(git(['--git-dir', remote, 'show', `${commit}:${path}`])) as Workflow;
}

/** Values of an `env:` block: literals only; an expression would need GitHub to evaluate it. */
function literals(block: Record<string, unknown> | undefined, where: string): Env {
  const env: Env = {};
  for (const [name, value] of Object.entries(block ?? {})) {
    const text = String(value);
    if (text.includes('${{')) throw new Error(`${where}: env ${name} holds an expression, which this fixture does not evaluate`);
    env[name] = text;
  }
  return env;
}

/** What `actions/checkout` (v7) does with `fetch-depth: 0`: every branch and tag, then the run's branch (main for a push) at the run's commit. */
function checkout(step: Step, remote: string, workspace: string, after: string, branch: string): StepRun {
  if (step.with?.['fetch-depth'] !== 0) throw new Error('actions/checkout is stood in for only with fetch-depth: 0');
  git(['init', '-q', workspace]);
  git(['-C', workspace, 'remote', 'add', 'origin', remote]);
  git(['-C', workspace, 'fetch', '-q', 'origin', '+refs/heads/*:refs/remotes/origin/*', '+refs/tags/*:refs/tags/*']);
  // When the branch moved on after the event that started the run, the action fetches the run's commit itself into it.
  const tracking = `refs/remotes/origin/${branch}`;
  if (spawnSync('git', ['-C', workspace, 'rev-parse', '--verify', '--quiet', tracking], { encoding: 'utf8' }).stdout.trim() !== after) git(['-C', workspace, 'update-ref', tracking, after]);
  git(['-C', workspace, 'checkout', '-q', '--force', '-B', branch, tracking]);
  return { name: step.name ?? step.uses!, status: 0, stdout: '', stderr: '' };
}

/** Runs one step's script; asynchronous, so a server in this process (the test's registry) can answer it. */
function runScript(shellArgs: readonly string[], script: string, cwd: string, env: Env): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn('bash', [...shellArgs, script], { cwd, env });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    child.on('error', (error) => resolve({ status: null, stdout, stderr: `${stderr}${error.message}\n` }));
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });
}

/** Runs the workflow's one job for a push of `after` to main (or on its schedule, with main at `after`), as GitHub would. */
export async function runPushWorkflow(run: PushRun): Promise<WorkflowRun> {
  const workflow = workflowAt(run.remote, run.after, run.workflowPath);
  if (!(workflow.on.push?.branches ?? []).includes('main')) throw new Error('the workflow does not run on a push to main');
  const cron = workflow.on.schedule?.[0]?.cron;
  if (run.schedule === true && cron === undefined) throw new Error('the workflow does not run on a schedule');
  const jobs = Object.entries(workflow.jobs);
  if (jobs.length !== 1) throw new Error(`this fixture runs one job, the workflow has ${jobs.length}`);
  const [jobName, job] = jobs[0]!;
  if (run.defaultBranch !== undefined && run.schedule !== true) throw new Error('a push run is on main; defaultBranch is for a scheduled run');
  // The branch the run is on: main for a push, the default branch for a scheduled run.
  const branch = run.defaultBranch ?? 'main';
  const shell = workflow.defaults?.run?.shell;
  // GitHub's own command lines for a run step on Linux: `shell: bash` is strict about pipes too.
  const shellArgs = shell === 'bash' ? ['--noprofile', '--norc', '-eo', 'pipefail'] : shell === undefined ? ['-e'] : null;
  if (shellArgs === null || job.defaults !== undefined) throw new Error(`shell ${String(shell)} is not stood in for`);
  const workspace = join(run.dir, 'work', 'ledger');
  const temp = join(run.dir, 'runner-temp');
  const home = join(run.dir, 'home');
  // The runner makes the workspace folder whether or not a step checks anything out into it.
  for (const folder of [workspace, temp, home]) mkdirSync(folder, { recursive: true });
  const eventPath = join(run.dir, 'event.json');
  const pushEvent = () => ({ ref: 'refs/heads/main', before: run.before, after: run.after, created: run.before === ZERO, deleted: false, forced: run.before !== ZERO && !isAncestor(run.remote, run.before, run.after) });
  writeFileSync(eventPath, JSON.stringify(run.schedule === true ? { schedule: cron } : pushEvent()));
  const github: Env = {
    CI: 'true',
    GITHUB_ACTIONS: 'true',
    GITHUB_EVENT_NAME: run.schedule === true ? 'schedule' : 'push',
    GITHUB_EVENT_PATH: eventPath,
    GITHUB_JOB: jobName,
    GITHUB_REF: `refs/heads/${branch}`,
    GITHUB_REF_NAME: branch,
    GITHUB_REF_TYPE: 'branch',
    GITHUB_REPOSITORY: 'owner/ledger',
    GITHUB_SERVER_URL: 'https://github.com',
    GITHUB_SHA: run.after,
    GITHUB_WORKSPACE: workspace,
    HOME: home,
    PATH: `${dirname(process.execPath)}:/usr/local/bin:/usr/bin:/bin`,
    RUNNER_OS: 'Linux',
    RUNNER_TEMP: temp,
  };
  const jobEnv = { ...literals(workflow.env, 'workflow'), ...literals(job.env, `job ${jobName}`) };
  const steps: StepRun[] = [];
  for (const [index, step] of job.steps.entries()) {
    const unknown = Object.keys(step).filter((key) => !['name', 'uses', 'run', 'with', 'env'].includes(key));
    if (unknown.length > 0) throw new Error(`step ${index + 1} uses ${unknown.join(', ')}, which this fixture does not stand in for`);
    let result: StepRun;
    if (step.uses !== undefined) {
      if (step.uses.startsWith('actions/checkout@')) result = checkout(step, run.remote, workspace, run.after, branch);
      else if (step.uses.startsWith('actions/setup-node@')) result = { name: step.name ?? step.uses, status: 0, stdout: '', stderr: '' };
      else throw new Error(`${step.uses} is not stood in for`);
    } else if (typeof step.run === 'string') {
      if (step.run.includes('${{')) throw new Error(`step ${index + 1} holds an expression, which this fixture does not evaluate`);
      const script = join(temp, `step-${index + 1}.sh`);
      writeFileSync(script, step.run);
      const env = { ...run.machineEnv, ...github, ...jobEnv, ...literals(step.env, `step ${index + 1}`) };
      const ran = await runScript(shellArgs, script, workspace, env);
      result = { name: step.name ?? step.run.split('\n')[0]!, status: ran.status, stdout: ran.stdout, stderr: ran.stderr };
    } else {
      throw new Error(`step ${index + 1} has neither uses nor run`);
    }
    steps.push(result);
    if (result.status !== 0) return { steps, ok: false };
  }
  return { steps, ok: true };
}

function isAncestor(remote: string, ancestor: string, descendant: string): boolean {
  return spawnSync('git', ['--git-dir', remote, 'merge-base', '--is-ancestor', ancestor, descendant]).status === 0;
}
