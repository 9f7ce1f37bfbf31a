import { CooError } from '../../errors.js';
import type { CommitCheck, EntryFile } from '../commit-check.js';
import { requireVersion, toTrustFile } from './trust.js';

/**
 * The kill switch (kill_switch.v0): a CEO may set either way; the active COO may stop, and may
 * restart only what it stopped. A stop belongs to whoever set it, and ownership does not pass by
 * re-asserting it: the COO may not set `on` over another's standing stop (its `off` would then
 * release that stop).
 */
export function checkKillSwitch(check: CommitCheck, entry: EntryFile, version: number, keyId: string): void {
  const doc = check.read('kill_switch.v0', entry);
  requireVersion(check.killSwitch, version, doc.version, entry.path);
  const holder = check.signerHolder(keyId, entry.path);
  if (holder.actor !== doc.set_by) {
    throw new CooError('SIGNER_WRONG_ACTOR', `${entry.path}: set_by ${doc.set_by} but signed by a key of ${holder.actor}`, { where: entry.path });
  }
  const isCoo = holder.actor === check.registry?.doc.active_coo;
  if (!holder.rootAuthority && !isCoo) {
    throw new CooError('TRUST_AUTHORITY', `${entry.path}: only a trust-root authority or the active COO may set the kill switch`, { where: entry.path });
  }
  const current = check.killSwitch?.doc;
  if (!holder.rootAuthority && current !== undefined && current.state === 'on' && current.set_by !== holder.actor) {
    const what = doc.state === 'off' ? 'the COO cannot release it' : 'the COO cannot take the stop over by setting it again';
    throw new CooError('TRUST_AUTHORITY', `${entry.path}: the kill switch was set by ${current.set_by}; ${what}`, { where: entry.path });
  }
  check.killSwitch = toTrustFile(check, entry, version, doc);
}
