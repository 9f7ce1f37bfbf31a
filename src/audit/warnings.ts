/**
 * What a receipt's warnings mean: what held, but less strongly than it should have. The runner
 * writes them (consult/receipt.ts, consult/runner-lane.ts, dispatch/runner-lane.ts); docs/design.md, Known limits, says why each
 * can happen. Pure: the report, `coo show` and `coo cite` word them alike.
 */
const MEANING: Readonly<Record<string, string>> = {
  sandbox_unenforced: 'the attempt ran in a clean folder and environment, but without bubblewrap: the OS did not enforce the sandbox',
  context_injection_suspected: 'the pinned context, or the answer a cross-check challenges, holds text that reads as instructions to the agent',
  usage_unreported: 'the provider or execution agent reported no usage: the cost is our higher estimate (for a dispatch, all the attempt was allowed to spend)',
  usage_implausible: 'the reported usage is below what the runner can know (fewer tokens than the bytes sent and received come to, a total above its input, output and reasoning, or a cost under the policy\'s price for the tokens stated), or a figure of it is stated as no honest report states one (a string, a negative, a fraction of a token, a key twice): the cost is our higher estimate',
  usage_partial: "the reported usage leaves out output the provider may have billed (a route whose record omits the model's thinking, or a call ended before the provider's last word): the output is charged up to the attempt's cap",
  allowance_unstated: "the attempt's runner stopped before its receipt and its claim does not state what it was allowed to spend: the charge is bounded from the ledger at its claim (its message's budget and its model's cap), the most its pre-flight could have let it spend",
  artifact_truncated: 'an attachment (the event stream, a log, a stderr tail) was larger than the runner or the ledger keeps: it is stored cut, and its hash is of what is stored',
  proposal_stripped: "the answer passed, but proposals in it carried authority (an actor to dispatch, an approval, an unbounded scope, a field of their own): they were stripped and not stored, the receipt's output_validation errors say which and why, and the advice stands without them",
  bundle_unverified: "the attempt was recovered after its runner died, and its sandbox's prompt.txt (a folder Oracle may write) was not the bundle the recovering build renders for its message with the attempt's canary (rewritten, removed, or written by a build whose prompt template differs): no prompt-sent.md is kept and no bundle_hash is stated, and the estimates and floors use the rendered bundle's size, not the file's",
  commands_in_artifact: 'the executor ran more commands than a receipt lists: the receipt keeps the first ones and every verification, and commands.json (attached, hashed) keeps them all',
};

/** One line on a warning code; a code this version does not know is named as such. */
export function warningMeaning(code: string): string {
  return Object.hasOwn(MEANING, code) ? MEANING[code]! : 'a warning this version of coo does not know; see the receipt';
}
