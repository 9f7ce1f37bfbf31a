import type { Command } from 'commander';
import { LIMITS } from '../limits.js';
import { CooError } from '../errors.js';
import { enqueueCrossCheck } from '../consult/cross-check.js';
import { MAX_HOPS, MAX_RUNTIME_SECONDS } from '../schema/common.js';
import { durationFlag, emitMessage, jsonOption, keyOption, ledgerOption, loadPrivateKey, now, positiveNumber, wholeNumber, readInput, required, idempotencyKeyFlag } from './common.js';
import { remoteJson, remoteOption, remoteText, writeLedger } from './remote-option.js';

export function crossCheckVerb(program: Command): void {
  program
    .command('cross-check')
    .argument('<answer>', "the answer to challenge: a consult's message id (its latest answer) or the path of the receipt that holds it")
    .description(
      "put one advisory agent's answer to another to challenge, where the policy has an aa.* -> aa.* edge for cross_check (the default policy has none): a cross_check envelope the COO signs on the answering agent's behalf, its parent the message that was answered, its context that message's pin, the answer pinned by hash and sent quoted as untrusted data",
    )
    .addOption(ledgerOption())
    .addOption(keyOption('the COO private key; default $COO_KEY'))
    .option('--to <actor>', 'the advisory agent that challenges the answer, e.g. aa.claude')
    .option('--prompt <text>', 'what to ask about the answer (default: a standing request to challenge it against the pinned files)')
    .option('--prompt-file <file>', 'read that question from a file')
    .option('--max-cost <usd>', 'budget for the challenge in USD (default: the policy cap; it counts against the correlation)')
    .option('--max-runtime <seconds>', 'runtime budget in seconds (default: 600 or the policy cap)')
    .option('--ttl <duration>', 'how long the challenge may wait to start, e.g. 30m, 2h (default 1h)')
    .option('--idempotency-key <key>', 'the same key with the same request returns the message already there')
    .option('--max-hops <n>', 'how many hops the chain may take from here on (at most what the answered message leaves)')
    .addOption(remoteOption())
    .addOption(jsonOption())
    .action(async (answer: string, opts: Record<string, string | boolean | undefined>) => {
      const gitdir = required(opts['ledger'] as string | undefined, '--ledger', 'the ledger path or $COO_LEDGER');
      const key = loadPrivateKey(required(opts['key'] as string | undefined, '--key', 'the COO private key or $COO_KEY'));
      const idempotency = idempotencyKeyFlag(opts['idempotencyKey'] as string | undefined);
      const target = required(opts['to'] as string | undefined, '--to', 'the advisory agent that challenges the answer, e.g. aa.claude');
      const promptText = opts['prompt'] as string | undefined;
      const promptFile = opts['promptFile'] as string | undefined;
      if (promptText !== undefined && promptFile !== undefined) throw new CooError('USAGE', 'give at most one of --prompt or --prompt-file');
      const question = promptText ?? (promptFile === undefined ? undefined : readInput(promptFile, 'prompt file', LIMITS.artifactBytes).toString('utf8'));
      const ttl = durationFlag(opts['ttl'] as string | undefined, '--ttl');
      const maxCost = positiveNumber(opts['maxCost'] as string | undefined, '--max-cost');
      const maxRuntime = wholeNumber(opts['maxRuntime'] as string | undefined, '--max-runtime', 'a whole number of seconds', MAX_RUNTIME_SECONDS);
      const maxHops = wholeNumber(opts['maxHops'] as string | undefined, '--max-hops', 'a whole number of hops', MAX_HOPS);
      const { result, remote } = await writeLedger(gitdir, opts['remote'] as string | undefined, async (ledger) =>
        enqueueCrossCheck({
          ledger,
          key,
          now: now(),
          of: answer,
          target,
          ...(question === undefined ? {} : { question }),
          ...(maxCost === undefined ? {} : { maxCostUsd: maxCost }),
          ...(maxRuntime === undefined ? {} : { maxRuntimeSeconds: maxRuntime }),
          ...(ttl === undefined ? {} : { ttlSeconds: ttl }),
          ...(maxHops === undefined ? {} : { maxHops }),
          ...idempotency,
        }),
      );
      emitMessage(
        'cross-check',
        opts['json'] === true,
        { message_id: result.messageId, existing: result.existing, commit: result.commit, envelope: result.envelope, ...remoteJson(remote) },
        `: ${result.envelope.target_actor} challenges the answer of ${result.envelope.source_actor}${result.existing ? ' (already queued with this idempotency key and request)' : ''}${remoteText(remote)}`,
      );
    });
}
