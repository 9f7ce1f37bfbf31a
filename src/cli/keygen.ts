import * as fs from 'node:fs';
import { join } from 'node:path';
import type { Command } from 'commander';
import { CooError } from '../errors.js';
import { actorId } from '../schema/common.js';
import { formatPrivateKey, formatPublicKeyLine, generatePrivateKey } from '../crypto/keys.js';
import { emit, jsonOption, required } from './common.js';
import { writeOwnFile } from '../util/own-write.js';

/** Anything at `path`, a dangling link included. */
function present(path: string): boolean {
  try {
    fs.lstatSync(path);
    return true;
  } catch {
    return false;
  }
}

export function keygenVerb(program: Command): void {
  program
    .command('keygen')
    .description('create an ed25519 key pair for an actor: DIR/ID.key (OpenSSH private key, mode 0600) and DIR/ID.pub')
    .option('--actor <id>', 'the actor the key is for, e.g. coo.hermes')
    .option('--out <dir>', 'where to write the key files')
    .option('--force', 'overwrite existing key files')
    .addOption(jsonOption())
    .action((opts: { actor?: string; out?: string; force?: boolean; json?: boolean }) => {
      const actor = required(opts.actor, '--actor', 'the actor id, e.g. coo.hermes');
      const out = required(opts.out, '--out', 'a directory for the key files');
      if (!actorId.safeParse(actor).success) throw new CooError('USAGE', `--actor ${JSON.stringify(actor)} is not an actor id (dotted lowercase, e.g. coo.hermes)`);
      const keyPath = join(out, `${actor}.key`);
      const pubPath = join(out, `${actor}.pub`);
      if (opts.force !== true && (present(keyPath) || present(pubPath))) {
        throw new CooError('USAGE', `${keyPath} or ${pubPath} exists; pass --force to overwrite`);
      }
      const key = generatePrivateKey(actor);
      fs.mkdirSync(out, { recursive: true, mode: 0o700 });
      // A fresh private file renamed into place: a link left at either name is replaced, never written through (the key to where it points).
      writeOwnFile(keyPath, formatPrivateKey(key), { mode: 0o600, makeFolder: false, what: 'the private key', remedy: 'move what is at that name away and run coo keygen again', code: 'IO_ERROR' });
      writeOwnFile(pubPath, `${formatPublicKeyLine(key.publicKey, actor)}\n`, { mode: 0o644, makeFolder: false, what: 'the public key', remedy: 'move what is at that name away and run coo keygen again', code: 'IO_ERROR' });
      emit(opts.json, { actor, key_id: key.publicKey.keyId, private_key: keyPath, public_key: pubPath }, () =>
        [`${actor} ${key.publicKey.keyId}`, `  private key: ${keyPath} (keep it secret)`, `  public key:  ${pubPath}`].join('\n'),
      );
    });
}
