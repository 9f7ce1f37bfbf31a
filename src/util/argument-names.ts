/**
 * How the caller of a lane's writer names the request's arguments, so that an error says what to
 * change in the caller's own terms: the CLI's flags, an MCP tool's arguments, or a library caller's
 * fields. The writers are the same library calls for every caller; only the words differ.
 */
export interface ArgumentNames {
  readonly rev: string;
  readonly file: string;
  readonly scope: string;
  readonly accept: string;
  readonly verify: string;
  readonly approval: string;
  /** How the caller sends the same request again. */
  readonly again: string;
  /** The idempotency key as the caller gives it. */
  readonly idempotencyKey: string;
  /** What the caller does instead of giving a key it may not: true for its shell. */
  readonly newKey: string;
}

export const CLI_ARGUMENTS: ArgumentNames = {
  rev: '--rev',
  file: '--file',
  scope: '--scope',
  accept: '--accept',
  verify: '--verify',
  approval: '--approval',
  again: 'repeat this command',
  idempotencyKey: '--idempotency-key',
  // Without a key a verb writes under a new random one: a retry without the key is a second request.
  newKey: 'give a key of another form, or none for a new request; to repeat a request, give the key it was written under with the same request',
};

/**
 * A library caller's field names (EnvelopeRequest and the lanes' requests): the words a writer
 * uses when its caller names none, so that a program calling enqueueConsult is told which field to
 * change, never a CLI flag it did not give.
 */
export const LIBRARY_ARGUMENTS: ArgumentNames = {
  rev: 'rev',
  file: 'patterns',
  scope: 'scope',
  accept: 'accept',
  verify: 'verify',
  approval: 'approvalId',
  again: 'send the request again',
  idempotencyKey: 'idempotencyKey',
  // Without a key a writer makes a new random one, as a verb does: a retry without the key is a second request.
  newKey: 'give a key of another form, or none for a new request; to repeat a request, give the key it was written under with the same request',
};

/** The consult and dispatch tools' argument names (mcp/schemas.ts). */
export const MCP_ARGUMENTS: ArgumentNames = {
  rev: 'rev',
  file: 'files',
  scope: 'scope',
  accept: 'accept',
  verify: 'verify',
  approval: 'approval_id',
  again: 'call the dispatch tool again',
  idempotencyKey: 'idempotency_key',
  // Without a key a tool derives one from the request: a retry without it repeats the request.
  newKey: 'give a key of another form, or none and one is derived from the request',
};
