import type { Command } from 'commander';
import { CooError } from '../errors.js';
import { enqueueDispatch } from '../dispatch/enqueue.js';
import { LIMITS } from '../limits.js';
import { MAX_RUNTIME_SECONDS } from '../schema/common.js';
import { collectPairs, durationFlag, emitMessage, jsonOption, keyOption, ledgerOption, loadPrivateKey, now, positiveNumber, wholeNumber, readInput, required, idempotencyKeyFlag } from './common.js';
import { remoteJson, remoteOption, remoteText, writeLedger } from './remote-option.js';

export function dispatchVerb(program: Command): void {
  program
    .command('dispatch')
    .description('enqueue governed work for an execution agent: pin the base commit, write the task, sign and append an ea_dispatch envelope; `coo watch` runs it and proves the outcome itself')
    .addOption(ledgerOption())
    .addOption(keyOption('the COO private key; default $COO_KEY'))
    .option('--to <actor>', 'the execution agent, e.g. ea.codex')
    .option('--repo <path>', 'the repository the work is done in')
    .option('--rev <rev>', 'the base commit (default HEAD)')
    .option('--task <text>', 'what to do')
    .option('--task-file <file>', `read the task from a regular file, or - for standard input (at most ${LIMITS.executorPromptBytes / 1024} KiB with the rest of what the executor is given)`)
    .option('--scope <glob>', 'a path glob the work may change, relative to the repository root; a folder (src or src/) covers everything under it (repeatable; at least one)', collectPairs, [])
    .option('--accept <text>', 'an acceptance criterion (repeatable; at least one)', collectPairs, [])
    .option('--verify <command>', 'a command the runner runs itself afterwards, on a fresh checkout of the signed commit in a fresh HOME; every one must exit 0 (repeatable; at least one)', collectPairs, [])
    .option('--file <glob>', 'a context file to pin at the base commit (repeatable)', collectPairs, [])
    .option('--branch <name>', 'a new branch the work is committed on: not HEAD, the default branch, an existing name, or a refs/, heads/, tags/ or remotes/ name (default coo/<message id>; later attempts add -attempt-N)')
    .option('--timeout <duration>', "the executor's time box, e.g. 10m (default: the runtime budget)")
    .option('--max-cost <usd>', 'budget for this dispatch in USD, all attempts (default: the policy cap)')
    .option('--ttl <duration>', 'how long the dispatch may wait to start (default 1h)')
    .option('--approval <id>', "the CEO's approval (apr_...) of this exact request, when the policy asks for one")
    .option('--open-pr <owner/repo>', 'once the work succeeds, push its branch and open a pull request there')
    .option('--issue <n>', 'the forge issue the work answers')
    .option('--idempotency-key <key>', 'the same key with the same request returns the message already there; with another request it is refused')
    .option('--correlation <id>', "correlation id (corr_...) (default: the parent's, or the original's under the same --idempotency-key, or a new one)")
    .option('--parent <message-id>', 'the message this one follows from (never advisory traffic)')
    .addOption(remoteOption())
    .addOption(jsonOption())
    .action(async (opts: Record<string, string | string[] | boolean | undefined>) => {
      const gitdir = required(opts['ledger'] as string | undefined, '--ledger', 'the ledger path or $COO_LEDGER');
      const key = loadPrivateKey(required(opts['key'] as string | undefined, '--key', 'the COO private key or $COO_KEY'));
      const idempotency = idempotencyKeyFlag(opts['idempotencyKey'] as string | undefined);
      const target = required(opts['to'] as string | undefined, '--to', 'the execution agent, e.g. ea.codex');
      const repo = required(opts['repo'] as string | undefined, '--repo', 'the repository the work is done in');
      const taskText = opts['task'] as string | undefined;
      const taskFile = opts['taskFile'] as string | undefined;
      if ((taskText === undefined) === (taskFile === undefined)) throw new CooError('USAGE', 'give exactly one of --task or --task-file');
      const task = taskText ?? readTaskFile(taskFile!);
      const openPr = opts['openPr'] as string | undefined;
      if (openPr !== undefined && !/^[A-Za-z0-9_.-]+\/[A-Za-z0-9_.-]+$/.test(openPr)) throw new CooError('USAGE', `--open-pr takes OWNER/REPO, got ${JSON.stringify(openPr)}`);
      const timeout = durationFlag(opts['timeout'] as string | undefined, '--timeout', MAX_RUNTIME_SECONDS);
      const ttl = durationFlag(opts['ttl'] as string | undefined, '--ttl');
      const maxCost = positiveNumber(opts['maxCost'] as string | undefined, '--max-cost');
      const issue = wholeNumber(opts['issue'] as string | undefined, '--issue', 'an issue number');
      const optional = {
        ...(opts['rev'] === undefined ? {} : { rev: opts['rev'] as string }),
        ...(opts['branch'] === undefined ? {} : { branch: opts['branch'] as string }),
        ...(timeout === undefined ? {} : { timeoutSeconds: Math.round(timeout), maxRuntimeSeconds: Math.round(timeout) }),
        ...(ttl === undefined ? {} : { ttlSeconds: ttl }),
        ...(maxCost === undefined ? {} : { maxCostUsd: maxCost }),
        ...(issue === undefined ? {} : { issueNumber: issue }),
        ...(openPr === undefined ? {} : { openPr }),
        ...(opts['approval'] === undefined ? {} : { approvalId: opts['approval'] as string }),
        ...(opts['correlation'] === undefined ? {} : { correlationId: opts['correlation'] as string }),
        ...(opts['parent'] === undefined ? {} : { parentMessageId: opts['parent'] as string }),
      };
      const { result, remote } = await writeLedger(gitdir, opts['remote'] as string | undefined, async (ledger) =>
        enqueueDispatch({
          ledger,
          key,
          now: now(),
          target,
          repo,
          task,
          scope: opts['scope'] as string[],
          accept: opts['accept'] as string[],
          verify: opts['verify'] as string[],
          patterns: opts['file'] as string[],
          ...optional,
          ...idempotency,
        }),
      );
      emitMessage(
        'dispatch',
        opts['json'] === true,
        { message_id: result.messageId, existing: result.existing, commit: result.commit, envelope: result.envelope, ...remoteJson(remote) },
        (result.existing ? ' (already queued with this idempotency key and request)' : ` (base ${result.envelope.dispatch.base_ref.slice(0, 12)}, branch ${result.envelope.dispatch.branch_name})`) + remoteText(remote),
      );
    });
}

/**
 * The task file (or `-`, standard input), read as every file the operator names is (readInput): a
 * folder, or a FIFO no program writes to, is refused rather than waited on, and a longer file is
 * refused rather than cut.
 */
export function readTaskFile(path: string, what = 'task file'): string {
  return readInput(path, what, LIMITS.executorPromptBytes).toString('utf8');
}
