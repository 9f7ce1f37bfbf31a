import { Command, CommanderError, type Option } from 'commander';
import { CooError, errorClassOf, isCooError } from '../errors.js';
import { oneLineText } from '../util/invisible.js';
import { allowedSignersVerb } from './allowed-signers.js';
import { appendVerb } from './append.js';
import { collectPairs } from './common.js';
import { approveVerb } from './approve.js';
import { attestVerb } from './attest.js';
import { citeVerb } from './cite.js';
import { cloneVerb } from './clone.js';
import { consultVerb } from './consult.js';
import { consultRelayVerb } from './consult-relay.js';
import { adoptVerb } from './adopt.js';
import { commandVerb, rejectVerb } from './ceo-messages.js';
import { ackVerb, inboxVerb } from './inbox.js';
import { crossCheckVerb } from './cross-check.js';
import { reportVerb } from './report.js';
import { demoVerb } from './demo.js';
import { dispatchVerb } from './dispatch.js';
import { forgeVerb } from './forge.js';
import { killSwitchVerb } from './kill-switch.js';
import { watchVerb } from './watch.js';
import { hookVerb } from './hook.js';
import { initVerb } from './init.js';
import { keygenVerb } from './keygen.js';
import { logVerb } from './log.js';
import { mcpVerb } from './mcp.js';
import { modelVerb } from './model.js';
import { currentOutcome } from './outcome.js';
import { schemasVerb } from './schemas.js';
import { showVerb } from './show.js';
import { trustVerb } from './trust.js';
import { verifyVerb } from './verify.js';
import { verifyBundleVerb } from './verify-bundle.js';
import { heldSecrets, writeErr } from './terminal.js';
import { inertJson } from '../util/invisible.js';

/** How a run ended; cli/coo.ts turns it into the exit status. */
export type RunOutcome = 'ok' | 'error' | 'usage' | 'rejected' | 'interrupted';

export function buildProgram(): Command {
  const program = new Command('coo')
    .description('coo-commons: a Git-native control plane for AI actors (signed envelopes and receipts in a ledger repo)')
    .version('0.1.0')
    // `--version` and `--help` of `coo` itself are read before the verb only: after it, `--version` is a
    // flag's value like any other (`--prompt --version` asked about versions printed `0.1.0` and did nothing).
    .enablePositionalOptions()
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride()
    // A malformed command line is said as every other failure is: one coded line (`coo: USAGE: ...`).
    .configureOutput({ writeErr: (text) => writeErr(text), outputError: (text, write) => write(`coo: USAGE: ${text.replace(/^error: /, '')}`) });
  for (const verb of [keygenVerb, initVerb, cloneVerb, trustVerb, appendVerb, consultVerb, crossCheckVerb, dispatchVerb, adoptVerb, approveVerb, rejectVerb, commandVerb, inboxVerb, ackVerb, watchVerb, killSwitchVerb, forgeVerb, showVerb, logVerb, verifyVerb, allowedSignersVerb, citeVerb, attestVerb, verifyBundleVerb, reportVerb, schemasVerb, demoVerb, modelVerb, hookVerb, consultRelayVerb, mcpVerb]) {
    verb(program);
  }
  for (const command of program.commands) command.exitOverride();
  program.hook('preAction', (_program, action) => requireNoEmptyValues(action));
  return program;
}

/**
 * A flag or an argument given an empty value on the command line (`--state-dir "$STATE"` with
 * STATE unset) is a mistake in it, refused before the verb runs: taken as given, a path would
 * resolve to the current folder (a runner's state folder made there) and a URL or a name to
 * nothing, unlike the flag left out. The same variable empty in the environment a flag falls back
 * to still counts as unset.
 */
function requireNoEmptyValues(command: Command): void {
  const empty = (value: unknown): boolean => (Array.isArray(value) ? value : [value]).some((one) => typeof one === 'string' && one.trim() === '');
  for (const option of command.options) {
    const name = option.attributeName();
    if (command.getOptionValueSource(name) !== 'cli' || !empty(command.getOptionValue(name))) continue;
    throw emptyValue(option);
  }
  command.registeredArguments.forEach((argument, index) => {
    if (empty(command.processedArgs[index])) throw new CooError('USAGE', `the argument <${argument.name()}> was given empty (a shell variable that is unset or empty?): give it a value; nothing was done`);
  });
}

function emptyValue(option: Option): CooError {
  return new CooError('USAGE', `${option.long ?? option.flags} was given an empty value (a shell variable that is unset or empty?): give it a value, or leave the flag out for its default; nothing was done`);
}

/**
 * The options a command line gives its verb, in order, as the parser takes them, and the words it
 * left as unknown options; `command` is null when it names no verb.
 */
interface GivenLine {
  readonly command: Command | null;
  readonly given: readonly { readonly option: Option; readonly value: unknown }[];
  readonly unknown: readonly string[];
}

/**
 * Reads a command line as the parser will, on a program of its own whose option events are only
 * recorded (no value parsed, nothing run): so `--json` is asked for only where the parser takes it
 * as the flag, never as another flag's value (`--prompt --json`) or an operand after `--`. A line
 * the parser refuses is read up to where it stops.
 */
function readLine(argv: readonly string[]): GivenLine {
  let command = buildProgram();
  let operands: string[] = [];
  let unknown = [...argv];
  let given: { option: Option; value: unknown }[];
  for (;;) {
    const seen = command;
    const recorded: { option: Option; value: unknown }[] = [];
    given = recorded;
    seen.configureOutput({ writeErr: () => undefined, writeOut: () => undefined, outputError: () => undefined });
    (seen as unknown as { emit: (event: string, ...values: unknown[]) => boolean }).emit = (event, ...values) => {
      const option = event.startsWith('option:') ? seen.options.find((one) => one.name() === event.slice('option:'.length)) : undefined;
      if (option !== undefined) recorded.push({ option, value: values[0] });
      return true;
    };
    try {
      const parsed = seen.parseOptions(unknown);
      operands = [...operands, ...parsed.operands];
      unknown = parsed.unknown;
    } catch {
      // A missing value: the parser refuses the line itself; what came before it stands. A `--json` this verb does not know
      // counts as asked for unless it stands where a flag of this verb takes a value (`--remote --json --state-dir`: the
      // remote's value), as the parser would have read it.
      const takesValue = (word: string | undefined): boolean => word !== undefined && seen.options.some((option) => (option.long === word || option.short === word) && (option.required || option.optional));
      unknown = unknown.filter((word, index) => word === '--' || (word === '--json' && !takesValue(unknown[index - 1])));
      break;
    }
    const sub = seen.commands.find((one) => one.name() === operands[0] || one.aliases().includes(operands[0] ?? ''));
    if (sub === undefined) break;
    command = sub;
    operands = operands.slice(1);
  }
  return command.parent === null ? { command: null, given: [], unknown: [] } : { command, given, unknown };
}

/**
 * Whether the command line asks for JSON: `--json` where the parser takes it as the flag; given to a
 * verb that has no such flag (`coo model --json`, `coo mcp --json`), where the parser refuses it as an
 * unknown option, not as another flag's value; a line naming no verb, by its words before `--`.
 */
function wantsJson(argv: readonly string[]): boolean {
  let line: GivenLine;
  try {
    line = readLine(argv);
  } catch {
    line = { command: null, given: [], unknown: [] };
  }
  if (line.command !== null) {
    if (line.given.some(({ option }) => option.long === '--json')) return true;
    const end = line.unknown.indexOf('--');
    return (end === -1 ? line.unknown : line.unknown.slice(0, end)).includes('--json');
  }
  const end = argv.indexOf('--');
  return (end === -1 ? argv : argv.slice(0, end)).includes('--json');
}

/**
 * A flag that takes one value, given twice (`--remote a --remote b`, `--budget 1 --budget 100`), or
 * given one of its verb's own flags as its value (`--prompt --json`: the value left out), is a
 * mistake in the command line, refused before the verb runs rather than taken as the last value or
 * as the flag's text. A repeatable flag (`--file`, `--scope`) may be given again; a flag's value
 * that is meant to read as a flag is given with `=` (`--oracle-arg=--verbose`).
 */
function requireOneValueEach(argv: readonly string[]): void {
  const { command, given } = readLine(argv);
  if (command === null) return;
  const flags = new Set(command.options.flatMap((option) => [option.long, option.short]).filter((flag) => flag !== undefined));
  const counted = new Map<Option, number>();
  for (const { option, value } of given) {
    const name = option.long ?? option.flags;
    // Said as empty, whichever of two values it was: the last one alone is what the verb would see.
    if (typeof value === 'string' && value.trim() === '') throw emptyValue(option);
    if (typeof value === 'string' && flags.has(value) && !argv.includes(`${name}=${value}`)) {
      throw new CooError('USAGE', `${name} was given ${value}, a flag of this verb, as its value: give ${name} its value (or ${name}=${value} if that is meant); nothing was done`);
    }
    if (!(option.required || option.optional) || option.variadic || option.parseArg === collectPairs) continue;
    counted.set(option, (counted.get(option) ?? 0) + 1);
    if (counted.get(option) === 2) throw new CooError('USAGE', `${name} was given twice: it takes one value, give it once; nothing was done`);
  }
}

/**
 * With `--json`, a failure is also one JSON object on standard output, so a script reads it where it
 * reads results; on one line, so that it is also one record of a verb that prints a JSON line per
 * event (`coo watch --json`).
 */
function printJsonError(argv: readonly string[], error: { code: string; message: string; where?: string | undefined; findings?: readonly unknown[] }): void {
  if (!wantsJson(argv)) return;
  const said = { ok: false, error: { code: error.code, message: error.message, where: error.where ?? null, findings: error.findings ?? [] } };
  // Scrubbed as a value, before it is serialised: a secret is found whatever escaping JSON adds.
  process.stdout.write(`${inertJson(heldSecrets().value(said))}\n`);
}

/**
 * The file system's refusal of a path the operator named (a folder where a file goes, a file where
 * a folder goes, a read-only or full file system, no permission), as a coded IO_ERROR that names
 * the path and what to check, rather than an internal error.
 */
function systemError(error: unknown): CooError | null {
  if (!(error instanceof Error)) return null;
  const { code, syscall, path } = error as NodeJS.ErrnoException;
  if (typeof code !== 'string' || !/^E[A-Z]+$/.test(code) || typeof syscall !== 'string' || typeof path !== 'string') return null;
  return new CooError('IO_ERROR', `cannot ${syscall} ${path} (${code}): check that the paths you gave exist, are folders or files as the verb's --help says, and that this user may write them`);
}

/**
 * What a command line that names no verb to run lacks, said after the help the parser printed in its
 * place: `coo` alone, `coo model` without its command, `coo help wacth` (a verb misspelt). The help is
 * no answer to what was asked, so the line ends as a malformed one does (USAGE, exit 2); before, it
 * ended with status 0, and a script's `coo help X && ...` went on.
 */
function noVerbNamed(argv: readonly string[]): string {
  if (argv[0] === 'help' && argv[1] !== undefined) return `unknown command '${argv[1]}': coo help takes one of the verbs listed above`;
  const { command } = readLine(argv);
  if (command !== null) return `coo ${command.name()} takes one of its commands: ${command.commands.map((one) => one.name()).join(', ')}`;
  return 'name one of the verbs listed above';
}

/** Runs one command line. Never throws: every failure is printed as one coded line. */
export async function run(argv: readonly string[]): Promise<RunOutcome> {
  try {
    requireOneValueEach(argv);
    await buildProgram().parseAsync(argv as string[], { from: 'user' });
    return currentOutcome();
  } catch (error) {
    if (error instanceof CommanderError) {
      if (error.code === 'commander.help' && error.exitCode !== 0) {
        const said = noVerbNamed(argv);
        printJsonError(argv, { code: 'USAGE', message: said });
        writeErr(`coo: USAGE: ${oneLineText(said)}\n`);
        return 'usage';
      }
      if (error.code === 'commander.helpDisplayed' || error.code === 'commander.version' || error.code === 'commander.help') return 'ok';
      printJsonError(argv, { code: 'USAGE', message: error.message.replace(/^error: /, '') });
      return 'usage';
    }
    if (isCooError(error)) {
      printJsonError(argv, error);
      writeErr(`coo: ${error.code}: ${oneLineText(error.message)}\n`);
      return errorClassOf(error.code);
    }
    const io = systemError(error);
    if (io !== null) {
      printJsonError(argv, io);
      writeErr(`coo: ${io.code}: ${oneLineText(io.message)}\n`);
      return errorClassOf(io.code);
    }
    const message = error instanceof Error ? error.message : String(error);
    printJsonError(argv, { code: 'INTERNAL', message });
    writeErr(`coo: internal error: ${oneLineText(message)}\n`);
    if (process.env['COO_DEBUG'] === '1' && error instanceof Error) writeErr(`${error.stack ?? ''}\n`);
    return 'error';
  }
}
