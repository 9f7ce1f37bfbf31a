import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { formatPrivateKey } from '../../src/crypto/keys.js';
import type { PanelComparison } from '../../src/audit/panel-comparison.js';
import { coo, json } from '../helpers/cli.js';
import { receiptsOf, worlds } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * A panel as an auditor reads it: `coo show` sets the members' answers side by side (compared by
 * the runner's own code), `coo cite` names every member's receipt, `coo report --html` shows both.
 */
const fresh = worlds(tempDir());
const MEMBERS = ['aa.chatgpt', 'aa.claude', 'aa.gemini'];

describe('a panel in the audit verbs', () => {
  it('is compared by show, cited with every member receipt by cite, and shown by report --html', async () => {
    const w = await fresh({ policy: (policy) => ({ ...policy, panels: [{ name: 'review', from: 'coo.*', members: MEMBERS }] }) });
    // Claude disagrees, with an objection; Gemini's first answer breaks its format and its retry agrees.
    w.server.setModelModes('claude-sonnet-4-6', ['dissent']);
    w.server.setModelModes('gemini-3.1-pro-preview', ['malformed', 'ok']);
    const keyFile = join(w.dir, 'coo.key');
    writeFileSync(keyFile, formatPrivateKey(w.actors.coo), { mode: 0o600 });
    const enqueued = coo(['consult', '--panel', 'review', '--repo', w.target, '--file', 'src/add.ts', '--prompt', 'Is add() correct for NaN?', '--max-runtime', '60', '--json'], { env: { COO_LEDGER: w.gitdir, COO_KEY: keyFile } });
    expect(enqueued.status).toBe(0);
    const queued = json<{ panel_id: string; panel: string; members: Array<{ target: string; message_id: string }> }>(enqueued);
    expect(queued.panel).toBe('review');
    expect(queued.members.map((member) => member.target)).toEqual(MEMBERS);
    await w.runner().runOnce();
    const ids = Object.fromEntries(queued.members.map((member) => [member.target, member.message_id]));
    const receipts = Object.fromEntries(await Promise.all(MEMBERS.map(async (actor) => [actor, await receiptsOf(w, ids[actor]!)] as const)));
    expect(receipts['aa.gemini']!.map((receipt) => receipt['status'])).toEqual(['failed', 'succeeded']);

    const shown = coo(['show', queued.panel_id, '--ledger', w.gitdir, '--json']);
    expect(shown.status).toBe(0);
    const comparison = json<PanelComparison>(shown);
    expect(comparison).toMatchObject({ panel_id: queued.panel_id, name: 'review', answered: MEMBERS, agreement: 'split' });
    expect(comparison.verdicts).toEqual([
      { verdict: 'approve_with_changes', members: ['aa.chatgpt', 'aa.gemini'] },
      { verdict: 'reject', members: ['aa.claude'] },
    ]);
    expect(comparison.objections).toEqual([{ actor: 'aa.claude', objection: expect.stringContaining('add() returns NaN for NaN inputs') }]);
    expect(comparison.members.map((member) => member.attempt)).toEqual([1, 1, 2]);
    const spent = MEMBERS.flatMap((actor) => receipts[actor]!.map((receipt) => receipt['actual_cost_usd'] as number)).reduce((sum, usd) => sum + usd, 0);
    expect(comparison.total_cost_usd).toBeCloseTo(spent, 6);
    const text = coo(['show', queued.panel_id, '--ledger', w.gitdir]).stdout;
    expect(text).toMatch(new RegExp(`^${queued.panel_id} panel review: 3 members, 3 answered; verdicts split: approve_with_changes \\(aa\\.chatgpt, aa\\.gemini\\); reject \\(aa\\.claude\\)`));
    expect(text).toContain('objection: add() returns NaN for NaN inputs');
    const member = coo(['show', ids['aa.claude']!, '--ledger', w.gitdir]).stdout;
    expect(member).toContain(`a member of panel ${queued.panel_id} (review)`);

    const cited = coo(['cite', queued.panel_id, '--ledger', w.gitdir, '--json']);
    expect(cited.status).toBe(0);
    const citation = json<{ verified: boolean; markdown: string }>(cited);
    expect(citation.verified).toBe(true);
    expect(citation.markdown).toContain('verdicts **split**');
    for (const actor of MEMBERS) {
      const last = receipts[actor]![receipts[actor]!.length - 1]!;
      expect(citation.markdown).toContain(`\`${(await w.ledger.state()).messages.get(ids[actor]!)!.attempts.at(-1)!.receipt!.path}\``);
      expect(citation.markdown).toContain(`\`${last['output_hash'] as string}\``);
    }
    const memberCitation = coo(['cite', ids['aa.chatgpt']!, '--ledger', w.gitdir]).stdout;
    expect(memberCitation).toContain(`**Panel** \`${queued.panel_id}\``);
    for (const actor of MEMBERS) expect(memberCitation).toContain(`| ${actor} | \`${ids[actor]!}\` | succeeded |`);

    const page = join(w.dir, 'report.html');
    expect(coo(['report', '--html', page, '--ledger', w.gitdir]).status).toBe(0);
    const html = readFileSync(page, 'utf8');
    expect(html).toContain('<section id="panels"><h2>Panels (1)</h2>');
    expect(html).toContain('<span class="badge warn">split</span>');
    expect(html).toContain('add() returns NaN for NaN inputs');
    for (const actor of MEMBERS) expect(html).toContain((await w.ledger.state()).messages.get(ids[actor]!)!.attempts.at(-1)!.receipt!.path);
  });
});
