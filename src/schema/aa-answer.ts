import { z } from 'zod';
import { messageId } from './common.js';

export const ANSWER_SCHEMA = 'aa_answer.v0';

/**
 * A change an advisory agent suggests: a task, the paths it would touch, how to tell it is done and
 * how to check it. Addressed to no one and carrying no authority: there is no field for an actor,
 * an approval, a budget or a branch, and unknown keys are refused. Only a COO-signed adoption
 * (`coo adopt`) that names it by hash turns it into work.
 */
export const proposal = z.strictObject({
  task: z.string().min(1).max(20_000),
  scope: z.array(z.string().min(1).max(512)).min(1).max(50),
  acceptance: z.array(z.string().min(1).max(2000)).min(1).max(50),
  verification: z.array(z.string().min(1).max(2000)).min(1).max(20),
});
export type Proposal = z.infer<typeof proposal>;

/** The most proposals one answer may carry. */
export const MAX_PROPOSALS = 5;

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
  /** Changes the agent suggests, each judged on its own (consult/proposals.ts): one that carries authority is stripped, never the answer. */
  proposals: z.array(proposal).max(MAX_PROPOSALS).optional(),
});
export type AaAnswer = z.infer<typeof aaAnswer>;

export const PROPOSAL_SCHEMA = 'aa_proposal.v0';

/**
 * aa_proposal.v0: one proposal of an answer, as the runner stores it beside the consult's receipt
 * (`artifacts/NNN/proposal-NN.yaml`), so a dispatch can adopt it by its hash.
 */
export const storedProposal = z.strictObject({
  schema_version: z.literal(PROPOSAL_SCHEMA),
  message_id: messageId,
  attempt_number: z.number().int().positive().max(100),
  /** Its place among the answer's proposals that were kept, from 1. */
  index: z.number().int().positive().max(MAX_PROPOSALS),
  ...proposal.shape,
});
export type StoredProposal = z.infer<typeof storedProposal>;
