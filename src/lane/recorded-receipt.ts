import { toYaml } from '../schema/strict-yaml.js';
import type { Scrubber } from '../util/scrub.js';

/**
 * A receipt as the ledger records it: every string in it scrubbed of the secrets the runner holds
 * and the folders of its machine (util/scrub.ts), then written as YAML. A receipt's details quote
 * errors (a pin check's, git's, the runner's own) that name the runner's repository or state folder
 * or echo what a child said; a signed entry cannot be taken back, so each lane writes its receipts
 * through this one place.
 */
export function recordedReceipt<T>(doc: T, scrubber: Scrubber): { readonly doc: T; readonly bytes: Buffer } {
  const scrubbed = scrubber.value(doc);
  return { doc: scrubbed, bytes: Buffer.from(toYaml(scrubbed)) };
}
