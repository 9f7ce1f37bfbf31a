import * as fs from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { CooError } from '../errors.js';
import { findExecutable, isExecutableFile } from '../util/executable.js';

/**
 * Before the runner claims anything: can the Oracle it was given be started at all? A command that
 * is missing, not executable or not on PATH fails every consult the same way; found at start
 * (runner/startup.ts), it is a configuration error (exit 2) and every envelope stays queued until
 * the runner starts with a working Oracle.
 */

/**
 * The executable `--oracle-command` names, as an absolute path. Oracle runs in the attempt's
 * sandbox folder with a PATH of its own, where a relative path or a name found on the runner's
 * PATH would not be found: both are resolved here, against the runner's own folder and PATH.
 */
export function resolveOracleCommand(command: string, env: NodeJS.ProcessEnv = process.env, cwd = process.cwd()): string {
  if (command === '') throw new CooError('ORACLE_CONFIG', '--oracle-command is empty: give the path of an Oracle executable');
  if (!command.includes('/')) {
    const found = findExecutable(command, env['PATH'] ?? '', cwd);
    if (found === null) throw new CooError('ORACLE_CONFIG', `--oracle-command ${command}: no executable of that name on PATH; give its path, or install it`);
    return found;
  }
  const path = isAbsolute(command) ? command : resolve(cwd, command);
  let stat: fs.Stats;
  try {
    stat = fs.statSync(path);
  } catch (error) {
    throw new CooError('ORACLE_CONFIG', `--oracle-command ${command}: ${(error as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (error as Error).message}; give the path of an Oracle executable`);
  }
  if (!stat.isFile()) throw new CooError('ORACLE_CONFIG', `--oracle-command ${command} is not a file; give the path of an Oracle executable`);
  if (!isExecutableFile(path)) throw new CooError('ORACLE_CONFIG', `--oracle-command ${command} is not executable; chmod +x it`);
  return path;
}
