import { parseDocument } from '../schema/documents.js';
import type { Proposal } from '../schema/aa-answer.js';
import { toYaml } from '../schema/strict-yaml.js';

/** A proposal as the runner stores it beside the consult's receipt (aa_proposal.v0): what a dispatch adopts by hash. */
export function storedProposalBytes(messageId: string, attempt: number, index: number, item: Proposal): Buffer {
  return Buffer.from(toYaml(parseDocument('aa_proposal.v0', { schema_version: 'aa_proposal.v0', message_id: messageId, attempt_number: attempt, index, ...item }, 'proposal')));
}
