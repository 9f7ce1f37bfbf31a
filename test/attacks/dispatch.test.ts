import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { approve } from '../../src/dispatch/approve.js';
import type { Executor } from '../../src/dispatch/executor.js';
import { rejectRequest } from '../../src/inbox/ceo-messages.js';
import { COO, coo } from '../helpers/cli.js';
import { dispatchRequestHash } from '../../src/authority/rules/intents/dispatch.js';
import { approvalPath, claimPath, messageFolder, receiptPath } from '../../src/ledger/layout.js';
import type { CooMessage, EaDispatchMessage } from '../../src/schema/message.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { newMessageId } from '../../src/util/ids.js';
import { addSeconds, isoSeconds } from '../../src/util/time.js';
import { attack, codeOf, firstOr, useKit, type Kit } from '../helpers/attack-kit.js';
import { dispatchEnvelope, eaReceiptDoc, messageFiles } from '../helpers/ledger.js';
import { agentScript, CODEX_DONE, codesOf, dispatchTo, hostilePlaces, receiptsFor, watchOnce, type HostilePlace, type WatchRun } from '../helpers/hostile-agent.js';
import { git, tempDir } from '../helpers/tmp.js';
import { sha256Ref } from '../../src/util/hash.js';

/**
 * The dispatch lane's authority: who may approve, what an approval covers, and what a dispatch
 * must say before the runner may execute it. Entries are written past the writers' own checks, so
 * the validator (the same in the writer, the hook and verify) is what refuses them.
 */

const dir = tempDir('attacks-dispatch');
const getKit = useKit(dir);
let kit: Kit;
beforeAll(() => {
  kit = getKit();
});

function approval(fields: Record<string, unknown> = {}, now = new Date()): { path: string; bytes: Buffer; id: string } {
  const id = `apr_${newMessageId(now.getTime()).slice(4)}`;
  const doc = {
    schema_version: 'approval.v0',
    approval_id: id,
    approves: 'dispatch',
    request_hash: `sha256:${'0'.repeat(64)}`,
    message_id: null,
    attempt_number: null,
    reason: 'approved',
    approved_by: 'ceo',
    created_at: isoSeconds(now),
    expires_at: isoSeconds(addSeconds(now, 3600)),
    ...fields,
  };
  return { path: approvalPath(doc.approval_id as string, doc.created_at as string), bytes: Buffer.from(toYaml(doc)), id: doc.approval_id as string };
}

/** A dispatch to Claude Code, whose edge asks for the CEO's approval. */
function claudeDispatch(overrides: Record<string, unknown> = {}, now?: Date): EaDispatchMessage {
  const base = dispatchEnvelope({ target_actor: 'ea.claude_code' }, now) as EaDispatchMessage;
  return { ...base, dispatch: { ...base.dispatch, executor: 'claude_code' }, ...overrides } as EaDispatchMessage;
}

function failedReceipt(message: CooMessage, attempt: number): { path: string; bytes: Buffer } {
  const doc = eaReceiptDoc(message.message_id, attempt, { target_actor: message.target_actor, created_at: message.created_at, commands_run: [], inner_exit_codes: [], tests_run: [] });
  return { path: receiptPath(messageFolder(message.message_id, message.created_at), attempt), bytes: Buffer.from(toYaml(doc)) };
}

function claim(message: CooMessage, attempt: number, claimedAt = message.created_at): { path: string; bytes: Buffer } {
  const doc = { schema_version: 'claim.v0', message_id: message.message_id, attempt_id: `ea_attempt_${message.message_id.slice(4)}_${attempt}`, attempt_number: attempt, runner_id: 'attacker', transport_session_id: 'attacker', claimed_at: claimedAt };
  return { path: claimPath(messageFolder(message.message_id, message.created_at), attempt), bytes: Buffer.from(toYaml(doc)) };
}

describe('approvals', () => {
  attack('an approval the COO signs for itself', 'library', 'TRUST_AUTHORITY', () => kit.append([approval({ approved_by: 'coo.hermes' })], kit.keys.coo.key));

  attack('an approval signed by the CEO naming someone else as approver', 'library', 'SIGNER_WRONG_ACTOR', () => kit.append([approval({ approved_by: 'coo.hermes' })], kit.keys.ceo.key));

  attack('an approval filed under another hour than its creation', 'library', 'PATH_INVALID', () => {
    const entry = approval();
    return kit.append([{ ...entry, path: entry.path.replace(/\/\d{2}\/apr_/, '/00/apr_') === entry.path ? entry.path.replace(/\/\d{2}\/apr_/, '/01/apr_') : entry.path.replace(/\/\d{2}\/apr_/, '/00/apr_') }], kit.keys.ceo.key);
  });

  attack('an approval that outlives the policy time-to-live', 'library', 'POLICY_LIMIT', () => kit.append([approval({ expires_at: isoSeconds(addSeconds(new Date(), 40 * 86_400)) })], kit.keys.ceo.key));

  attack('a dispatch the policy gives to the CEO, written without an approval', 'library', 'APPROVAL_REQUIRED', () => kit.append(messageFiles(claudeDispatch()), kit.keys.coo.key));

  attack('a dispatch naming an approval of another request', 'library', 'APPROVAL_INVALID', async () => {
    const entry = approval();
    await kit.append([entry], kit.keys.ceo.key);
    return kit.append(messageFiles(claudeDispatch({ approval_id: entry.id })), kit.keys.coo.key);
  });

  attack('a second dispatch riding on an approval already used', 'library', 'APPROVAL_INVALID', async () => {
    const first = claudeDispatch({}, new Date(Date.now() + 1000));
    const entry = approval({ request_hash: dispatchRequestHash(first) });
    await kit.append([entry], kit.keys.ceo.key);
    const used = await kit.append(messageFiles({ ...first, approval_id: entry.id } as CooMessage), kit.keys.coo.key);
    if (used !== 'accepted') return `first use: ${used}`;
    return kit.append(messageFiles(claudeDispatch({ approval_id: entry.id, idempotency_key: 'second-ride' }, new Date(Date.now() + 2000))), kit.keys.coo.key);
  });

  attack('a dispatch written after its approval expired', 'library', 'APPROVAL_INVALID', async () => {
    const past = new Date(Date.now() - 7200_000);
    const later = claudeDispatch({}, new Date());
    const entry = approval({ request_hash: dispatchRequestHash(later), created_at: isoSeconds(past), expires_at: isoSeconds(addSeconds(past, 60)) }, past);
    await kit.append([entry], kit.keys.ceo.key);
    return kit.append(messageFiles({ ...later, approval_id: entry.id } as CooMessage), kit.keys.coo.key);
  });

  attack('a dispatch backdated to before its approval', 'library', 'APPROVAL_INVALID', async () => {
    const early = claudeDispatch();
    const entry = approval({ request_hash: dispatchRequestHash(early) });
    await kit.append([entry], kit.keys.ceo.key);
    return kit.append(messageFiles({ ...early, approval_id: entry.id } as CooMessage), kit.keys.coo.key);
  });

  attack('a retry approval for a dispatch that succeeded or never ran', 'library', 'ATTEMPT_INVALID', async () => {
    const message = dispatchEnvelope();
    await kit.append(messageFiles(message), kit.keys.coo.key);
    return kit.append([approval({ approves: 'retry', request_hash: null, message_id: message.message_id, attempt_number: 2 })], kit.keys.ceo.key);
  });

  attack('a retry approval for an attempt other than the next', 'library', 'ATTEMPT_INVALID', async () => {
    const message = dispatchEnvelope();
    await kit.append(messageFiles(message), kit.keys.coo.key);
    await kit.append([claim(message, 1), failedReceipt(message, 1)], kit.keys.coo.key);
    return kit.append([approval({ approves: 'retry', request_hash: null, message_id: message.message_id, attempt_number: 3 })], kit.keys.ceo.key);
  });

  attack('a claim on an approved retry after the approval expired', 'library', 'ATTEMPT_INVALID', async () => {
    const message = dispatchEnvelope();
    await kit.append(messageFiles(message), kit.keys.coo.key);
    await kit.append([claim(message, 1), failedReceipt(message, 1)], kit.keys.coo.key);
    // Given two hours ago for an hour; the claim is written now (one dated ahead of its writer's clock is refused as CLOCK_SKEW before this rule is reached).
    const entry = approval({ approves: 'retry', request_hash: null, message_id: message.message_id, attempt_number: 2 }, addSeconds(new Date(), -7200));
    expect(await kit.append([entry], kit.keys.ceo.key)).toBe('accepted');
    return kit.append([claim(message, 2, isoSeconds(new Date()))], kit.keys.coo.key);
  });

  attack('an approval pushed past the writer by an intruder with stock git', 'hook', 'SIGNER_UNKNOWN', () => kit.push({ [approval().path]: approval().bytes }, { key: kit.keys.intruder.file }));
});

/**
 * A CEO rejection is final: an approval of the request hash it refused, or of the next attempt of the
 * dispatch it refused, is refused by the validator wherever it is written (the writer, the CLI, a
 * stock-git push through the hook) and reported by `coo verify` when forced in behind its back.
 */
describe("the CEO's rejection stands", () => {
  const rejectedHash = async (fill: string): Promise<string> => {
    const requestHash = `sha256:${fill.repeat(64)}`;
    await rejectRequest({ ledger: kit.world.ledger, key: kit.keys.ceo.key, now: new Date(), requestHash, reason: 'Too wide a scope.' });
    return requestHash;
  };

  attack('an approval of a request hash the CEO rejected, through the writer', 'library', 'APPROVAL_REJECTED', async () =>
    codeOf(async () => approve({ ledger: kit.world.ledger, key: kit.keys.ceo.key, now: new Date(), reason: 'yes after all', requestHash: await rejectedHash('1') })),
  );

  attack('an approval of the next attempt of a dispatch the CEO rejected, through the writer', 'library', 'APPROVAL_REJECTED', async () => {
    const message = dispatchEnvelope();
    await kit.append(messageFiles(message), kit.keys.coo.key);
    await kit.append([claim(message, 1), failedReceipt(message, 1)], kit.keys.coo.key);
    await rejectRequest({ ledger: kit.world.ledger, key: kit.keys.ceo.key, now: new Date(), messageId: message.message_id, reason: 'Not again.' });
    return codeOf(() => approve({ ledger: kit.world.ledger, key: kit.keys.ceo.key, now: new Date(), reason: 'yes after all', messageId: message.message_id }));
  });

  attack('a retry approval written by hand for the next attempt the CEO rejected', 'library', 'APPROVAL_REJECTED', async () => {
    const message = dispatchEnvelope();
    await kit.append(messageFiles(message), kit.keys.coo.key);
    await kit.append([claim(message, 1), failedReceipt(message, 1)], kit.keys.coo.key);
    await rejectRequest({ ledger: kit.world.ledger, key: kit.keys.ceo.key, now: new Date(), messageId: message.message_id, reason: 'Not again.' });
    return kit.append([approval({ approves: 'retry', request_hash: null, message_id: message.message_id, attempt_number: 2 })], kit.keys.ceo.key);
  });

  attack('coo approve of a request hash the CEO rejected', 'cli', 'APPROVAL_REJECTED', async () => {
    const requestHash = await rejectedHash('2');
    const result = coo(['approve', '--ledger', kit.world.gitdir, '--ceo-key', kit.keys.ceo.file, '--request', requestHash, '--reason', 'yes after all']);
    if (result.status === 0) return 'accepted';
    const code = /^coo: ([A-Z_]+):/.exec(result.stderr)?.[1] ?? 'DECLINED';
    return code === 'APPROVAL_REJECTED' && !/rejection stands at msg_/.test(result.stderr) ? 'APPROVAL_REJECTED without naming the rejection' : code;
  });

  attack('an approval of a rejected request hash pushed with stock git', 'hook', 'APPROVAL_REJECTED', async () => {
    const entry = approval({ request_hash: await rejectedHash('3') });
    return kit.push({ [entry.path]: entry.bytes }, { key: kit.keys.ceo.file });
  });

  attack("an approval of a rejected request hash written behind the hook's back", 'verify', 'APPROVAL_REJECTED', async () => {
    const entry = approval({ request_hash: await rejectedHash('4') });
    let codes: string[] = [];
    await kit.bypass({ [entry.path]: entry.bytes }, { key: kit.keys.ceo.file }, () => {
      codes = kit.verifyCodes();
    });
    return firstOr(codes, 'APPROVAL_REJECTED');
  });

  it('accepts the same approval of a request no rejection names: the attacks above are refused for the rejection alone', async () => {
    const entry = approval({ request_hash: `sha256:${'5'.repeat(64)}` });
    expect(await kit.push({ [entry.path]: entry.bytes }, { key: kit.keys.ceo.file })).toBe('accepted');
  });
});

describe('dispatches the runner could not execute', () => {
  attack('a dispatch naming another executor than its target runs', 'library', 'SCHEMA_INVALID', () => {
    const message = dispatchEnvelope() as EaDispatchMessage;
    return kit.append(messageFiles({ ...message, dispatch: { ...message.dispatch, executor: 'claude_code' } }), kit.keys.coo.key);
  });

  attack('a dispatch pinned to a branch name instead of a commit', 'library', 'SCHEMA_INVALID', () => {
    const message = dispatchEnvelope() as EaDispatchMessage;
    return kit.append(messageFiles({ ...message, dispatch: { ...message.dispatch, base_ref: 'main' } }), kit.keys.coo.key);
  });

  attack('a dispatch whose branch name git would refuse or read as an option', 'library', 'SCHEMA_INVALID', () => {
    const message = dispatchEnvelope() as EaDispatchMessage;
    return kit.append(messageFiles({ ...message, dispatch: { ...message.dispatch, branch_name: '-main/..' } }), kit.keys.coo.key);
  });

  attack('a dispatch without its task', 'library', 'SCHEMA_INVALID', () => kit.append(messageFiles(dispatchEnvelope({ payload_ref: null, payload_hash: null })), kit.keys.coo.key));

  attack('a dispatch whose first attempt id is not the lane\'s', 'library', 'ATTEMPT_INVALID', () => {
    const message = dispatchEnvelope() as EaDispatchMessage;
    return kit.append(messageFiles({ ...message, dispatch: { ...message.dispatch, attempt_id: 'ea_attempt_chosen_by_hand' } }), kit.keys.coo.key);
  });

  attack('a dispatch whose executor time box exceeds its runtime budget', 'library', 'POLICY_LIMIT', () => {
    const message = dispatchEnvelope() as EaDispatchMessage;
    return kit.append(messageFiles({ ...message, dispatch: { ...message.dispatch, timeout_seconds: 3000 } }), kit.keys.coo.key);
  });

  attack('a dispatch to an execution agent the registry gives no executor', 'library', 'POLICY_INTENT_NOT_ALLOWED', async () => {
    const { appendTrustVersion } = await import('../../src/ledger/trust-update.js');
    const state = await kit.world.ledger.state();
    const registry = state.registry!.doc;
    await appendTrustVersion(
      kit.world.ledger,
      { role: 'registry', document: { ...registry, version: undefined, actors: [...registry.actors, { id: 'ea.bare', class: 'execution_agent', keys: [] }] } },
      kit.keys.ceo.key,
      new Date(),
    );
    const policy = state.policy!.doc;
    await appendTrustVersion(kit.world.ledger, { role: 'policy', document: { ...policy, version: undefined, edges: [...policy.edges, { from: 'coo.*', to: 'ea.bare', intents: ['ea_dispatch'], requires: [] }] } }, kit.keys.ceo.key, new Date());
    return kit.append(messageFiles(dispatchEnvelope({ target_actor: 'ea.bare' })), kit.keys.coo.key);
  });
});

/**
 * An execution agent that attacks the runner's evidence, as `coo watch --ea-command` runs it: a
 * script that does one thing in its worktree and prints a valid `codex exec --json` stream. The
 * promise under attack: what the receipt hashes, what the COO signs and what the verification ran
 * on are the same bytes, and every attempt ends in a receipt that fits, whatever the agent left.
 */
describe('a hostile execution agent', () => {
  const place = hostilePlaces(dir, 'hostile');

  /** One dispatch whose agent does `action` (then prints `stream`), run by `coo watch --once`: the place, the runner's run and the first receipt. */
  async function attempted(name: string, action: string, options: { stream?: string; dispatch?: Parameters<typeof dispatchTo>[2]; files?: Record<string, string>; timeoutMs?: number; isolation?: 'auto' | 'none'; env?: NodeJS.ProcessEnv } = {}) {
    const where = await place(name, options.files);
    const agent = agentScript(where.world.dir, action, options.stream);
    const { messageId } = await dispatchTo(where, name, options.dispatch);
    const watch = watchOnce(where, agent, { ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }), ...(options.isolation === undefined ? {} : { isolation: options.isolation }), ...(options.env === undefined ? {} : { env: options.env }) });
    const [receipt] = watch.hung ? [] : await receiptsFor(where, messageId);
    return { where, agent, messageId, watch, receipt, unreceipted: watch.hung ? 'hung' : `no receipt (exit ${watch.status})` };
  }

  /** The one-byte-identity check: each listed file's hash is its blob's in the signed head and what the verification printed for it. */
  async function sameBytes(where: HostilePlace, messageId: string, watch: WatchRun): Promise<string> {
    if (watch.hung) return 'hung';
    const [receipt] = await receiptsFor(where, messageId);
    if (receipt === undefined) return 'no receipt';
    const head = receipt['head_sha'] as string | null;
    if (head === null) return `no head (${codesOf(receipt).join(', ')})`;
    const log = (await where.world.ledger.readFile((receipt['attachments'] as Array<{ path: string }>).find((item) => item.path.endsWith('verify-01.log'))!.path))!.toString('utf8');
    const printed = new Map(log.split('\n').flatMap((line) => (/^[0-9a-f]{64} {2}/.test(line) ? [[line.slice(66), `sha256:${line.slice(0, 64)}`] as const] : [])));
    for (const file of receipt['file_hashes'] as Array<{ path: string; sha256: string | null }>) {
      if (file.sha256 === null) continue;
      const blob = execFileSync('git', ['-C', where.repo, 'cat-file', 'blob', `${head}:${file.path}`]);
      if (sha256Ref(blob) !== file.sha256) return `accepted: the receipt hashes ${file.path} as ${file.sha256}, the signed head holds ${sha256Ref(blob)}`;
      if (printed.get(file.path) !== file.sha256) return `accepted: the verification ran on ${file.path} as ${printed.get(file.path) ?? 'nothing'}, the receipt says ${file.sha256}`;
    }
    return 'refused';
  }

  /** Whether every branch of the target repository that holds a commit past the base is named, with that head, by a receipt. */
  async function onlyReceiptedCommits(where: HostilePlace, messageId: string): Promise<boolean> {
    const receipts = await receiptsFor(where, messageId);
    const named = new Set(receipts.filter((receipt) => receipt['branch'] !== null).map((receipt) => `${String(receipt['branch'])} ${String(receipt['head_sha'])}`));
    const branches = git(['for-each-ref', '--format=%(refname:short) %(objectname)', 'refs/heads/coo/'], { cwd: where.repo }).trim().split('\n').filter(Boolean);
    return branches.every((line) => line.endsWith(` ${where.base}`) || named.has(line));
  }

  const FIX = "printf 'export const add = (a, b) => a + b;\\n' > src/add.js";
  const blockers = (receipt: Record<string, unknown>): string => JSON.stringify(receipt['blockers']);

  attack('a hostile agent: an in-scope .gitattributes with ident rewrites the work between the worktree and the signed commit', 'runner', 'refused', async () => {
    const { where, messageId, watch } = await attempted('ident', "printf 'src/add.js ident\\n' > .gitattributes\nprintf 'export const add = (a, b) => a - b; // $Id: a + b $\\n' > src/add.js", {
      dispatch: { scope: ['src/**', '.gitattributes'], verify: ['sha256sum src/add.js .gitattributes; sh test.sh'] },
    });
    return sameBytes(where, messageId, watch);
  });

  attack('a hostile agent: an in-scope .gitattributes with eol=crlf rewrites the work between the worktree and the signed commit', 'runner', 'refused', async () => {
    const { where, messageId, watch } = await attempted('crlf', "printf '* text eol=crlf\\n' > .gitattributes\nprintf 'export const add = (a, b) => a + b;\\r\\n' > src/add.js", {
      dispatch: { scope: ['src/**', '.gitattributes'], verify: ['sha256sum src/add.js .gitattributes; sh test.sh'] },
    });
    return sameBytes(where, messageId, watch);
  });

  attack('a hostile agent: an .npmrc with script-shell=/bin/true where the runner makes its verification HOME passes npm test on unfixed work', 'runner', 'refused', async () => {
    // Every place the runner's scratch was or could be, as seen from the agent's own HOME.
    const { receipt, unreceipted } = await attempted('npmrc', 'for d in "$HOME/../verify-home" "$HOME/.." "$HOME" "$PWD/.."; do mkdir -p "$d"; printf \'script-shell=/bin/true\\n\' > "$d/.npmrc"; done', {
      files: { 'package.json': '{ "name": "calc", "private": true, "scripts": { "test": "sh test.sh" } }\n' },
      dispatch: { verify: ['npm test'] },
    });
    if (receipt === undefined) return unreceipted;
    return receipt['status'] === 'succeeded' ? 'accepted' : codesOf(receipt).includes('tests_failed') ? 'refused' : codesOf(receipt).join(', ');
  });

  attack('a hostile agent: its .git link replaced by a FIFO', 'runner', 'refused', async () => {
    const { receipt, watch, unreceipted } = await attempted('fifo-git', 'rm -f .git && mkfifo .git', { timeoutMs: 45_000 });
    return receipt !== undefined && watch.status === 0 && codesOf(receipt).includes('scope_violation') ? 'refused' : unreceipted;
  });

  attack('a hostile agent: a FIFO .gitignore, a FIFO, a socket, a link to /dev/zero and a huge sparse file in its work', 'runner', 'refused', async () => {
    const { where, messageId, receipt, unreceipted } = await attempted(
      'special',
      [FIX, 'mkfifo src/.gitignore src/pipe', 'ln -s /dev/zero src/zero', 'python3 -c "import socket; socket.socket(socket.AF_UNIX).bind(\'src/sock\')"', 'truncate -s 80M src/huge.bin'].join('\n'),
      { timeoutMs: 45_000 },
    );
    if (receipt === undefined) return unreceipted;
    const named = ['src/.gitignore', 'src/pipe', 'src/sock', 'src/zero', 'src/huge.bin'].every((path) => blockers(receipt).includes(path));
    return receipt['status'] === 'failed' && codesOf(receipt).includes('work_too_large') && named && (await onlyReceiptedCommits(where, messageId)) ? 'refused' : `receipted as ${blockers(receipt)}`;
  });

  attack('a hostile agent: 600 files with long names, more than a receipt can list', 'runner', 'refused', async () => {
    const { where, agent, messageId, receipt, unreceipted } = await attempted('long-list', `d="src/${'a'.repeat(200)}/${'b'.repeat(200)}"; mkdir -p "$d"; i=0; while [ $i -lt 600 ]; do printf "x$i\\n" > "$d/${'c'.repeat(60)}-$i.js"; i=$((i+1)); done`);
    if (receipt === undefined) return unreceipted;
    const artifact = (receipt['attachments'] as Array<{ path: string; sha256: string }>).find((item) => item.path.endsWith('changes.json'));
    const listed = artifact === undefined ? null : (await where.world.ledger.readFile(artifact.path))!;
    const whole = listed !== null && sha256Ref(listed) === artifact!.sha256 && (JSON.parse(listed.toString('utf8')) as { changes: unknown[] }).changes.length === 600;
    // A second pass finds the attempt receipted: nothing is left claimed to be called interrupted later.
    watchOnce(where, agent);
    const again = await receiptsFor(where, messageId);
    return receipt['status'] === 'failed' && codesOf(receipt).includes('work_too_large') && whole && again.length === 1 && (await onlyReceiptedCommits(where, messageId)) ? 'refused' : `receipted as ${blockers(receipt)}`;
  });

  attack('a hostile agent: a file name with a backslash and a path over 512 characters', 'runner', 'refused', async () => {
    const { where, messageId, receipt, unreceipted } = await attempted('names', `printf 'x\\n' > 'src/a\\b.js'; d="src/${'d'.repeat(250)}/${'e'.repeat(250)}"; mkdir -p "$d"; printf 'x\\n' > "$d/${'f'.repeat(40)}.js"`);
    if (receipt === undefined) return unreceipted;
    const named = blockers(receipt).includes('src/a\\\\b.js') && blockers(receipt).includes('f.js');
    return receipt['status'] === 'failed' && codesOf(receipt).includes('scope_violation') && named && (await onlyReceiptedCommits(where, messageId)) ? 'refused' : `receipted as ${blockers(receipt)}`;
  });

  attack('a hostile agent: 2,500 files of ignored build output beside a correct fix', 'runner', 'refused', async () => {
    const { where, receipt, unreceipted } = await attempted('ignored', `${FIX}; mkdir -p build; i=0; while [ $i -lt 2500 ]; do printf "$i" > build/out-$i.o; i=$((i+1)); done`);
    if (receipt === undefined) return unreceipted;
    const committed = git(['ls-tree', '-r', '--name-only', receipt['head_sha'] as string], { cwd: where.repo });
    // Ignored build output is not work: not listed, not committed; the fix is.
    return receipt['status'] === 'succeeded' && JSON.stringify(receipt['files_changed']) === '["src/add.js"]' && !committed.includes('build/') ? 'refused' : `receipted as ${String(receipt['status'])} ${blockers(receipt)}`;
  });

  attack('a hostile agent: a stream of 250 commands, more than a receipt lists', 'runner', 'refused', async () => {
    const commands = Array.from({ length: 250 }, (_, i) => `printf '%s\\n' '${JSON.stringify({ type: 'item.completed', item: { id: `c${i}`, type: 'command_execution', command: `echo ${i}`, exit_code: 0, status: 'completed' } })}'`).join('\n');
    const { where, receipt, unreceipted } = await attempted('commands', FIX, { stream: `${commands}\n${CODEX_DONE}` });
    if (receipt === undefined) return unreceipted;
    const artifact = (receipt['attachments'] as Array<{ path: string }>).find((item) => item.path.endsWith('commands.json'));
    const whole = artifact !== undefined && (JSON.parse((await where.world.ledger.readFile(artifact.path))!.toString('utf8')) as unknown[]).length === 250;
    const listed = receipt['commands_run'] as string[];
    return whole && (receipt['warnings'] as string[]).includes('commands_in_artifact') && listed.at(-1) === 'sh test.sh' && listed.length === 200 ? 'refused' : `receipted as ${blockers(receipt)}`;
  });

  attack('a hostile agent: without bubblewrap, it moves its own branch to a commit of its own', 'runner', 'refused', async () => {
    const { where, receipt, unreceipted } = await attempted('own-branch', `${FIX}; git update-ref "refs/heads/$(git symbolic-ref --short HEAD)" "$(git -c user.name=x -c user.email=x@x commit-tree HEAD^{tree} -p HEAD -m sneaky)"`, { isolation: 'none' });
    if (receipt === undefined) return unreceipted;
    const branchHead = git(['rev-parse', `coo/${String(receipt['message_id'])}`], { cwd: where.repo }).trim();
    // The receipt names the COO's commit and no branch; the runner did not put its commit over the agent's, nor the agent's under a receipt.
    return receipt['status'] === 'failed' && codesOf(receipt).includes('commit_partial') && receipt['branch'] === null && receipt['head_sha'] !== branchHead && branchHead !== where.base ? 'refused' : `receipted as ${String(receipt['branch'])} ${blockers(receipt)}`;
  });

  attack('a hostile agent: it prints the provider key it was handed base64-encoded (at three alignments, and wrapped at 76 columns) in its stream, its final message and its stderr', 'runner', 'refused', async () => {
    const key = 'sk-proj-HostileBase64Key0123456789abcdefXYZ';
    // Each encoding of the key, on one line; the wrapped one with its line breaks written as JSON escapes them.
    const action = [
      FIX,
      'B0=$(printf %s "$OPENAI_API_KEY" | base64 -w0)',
      "B1=$(printf 'k=%s' \"$OPENAI_API_KEY\" | base64 -w0)",
      "B2=$(printf 'key=%s;' \"$OPENAI_API_KEY\" | base64 -w0)",
      "W=$(printf '%080d%s%040d' 0 \"$OPENAI_API_KEY\" 0 | base64 | sed ':a;N;$!ba;s/\\n/\\\\n/g')",
      "printf '%080d%s%040d' 0 \"$OPENAI_API_KEY\" 0 | base64 >&2",
    ].join('\n');
    const stream = [
      `printf '%s\\n' '${JSON.stringify({ type: 'thread.started', thread_id: 'thread-hostile' })}'`,
      `printf '{"type":"item.completed","item":{"id":"i0","type":"command_execution","command":"base64","aggregated_output":"%s","exit_code":0,"status":"completed"}}\\n' "$W"`,
      `printf '{"type":"item.completed","item":{"id":"i1","type":"agent_message","text":"Done. %s %s %s"}}\\n' "$B0" "$B1" "$B2"`,
      `printf '%s\\n' '${JSON.stringify({ type: 'turn.completed', usage: { input_tokens: 100, cached_input_tokens: 0, output_tokens: 10 } })}'`,
    ].join('\n');
    const { where, receipt, unreceipted } = await attempted('base64-key', action, { stream, env: { OPENAI_API_KEY: key } });
    if (receipt === undefined) return unreceipted;
    // Every object of the ledger, its line breaks (as written and JSON-escaped) taken out so a wrapped encoding reads whole.
    const ledger = git(['--git-dir', where.world.gitdir, 'cat-file', '--batch-all-objects', '--batch']);
    const joined = ledger.replace(/\r|\n|\\r|\\n/g, '');
    const n = Buffer.byteLength(key);
    // What of the base64 of anything holding the key depends on the key alone, at each alignment.
    const cores = [0, 1, 2].map((k) => Buffer.concat([Buffer.alloc(k), Buffer.from(key)]).toString('base64').slice(Math.ceil((8 * k) / 6), Math.floor((8 * (k + n)) / 6)));
    const leaked = [key, Buffer.from(key).toString('base64'), ...cores].filter((form) => joined.includes(form) || ledger.includes(form));
    if (leaked.length > 0) return 'accepted';
    // The agent did print it: the receipt's artifacts hold the marker where the encoded key stood.
    return ledger.includes('[removed: OPENAI_API_KEY (base64)]') ? 'refused' : 'the agent printed no encoded key';
  });

  attack('a hostile agent: folders and files where the runner made its own scratch (evidence.index, verify-home)', 'runner', 'refused', async () => {
    const { where, messageId, receipt, unreceipted } = await attempted('scratch', `${FIX}; mkdir -p "$HOME/../evidence.index"; : > "$HOME/../verify-home"`);
    if (receipt === undefined) return unreceipted;
    return receipt['status'] === 'succeeded' && (await onlyReceiptedCommits(where, messageId)) ? 'refused' : `receipted as ${String(receipt['status'])} ${blockers(receipt)}`;
  });
});

describe('a dispatch that cannot run as written, refused before anything is claimed or paid for', () => {
  const place = hostilePlaces(dir, 'refused');

  attack('a dispatch whose branch is not a plain new branch: refs/heads/main, heads/main, HEAD, the default branch, an existing branch, a tag', 'library', 'USAGE', async () => {
    const where = await place('branches');
    git(['branch', 'feature'], { cwd: where.repo });
    git(['tag', 'v1'], { cwd: where.repo });
    const codes: string[] = [];
    for (const branch of ['refs/heads/main', 'heads/main', 'HEAD', 'main', 'feature', 'v1']) codes.push(`${branch}: ${await codeOf(() => dispatchTo(where, `branch-${branch}`, { branch }))}`);
    const wrong = codes.filter((code) => !code.endsWith(': USAGE'));
    return wrong.length === 0 ? 'USAGE' : wrong.join('; ');
  });

  attack('a dispatch written past the writer with a branch that resolves to main (heads/main, refs/heads/main, HEAD)', 'library', 'SCHEMA_INVALID', async () => {
    const codes: string[] = [];
    for (const branch of ['heads/main', 'refs/heads/main', 'HEAD']) {
      const message = dispatchEnvelope({ idempotency_key: `shadow-${branch}` }) as EaDispatchMessage;
      codes.push(await kit.append(messageFiles({ ...message, dispatch: { ...message.dispatch, branch_name: branch } }), kit.keys.coo.key));
    }
    return codes.every((code) => code === 'SCHEMA_INVALID') ? 'SCHEMA_INVALID' : codes.join(', ');
  });

  attack('a dispatch riding on the CEO\'s approval of the same request for another branch', 'library', 'APPROVAL_INVALID', async () => {
    const base = claudeDispatch({ idempotency_key: 'approved-branch' }, new Date(Date.now() + 3000));
    const approved = { ...base, dispatch: { ...base.dispatch, branch_name: 'coo/approved-branch' } } as EaDispatchMessage;
    const entry = approval({ request_hash: dispatchRequestHash(approved) });
    await kit.append([entry], kit.keys.ceo.key);
    return kit.append(messageFiles({ ...approved, dispatch: { ...approved.dispatch, branch_name: 'coo/another-branch' }, approval_id: entry.id } as CooMessage), kit.keys.coo.key);
  });

  attack('a task over what an executor takes as its one argument, once its acceptance criteria are added', 'library', 'USAGE', async () => {
    const where = await place('big-task');
    // The task alone is within the policy's prompt limit (64 KiB); with its criteria the executor's argument is over 100 KiB.
    return codeOf(() => dispatchTo(where, 'big-task', { task: 'Fix add(). '.repeat(5 * 1024), accept: Array.from({ length: 30 }, (_, i) => `criterion ${i}: ${'x'.repeat(1900)}`) }));
  });

  attack('a --task-file that is a FIFO nobody writes', 'cli', 'USAGE', async () => {
    const where = await place('fifo-task');
    const fifo = join(where.world.dir, 'task.fifo');
    execFileSync('mkfifo', [fifo]);
    const result = spawnSync(process.execPath, [COO, 'dispatch', '--json', '--ledger', where.world.gitdir, '--key', where.keyFile, '--to', 'ea.codex', '--repo', where.repo, '--task-file', fifo, '--scope', 'src', '--accept', 'ok', '--verify', 'true'], { encoding: 'utf8', timeout: 20_000, killSignal: 'SIGKILL' });
    if ((result.error as NodeJS.ErrnoException | undefined)?.code === 'ETIMEDOUT') return 'hung';
    return /^coo: ([A-Z_]+):/m.exec(result.stderr)?.[1] ?? `exit ${result.status}`;
  });

  attack('a scope given as a folder (src) for work inside it', 'runner', 'refused', async () => {
    const where = await place('folder-scope');
    const agent = agentScript(where.world.dir, "printf 'export const add = (a, b) => a + b;\\n' > src/add.js");
    const { messageId } = await dispatchTo(where, 'folder-scope', { scope: ['src'] });
    watchOnce(where, agent);
    const [receipt] = await receiptsFor(where, messageId);
    // Refused: the folder is taken as its contents, so in-scope work is not failed as out of scope.
    return receipt?.['status'] === 'succeeded' ? 'refused' : `receipted as ${JSON.stringify(receipt?.['blockers'])}`;
  });
});

describe('a runner that fails inside an attempt, and one that recovers after a crash', () => {
  const place = hostilePlaces(dir, 'runner');
  const strangers: ChildProcess[] = [];
  afterAll(() => {
    for (const stranger of strangers) stranger.kill('SIGKILL');
  });

  attack('an executor adapter that throws inside the attempt, after the claim', 'runner', 'refused', async () => {
    const where = await place('throws');
    const executor: Executor = { name: 'codex', isolated: true, check: () => undefined, handedSecrets: () => [], run: () => Promise.reject(new Error('the adapter broke')) };
    const runner = where.world.runner({ repo: where.repo, executors: () => executor });
    const { messageId } = await dispatchTo(where, 'throws');
    await runner.runOnce();
    const [receipt] = await receiptsFor(where, messageId);
    return receipt?.['status'] === 'failed' && codesOf(receipt).join() === 'runner_error' && JSON.stringify(receipt['blockers']).includes('INTERNAL: the adapter broke') ? 'refused' : `receipted as ${JSON.stringify(receipt ?? null)}`;
  });

  /** Whether the process is gone (or a zombie waiting for its parent, this test). */
  const gone = (pid: number): boolean => {
    try {
      return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.startsWith('Z');
    } catch {
      return true;
    }
  };

  /** A dispatch whose runner died after its claim, with `record(pid)` in its executor.pid naming a live process of this test; recovered by a second runner. */
  async function recoverNaming(name: string, record: (pid: number) => string): Promise<{ readonly killed: boolean; readonly codes: string[] }> {
    const where = await place(name);
    const agent = agentScript(where.world.dir, 'true');
    const { messageId } = await dispatchTo(where, name);
    const first = watchOnce(where, agent, { env: { COO_FAILPOINT: 'after-claim' } });
    expect(first.signal).toBe('SIGKILL');
    const attemptId = (await where.world.ledger.state()).messages.get(messageId)!.attempts[0]!.attemptId;
    const stranger = spawn('sleep', ['300'], { detached: true, stdio: 'ignore' });
    strangers.push(stranger);
    const folder = join(where.stateDir, 'dispatch', attemptId);
    mkdirSync(folder, { recursive: true });
    writeFileSync(join(folder, 'executor.pid'), record(stranger.pid!));
    watchOnce(where, agent);
    const [receipt] = await receiptsFor(where, messageId);
    return { killed: gone(stranger.pid!), codes: codesOf(receipt) };
  }

  attack('crash recovery with an executor.pid whose process is no longer the executor (a pid alone, or another start time)', 'runner', 'refused', async () => {
    const bare = await recoverNaming('pid-alone', (pid) => `${pid}\n`);
    const reused = await recoverNaming('pid-reused', (pid) => `${pid} 1\n`);
    // The same recovery with the process's own start time ends it: the check can tell the two apart.
    const own = await recoverNaming('pid-own', (pid) => `${pid} ${readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[19]}\n`);
    expect([bare.codes, reused.codes, own.codes]).toEqual([['interrupted'], ['interrupted'], ['interrupted']]);
    if (bare.killed || reused.killed) return 'accepted';
    return own.killed ? 'refused' : 'recovery ended nothing, not even its own executor';
  });
});
