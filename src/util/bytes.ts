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
