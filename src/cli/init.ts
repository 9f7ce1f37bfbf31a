import type { Command } from 'commander';
import { LIMITS } from '../limits.js';
import { initLedger } from '../ledger/init.js';
import { readDocument } from '../schema/documents.js';
import type { PublicKey } from '../crypto/keys.js';
import { ceoKeyOption, collectPairs, emit, jsonOption, ledgerOption, loadPrivateKey, loadPublicKey, now, readInput, required, splitPair } from './common.js';

export function initVerb(program: Command): void {
  program
    .command('init')
    .description('create a ledger: a bare git repository whose first commit, signed by the CEO, holds the trust root, registry and policy')
    .addOption(ledgerOption())
    .addOption(ceoKeyOption('the CEO private key; its public key becomes the trust root'))
    .option('--actor <id=pubfile>', 'give an actor of the registry its public key (repeatable)', collectPairs, [])
    .option('--registry <file>', 'registry to start from (default: policy/actor_registry.v0.yaml)')
    .option('--policy <file>', 'policy to start from (default: policy/actor_policy.v0.yaml)')
    .addOption(jsonOption())
    .action(async (opts: { ledger?: string; ceoKey?: string; actor: string[]; registry?: string; policy?: string; json?: boolean }) => {
      const gitdir = required(opts.ledger, '--ledger', 'where to create the ledger, e.g. ledger.git');
      const ceoKey = loadPrivateKey(required(opts.ceoKey, '--ceo-key', 'the CEO private key or $COO_CEO_KEY'));
      const actors = new Map<string, PublicKey>(opts.actor.map((pair) => {
        const [id, file] = splitPair(pair, '--actor');
        return [id, loadPublicKey(file)];
      }));
      const result = await initLedger({
        gitdir,
        ceoKey,
        actors,
        ...(opts.registry === undefined ? {} : { registry: readDocument('actor_registry.v0', readInput(opts.registry, 'registry', LIMITS.yamlBytes, 'YAML_TOO_LARGE'), opts.registry) }),
        ...(opts.policy === undefined ? {} : { policy: readDocument('actor_policy.v0', readInput(opts.policy, 'policy', LIMITS.yamlBytes, 'YAML_TOO_LARGE'), opts.policy) }),
        now: now(),
      });
      emit(opts.json, { ledger: gitdir, commit: result.commit, seq: result.seq, trust_root_key: ceoKey.publicKey.keyId }, () =>
        [`created ledger ${gitdir}`, `  genesis ${result.commit} (Ledger-Seq 1), signed by ${ceoKey.publicKey.keyId}`, '  pre-receive hook installed'].join('\n'),
      );
    });
}
