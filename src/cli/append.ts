import { basename } from 'node:path';
import { LIMITS } from '../limits.js';
import type { Command } from 'commander';
import { appendEnvelope } from '../ledger/append-envelope.js';
import { emit, jsonOption, keyOption, ledgerOption, loadPrivateKey, now, readInput, required } from './common.js';
import { remoteJson, remoteOption, remoteText, writeLedger } from './remote-option.js';

export function appendVerb(program: Command): void {
  program
    .command('append')
    .description('sign and commit an envelope written by hand; the write-time validator runs first')
    .argument('<envelope>', 'the coo_message.v0 YAML file')
    .argument('[artifacts...]', 'files that belong beside it, by name: prompt.md, context-manifest.yaml')
    .addOption(ledgerOption())
    .addOption(keyOption())
    .addOption(remoteOption())
    .addOption(jsonOption())
    .action(async (envelope: string, artifacts: string[], opts: { ledger?: string; key?: string; remote?: string; json?: boolean }) => {
      const gitdir = required(opts.ledger, '--ledger', 'the ledger path or $COO_LEDGER');
      const key = loadPrivateKey(required(opts.key, '--key', 'your private key file or $COO_KEY'));
      const files = new Map(artifacts.map((file) => [basename(file), readInput(file, 'artifact', LIMITS.artifactBytes)]));
      let bytes: Buffer | undefined;
      const { result, remote } = await writeLedger(gitdir, opts.remote, async (ledger) => {
        bytes ??= readInput(envelope, 'envelope', LIMITS.yamlBytes, 'YAML_TOO_LARGE');
        // The envelope's key is given by hand: the writer holds it to the derived-form rule in the slot it lands in.
        return appendEnvelope(ledger, bytes, files, key, now(), envelope);
      });
      emit(opts.json, { message_id: result.messageId, path: result.path, commit: result.commit, existing: result.existing, ...remoteJson(remote) }, () =>
        (result.existing
          ? `${result.messageId} (already in the ledger with this idempotency key and request; nothing written)`
          : `${result.messageId} appended in ${result.commit}`) + remoteText(remote),
      );
    });
}
