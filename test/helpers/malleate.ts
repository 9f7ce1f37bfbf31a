const L = (1n << 252n) + 27742317777372353535851937790883648493n;

/** Rewrites the ed25519 signature inside a raw commit's gpgsig as (R, S+L): same message, new bytes. */
export function L_PLUS(raw: string): string {
  const match = /gpgsig (-----BEGIN SSH SIGNATURE-----\n(?: .*\n)*? -----END SSH SIGNATURE-----)\n/.exec(raw);
  if (match === null) throw new Error('no gpgsig');
  const armored = match[1]!.replace(/\n /g, '\n');
  const blob = Buffer.from(armored.split('\n').slice(1, -1).join(''), 'base64');
  const sig = blob.subarray(blob.length - 64);
  const s = BigInt('0x' + Buffer.from(sig.subarray(32)).reverse().toString('hex')) + L;
  const sBytes = Buffer.from(s.toString(16).padStart(64, '0'), 'hex').reverse();
  const changed = Buffer.concat([blob.subarray(0, blob.length - 32), sBytes]);
  const lines = changed.toString('base64').match(/.{1,70}/g)!;
  const rearmored = ['-----BEGIN SSH SIGNATURE-----', ...lines, '-----END SSH SIGNATURE-----'].join('\n ');
  return raw.replace(match[1]!, rearmored);
}
