/**
 * `bytes` in memory of their own: the same object when it already spans its whole backing buffer,
 * otherwise a copy of the same kind (a Buffer stays a Buffer). A view into a shared buffer, such as
 * Node's 8 KiB allocation pool or a chunk of git's output, keeps the whole buffer alive while it is
 * cached (the tree cache keeps thousands).
 */
export function ownMemory<T extends Uint8Array>(bytes: T): T {
  if (bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength) return bytes;
  const copy = Buffer.isBuffer(bytes) ? Buffer.allocUnsafeSlow(bytes.byteLength) : new Uint8Array(bytes.byteLength);
  copy.set(bytes);
  return copy as T;
}

/**
 * A text or stream cut at a bound, without the partial line at the cut: a secret the cut split
 * would otherwise be kept in part, and the scrubber finds only whole ones (util/scrub.ts). `start`:
 * a tail, whose first line began before it; `end`: a head, whose last line goes on past it. A cut
 * text with no line break keeps nothing.
 */
export function wholeLinesOf<T extends string | Buffer>(text: T, cut: 'start' | 'end'): T {
  const newline = typeof text === 'string' ? '\n' : 0x0a;
  if (cut === 'start') {
    const at = (text as string).indexOf(newline as string);
    return (at < 0 ? text.slice(0, 0) : text.slice(at + 1)) as T;
  }
  const at = (text as string).lastIndexOf(newline as string);
  return (at < 0 ? text.slice(0, 0) : text.slice(0, at + 1)) as T;
}

/** At most the first `max` UTF-16 code units of `text`, never half of a surrogate pair: a lone half is no character, and a signed receipt's UTF-8 has no bytes for it. */
export function clipText(text: string, max: number): string {
  if (text.length <= max) return text;
  const high = text.charCodeAt(max - 1);
  return text.slice(0, high >= 0xd800 && high <= 0xdbff ? max - 1 : max);
}
