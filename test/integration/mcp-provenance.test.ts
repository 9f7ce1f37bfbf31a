import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { listSessions } from '../../src/audit/sessions.js';
import { requestFingerprint } from '../../src/authority/idempotency.js';
import { appendEnvelope } from '../../src/ledger/append-envelope.js';
import { manifestPath, messageFolder, promptPath } from '../../src/ledger/layout.js';
import type { AaConsultMessage, CooMessage } from '../../src/schema/message.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { newMessageId } from '../../src/util/ids.js';
import { coo, json } from '../helpers/cli.js';
import { codeOfAsync } from '../helpers/codes.js';
import { worlds, type World } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';

const fresh = worlds(tempDir());

/** Appends a copy of a queued consult under a new id, with the fields given (the prompt and manifest go along). */
async function appendCopy(w: World, original: AaConsultMessage, fields: Record<string, unknown>): ReturnType<typeof appendEnvelope> {
  const id = newMessageId(Date.parse(original.created_at));
  const folder = messageFolder(id, original.created_at);
  const envelope = { ...original, message_id: id, payload_ref: promptPath(folder), context_pin: { ...original.context_pin, context_manifest_ref: manifestPath(folder) }, ...fields };
  const artifacts = new Map([
    ['prompt.md', (await w.ledger.readFile(original.payload_ref))!],
    ['context-manifest.yaml', (await w.ledger.readFile(original.context_pin.context_manifest_ref))!],
  ]);
  return appendEnvelope(w.ledger, Buffer.from(toYaml(envelope)), artifacts, w.actors.coo, new Date());
}

describe('where a request came from (submitted_via)', () => {
  it('is signed into an envelope that came over MCP, and coo show, coo report and the sessions listing name it; an envelope without it reads as before', async () => {
    const w = await fresh();
    const typed = await w.consult({ idempotencyKey: 'typed-1' });
    const agent = await appendCopy(w, typed.envelope, { idempotency_key: 'agent-1', submitted_via: 'mcp' });
    const env = { COO_LEDGER: w.gitdir };

    const shownAgent = coo(['show', agent.messageId], { env });
    expect(shownAgent.status, shownAgent.stderr).toBe(0);
    expect(shownAgent.stdout).toContain('  submitted via mcp');
    expect(json(coo(['show', agent.messageId, '--json'], { env }))).toMatchObject({ submitted_via: 'mcp', envelope: { submitted_via: 'mcp' } });
    const shownTyped = coo(['show', typed.messageId], { env });
    expect(shownTyped.stdout).not.toContain('submitted via');
    expect(json(coo(['show', typed.messageId, '--json'], { env }))['submitted_via']).toBeNull();

    const html = join(w.dir, 'report.html');
    expect(coo(['report', '--html', html], { env }).status).toBe(0);
    const page = readFileSync(html, 'utf8');
    expect(page.match(/via mcp/g)).toHaveLength(1);
    expect(page.slice(page.indexOf(agent.messageId)).indexOf('via mcp')).toBeLessThan(page.slice(page.indexOf(agent.messageId)).indexOf('</tr>'));

    const { sessions } = listSessions(await w.ledger.state(), { limit: 10 });
    expect(sessions.map((session) => [session.message_id, session.submitted_via])).toEqual([
      [agent.messageId, 'mcp'],
      [typed.messageId, null],
    ]);
    const verified = coo(['verify', '--no-checkpoint'], { env });
    expect(verified.status, verified.stdout).toBe(0);
  });

  it('leaves the request fingerprint alone: a CLI retry of a request an agent made over MCP returns the same message', async () => {
    const w = await fresh();
    const typed = await w.consult({ idempotencyKey: 'first' });
    const agent = await appendCopy(w, typed.envelope, { idempotency_key: 'shared', submitted_via: 'mcp' });
    const retry = await appendCopy(w, typed.envelope, { idempotency_key: 'shared' });
    expect(retry).toMatchObject({ messageId: agent.messageId, existing: true, commit: null });
    const withField: CooMessage = { ...typed.envelope, submitted_via: 'mcp' };
    expect(requestFingerprint(withField)).toBe(requestFingerprint(typed.envelope));
  });

  it('refuses any other value, and nothing lands', async () => {
    const w = await fresh();
    const typed = await w.consult();
    const before = (await w.ledger.state()).seq;
    for (const via of ['cli', 'web', '', 1, null]) {
      expect(await codeOfAsync(() => appendCopy(w, typed.envelope, { idempotency_key: `k-${String(via)}`, submitted_via: via }))).toBe('SCHEMA_INVALID');
    }
    expect((await w.ledger.state()).seq).toBe(before);
  });
});
