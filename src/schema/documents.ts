import type { z } from 'zod';
import { CooError } from '../errors.js';
import { aaAnswer, storedProposal } from './aa-answer.js';
import { approval, claim, contextManifest, heartbeat, killSwitch, trustRoot } from './control.js';
import { cooMessage } from './message.js';
import { actorPolicy } from './policy.js';
import { aaReceipt, eaReceipt } from './receipt.js';
import { actorRegistry } from './registry.js';
import { readStrictYaml, yamlPosition, type StrictYamlOptions } from './strict-yaml.js';

/** Every document kind, by its `schema_version`. */
export const DOCUMENTS = {
  'coo_message.v0': cooMessage,
  'aa_receipt.v0': aaReceipt,
  'ea_receipt.v0': eaReceipt,
  'actor_registry.v0': actorRegistry,
  'actor_policy.v0': actorPolicy,
  'aa_answer.v0': aaAnswer,
  'aa_proposal.v0': storedProposal,
  'trust_root.v0': trustRoot,
  'kill_switch.v0': killSwitch,
  'claim.v0': claim,
  'approval.v0': approval,
  'heartbeat.v0': heartbeat,
  'context_manifest.v0': contextManifest,
} as const;

export type DocumentKind = keyof typeof DOCUMENTS;
export type DocumentOf<K extends DocumentKind> = z.infer<(typeof DOCUMENTS)[K]>;

export const DOCUMENT_KINDS = Object.keys(DOCUMENTS) as DocumentKind[];

export function isDocumentKind(value: unknown): value is DocumentKind {
  return typeof value === 'string' && Object.hasOwn(DOCUMENTS, value);
}

function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const part of path) {
    if (typeof part === 'number') out += `[${part}]`;
    else out += out === '' ? String(part) : `.${String(part)}`;
  }
  return out;
}

/**
 * Validates a plain value against one document kind; the first issue becomes a SCHEMA_INVALID naming
 * file and path, and, when the text it came from is given, the line and column there.
 */
export function parseDocument<K extends DocumentKind>(kind: K, value: unknown, file: string, source?: Uint8Array): DocumentOf<K> {
  const result = DOCUMENTS[kind].safeParse(value);
  if (result.success) return result.data as DocumentOf<K>;
  const issue = result.error.issues[0];
  const path = issue === undefined ? '' : formatPath(issue.path);
  const where = path === '' ? file : `${file}:${path}`;
  const more = result.error.issues.length > 1 ? ` (and ${result.error.issues.length - 1} more)` : '';
  const position = source === undefined || issue === undefined ? null : yamlPosition(source, issue.path);
  throw new CooError('SCHEMA_INVALID', `${where}: ${issue?.message ?? 'invalid'}${more}${position === null ? '' : ` (${position})`}`, { where });
}

/**
 * What a `schema_version` this build does not read is, when it names a later version of a kind it
 * does (`actor_policy.v1` to a build that reads `actor_policy.v0`): a newer coo-commons wrote it, and
 * the fix is an upgrade, not an edit. `expected`: the kind the reader wants, when it wants one; a
 * later version of another kind is a file of the wrong kind, which no upgrade mends. An empty string
 * for anything else.
 */
function laterVersion(declared: unknown, expected?: DocumentKind): string {
  const match = typeof declared === 'string' ? /^([a-z_]+)\.v(\d{1,6})$/.exec(declared) : null;
  if (match === null) return '';
  const family = `${match[1]}.v`;
  if (expected !== undefined && !expected.startsWith(family)) return '';
  const known = DOCUMENT_KINDS.filter((kind) => kind.startsWith(family));
  const newest = Math.max(...known.map((kind) => Number(kind.slice(family.length))));
  if (known.length === 0 || Number(match[2]) <= newest) return '';
  return `: a later version than this coo reads (${family}${newest}), written by a newer coo-commons; upgrade coo (the hook, the forge's check and the runners too) to read it`;
}

/** Reads untrusted YAML bytes strictly, then validates them as `kind`. */
export function readDocument<K extends DocumentKind>(kind: K, bytes: Uint8Array, file: string, options: StrictYamlOptions = {}): DocumentOf<K> {
  const value = readStrictYaml(bytes, file, options);
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new CooError('SCHEMA_INVALID', `${file}: a document is a mapping`, { where: file });
  }
  const declared = (value as Record<string, unknown>)['schema_version'];
  if (declared !== kind) {
    throw new CooError('SCHEMA_UNKNOWN', `${file}: schema_version ${JSON.stringify(declared)} where ${kind} is expected${laterVersion(declared, kind)}`, {
      where: `${file}:schema_version`,
    });
  }
  return parseDocument(kind, value, file, bytes);
}

/** Reads a document whose kind it names itself. */
export function readAnyDocument(bytes: Uint8Array, file: string): { kind: DocumentKind; doc: DocumentOf<DocumentKind> } {
  const value = readStrictYaml(bytes, file);
  const declared = value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>)['schema_version'] : undefined;
  if (!isDocumentKind(declared)) {
    throw new CooError('SCHEMA_UNKNOWN', `${file}: unknown schema_version ${JSON.stringify(declared)}${laterVersion(declared)}`, { where: `${file}:schema_version` });
  }
  return { kind: declared, doc: parseDocument(declared, value, file, bytes) };
}
