import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { privateKeyFromSeed } from '../../../src/crypto/keys.js';
import { GIT_NAMESPACE, armor, parseSshsig, signSshsig, verifySshsig } from '../../../src/crypto/sshsig.js';
import { formatIdent, ledgerMessage, parseCommit, parseSeq, renderCommitPayload, renderSignedCommit } from '../../../src/ledger/commit-format.js';
import { hashObject } from '../../../src/ledger/object-store.js';
import { codeOf } from '../../helpers/codes.js';

const key = privateKeyFromSeed(Buffer.from('9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60', 'hex'), 'ceo');
const ident = formatIdent('ceo', key.publicKey.keyId, 1_764_489_600);
const fields = {
  tree: '4b825dc642cb6eb9a060e54bf8d69288fbee4904',
  parents: [],
  author: ident,
  committer: ident,
  message: ledgerMessage('genesis', 1),
};
const signature = signSshsig(key, renderCommitPayload(fields), GIT_NAMESPACE);
const raw = renderSignedCommit(fields, signature);
const text = raw.toString('utf8');

const L = (1n << 252n) + 27742317777372353535851937790883648493n;

describe('raw commits', () => {
  it('renders a fixed commit to a fixed id (golden), the id stock git computes', () => {
    expect(hashObject('commit', raw)).toBe('100e548db59bc46db3130577e71ceb079c12b08c');
    expect(execFileSync('git', ['hash-object', '-t', 'commit', '--stdin'], { input: raw, encoding: 'utf8' }).trim()).toBe('100e548db59bc46db3130577e71ceb079c12b08c');
  });

  it('cuts the signed payload from the raw bytes exactly as it was signed', () => {
    const parsed = parseCommit(raw);
    expect(parsed.payload.equals(renderCommitPayload(fields))).toBe(true);
    expect(parsed.gpgsig).toBe(signature);
    expect(parsed.seq).toBe(1);
    expect(verifySshsig(parseSshsig(parsed.gpgsig), parsed.payload, GIT_NAMESPACE)).toBe(true);
  });

  const variants: Array<[string, string, string]> = [
    ['an extra gpgsig-sha256 header (git still says Good)', text.replace('gpgsig ', 'gpgsig-sha256 junk\ngpgsig '), 'COMMIT_MALFORMED'],
    ['a duplicated gpgsig header (git still says Good)', text.replace(/(gpgsig [\s\S]*?-----END SSH SIGNATURE-----\n)/, '$1$1'), 'COMMIT_MALFORMED'],
    ['two tree headers (the gitsign trust-confusion case)', text.replace('tree ', `tree ${'1'.repeat(40)}\ntree `), 'COMMIT_MALFORMED'],
    ['a mergetag header', text.replace('gpgsig ', 'mergetag object 1\ngpgsig '), 'COMMIT_MALFORMED'],
    ['an encoding header', text.replace('gpgsig ', 'encoding ISO-8859-1\ngpgsig '), 'COMMIT_MALFORMED'],
    ['an unknown header', text.replace('gpgsig ', 'x-extra hello\ngpgsig '), 'COMMIT_MALFORMED'],
    ['a carriage return', text.replace('\n\ngenesis', '\r\n\ngenesis'), 'COMMIT_MALFORMED'],
    ['no signature', text.replace(/gpgsig [\s\S]*?-----END SSH SIGNATURE-----\n/, ''), 'COMMIT_UNSIGNED'],
    ['no Ledger-Seq trailer', text.replace('Ledger-Seq: 1\n', ''), 'COMMIT_SEQ'],
    ['two Ledger-Seq trailers', text.replace('Ledger-Seq: 1\n', 'Ledger-Seq: 1\nLedger-Seq: 2\n'), 'COMMIT_SEQ'],
    ['headers out of order', text.replace(/^(tree .*\n)(author .*\n)/, '$2$1'), 'COMMIT_MALFORMED'],
  ];
  it.each([
    ['the trailer alone', 'genesis\n\nLedger-Seq: 7\n', 7],
    ['other trailers before it', 'summary\n\nbody\n\nSigned-off-by: x\nLedger-Seq: 12\n', 12],
    ['blank lines after it', 'summary\n\nLedger-Seq: 3\n\n\n', 3],
    ['three newlines before its paragraph', 'summary\n\n\nLedger-Seq: 4\n', 4],
  ])('reads the sequence number from a message with %s', (_name, message, seq) => {
    expect(parseSeq(message)).toBe(seq);
  });

  it.each([
    ['no trailer', 'summary\n'],
    ['the trailer outside the last paragraph', 'summary\n\nLedger-Seq: 1\n\nmore text\n'],
    ['two trailers', 'summary\n\nLedger-Seq: 1\nLedger-Seq: 1\n'],
    ['"Ledger-Seq:" in the summary as well', 'set Ledger-Seq: 9\n\nLedger-Seq: 1\n'],
    ['a zero', 'summary\n\nLedger-Seq: 0\n'],
    ['a leading zero', 'summary\n\nLedger-Seq: 01\n'],
  ])('refuses a message with %s', (_name, message) => {
    expect(codeOf(() => parseSeq(message))).toBe('COMMIT_SEQ');
  });

  for (const [name, variant, code] of variants) {
    it(`refuses ${name}`, () => {
      expect(variant).not.toBe(text);
      expect(codeOf(() => parseCommit(Buffer.from(variant, 'utf8')))).toBe(code);
    });
  }

  it.each([
    ['a byte that is never UTF-8', [0xff]],
    ['an overlong encoding of "/"', [0xc0, 0xaf]],
    ['an encoded surrogate', [0xed, 0xa0, 0x80]],
    ['a truncated sequence', [0xe2, 0x82]],
  ])('refuses a message with %s', (_name, bytes) => {
    const at = raw.indexOf('genesis');
    const broken = Buffer.concat([raw.subarray(0, at), Buffer.from(bytes), raw.subarray(at)]);
    expect(codeOf(() => parseCommit(broken))).toBe('COMMIT_MALFORMED');
    expect(() => parseCommit(broken)).toThrow('not valid UTF-8');
    expect(parseCommit(Buffer.concat([raw.subarray(0, at), Buffer.from('é€😀', 'utf8'), raw.subarray(at)])).message).toContain('é€😀genesis');
  });

  it('refuses a signature rewritten as S+L, which ssh-keygen and tweetnacl accept', () => {
    const sig = parseSshsig(signature);
    const s = BigInt('0x' + Buffer.from(sig.signature.subarray(32)).reverse().toString('hex')) + L;
    const malleated = Buffer.concat([Buffer.from(sig.signature.subarray(0, 32)), Buffer.from(s.toString(16).padStart(64, '0'), 'hex').reverse()]);
    const blob = Buffer.from(signature.split('\n').slice(1, -2).join(''), 'base64');
    const swapped = armor(Buffer.concat([blob.subarray(0, blob.length - 64), malleated]));
    expect(verifySshsig(parseSshsig(swapped), renderCommitPayload(fields), GIT_NAMESPACE)).toBe(false);
  });

  it('refuses a signature armor wrapped at 76 columns', () => {
    const blob = Buffer.from(signature.split('\n').slice(1, -2).join(''), 'base64').toString('base64');
    const rewrapped = `-----BEGIN SSH SIGNATURE-----\n${blob.match(/.{1,76}/g)!.join('\n')}\n-----END SSH SIGNATURE-----\n`;
    expect(codeOf(() => parseSshsig(rewrapped))).toBe('SIG_NONCANONICAL');
  });
});
