import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import type { ErrorCode } from '../errors.js';
import { LIMITS } from '../limits.js';
import { jsonShapeProblem } from '../util/json-shape.js';

/**
 * One line of `coo mcp`'s stdio transport, read as untrusted input before the SDK sees it: valid
 * UTF-8, one JSON value without a key twice in any object and no deeper than LIMITS.mcpMessageDepth,
 * one JSON-RPC message (never a batch) whose params fit its method and whose id is at most
 * LIMITS.mcpIdChars long. What fails is refused with the JSON-RPC error the client is owed, its
 * message starting with a code: the SDK's own reader dropped such a line with no answer (the client
 * waited for ever), answered wrong params as an internal error with a schema dump, and read a
 * duplicated key as its last occurrence, where a client or a proxy in between may read the first.
 * A request asking to run as a task (params.task) is refused too: the server declares no tasks, and
 * the SDK answered one as an internal error of the server's. So is a string holding a lone
 * surrogate (loneSurrogateEscapeAt), which valid UTF-8 can only carry as a JSON escape, and a
 * resource read by no URI or a tool or resource named past LIMITS.mcpNameChars (nameProblem).
 * An id is held by the transport until the server is done with its request, so one of megabytes
 * held that much for as long.
 */

/** The code every refusal's message starts with. */
export const WIRE_CODE: ErrorCode = 'MCP_MESSAGE_INVALID';

/** JSON-RPC 2.0's error codes. */
export const PARSE_ERROR = -32700;
export const INVALID_REQUEST = -32600;
export const METHOD_NOT_FOUND = -32601;
export const INVALID_PARAMS = -32602;
export const INTERNAL_ERROR = -32603;

export interface WireRefusal {
  /** The request's id when one could be read, else null (JSON-RPC's answer to what has none). */
  readonly id: string | number | null;
  readonly code: number;
  readonly message: string;
}

export type WireLine = { readonly ok: true; readonly message: JSONRPCMessage } | { readonly ok: false; readonly refusal: WireRefusal };

/** The SDK's schemas the decoder checks against (loaded on demand with the SDK, server.ts). */
export interface WireSchemas {
  readonly message: { safeParse(value: unknown): { success: boolean } };
  /** Each method a client may ask the server, with the schema of its request. */
  readonly requests: ReadonlyMap<string, { safeParse(value: unknown): { success: boolean; error?: { issues: ReadonlyArray<{ path: ReadonlyArray<PropertyKey>; message: string }> } } }>;
}

const refuse = (id: string | number | null, code: number, message: string): WireLine => ({ ok: false, refusal: { id, code, message: `${WIRE_CODE}: ${message}` } });

/**
 * Where the JSON `text` has an escape of a lone surrogate (`\ud800` not followed by the escape of a
 * low half, or a low half `\udc00` after no high one), as its index; null when it has none. Half a
 * UTF-16 pair is no character: JSON.parse makes a string of it, and UTF-8 has no bytes for it, so
 * written to the ledger or sent to a provider it became U+FFFD, and what was signed and asked was not
 * what the client sent. Valid UTF-8 carries a surrogate only as an escape, so the escapes are all
 * there is to read: one pass over the text, allocating nothing, as `text` is JSON that JSON.parse
 * accepted (a backslash stands only in a string, and starts an escape).
 */
export function loneSurrogateEscapeAt(text: string): number | null {
  for (let i = text.indexOf('\\'); i !== -1; i = text.indexOf('\\', i)) {
    const kind = escapeAt(text, i);
    if (kind === 'low') return i;
    if (kind === 'high') {
      if (escapeAt(text, i + 6) !== 'low') return i;
      i += 12;
    } else {
      // Another escape: \uXXXX is six characters, any other (\\ among them) two.
      i += kind === 'unit' ? 6 : 2;
    }
  }
  return null;
}

/** The escape at `at` of JSON text: the high or low half of a surrogate pair, another \uXXXX, or another escape; read by its characters' codes, allocating nothing. */
function escapeAt(text: string, at: number): 'high' | 'low' | 'unit' | 'other' {
  if (text.charCodeAt(at) !== 0x5c || text.charCodeAt(at + 1) !== 0x75) return 'other';
  // Lower case by its bit: d, then 8, 9, a or b for a high half, c to f for a low one.
  if ((text.charCodeAt(at + 2) | 0x20) !== 0x64) return 'unit';
  const third = text.charCodeAt(at + 3) | 0x20;
  if (third === 0x38 || third === 0x39 || third === 0x61 || third === 0x62) return 'high';
  return third >= 0x63 && third <= 0x66 ? 'low' : 'unit';
}

/** What a refusal says of the lone surrogate escape at `at` of `text`. */
export function loneSurrogateProblem(text: string, at: number): string {
  return `the line holds the escape ${text.slice(at, at + 6)} (at character ${at}), half of a UTF-16 surrogate pair standing alone, which is no character and has no UTF-8 bytes: send whole characters`;
}

function idOf(value: unknown): string | number | null {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return null;
  const id = (value as Record<string, unknown>)['id'];
  return typeof id === 'string' || (typeof id === 'number' && Number.isSafeInteger(id)) ? id : null;
}

/**
 * What is wrong with the name a request gives a tool or a resource by, or null. A URI the URL parser
 * refuses was answered as the server's own failure (the SDK parses it before any handler, and its
 * TypeError became an internal error telling the client to report it to the operator); a name of
 * megabytes was repeated whole in the refusal and in the operator's log, once per call.
 */
function nameProblem(method: string, params: Record<string, unknown> | undefined): string | null {
  const [field, what] = method === 'resources/read' ? ['uri', 'the URI of a resource'] : method === 'tools/call' ? ['name', "a tool's name"] : [null, ''];
  const name = field === null ? undefined : params?.[field];
  if (typeof name !== 'string') return null;
  const shortName = JSON.stringify(name.length > 64 ? `${name.slice(0, 63)}…` : name);
  if (name.length > LIMITS.mcpNameChars) return `params.${field} ${shortName} is ${name.length} characters long, over the ${LIMITS.mcpNameChars} ${what} may have: tools/list lists the tools, resources/templates/list the resources`;
  if (field === 'uri' && !URL.canParse(name)) return `params.uri ${shortName} is not a URI: read coo://messages/<msg_...>/envelope, receipt or answer`;
  return null;
}

/** One line of the transport (its newline and any carriage return removed), decoded or refused. */
export function decodeLine(bytes: Uint8Array, schemas: WireSchemas): WireLine {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    return refuse(null, PARSE_ERROR, 'the line is not valid UTF-8: send each message as one line of UTF-8 JSON');
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return refuse(null, PARSE_ERROR, 'the line is not JSON: send each message as one line of JSON');
  }
  const shape = jsonShapeProblem(text, LIMITS.mcpMessageDepth);
  if (shape !== null) return refuse(idOf(value), INVALID_REQUEST, `the message was refused unread: ${shape}`);
  if (Array.isArray(value)) return refuse(null, INVALID_REQUEST, 'a batch (a JSON array of messages) is not accepted: send one message per line');
  const id = idOf(value);
  if (typeof id === 'string' && id.length > LIMITS.mcpIdChars) {
    // Answered under no id: echoing it would send back what was refused for its size.
    return refuse(null, INVALID_REQUEST, `the id ${JSON.stringify(id.slice(0, 32))}… is ${id.length} characters long, over the ${LIMITS.mcpIdChars} an id may have: give each request a short id of its own`);
  }
  const lone = loneSurrogateEscapeAt(text);
  if (lone !== null) return refuse(id, INVALID_REQUEST, loneSurrogateProblem(text, lone));
  // Any JSON value reaches here but an array: null, a number or a string has no method.
  const method = typeof value === 'object' && value !== null ? (value as { method?: unknown }).method : undefined;
  const request = typeof method === 'string' && id !== null ? schemas.requests.get(method) : undefined;
  const parsed = request?.safeParse(value);
  /** Where the request does not fit its method's schema, as the refusal says it; '' when it fits or the method has none. */
  const issue = parsed?.error?.issues[0];
  const where = issue === undefined ? '' : ` at ${issue.path.map(String).join('.') || 'the message'}: ${issue.message}`;
  if (!schemas.message.safeParse(value).success) {
    // The envelope's rules and the method's share fields (params._meta.progressToken is a string or an integer in both): the refusal names the field.
    return refuse(id, INVALID_REQUEST, `the line is not a JSON-RPC 2.0 request, notification or response (jsonrpc "2.0"; an id that is a string or an integer of at most 2^53 - 1 in size; a method that is a string; params an object; a progress token that is a string or an integer)${where}`);
  }
  if (request !== undefined) {
    if (parsed?.success !== true) return refuse(id, INVALID_PARAMS, `the params of ${method} do not fit the method${where}`);
    // A task-augmented request (params.task): the SDK refused it as its own internal error, which told the client to report it to the operator.
    const params = (value as { params?: unknown }).params;
    if (typeof params === 'object' && params !== null && Object.hasOwn(params, 'task')) {
      return refuse(id, INVALID_PARAMS, `${method} asks to run as a task (params.task), and this server runs no tasks (its capabilities declare none): send it without params.task`);
    }
    const named = nameProblem(method as string, params as Record<string, unknown> | undefined);
    if (named !== null) return refuse(id, INVALID_PARAMS, named);
  }
  return { ok: true, message: value as JSONRPCMessage };
}
