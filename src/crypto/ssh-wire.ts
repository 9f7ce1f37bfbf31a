import { CooError, type ErrorCode } from '../errors.js';

/** SSH wire encoding (RFC 4251 section 5): uint32 big-endian and length-prefixed strings. */
export function encodeString(value: Uint8Array | string): Buffer {
  const bytes = typeof value === 'string' ? Buffer.from(value, 'utf8') : Buffer.from(value);
  const out = Buffer.alloc(4 + bytes.length);
  out.writeUInt32BE(bytes.length, 0);
  bytes.copy(out, 4);
  return out;
}

export function encodeUint32(value: number): Buffer {
  const out = Buffer.alloc(4);
  out.writeUInt32BE(value, 0);
  return out;
}

/** A bounds-checked reader; any overrun is the given coded error, never a RangeError. */
export class WireReader {
  private offset = 0;

  constructor(
    private readonly bytes: Buffer,
    private readonly code: ErrorCode,
    private readonly what: string,
  ) {}

  uint32(): number {
    if (this.offset + 4 > this.bytes.length) this.fail('truncated uint32');
    const value = this.bytes.readUInt32BE(this.offset);
    this.offset += 4;
    return value;
  }

  string(): Buffer {
    const length = this.uint32();
    if (length > this.bytes.length - this.offset) this.fail('string runs past the end');
    const value = this.bytes.subarray(this.offset, this.offset + length);
    this.offset += length;
    return value;
  }

  raw(length: number): Buffer {
    if (length > this.bytes.length - this.offset) this.fail('truncated field');
    const value = this.bytes.subarray(this.offset, this.offset + length);
    this.offset += length;
    return value;
  }

  utf8(): string {
    return this.string().toString('utf8');
  }

  remaining(): number {
    return this.bytes.length - this.offset;
  }

  end(): void {
    if (this.offset !== this.bytes.length) this.fail('trailing bytes');
  }

  fail(reason: string): never {
    throw new CooError(this.code, `${this.what}: ${reason}`);
  }
}
