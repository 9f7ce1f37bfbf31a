/** How many input tokens a consult sends through Oracle, estimated before it runs. Pure. */

/** Oracle adds its system prompt and bundling around our text; measured about 4.3k tokens with search on, much less off. */
const ORACLE_OVERHEAD_TOKENS = 1500;

/** A deliberately high estimate of input tokens: about 3 bytes a token, plus Oracle's overhead. */
export function estimateInputTokens(promptBytes: number, contextBytes: number): number {
  return Math.ceil((promptBytes + contextBytes) / 3) + ORACLE_OVERHEAD_TOKENS;
}
