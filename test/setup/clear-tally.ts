import { rmSync } from 'node:fs';
import { join } from 'node:path';

/** Each run tallies attacks, properties, crashes and load from scratch. */
export default function setup(): void {
  rmSync(join(import.meta.dirname, '..', '..', 'test-artifacts', 'reliability'), { recursive: true, force: true });
}
