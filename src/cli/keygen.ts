import * as fs from 'node:fs';
import { basename, join } from 'node:path';
import type { Command } from 'commander';
import { CooError } from '../errors.js';
import { actorId } from '../schema/common.js';
import { formatPrivateKey, formatPublicKeyLine, generatePrivateKey } from '../crypto/keys.js';
import { emit, jsonOption, required } from './common.js';

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
      writeKeyFiles(out, [
        { path: keyPath, text: formatPrivateKey(key), mode: 0o600 },
        { path: pubPath, text: `${formatPublicKeyLine(key.publicKey, actor)}\n`, mode: 0o644 },
      ]);
      emit(opts.json, { actor, key_id: key.publicKey.keyId, private_key: keyPath, public_key: pubPath }, () =>
        [`${actor} ${key.publicKey.keyId}`, `  private key: ${keyPath} (keep it secret)`, `  public key:  ${pubPath}`].join('\n'),
      );
    });
}

/**
 * Writes each file whole: first a new file of its own beside it (mode set when it is made, so the
 * private key is never readable by others, not even for a moment), then renamed into place. An
 * interrupted keygen leaves no half-written key, `--force` never writes through a link or into a
 * file others may read, and what cannot be written is a coded line.
 */
function writeKeyFiles(out: string, files: ReadonlyArray<{ readonly path: string; readonly text: string; readonly mode: number }>): void {
  const temps: string[] = [];
  try {
    fs.mkdirSync(out, { recursive: true, mode: 0o700 });
    // A folder where a file goes is found before any file is replaced: --force never leaves a new private key beside an old public one.
    for (const file of files) {
      if (fs.lstatSync(file.path, { throwIfNoEntry: false })?.isDirectory() === true) throw Object.assign(new Error('a folder where a key file goes'), { code: 'EISDIR' });
    }
    for (const file of files) {
      const temp = `${file.path}.${process.pid}.tmp`;
      temps.push(temp);
      fs.writeFileSync(temp, file.text, { mode: file.mode, flag: 'wx' });
    }
    for (const [index, file] of files.entries()) fs.renameSync(temps[index]!, file.path);
  } catch (error) {
    throw new CooError('IO_ERROR', `cannot write the key files in ${out} (${(error as NodeJS.ErrnoException).code ?? 'EIO'}): give --out a folder this user may write, where ${files.map((file) => basename(file.path)).join(' and ')} are not folders`);
  } finally {
    for (const temp of temps) fs.rmSync(temp, { force: true });
  }
}
