import type { Command } from 'commander';
import { CooError } from '../errors.js';
import { adoptProposal } from '../dispatch/adopt.js';
import { MAX_RUNTIME_SECONDS } from '../schema/common.js';
import { collectPairs, durationFlag, emitMessage, jsonOption, keyOption, ledgerOption, loadPrivateKey, now, positiveNumber, wholeNumber, required, idempotencyKeyFlag } from './common.js';
import { readTaskFile } from './dispatch.js';
import { remoteJson, remoteOption, remoteText, writeLedger } from './remote-option.js';

export function adoptVerb(program: Command): void {
  program
    .command('adopt')
    .description("adopt an advisory agent's proposal as governed work: a COO-signed ea_dispatch whose parent is the consult, naming the proposal by hash and recording what you changed of it")
    .argument('<message-id>', 'the consult whose answer carried the proposal')
    .requiredOption('--proposal <n>', 'which of its stored proposals (coo show MESSAGE_ID lists them), from 1')
    .addOption(ledgerOption())
    .addOption(keyOption('the COO private key; default $COO_KEY'))
    .option('--to <actor>', 'the execution agent that does the work, e.g. ea.codex (a proposal names none)')
    .option('--repo <path>', 'the repository the work is done in')
    .option('--rev <rev>', "the base commit (default: the commit the consult's context was pinned at)")
    .option('--task <text>', "the task, in place of the proposal's")
    .option('--task-file <file>', "read the task, in place of the proposal's, from a regular file or - for standard input")
    .option('--scope <glob>', "a path glob the work may change, in place of the proposal's scope (repeatable)", collectPairs, [])
    .option('--accept <text>', "an acceptance criterion, in place of the proposal's (repeatable)", collectPairs, [])
    .option('--verify <command>', "a command the runner runs itself afterwards, in place of the proposal's (repeatable)", collectPairs, [])
    .option('--attempt <n>', "the consult's attempt that answered (default: its latest succeeded one)")
    .option('--branch <name>', 'a new branch the work is committed on (default coo/<message id>)')
    .option('--timeout <duration>', "the executor's time box, e.g. 10m (default: the runtime budget)")
    .option('--max-cost <usd>', 'budget for this dispatch in USD, all attempts (default: the policy cap)')
    .option('--ttl <duration>', 'how long the dispatch may wait to start (default 1h)')
    .option('--approval <id>', "the CEO's approval (apr_...) of this exact adoption, when the policy asks for one (the default policy does)")
    .option('--idempotency-key <key>', 'the same key with the same request returns the message already there; with another request it is refused')
    .addOption(remoteOption())
    .addOption(jsonOption())
    .action(async (consultId: string, opts: Record<string, string | string[] | boolean | undefined>) => {
      const gitdir = required(opts['ledger'] as string | undefined, '--ledger', 'the ledger path or $COO_LEDGER');
      const key = loadPrivateKey(required(opts['key'] as string | undefined, '--key', 'the COO private key or $COO_KEY'));
      const idempotency = idempotencyKeyFlag(opts['idempotencyKey'] as string | undefined);
      const target = required(opts['to'] as string | undefined, '--to', 'the execution agent, e.g. ea.codex');
      const repo = required(opts['repo'] as string | undefined, '--repo', 'the repository the work is done in');
      const proposal = wholeNumber(opts['proposal'] as string, '--proposal', 'the number of a stored proposal');
      if (proposal === undefined) throw new CooError('USAGE', '--proposal takes the number of a stored proposal, from 1');
      const attempt = wholeNumber(opts['attempt'] as string | undefined, '--attempt', "the number of the consult's attempt");
      if (opts['task'] !== undefined && opts['taskFile'] !== undefined) throw new CooError('USAGE', 'give at most one of --task or --task-file');
      const task = (opts['task'] as string | undefined) ?? (opts['taskFile'] === undefined ? undefined : readTaskFile(opts['taskFile'] as string));
      const timeout = durationFlag(opts['timeout'] as string | undefined, '--timeout', MAX_RUNTIME_SECONDS);
      const ttl = durationFlag(opts['ttl'] as string | undefined, '--ttl');
      const maxCost = positiveNumber(opts['maxCost'] as string | undefined, '--max-cost');
      const list = (name: string): string[] | undefined => ((opts[name] as string[]).length === 0 ? undefined : (opts[name] as string[]));
      const overrides = { task, scope: list('scope'), accept: list('accept'), verify: list('verify') };
      const optional = {
        ...Object.fromEntries(Object.entries(overrides).filter(([, value]) => value !== undefined)),
        ...(attempt === undefined ? {} : { attempt }),
        ...(opts['rev'] === undefined ? {} : { rev: opts['rev'] as string }),
        ...(opts['branch'] === undefined ? {} : { branch: opts['branch'] as string }),
        ...(timeout === undefined ? {} : { timeoutSeconds: Math.round(timeout), maxRuntimeSeconds: Math.round(timeout) }),
        ...(ttl === undefined ? {} : { ttlSeconds: ttl }),
        ...(maxCost === undefined ? {} : { maxCostUsd: maxCost }),
        ...(opts['approval'] === undefined ? {} : { approvalId: opts['approval'] as string }),
      };
      const { result, remote } = await writeLedger(gitdir, opts['remote'] as string | undefined, async (ledger) => adoptProposal({ ledger, key, now: now(), target, repo, consultId, proposal, ...optional, ...idempotency }));
      emitMessage(
        'adopt',
        opts['json'] === true,
        { message_id: result.messageId, existing: result.existing, commit: result.commit, adopted: result.envelope.adopted_proposal, changed: result.changed, envelope: result.envelope, ...remoteJson(remote) },
        (result.existing ? ' (already queued with this idempotency key and request)' : ` adopts proposal ${proposal} of ${consultId}${result.changed.length === 0 ? ' as it stands' : `, changed: ${result.changed.join(', ')}`} (base ${result.envelope.dispatch.base_ref.slice(0, 12)}, branch ${result.envelope.dispatch.branch_name})`) + remoteText(remote),
      );
    });
}
