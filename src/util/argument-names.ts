/**
 * How the caller of a lane's writer names the request's arguments, so that an error says what to
 * change in the caller's own terms: the CLI's flags, or an MCP tool's arguments. The writers are
 * the same library calls for both shells; only the words differ.
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
}

export const CLI_ARGUMENTS: ArgumentNames = {
  rev: '--rev',
  file: '--file',
  scope: '--scope',
  accept: '--accept',
  verify: '--verify',
  approval: '--approval',
  again: 'repeat this command',
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
};
