import type { Command } from 'commander';
import { LIMITS } from '../limits.js';
import { CooError } from '../errors.js';
import { appendTrustVersion } from '../ledger/trust-update.js';
import type { TrustRole } from '../ledger/layout.js';
import { readStrictYaml } from '../schema/strict-yaml.js';
import type { PublicKey } from '../crypto/keys.js';
import { ceoKeyOption, collectPairs, emit, jsonOption, ledgerOption, loadPrivateKey, loadPublicKey, now, readInput, required, splitPair } from './common.js';
import { remoteJson, remoteOption, remoteText, writeLedger } from './remote-option.js';

export function trustVerb(program: Command): void {
  program
    .command('trust')
    .description('append the next version of the trust root, registry or policy, signed by a trust-root authority (the CEO)')
    .addOption(ledgerOption())
    .addOption(ceoKeyOption('a private key of the trust root in force'))
    .option('--root <file>', 'the next trust root (key rotation of the CEO); the registry follows in the same commit, so both name the same CEO keys')
    .option('--registry <file>', 'the next actor registry')
    .option('--policy <file>', 'the next actor policy')
    .option('--actor <id=pubfile>', 'with --registry: set an actor\'s key (rotation); repeatable', collectPairs, [])
    .option('--revoke <keyid=reason>', 'with --registry or --root: revoke a key (compromise: final, it never regains any role); a CEO key is revoked with the --root that names its successor; repeatable', collectPairs, [])
    .addOption(remoteOption())
    .addOption(jsonOption())
    .action(async (opts: { ledger?: string; ceoKey?: string; root?: string; registry?: string; policy?: string; actor: string[]; revoke: string[]; remote?: string; json?: boolean }) => {
      const gitdir = required(opts.ledger, '--ledger', 'the ledger path');
      const key = loadPrivateKey(required(opts.ceoKey, '--ceo-key', 'a trust-root private key or $COO_CEO_KEY'));
      const chosen = (['root', 'registry', 'policy'] as const).filter((role) => opts[role] !== undefined);
      if (chosen.length !== 1) throw new CooError('USAGE', 'give exactly one of --root, --registry or --policy');
      const role: TrustRole = chosen[0]!;
      const file = opts[role]!;
      const document = readStrictYaml(readInput(file, `${role} file`, LIMITS.yamlBytes, 'YAML_TOO_LARGE'), file);
      if (document === null || typeof document !== 'object' || Array.isArray(document)) throw new CooError('SCHEMA_INVALID', `${file}: a mapping is expected`);
      const actorKeys = new Map<string, PublicKey>(opts.actor.map((pair) => {
        const [id, pub] = splitPair(pair, '--actor');
        return [id, loadPublicKey(pub)];
      }));
      const revoke = new Map(opts.revoke.map((pair) => splitPair(pair, '--revoke')));
      const { result, remote } = await writeLedger(gitdir, opts.remote, (ledger) =>
        appendTrustVersion(
          ledger,
          {
            role,
            document: document as Record<string, unknown>,
            ...(actorKeys.size > 0 ? { actorKeys } : {}),
            ...(revoke.size > 0 ? { revoke } : {}),
          },
          key,
          now(),
        ),
      );
      const registryVersion = result.registryVersion;
      emit(opts.json, { role, version: result.version, ...(registryVersion === undefined ? {} : { registry_version: registryVersion }), commit: result.commit, seq: result.seq, ...remoteJson(remote) }, () =>
        `${role} version ${result.version}${registryVersion === undefined ? '' : ` and registry version ${registryVersion}`} appended in ${result.commit} (Ledger-Seq ${result.seq})${remoteText(remote)}`,
      );
    });
}
