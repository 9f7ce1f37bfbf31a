import type { MessageView } from '../audit/message-view.js';
import { ADOPTION_FIELDS } from '../schema/message.js';
import { quoted as quote } from './untrusted.js';

/**
 * An adoption's words that are its advisory agent's. A dispatch that adopts a proposal states the
 * proposal's task, scope, acceptance and verification as the agent wrote them, except the fields the
 * COO changed (`adopted_proposal.changed`, which the validator holds to exactly what differs): the
 * COO signs them, but they are the agent's words, and an agent COO reading the dispatch back gets
 * them quoted as untrusted data, as it got the answer that carried them. Pure.
 */

export type AdoptionField = (typeof ADOPTION_FIELDS)[number];

/** Where a dispatch's request states each field, in its envelope's `dispatch` and in show's view of it. */
const REQUEST_FIELDS: Readonly<Record<AdoptionField, string>> = { task: 'task', scope: 'scope_paths', acceptance: 'acceptance_criteria', verification: 'verification_commands' };

/** The fields of the envelope's adopted proposal the COO left as the agent wrote them; none for a dispatch that adopts nothing. */
export function adoptedWords(envelope: unknown): ReadonlySet<AdoptionField> {
  const adopted = (envelope as { adopted_proposal?: { changed?: unknown } } | null | undefined)?.adopted_proposal;
  if (adopted === undefined || !Array.isArray(adopted.changed)) return new Set();
  const changed = adopted.changed as unknown[];
  return new Set(ADOPTION_FIELDS.filter((field) => !changed.includes(field)));
}

/** `request` (an envelope's `dispatch`, or show's view of it) with each field that is the agent's quoted. */
function quoteRequest<T extends object>(request: T, words: ReadonlySet<AdoptionField>): T {
  const out = { ...request } as Record<string, unknown>;
  for (const field of words) {
    const key = REQUEST_FIELDS[field];
    const value = out[key];
    if (typeof value === 'string') out[key] = quote(value);
    else if (Array.isArray(value)) out[key] = value.map((item: unknown) => (typeof item === 'string' ? quote(item) : item));
  }
  return out as T;
}

/** Show's view of a dispatch with its adopted proposal's words quoted, in the request and in the envelope alike. */
export function quoteAdoptedRequest(view: MessageView, words: ReadonlySet<AdoptionField>): MessageView {
  if (words.size === 0) return view;
  const envelope = view.envelope as { dispatch?: object } | null;
  return {
    ...view,
    ...(view.dispatch === undefined ? {} : { dispatch: quoteRequest(view.dispatch, words) }),
    ...(envelope?.dispatch === undefined ? {} : { envelope: { ...envelope, dispatch: quoteRequest(envelope.dispatch, words) } }),
  };
}
