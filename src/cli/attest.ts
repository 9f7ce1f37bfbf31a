import type { Command } from 'commander';
import { CooError, type Finding } from '../errors.js';
import { requireHolder } from '../authority/keys.js';
import { receiptStatement, signStatement } from '../audit/attest.js';
import { isVerified, whatIsWrong } from '../audit/cite.js';
import { dispatchStatement } from '../audit/dispatch-attest.js';
import { gatherDispatchEvidence } from '../audit/dispatch-evidence.js';
import { gatherEvidence } from '../audit/evidence.js';
import { envelopePath } from '../ledger/layout.js';
import { Ledger } from '../ledger/ledger.js';
import { sha256Ref } from '../util/hash.js';
import { noteOtherRefs } from './cite.js';
import { jsonOption, keyOption, ledgerOption, loadPrivateKey, required, writeOutput } from './common.js';
import { inertJson } from '../util/invisible.js';

export function attestVerb(program: Command): void {
  program
    .command('attest')
    .description("export a consult's or a dispatch's receipt as an in-toto Statement v1 in a DSSE envelope signed with the COO key: a consult's subjects are its answer and attachments, a dispatch's the signed head commit and the files it changed (docs/attestation.md); refused unless coo verify finds the whole ledger clean")
    .argument('<message-id>', 'the consult or dispatch to attest')
    .addOption(ledgerOption())
    .addOption(keyOption('the COO private key that signs the envelope; default $COO_KEY'))
    .option('--out <file>', 'write the DSSE envelope (JSON) here instead of standard output')
    .addOption(jsonOption())
    .action(async (messageId: string, opts: { ledger?: string; key?: string; out?: string; json?: boolean }) => {
      const gitdir = required(opts.ledger, '--ledger', 'the ledger path or $COO_LEDGER');
      const key = loadPrivateKey(required(opts.key, '--key', 'the COO private key or $COO_KEY'));
      const ledger = Ledger.open(gitdir, { checkpoints: false });
      let intent: string | undefined;
      try {
        // Only the active COO speaks for the ledger's receipts: an attestation signed by any other key says nothing.
        const state = await ledger.state();
        const coo = state.registry?.doc.active_coo;
        if (requireHolder(state, key.publicKey.keyId, '--key').actor !== coo) {
          throw new CooError('SIGNER_WRONG_ACTOR', `--key ${key.publicKey.keyId} is not a key of the active COO ${coo ?? '(none)'}: attest with the COO key`);
        }
        intent = state.messages.get(messageId)?.intent;
      } finally {
        ledger.close();
      }
      const { id, statement, otherRefs } = intent === 'ea_dispatch' ? await dispatchAttestation(gitdir, messageId) : await consultAttestation(gitdir, messageId);
      noteOtherRefs(otherRefs, opts.json === true && opts.out !== undefined, 'this attestation');
      const text = `${JSON.stringify(signStatement(statement, key), null, 2)}\n`;
      if (opts.out === undefined) {
        process.stdout.write(text);
        return;
      }
      writeOutput(opts.out, text, '--out', 'the attestation');
      process.stdout.write(opts.json === true ? `${inertJson({ message_id: id, out: opts.out, keyid: key.publicKey.keyId, other_refs: otherRefs })}\n` : `attestation for ${id} written to ${opts.out}\n`);
    });
}

/** Evidence that does not verify is not attested: what is wrong says why, and every finding is kept. */
function refuseUnverified(id: string, findings: readonly Finding[], wrong: string): void {
  if (findings.length > 0) throw new CooError('SIG_INVALID', `not attesting: the evidence for ${id} does not verify (${wrong})`, { findings });
}

/** An attestation's statement, and the refs beside main the replay behind it did not judge. */
interface Attestation {
  readonly id: string;
  readonly statement: Record<string, unknown>;
  readonly otherRefs: readonly string[];
}

async function consultAttestation(gitdir: string, messageId: string): Promise<Attestation> {
  const evidence = await gatherEvidence(gitdir, messageId);
  if (!isVerified(evidence)) refuseUnverified(evidence.messageId, evidence.findings, whatIsWrong(evidence));
  const folder = evidence.receiptPath.slice(0, evidence.receiptPath.indexOf('/receipts/'));
  const ledger = Ledger.open(gitdir, { checkpoints: false });
  let envelope: Buffer | null;
  try {
    envelope = await ledger.readFile(envelopePath(folder), evidence.receiptCommit);
  } finally {
    ledger.close();
  }
  if (envelope === null) throw new CooError('NOT_FOUND', `${envelopePath(folder)} is missing`);
  return { id: evidence.messageId, statement: receiptStatement(evidence, { path: envelopePath(folder), sha256: sha256Ref(envelope) }), otherRefs: evidence.otherRefs };
}

async function dispatchAttestation(gitdir: string, messageId: string): Promise<Attestation> {
  const evidence = await gatherDispatchEvidence(gitdir, messageId);
  const first = evidence.findings[0];
  refuseUnverified(evidence.messageId, evidence.findings, first === undefined ? '' : `${first.code}${first.commit === undefined ? '' : ` in commit ${first.commit.slice(0, 12)}`}: ${first.message}`);
  return { id: evidence.messageId, statement: dispatchStatement(evidence), otherRefs: evidence.otherRefs };
}
