import { randomBytes } from 'node:crypto';

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

function encode(value: bigint, length: number): string {
  let out = '';
  for (let i = 0; i < length; i += 1) {
    out = CROCKFORD[Number(value & 31n)]! + out;
    value >>= 5n;
  }
  return out;
}

/** A ULID-shaped id: 10 characters of milliseconds then 16 of randomness, so ids sort by time. */
export function newMessageId(nowMs: number, random: Uint8Array = randomBytes(10)): string {
  const randomPart = BigInt('0x' + Buffer.from(random.subarray(0, 10)).toString('hex'));
  return `msg_${encode(BigInt(nowMs), 10)}${encode(randomPart, 16)}`;
}

/** A panel's id: `pnl_` and a ULID-shaped 26 characters, as message ids. */
export function newPanelId(nowMs: number, random: Uint8Array = randomBytes(10)): string {
  return `pnl_${newMessageId(nowMs, random).slice(4)}`;
}

export function newCorrelationId(random: Uint8Array = randomBytes(10)): string {
  return `corr_${Buffer.from(random).toString('hex')}`;
}

/** The one attempt id an attempt of a message can have. */
export function attemptIdFor(messageId: string, attempt: number, lane: 'aa' | 'ea' = 'aa'): string {
  return `${lane}_attempt_${messageId.slice(4)}_${attempt}`;
}

/** Oracle session slugs are 3-5 lowercase words of at most 10 characters; this one is unique per attempt. */
export function sessionSlugFor(messageId: string, attempt: number): string {
  const id = messageId.slice(4).toLowerCase();
  return `coo-${id.slice(0, 10)}-${id.slice(10, 20)}-${id.slice(20)}-a${attempt}`;
}
