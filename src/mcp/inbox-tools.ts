import type { z } from 'zod';
import { acknowledge } from '../inbox/ack.js';
import { readInbox, type InboxItem } from '../inbox/inbox.js';
import type { ackInput } from './schemas.js';
import { fresh, writeThrough, type ToolContext } from './tools.js';
import { quoteUntrusted } from './untrusted.js';

/**
 * `coo inbox` and `coo ack` over MCP: what reached the COO, and its acknowledgement of one item.
 * The CEO's words come as they are (the CEO signed them); what an execution agent says of a
 * blocker is quoted as untrusted data, as an advisory answer is.
 */

export async function inboxTool(context: ToolContext): Promise<{ items: InboxItem[] }> {
  await fresh(context);
  const items = await readInbox(context.ledger, context.clock());
  return { items: items.map((item) => (item.blocker === undefined ? item : { ...item, blocker: { ...item.blocker, detail: quoteUntrusted(item.blocker.detail).text } })) };
}

export async function ackTool(context: ToolContext, args: z.infer<typeof ackInput>): Promise<{ message_id: string; acknowledges: string; existing: boolean }> {
  await fresh(context);
  const acked = await writeThrough(context, (ledger) => acknowledge({ ledger, key: context.key, now: context.clock(), messageId: args.message_id, submittedVia: 'mcp', ...(args.note === undefined ? {} : { note: args.note }) }));
  return { message_id: acked.messageId, acknowledges: args.message_id, existing: acked.existing };
}
