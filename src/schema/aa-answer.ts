import { z } from 'zod';

export const ANSWER_SCHEMA = 'aa_answer.v0';

/**
 * aa_answer.v0: what an advisory agent may say. Advice only: a verdict, findings, recommendations
 * and objections. There is no field for actions, commands, targets or dispatches, and unknown
 * keys are rejected, so an answer cannot carry an instruction to anyone in a structured form.
 */
export const aaAnswer = z.strictObject({
  schema_version: z.literal(ANSWER_SCHEMA),
  verdict: z.enum(['approve', 'approve_with_changes', 'reject', 'needs_information', 'no_opinion']),
  summary: z.string().min(1).max(4000),
  findings: z
    .array(
      z.strictObject({
        severity: z.enum(['info', 'low', 'medium', 'high', 'critical']),
        title: z.string().min(1).max(300),
        detail: z.string().max(4000),
        refs: z.array(z.string().max(300)).max(20),
      }),
    )
    .max(50),
  recommendations: z.array(z.string().min(1).max(2000)).max(50),
  objections: z.array(z.string().min(1).max(2000)).max(50),
  confidence: z.number().finite().min(0).max(1),
  /** Echo of the per-attempt canary the prompt carried: proves the answer belongs to this attempt. */
  canary: z.string().regex(/^[a-z0-9-]{8,80}$/),
});
export type AaAnswer = z.infer<typeof aaAnswer>;
