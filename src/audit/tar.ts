import { CooError } from '../errors.js';

/**
 * One canonical form of a POSIX ustar archive, so that `tar -x` (any stock tar) unpacks an evidence
 * bundle and coo can refuse any byte it did not write: regular files only, mode 0644, owner 0,
 * time 0, no names but the ones given, two zero blocks at the end. Reading re-renders what it parsed
 * and compares, so padding, header fields and trailing bytes are all covered. Pure.
 */
export interface TarFile {
  readonly name: string;
  readonly content: Buffer;
}

const BLOCK = 512;
const MAX_FILES = 10_000;

function octal(value: number, width: number): string {
  return `${value.toString(8).padStart(width - 1, '0')}\0`;
}

function splitName(name: string): { prefix: string; base: string } {
  if (Buffer.byteLength(name) <= 100) return { prefix: '', base: name };
  const cut = name.lastIndexOf('/', 155);
  if (cut <= 0 || Buffer.byteLength(name.slice(cut + 1)) > 100 || Buffer.byteLength(name.slice(0, cut)) > 155) {
    throw new CooError('USAGE', `${name} is too long for a ustar archive`);
  }
  return { prefix: name.slice(0, cut), base: name.slice(cut + 1) };
}

function header(name: string, size: number): Buffer {
  const block = Buffer.alloc(BLOCK);
  const { prefix, base } = splitName(name);
  block.write(base, 0, 'utf8');
  block.write(octal(0o644, 8), 100, 'ascii');
  block.write(octal(0, 8), 108, 'ascii');
  block.write(octal(0, 8), 116, 'ascii');
  block.write(octal(size, 12), 124, 'ascii');
  block.write(octal(0, 12), 136, 'ascii');
  block.write('        ', 148, 'ascii');
  block.write('0', 156, 'ascii');
  block.write('ustar\0' + '00', 257, 'ascii');
  block.write(prefix, 345, 'utf8');
  let sum = 0;
  for (const byte of block) sum += byte;
  block.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'ascii');
  return block;
}

export function renderTar(files: readonly TarFile[]): Buffer {
  const parts: Buffer[] = [];
  for (const file of files) {
    parts.push(header(file.name, file.content.length), file.content);
    const pad = (BLOCK - (file.content.length % BLOCK)) % BLOCK;
    if (pad > 0) parts.push(Buffer.alloc(pad));
  }
  parts.push(Buffer.alloc(BLOCK * 2));
  return Buffer.concat(parts);
}

function field(block: Buffer, start: number, length: number): string {
  const raw = block.subarray(start, start + length);
  const end = raw.indexOf(0);
  return raw.subarray(0, end === -1 ? length : end).toString('utf8');
}

/** Parses an archive renderTar wrote, and nothing else: any other byte is BUNDLE_INVALID. */
export function parseTar(bytes: Buffer): TarFile[] {
  const invalid = (why: string): CooError => new CooError('BUNDLE_INVALID', `not a canonical evidence archive: ${why}`);
  const files: TarFile[] = [];
  let at = 0;
  while (at + BLOCK <= bytes.length) {
    const block = bytes.subarray(at, at + BLOCK);
    if (block.every((byte) => byte === 0)) break;
    if (files.length >= MAX_FILES) throw invalid(`more than ${MAX_FILES} files`);
    const base = field(block, 0, 100);
    const prefix = field(block, 345, 155);
    const sizeText = field(block, 124, 12);
    if (!/^[0-7]{11}$/.test(sizeText)) throw invalid(`bad size field at byte ${at}`);
    const size = parseInt(sizeText, 8);
    const start = at + BLOCK;
    if (start + size > bytes.length) throw invalid('a file runs past the end');
    files.push({ name: prefix === '' ? base : `${prefix}/${base}`, content: Buffer.from(bytes.subarray(start, start + size)) });
    at = start + Math.ceil(size / BLOCK) * BLOCK;
  }
  let rendered: Buffer;
  try {
    rendered = renderTar(files);
  } catch {
    throw invalid('a name does not fit');
  }
  if (!rendered.equals(bytes)) throw invalid('it differs from its canonical form (a changed header, padding or trailing byte)');
  return files;
}
