import type { Command } from 'commander';
import { LIMITS } from '../limits.js';
import { CooError } from '../errors.js';
import { enqueueConsult, enqueuePanel } from '../consult/enqueue.js';
import { MAX_HOPS, MAX_RUNTIME_SECONDS } from '../schema/common.js';
import { collectPairs, durationFlag, emitMessage, jsonOption, keyOption, ledgerOption, loadPrivateKey, now, positiveNumber, wholeNumber, readInput, required, idempotencyKeyFlag } from './common.js';
import { remoteJson, remoteOption, remoteText, writeLedger } from './remote-option.js';
import { writeErr } from './terminal.js';
import { inertJson } from '../util/invisible.js';

export function consultVerb(program: Command): void {
  program
    .command('consult')
    .description(
      'enqueue an advisory consult: pin context files at a commit, write prompt and manifest, sign and append an aa_consult envelope; with several --to, or --panel, one consult to each member of a panel the policy names, written together (prints the panel id)',
    )
    .addOption(ledgerOption())
    .addOption(keyOption('the COO private key; default $COO_KEY'))
    .option('--to <actor>', 'the advisory agent, e.g. aa.chatgpt; repeat it to ask several at once (a panel the policy allows)', collectPairs, [])
    .option('--panel <name>', "ask a policy panel: all its members, or the --to ones among them")
    .option('--repo <path>', 'the repository the context is pinned from')
    .option('--rev <rev>', 'the commit to pin (default HEAD)')
    .option('--file <glob>', 'a context file or glob, relative to the repository root (repeatable)', collectPairs, [])
    .option('--prompt <text>', 'the question for the advisory agent')
    .option('--prompt-file <file>', 'read the question from a file')
    .option('--max-cost <usd>', "budget for this consult in USD, each panel member's for a panel (default: the policy cap)")
    .option('--max-runtime <seconds>', 'runtime budget in seconds (default: 600 or the policy cap)')
    .option('--ttl <duration>', 'how long the consult may wait to start, e.g. 30m, 2h (default 1h)')
    .option('--idempotency-key <key>', 'the same key with the same request returns the message already there; with another request or correlation it is refused')
    .option('--correlation <id>', "correlation id (corr_...) shared by related messages (default: the parent's, or the original's under the same --idempotency-key, or a new one)")
    .option('--parent <message-id>', 'the message this one follows from')
    .option('--max-hops <n>', 'how many hops a chain through this message may take, counted from its first message (default: what the parent leaves, or the policy limit)')
    .addOption(remoteOption())
    .addOption(jsonOption())
    .action(async (opts: Record<string, string | string[] | boolean | undefined>) => {
      const gitdir = required(opts['ledger'] as string | undefined, '--ledger', 'the ledger path or $COO_LEDGER');
      const key = loadPrivateKey(required(opts['key'] as string | undefined, '--key', 'the COO private key or $COO_KEY'));
      const idempotency = idempotencyKeyFlag(opts['idempotencyKey'] as string | undefined);
      const targets = opts['to'] as string[];
      const panel = opts['panel'] as string | undefined;
      if (targets.length === 0 && panel === undefined) required(undefined, '--to', 'the advisory agent, e.g. aa.chatgpt (or several, or --panel NAME)');
      const repo = required(opts['repo'] as string | undefined, '--repo', 'the repository to pin context from');
      const promptText = opts['prompt'] as string | undefined;
      const promptFile = opts['promptFile'] as string | undefined;
      if ((promptText === undefined) === (promptFile === undefined)) throw new CooError('USAGE', 'give exactly one of --prompt or --prompt-file');
      const question = promptText ?? readInput(promptFile!, 'prompt file', LIMITS.artifactBytes).toString('utf8');
      const ttl = durationFlag(opts['ttl'] as string | undefined, '--ttl');
      const maxCost = positiveNumber(opts['maxCost'] as string | undefined, '--max-cost');
      const maxRuntime = wholeNumber(opts['maxRuntime'] as string | undefined, '--max-runtime', 'a whole number of seconds', MAX_RUNTIME_SECONDS);
      const maxHops = wholeNumber(opts['maxHops'] as string | undefined, '--max-hops', 'a whole number of hops', MAX_HOPS);
      const optional = {
        ...(opts['rev'] === undefined ? {} : { rev: opts['rev'] as string }),
        ...(maxCost === undefined ? {} : { maxCostUsd: maxCost }),
        ...(maxRuntime === undefined ? {} : { maxRuntimeSeconds: maxRuntime }),
        ...(ttl === undefined ? {} : { ttlSeconds: ttl }),
        ...(maxHops === undefined ? {} : { maxHops }),
        ...(opts['correlation'] === undefined ? {} : { correlationId: opts['correlation'] as string }),
        ...(opts['parent'] === undefined ? {} : { parentMessageId: opts['parent'] as string }),
      };
      if (targets.length > 1 || panel !== undefined) {
        const { result, remote } = await writeLedger(gitdir, opts['remote'] as string | undefined, async (ledger) =>
          enqueuePanel({ ledger, key, now: now(), ...(targets.length === 0 ? {} : { members: targets }), ...(panel === undefined ? {} : { panel }), repo, patterns: opts['file'] as string[], question, ...optional, ...idempotency }),
        );
        if (opts['json'] === true) {
          process.stdout.write(`${inertJson({ panel_id: result.panelId, panel: result.name, members: result.members.map((member) => ({ target: member.target, message_id: member.messageId })), existing: result.existing, commit: result.commit, ...remoteJson(remote) }, 2)}\n`);
          return;
        }
        process.stdout.write(`${result.panelId}\n`);
        writeErr(
          `coo consult: ${result.panelId} (panel ${result.name}${result.existing ? ', already queued with this idempotency key and request' : ''}): ${result.members.map((member) => `${member.target} ${member.messageId}`).join(', ')}${remoteText(remote)}\n`,
        );
        return;
      }
      const target = targets[0]!;
      const { result, remote } = await writeLedger(gitdir, opts['remote'] as string | undefined, async (ledger) =>
        enqueueConsult({ ledger, key, now: now(), target, repo, patterns: opts['file'] as string[], question, ...optional, ...idempotency }),
      );
      emitMessage(
        'consult',
        opts['json'] === true,
        { message_id: result.messageId, existing: result.existing, commit: result.commit, envelope: result.envelope, ...remoteJson(remote) },
        (result.existing ? ' (already queued with this idempotency key and request)' : '') + remoteText(remote),
      );
    });
}
