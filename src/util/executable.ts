import * as fs from 'node:fs';
import * as os from 'node:os';
import { delimiter, isAbsolute, join, resolve } from 'node:path';
import { failedDownload, foreignBuild } from './program-format.js';

/** Is `path` a regular file this process may execute? */
export function isExecutableFile(path: string): boolean {
  try {
    fs.accessSync(path, fs.constants.X_OK);
    return fs.statSync(path).isFile();
  } catch {
    return false;
  }
}

/** Is `path` a regular file this process may read? */
export function isReadableFile(path: string): boolean {
  try {
    fs.accessSync(path, fs.constants.R_OK);
    return fs.statSync(path).isFile();
  } catch {
    return false;
  }
}

/**
 * The absolute path a command's program names, as a shell would find it: one with a slash is
 * taken against `cwd`, a bare name is looked up in `pathList` (an empty entry is `cwd`). Null
 * when no executable file is there.
 */
export function findExecutable(program: string, pathList: string, cwd = process.cwd()): string | null {
  if (program === '') return null;
  if (program.includes('/')) {
    const full = isAbsolute(program) ? program : resolve(cwd, program);
    return isExecutableFile(full) ? full : null;
  }
  for (const dir of pathList.split(delimiter)) {
    const full = join(dir === '' ? cwd : resolve(cwd, dir), program);
    if (isExecutableFile(full)) return full;
  }
  return null;
}

/** The most of a script's first line the kernel reads for its `#!` (Linux's BINPRM_BUF_SIZE). */
const SHEBANG_BYTES = 256;

/**
 * Why the executable file at `path` cannot be started, or null when it can as far as can be told
 * before it runs. A script (`#!`) is started by its interpreter: one that is missing or not
 * executable (a script copied from another machine, `#!/usr/bin/env NAME` with NAME not on
 * `pathList`, the PATH the program is given) fails every start, and so does a script its
 * interpreter may not read. A build for another machine, or a download that failed (an empty file, a
 * web page: program-format.ts), fails every start too.
 * Found at start, before any claim: after one, each attempt was claimed
 * and ended as the work's failure (a dispatch `timed_out` with `tests_failed`).
 */
export function startProblem(path: string, pathList: string): string | null {
  const head = Buffer.alloc(SHEBANG_BYTES);
  let length: number;
  try {
    const fd = fs.openSync(path, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
    try {
      length = fs.readSync(fd, head, 0, SHEBANG_BYTES, 0);
    } catch (error) {
      // A FIFO or a device at the path: what it is is the start's to say.
      if ((error as NodeJS.ErrnoException).code === 'EAGAIN') return null;
      throw error;
    } finally {
      fs.closeSync(fd);
    }
  } catch (error) {
    // An execute-only program (mode 0711): whether it is a script its interpreter could not read cannot be told; its start says.
    if ((error as NodeJS.ErrnoException).code === 'EACCES') return null;
    return `${path} cannot be read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message}): a script's interpreter could not read it either; chmod +r it`;
  }
  const foreign = foreignBuild(head.subarray(0, length), { platform: process.platform, machine: os.machine(), foreignHandlers: hasForeignHandlers() });
  if (foreign !== null) return `${path} is ${foreign}, which cannot be started here: give the build of it for this machine (${process.platform} ${os.machine()})`;
  const download = failedDownload(head.subarray(0, length));
  if (download !== null) return `${path} is ${download}: a download of it that failed? Download or install it again`;
  const text = head.subarray(0, length).toString('latin1');
  if (!text.startsWith('#!')) return null;
  // Linux passes what follows the interpreter as one argument: for env, the name it looks up, unless an option (-S) comes first.
  // The kernel strips spaces and tabs only: a carriage return (a script saved with Windows line ends) is part of the name it looks for.
  const line = text.slice(2).split('\n', 1)[0]!.replace(/^[ \t]+|[ \t]+$/g, '');
  if (line.includes('\r')) return `${path} has Windows line ends (CRLF): its first line names ${JSON.stringify(line)}, carriage return included, which cannot be started; convert the script to Unix line ends (dos2unix)`;
  const at = line.search(/[ \t]/);
  const interpreter = at === -1 ? line : line.slice(0, at);
  const argument = at === -1 ? '' : line.slice(at).trim();
  if (!isAbsolute(interpreter)) return null;
  if (!isExecutableFile(interpreter)) return `${path} is a script for #!${interpreter}, which is missing or not executable here: install it, or correct the script's first line`;
  if (/(^|\/)env$/.test(interpreter) && argument !== '' && !argument.startsWith('-') && !/[ \t]/.test(argument) && findExecutable(argument, pathList) === null) {
    return `${path} is a script for #!${line}, and ${argument} is not on the PATH it runs with (${pathList}): give its path in the script's first line, or install it in one of those folders`;
  }
  return null;
}

/**
 * Whether the kernel has a binfmt_misc handler registered (qemu-user for another architecture, Wine,
 * WSL's interop for .exe files), which may start a build for another machine after all.
 */
function hasForeignHandlers(): boolean {
  try {
    return fs.readdirSync('/proc/sys/fs/binfmt_misc').some((name) => name !== 'register' && name !== 'status');
  } catch {
    return false;
  }
}
