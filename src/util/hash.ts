import { hash } from 'node:crypto';

/** `sha256:<hex>`, the form every hash in an entry takes. */
export function sha256Ref(bytes: Uint8Array | string): string {
  return `sha256:${hash('sha256', bytes, 'hex')}`;
}

/** JSON with object keys sorted at every level: a stable form to hash parsed values by. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) {
    let out = '[';
    for (let i = 0; i < value.length; i += 1) out += (i === 0 ? '' : ',') + (value[i] === undefined ? 'null' : canonicalJson(value[i]));
    return `${out}]`;
  }
  const record = value as Record<string, unknown>;
  let out = '{';
  for (const key of Object.keys(record).sort()) {
    const item = record[key];
    if (item === undefined) continue;
    out += `${out.length === 1 ? '' : ','}${JSON.stringify(key)}:${canonicalJson(item)}`;
  }
  return `${out}}`;
}
