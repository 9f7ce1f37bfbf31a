import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { invisibleCharacters } from '../../src/util/invisible.js';
import { coo } from '../helpers/cli.js';
import { worlds } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * The HTML report a person opens shows the ledger's text as text: markup is escaped, and a
 * bidirectional override, a zero-width character or a control in a question is shown as its code
 * point, never left to reorder or hide what the auditor reads.
 */

const fresh = worlds(tempDir('report-text-'));

describe('coo report --html with hostile text in a question', () => {
  it('escapes markup and shows each acting character as its code point', async () => {
    const w = await fresh();
    // Shown as written, the override turns "pay 100 to evil" around on screen; the zero-width space hides in a word.
    const question = `Approve \u202Elive ot 001 yap\u202C now? <img src=x onerror='alert(1)'> ap\u200Bprove`;
    await w.consult({ question });
    const out = join(w.dir, 'report.html');
    const run = coo(['report', '--ledger', w.gitdir, '--html', out]);
    expect(run.status, run.stderr).toBe(0);
    const page = readFileSync(out, 'utf8');
    expect(page).toContain('Approve \\u202elive ot 001 yap\\u202c now? &lt;img src=x onerror=&#39;alert(1)&#39;&gt; ap\\u200bprove');
    expect(page).not.toContain('<img');
    const acting = [...page.matchAll(invisibleCharacters())].map((match) => match[0]).filter((char) => char !== '\n' && char !== '\t');
    expect(acting).toEqual([]);
  }, 60_000);
});
