import { terminalText } from '../util/invisible.js';

/**
 * Every line the CLI writes to stderr for a person: errors, notes, progress lines and the runner's
 * events carry text from the ledger, a remote or an agent, so each goes through `terminalText` and no
 * escape sequence in it reaches the operator's terminal. (Progress bars draw with their own escapes
 * and write to the terminal themselves.)
 */
export function writeErr(text: string): void {
  process.stderr.write(terminalText(text));
}
