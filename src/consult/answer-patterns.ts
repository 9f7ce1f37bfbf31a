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

/** The ledger's documents, by the schema each states. */
const LEDGER_SCHEMAS = '(coo_message|approval|claim|aa_receipt|ea_receipt|heartbeat|kill_switch|trust_root|actor_registry|actor_policy)\\.v0';
/**
 * The intents of the ledger's messages that no program's own code is likely to name: a CEO's
 * command or rejection, a dispatch to an execution agent, a consult of an advisory one. `retry`,
 * `ack`, `blocker`, `status_query`, `receipt_notice` and `cross_check` are words and identifiers of
 * any code base (`intent: 'retry'` in an intent classifier, a `cross_check()`), so they name nothing.
 */
const LEDGER_INTENTS = '(ceo_command|ceo_reject|ea_dispatch|aa_consult)';
/** A field a ledger message or approval sets, as YAML, JSON or a keyword argument writes it. */
const SET = '\\b["\'`]?\\s*[:=]\\s*["\'`]?';
const SCHEMA_SET = new RegExp(`\\bschema_version${SET}${LEDGER_SCHEMAS}\\b`, 'i');
const INTENT_SET = new RegExp(`\\bintent${SET}${LEDGER_INTENTS}\\b`, 'i');
/**
 * A party of a message set to one of the ledger's actors (`source_actor: ceo`, `target_actor:
 * coo.hermes`, `approved_by: ceo_main`, a YAML block `>` before it): an event schema's
 * `source_actor: str` names a type, not an actor. Actors named otherwise in the registry are not
 * known to the judge, which reads the answer alone.
 */
const ACTOR_SET = new RegExp(`\\b(source_actor|target_actor|approved_by)${SET}(?:[>|][-+]?\\s*)?(ceo|coo|ea|aa)(?![a-z0-9])`, 'i');
/** The chain of a ledger message's causes, a field no program's own code is likely to set. */
const CHAIN_SET = new RegExp(`\\bcausality_chain${SET}`, 'i');
const APPROVAL_ID = /\bapr_[0-9A-HJKMNP-TV-Z]{26}\b/i;

/**
 * What makes `text` read as one of the ledger's own documents, or null: a ledger schema, a message
 * intent only the ledger has, one of its actors as a message's party, or a causality chain, set as a
 * field; an approval's id. An advisory agent writes advice to the COO, never a message of the ledger: a CEO
 * command laid out for the COO names no agent, and an agent COO would read it as one. Fields that
 * programs share with the ledger (`correlation_id`, `idempotency_key`, `budget_usd`, an `intent`
 * of `retry`) are advice about code, and stand. `text` is read as patternText gives it.
 */
export function ledgerDocumentShape(text: string): string | null {
  if (SCHEMA_SET.test(text)) return 'sets the schema of a ledger document';
  if (INTENT_SET.test(text)) return 'sets the intent of a ledger message';
  if (ACTOR_SET.test(text)) return "sets a ledger message's party to one of its actors";
  if (CHAIN_SET.test(text)) return "sets a ledger message's causality chain";
  if (APPROVAL_ID.test(text)) return 'names an approval of the ledger by its id';
  return null;
}

/**
 * The ledger's schemas and the intents only its messages carry, by name: a proposal is work for an
 * execution agent in a repository, and work that is to write one of these is the actors' own.
 */
export const LEDGER_NAMES = new RegExp(`\\b(${LEDGER_SCHEMAS}|coo_message|${LEDGER_INTENTS.slice(1, -1)})\\b`, 'i');

/**
 * Text as the patterns read it: compatibility forms folded (fullwidth letters, ligatures, one-dot
 * leaders), invisible characters dropped (zero-width spaces, joiners, soft hyphens) and letters of
 * other scripts drawn like Latin ones read as those (util/look-alikes.ts: a Cyrillic `еа.codex`), so
 * text that reads as an address or a command to whoever acts on it is judged as what it reads as.
 */
export function patternText(text: string): string {
  return asLatin(text.normalize('NFKC').replace(/[\p{Cf}\p{Default_Ignorable_Code_Point}]/gu, ''));
}
