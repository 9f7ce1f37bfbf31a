/**
 * The part of a line of the stdio transport read so far, up to a bound: held as one buffer that
 * grows by doubling, so whatever the number of reads the line came in, what is held is at most
 * twice its bytes, and each byte is copied a bounded number of times. Kept as the list of the reads'
 * buffers, a client that wrote its line a byte at a time (each write read on its own) had the server
 * hold an object of some two hundred bytes per byte sent: a line under the bound grew the server's
 * heap past what the machine had, and the process died of it. Pure.
 */

const EMPTY = Buffer.alloc(0);
/** The first buffer's size: most lines arrive whole, and one of these holds them without growing. */
const FIRST_BYTES = 4096;

export class LineBuffer {
  private bytes: Buffer = EMPTY;
  private used = 0;

  constructor(private readonly maxBytes: number) {}

  /** The bytes held. */
  get length(): number {
    return this.used;
  }

  /** Adds `part`; false, holding nothing, once the line is over the bound. */
  add(part: Uint8Array): boolean {
    if (this.used + part.length > this.maxBytes) {
      this.clear();
      return false;
    }
    if (this.used + part.length > this.bytes.length) {
      const grown = Buffer.allocUnsafe(Math.min(this.maxBytes, Math.max(this.used + part.length, this.bytes.length * 2, FIRST_BYTES)));
      this.bytes.copy(grown, 0, 0, this.used);
      this.bytes = grown;
    }
    this.bytes.set(part, this.used);
    this.used += part.length;
    return true;
  }

  /** The line held, which is the caller's from here: this buffer starts over, empty. */
  take(): Buffer {
    const line = this.bytes.subarray(0, this.used);
    this.clear();
    return line;
  }

  clear(): void {
    this.bytes = EMPTY;
    this.used = 0;
  }
}
