import { asLatin } from '../util/look-alikes.js';

/** Command-shaped text that has no place in advice: in an answer's prose or in a proposal (consult/answer.ts, consult/proposals.ts). */
export const COMMAND_PATTERNS: ReadonlyArray<[RegExp, string]> = [
  // An interpreter runs what it reads only when it is given no script of its own (`| python3`, `| node -`; not `| node parse.js`).
  [/\b(curl|wget)\b[^\n]*\|\s*(sudo\s+)?((ba|z|da|k|c|tc|fi)?sh\b|(python[0-9.]*|node|perl|ruby|php|bun|deno)(\s+-[a-zA-Z-]*)*\s*($|[;&|)]))/i, 'pipes a download into a shell or an interpreter'],
  // The same download run without a pipe: handed to a shell, eval or an interpreter as the text of a command substitution or as a file of a process substitution.
  [/(\b((ba|z|da|k)?sh|eval|source|python[0-9.]*|node|perl|ruby)\b|(^|[\s;&|(])\.)(\s+-[a-zA-Z]+)*\s+["']?(\$\(|`|<\()\s*(sudo\s+)?(curl|wget)\b/i, 'runs a download as a command'],
  [/\brm\s+-[a-z]*r[a-z]*f?\s+(\/|~|\$HOME)/i, 'deletes recursively from a root'],
  [/\bgit\s+push\b[^\n]*(--force|-f\b)/i, 'force-pushes'],
  [/\bchmod\s+(\+x|[0-7]*7[0-7]*)\b[^\n]*&&/i, 'makes a file executable and runs it'],
];

/**
 * Text as the patterns read it: compatibility forms folded (fullwidth letters, ligatures, one-dot
 * leaders), invisible characters dropped (zero-width spaces, joiners, soft hyphens) and letters of
 * other scripts drawn like Latin ones read as those (util/look-alikes.ts: a Cyrillic `еа.codex`), so
 * text that reads as an address or a command to whoever acts on it is judged as what it reads as.
 */
export function patternText(text: string): string {
  return asLatin(text.normalize('NFKC').replace(/[\p{Cf}\p{Default_Ignorable_Code_Point}]/gu, ''));
}
