/**
 * What the lane may hand Oracle that a target repository chose: the pinned files' names, which
 * become `--file` arguments, and the files themselves, which Oracle finds in its working folder.
 * Pure. Checked when a consult is written (enqueue) and again before an attempt is claimed, so a
 * hand-written envelope is refused unpaid too.
 */

/** dotenv, which Oracle imports first, reads `dotenv_config_<option>=value` from its own argv (dotenv/lib/cli-options.js). */
const DOTENV_ARGUMENT = /^dotenv_config_/i;

/** Oracle reads a project configuration (model, search, prompt suffix, engine) at this path under its working folder. */
const PROJECT_CONFIG = '.oracle/config.json';

/** Why `path` may not be handed to Oracle as a pinned file, or null when it may. */
export function oraclePathProblem(path: string): string | null {
  if (/[*?[\]{}(),!\\]/.test(path) || path.startsWith('-') || /[\n\r]/.test(path)) {
    return 'Oracle would read this name as a pattern (characters * ? [ ] { } ( ) , ! \\ or a line break, or a leading -)';
  }
  if (path.trim() !== path) return 'Oracle trims a file name, so it would read another file than the one pinned';
  if (DOTENV_ARGUMENT.test(path)) return 'dotenv, which Oracle loads, would read this argument as its own option and could load variables over the runner\'s';
  if (path === PROJECT_CONFIG) return 'Oracle would read it as its configuration (model, prompt suffix, engine), not as context';
  return null;
}

/** Why an argument the operator gave Oracle is one dotenv would take as its option, or null. */
export function dotenvArgumentProblem(arg: string): string | null {
  return DOTENV_ARGUMENT.test(arg) ? `Oracle argument ${arg} would be read by dotenv as its own option` : null;
}
