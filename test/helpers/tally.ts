import { appendFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { TALLY_DIR } from './attack-kit.js';

/** Appends one line of figures for the reliability summary. */
export function tally(kind: 'properties' | 'faults' | 'load', record: Record<string, unknown>): void {
  mkdirSync(TALLY_DIR, { recursive: true });
  appendFileSync(join(TALLY_DIR, `${kind}.jsonl`), `${JSON.stringify(record)}\n`);
}
