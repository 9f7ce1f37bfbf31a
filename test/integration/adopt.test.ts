import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { verifyLedger } from '../../src/audit/verify.js';
import { approve } from '../../src/dispatch/approve.js';
import { adoptProposal } from '../../src/dispatch/adopt.js';
import { pinnedCodexCommand } from '../../src/dispatch/codex.js';
import { executorFactory } from '../../src/dispatch/executors.js';
import { formatPrivateKey } from '../../src/crypto/keys.js';
import { CooError } from '../../src/errors.js';
import { readMessage } from '../../src/lane/envelope.js';
import { startScriptedResponsesServer, type ScriptTurn } from '../../src/offline/fake-responses-server.js';
import { readStrictYaml } from '../../src/schema/strict-yaml.js';
import { sha256Ref } from '../../src/util/hash.js';
import { coo, json } from '../helpers/cli.js';
import { makeTargetRepo } from '../helpers/dispatch-repo.js';
import { receiptsOf, worlds, type World } from '../helpers/lane.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * AA -> COO -> EA end to end: an advisory agent's answer carries proposals, the runner stores the
 * ones that are advice (and strips the ones that try to carry authority), the COO adopts one through
 * the CEO's approval, and the real Codex does the work the runner verifies and receipts.
 */

const dir = tempDir('adopt');
const world = worlds(dir);

const FIX: ScriptTurn = { kind: 'patch', patch: '*** Update File: src/add.js\n@@\n-export const add = (a, b) => a - b;\n+export const add = (a, b) => a + b;' };
const DONE: ScriptTurn = { kind: 'message', text: 'Fixed add(); test.sh passes.' };

async function consulted(w: World) {
  const repo = join(w.dir, 'work');
  const base = makeTargetRepo(repo);
  const model = await startScriptedResponsesServer([FIX, DONE]);
  const executors = executorFactory({ command: pinnedCodexCommand(), baseUrl: `${model.url}/v1`, hide: [w.gitdir], env: { ...process.env, OPENAI_API_KEY: 'sk-test-key' } });
  const runner = w.runner({ repo, executors });
  const consult = await w.consult({ repo, patterns: ['src/add.js'], question: 'How should add() be fixed?' });
  await runner.runOnce();
  const [receipt] = await receiptsOf(w, consult.messageId);
  return { repo, base, model, runner, consult, receipt: receipt!, close: () => model.close() };
}

describe("an advisory agent's proposal adopted through the COO's gate", () => {
  it('is stored as advice with its hash, adopted with the CEO approval the default policy asks for, dispatched, done by the real Codex and receipted', async () => {
    const w = await world({ modes: ['propose'] });
    const s = await consulted(w);
    try {
      expect(s.receipt['status']).toBe('succeeded');
      const [stored] = s.receipt['proposals'] as Array<{ path: string; sha256: string }>;
      const bytes = (await w.ledger.readFile(stored!.path))!;
      expect(sha256Ref(bytes)).toBe(stored!.sha256);
      expect(readStrictYaml(bytes, 'proposal')).toMatchObject({ schema_version: 'aa_proposal.v0', message_id: s.consult.messageId, attempt_number: 1, index: 1, scope: ['src/**'] });
      // The runner stored the proposal; nothing ran it.
      expect([...(await w.ledger.state()).messages.values()].filter((record) => record.intent === 'ea_dispatch')).toEqual([]);

      const adopt = (approvalId?: string) =>
        adoptProposal({ ledger: w.ledger, key: w.actors.coo, now: new Date(), target: 'ea.codex', repo: s.repo, consultId: s.consult.messageId, proposal: 1, timeoutSeconds: 120, maxRuntimeSeconds: 120, ...(approvalId === undefined ? {} : { approvalId }) });
      // The default policy gives adoptions to the CEO: refused with the exact request to approve.
      const refused = await adopt().catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(CooError);
      expect((refused as CooError).code).toBe('APPROVAL_REQUIRED');
      const requestHash = (refused as CooError).where!;
      const approved = await approve({ ledger: w.ledger, key: w.actors.ceo, now: new Date(), reason: 'the fix is sound', requestHash });
      const adopted = await adopt(approved.approval.approval_id);
      expect(adopted.changed).toEqual([]);
      expect(adopted.envelope).toMatchObject({ parent_message_id: s.consult.messageId, causality_chain: [s.consult.messageId], correlation_id: s.consult.envelope.correlation_id, adopted_proposal: { attempt_number: 1, index: 1, sha256: stored!.sha256, changed: [] } });
      expect(adopted.envelope.dispatch).toMatchObject({ base_ref: s.base, scope_paths: ['src/**'], acceptance_criteria: ['test.sh passes'], verification_commands: ['sh test.sh'] });

      await s.runner.runOnce();
      const [receipt] = await receiptsOf(w, adopted.messageId);
      expect(receipt).toMatchObject({ status: 'succeeded', files_changed: ['src/add.js'], tests_run: ['sh test.sh'] });
      expect(git(['show', `${receipt!['head_sha'] as string}:src/add.js`], { cwd: s.repo })).toContain('a + b');
      const report = await verifyLedger(w.gitdir, { full: true, now: new Date() });
      expect(report.findings.filter((finding) => finding.code !== 'HEARTBEAT_EXPIRED')).toEqual([]);
    } finally {
      await s.close();
    }
  });

  it('records what the COO changed of the proposal it adopts, through coo show and coo adopt', async () => {
    const w = await world({ modes: ['propose'], policy: (policy) => ({ ...policy, adoptions: { ceo_approval: false } }) });
    const s = await consulted(w);
    try {
      const key = join(w.dir, 'coo.key');
      writeFileSync(key, formatPrivateKey(w.actors.coo), { mode: 0o600 });
      const shown = coo(['show', s.consult.messageId, '--ledger', w.gitdir]);
      expect(shown.stdout).toMatch(/proposal 1 messages\/\S+\/artifacts\/001\/proposal-01\.yaml sha256:[0-9a-f]{64} \(coo adopt --proposal 1 turns it into work\)/);
      const result = coo(['adopt', s.consult.messageId, '--proposal', '1', '--to', 'ea.codex', '--repo', s.repo, '--scope', 'src/add.js', '--verify', 'sh test.sh', '--verify', 'test -f src/add.js', '--ledger', w.gitdir, '--key', key, '--json']);
      expect(result.stderr).toBe('');
      const adopted = json<{ message_id: string; changed: string[]; adopted: { sha256: string } }>(result);
      expect(adopted.changed).toEqual(['scope', 'verification']);
      const envelope = await readMessage(w.ledger, (await w.ledger.state()).messages.get(adopted.message_id)!);
      expect(envelope).toMatchObject({ intent: 'ea_dispatch', parent_message_id: s.consult.messageId, adopted_proposal: { changed: ['scope', 'verification'], sha256: (s.receipt['proposals'] as Array<{ sha256: string }>)[0]!.sha256 } });
      expect(envelope).toMatchObject({ dispatch: { scope_paths: ['src/add.js'], verification_commands: ['sh test.sh', 'test -f src/add.js'] } });
    } finally {
      await s.close();
    }
  });

  it('strips each proposal that tries to carry authority, with a finding, and stores the rest', async () => {
    const w = await world({ modes: ['propose-authority'] });
    const s = await consulted(w);
    try {
      expect(s.receipt['status']).toBe('succeeded');
      expect(s.receipt['proposals']).toHaveLength(1);
      expect(s.receipt['warnings']).toContain('proposal_stripped');
      const errors = (s.receipt['output_validation'] as { errors: string[] }).errors;
      expect(errors).toEqual([
        expect.stringMatching(/^proposal 2 stripped: it addresses an actor \("ea\.codex"\)/),
        expect.stringMatching(/^proposal 3 stripped: it names an approval/),
        expect.stringMatching(/^proposal 4 stripped: its scope "\*\*" is no bound/),
        expect.stringMatching(/^proposal 5 stripped: it carries fields a proposal has no place for \(target_actor\)/),
      ]);
    } finally {
      await s.close();
    }
  });
});
