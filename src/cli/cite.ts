import type { Command } from 'commander';
import { providerKeyProblem } from '../lane/provider-key.js';
import { CooError } from '../errors.js';
import { citationMarker, isVerified, panelCitationMarker, renderCitation, renderPanelCitation, whatIsWrong } from '../audit/cite.js';
import { gatherBundle } from '../audit/bundle-gather.js';
import { gatherEvidence, gatherPanelEvidence } from '../audit/evidence.js';
import { parseIssueRef, postComment } from '../audit/github.js';
import { otherRefsNote } from '../audit/verify.js';
import { emit, jsonOption, ledgerOption, required, writeOutput } from './common.js';
import { writeErr } from './terminal.js';

export function citeVerb(program: Command): void {
  program
    .command('cite')
    .description('print a consult\'s answer as Markdown evidence for an issue or PR comment (marked advisory, not authority), or post it; verified only when coo verify finds the whole ledger clean, and the model\'s text is literal, on one line')
    .argument('<message-id>', 'the consult to cite, or a panel (pnl_...): its members\' answers side by side, naming every member\'s receipt')
    .addOption(ledgerOption())
    .option('--post <owner/repo#n>', 'post it as a comment (needs GITHUB_TOKEN); refused when the evidence does not verify; never posted twice')
    .option('--bundle <file>', 'also write a self-contained evidence bundle (a tar archive) that coo verify-bundle, or git and ssh-keygen, check without the ledger')
    .option('--github-api-url <url>', 'GitHub API base URL, for GitHub Enterprise (default $GITHUB_API_URL or https://api.github.com)')
    .addOption(jsonOption())
    .action(async (messageId: string, opts: { ledger?: string; post?: string; bundle?: string; githubApiUrl?: string; json?: boolean }) => {
      const gitdir = required(opts.ledger, '--ledger', 'the ledger path or $COO_LEDGER');
      const target = opts.post === undefined ? null : parseIssueRef(opts.post);
      if (messageId.startsWith('pnl_')) {
        if (opts.bundle !== undefined) throw new CooError('USAGE', `a bundle holds one receipt: bundle each member's evidence (coo cite MEMBER_ID --bundle FILE; coo show ${messageId} lists the members)`);
        const panel = await gatherPanelEvidence(gitdir, messageId);
        noteOtherRefs(panel.otherRefs, opts.json);
        const markdown = renderPanelCitation(panel);
        const verified = panel.findings.length === 0;
        if (target === null) {
          emit(opts.json, { panel_id: panel.panelId, verified, head_seq: panel.headSeq, other_refs: panel.otherRefs, findings: panel.findings, comparison: panel.comparison, markdown }, () => markdown.trimEnd());
          return;
        }
        if (!verified) throw new CooError('SIG_INVALID', `not posting: the ledger holding ${panel.panelId} does not verify (${panel.findings[0]!.code}: ${panel.findings[0]!.message})`, { findings: panel.findings });
        const result = await post(target, markdown, panelCitationMarker(panel), opts.githubApiUrl);
        emit(opts.json, { panel_id: panel.panelId, posted: result.created, url: result.url, other_refs: panel.otherRefs }, () => (result.created ? `posted ${result.url}` : `already posted: ${result.url} (nothing new written)`));
        return;
      }
      const evidence = await gatherEvidence(gitdir, messageId);
      noteOtherRefs(evidence.otherRefs, opts.json);
      const markdown = renderCitation(evidence);
      if (opts.bundle !== undefined) writeOutput(opts.bundle, await gatherBundle(gitdir, evidence), '--bundle', 'the evidence bundle');
      if (target === null) {
        emit(opts.json, { message_id: evidence.messageId, verified: isVerified(evidence), head_seq: evidence.headSeq, clean_to_seq: evidence.cleanToSeq, other_refs: evidence.otherRefs, findings: evidence.findings, ...(evidence.revokedSigner === undefined ? {} : { revoked_signer: { key_id: evidence.revokedSigner.keyId, seq: evidence.revokedSigner.seq, reason: evidence.revokedSigner.reason } }), markdown }, () => markdown.trimEnd());
        return;
      }
      if (!isVerified(evidence)) {
        throw new CooError('SIG_INVALID', `not posting: the evidence for ${evidence.messageId} does not verify (${whatIsWrong(evidence)})`, { findings: evidence.findings });
      }
      const result = await post(target, markdown, citationMarker(evidence), opts.githubApiUrl);
      emit(opts.json, { message_id: evidence.messageId, posted: result.created, url: result.url, other_refs: evidence.otherRefs }, () =>
        result.created ? `posted ${result.url}` : `already posted: ${result.url} (nothing new written)`,
      );
    });
}

/** A citation (an attestation too) judges main alone, as `coo verify` does: the refs beside it are named on standard error, as verify names them. */
export function noteOtherRefs(refs: readonly string[], json: boolean | undefined, judge = 'this citation'): void {
  const note = otherRefsNote(refs, judge);
  if (note !== null && json !== true) writeErr(`note: ${note}\n`);
}

/** Posts a citation as a comment, once: the marker finds one posted before. */
function post(target: ReturnType<typeof parseIssueRef>, markdown: string, marker: string, apiUrl: string | undefined): ReturnType<typeof postComment> {
  const token = process.env['GITHUB_TOKEN'];
  if (token === undefined || token === '') throw new CooError('USAGE', 'posting needs GITHUB_TOKEN in the environment');
  // The runner's rule for a forge token (cli/watch.ts): one no forge takes is refused here, before anything is sent.
  const problem = providerKeyProblem('GITHUB_TOKEN', token);
  if (problem !== null) throw new CooError('USAGE', `not posting: ${problem}`);
  const baseUrl = apiUrl ?? process.env['GITHUB_API_URL'];
  return postComment(target, markdown, marker, { token, ...(baseUrl === undefined ? {} : { baseUrl }) });
}
