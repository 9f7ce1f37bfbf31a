import { join } from 'node:path';
import { generatePrivateKey, type PrivateKey } from '../../src/crypto/keys.js';
import { initLedger } from '../../src/ledger/init.js';
import { Ledger, type NewFile } from '../../src/ledger/ledger.js';
import { defaultBranchFor } from '../../src/authority/rules/intents/dispatch.js';
import { envelopePath, messageFolder, promptPath } from '../../src/ledger/layout.js';
import type { CooMessage } from '../../src/schema/message.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { attemptIdFor, newMessageId } from '../../src/util/ids.js';
import { sha256Ref } from '../../src/util/hash.js';
import { addSeconds, isoSeconds } from '../../src/util/time.js';

export const T0 = new Date('2026-11-30T08:00:00Z');

export interface Actors {
  readonly ceo: PrivateKey;
  readonly coo: PrivateKey;
  readonly codex: PrivateKey;
  readonly claude: PrivateKey;
}

export function makeActors(): Actors {
  return {
    ceo: generatePrivateKey('ceo'),
    coo: generatePrivateKey('coo.hermes'),
    codex: generatePrivateKey('ea.codex'),
    claude: generatePrivateKey('ea.claude_code'),
  };
}

export async function makeLedger(dir: string, actors: Actors = makeActors(), name = 'ledger.git'): Promise<{ gitdir: string; actors: Actors; ledger: Ledger }> {
  const gitdir = join(dir, name);
  await initLedger({
    gitdir,
    ceoKey: actors.ceo,
    actors: new Map([
      ['coo.hermes', actors.coo.publicKey],
      ['ea.codex', actors.codex.publicKey],
      ['ea.claude_code', actors.claude.publicKey],
    ]),
    now: T0,
  });
  return { gitdir, actors, ledger: Ledger.open(gitdir) };
}

let counter = 0;

/** A valid COO -> EA dispatch envelope; override any field. */
export function dispatchEnvelope(overrides: Partial<Record<string, unknown>> = {}, now = T0): CooMessage {
  counter += 1;
  const id = newMessageId(now.getTime() + counter);
  return {
    schema_version: 'coo_message.v0',
    message_id: id,
    correlation_id: `corr_test${counter}`,
    parent_message_id: null,
    causality_chain: [],
    hop_count: 0,
    max_hops: 3,
    expires_at: isoSeconds(addSeconds(now, 3600)),
    deadline_at: isoSeconds(addSeconds(now, 7200)),
    principal: 'coo.hermes',
    source_actor: 'coo.hermes',
    target_actor: 'ea.codex',
    intent: 'ea_dispatch',
    authority_class: 'governed_execution',
    idempotency_key: `key-${id}`,
    budget: { max_cost_usd: 1, max_runtime_seconds: 600, correlation_budget_remaining_usd: null },
    dispatch: {
      repo: 'lifeos/example',
      issue_number: 62,
      attempt_id: attemptIdFor(id, 1, 'ea'),
      executor: 'codex',
      base_ref: 'b'.repeat(40),
      branch_name: defaultBranchFor(id),
      scope_paths: ['src'],
      acceptance_criteria: ['tests pass'],
      verification_commands: ['npm test'],
      timeout_seconds: 600,
    },
    payload_ref: promptPath(messageFolder(id, isoSeconds(now))),
    payload_hash: sha256Ref(TASK),
    context_pin: null,
    expected_receipt_schema: 'ea_receipt.v0',
    status: 'queued',
    created_at: isoSeconds(now),
    ...overrides,
  } as CooMessage;
}

export function envelopeFile(message: CooMessage): NewFile {
  return { path: envelopePath(messageFolder(message.message_id, message.created_at)), bytes: Buffer.from(toYaml(message)) };
}

/** The task every test dispatch carries. */
export const TASK = Buffer.from('Fix add() so that test.sh passes.\n');

/** An envelope with the artifacts it needs in its commit: a dispatch's task. */
export function messageFiles(message: CooMessage): NewFile[] {
  const files = [envelopeFile(message)];
  if (message.intent === 'ea_dispatch' && message.payload_ref !== null) files.push({ path: message.payload_ref, bytes: TASK });
  return files;
}

/** A failed ea_receipt.v0 for attempt `attempt` of a dispatch, as a runner writes one; override any field. */
export function eaReceiptDoc(messageId: string, attempt: number, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    schema_version: 'ea_receipt.v0',
    message_id: messageId,
    attempt_id: attemptIdFor(messageId, attempt, 'ea'),
    attempt_number: attempt,
    target_actor: 'ea.codex',
    status: 'failed',
    created_at: '2026-11-30T08:30:00Z',
    blockers: [{ code: 'tests_failed', detail: 'x' }],
    next_attempt_at: null,
    commands_run: ['npm test'],
    inner_exit_codes: [1],
    files_changed: [],
    tests_run: ['npm test'],
    head_sha: null,
    executor: 'codex',
    executor_session_id: null,
    model: 'gpt-5.5',
    base_sha: 'b'.repeat(40),
    branch: null,
    file_hashes: [],
    attachments: [],
    policy_decision_ref: 'trust/policy/000001.yaml@sha256:0',
    usage: null,
    actual_cost_usd: 0,
    warnings: [],
    ...overrides,
  };
}
