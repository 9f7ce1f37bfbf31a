import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import { coo, json } from '../helpers/cli.js';
import { makeWorld } from '../helpers/lane.js';
import { git, gitEnv, run, tempDir } from '../helpers/tmp.js';

/**
 * `coo report` read as an auditor reads it: in a real browser (Debian's Chromium), on a phone's
 * width and a desktop's, from a demo ledger and from one with findings and receipt warnings.
 */
const dir = tempDir();
const demo = join(dir, 'demo');
const artifacts = join(import.meta.dirname, '..', '..', 'test-artifacts');
/** The page's own address: the test serves it, and any other request is one the page must not make. */
const PAGE = 'http://report.invalid/report.html';
let browser: Browser;
let warned = { gitdir: '', messageId: '' };

beforeAll(async () => {
  expect(coo(['demo', '--dir', demo]).status).toBe(0);
  // A consult run without bubblewrap: its receipt says sandbox_unenforced.
  const world = await makeWorld(join(dir, 'world'));
  try {
    const { messageId } = await world.consult();
    expect((await world.runner({ transport: world.transport({ isolation: 'none' }) }).runOnce()).receipts).toBe(1);
    warned = { gitdir: world.gitdir, messageId };
  } finally {
    await world.close();
  }
  // Then a commit behind the hook's back: unsigned, with a file the layout has no place for.
  const work = join(dir, 'tamper');
  git(['clone', '-q', warned.gitdir, work]);
  const seq = Number(/Ledger-Seq: (\d+)/.exec(git(['log', '-1', '--format=%B'], { cwd: work }))![1]) + 1;
  writeFileSync(join(work, 'notes.txt'), 'not a ledger entry\n');
  git(['add', '-A'], { cwd: work });
  git(['commit', '-q', '-m', 'unsigned', '-m', `Ledger-Seq: ${seq}`], { cwd: work, env: gitEnv() });
  git(['--git-dir', warned.gitdir, 'fetch', '-q', work, 'main:refs/heads/main']);
  const { chromium } = await import('playwright-core');
  browser = await chromium.launch({
    executablePath: process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}, 300_000);

afterAll(async () => {
  await browser?.close();
});

interface Reading {
  readonly scrollWidth: number;
  readonly errors: readonly string[];
  readonly outside: readonly string[];
  readonly text: (selector: string) => Promise<string[]>;
  /** Runs a script in the page (a string: this project's types have no DOM) and returns its value. */
  readonly evaluate: <T>(script: string) => Promise<T>;
  readonly close: () => Promise<void>;
}

/** Opens the page at a viewport width, serving it at PAGE and refusing (and noting) every other request. */
async function read(html: string, width: number, screenshot?: string): Promise<Reading> {
  const page = await browser.newPage({ viewport: { width, height: 900 } });
  const errors: string[] = [];
  const outside: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error') errors.push(message.text());
  });
  page.on('pageerror', (error) => errors.push(error.message));
  await page.route('**/*', async (route) => {
    if (route.request().url() === PAGE) return route.fulfill({ status: 200, contentType: 'text/html; charset=utf-8', body: readFileSync(html) });
    outside.push(route.request().url());
    return route.abort();
  });
  await page.goto(PAGE);
  // A string, run in the page: this project's types have no DOM.
  const scrollWidth = (await page.evaluate('Math.max(document.documentElement.scrollWidth, document.body.scrollWidth)')) as number;
  if (screenshot !== undefined) {
    mkdirSync(artifacts, { recursive: true });
    await page.screenshot({ path: join(artifacts, screenshot), fullPage: true });
  }
  return { scrollWidth, errors, outside, text: (selector) => page.locator(selector).allTextContents(), evaluate: async <T>(script: string) => (await page.evaluate(script)) as T, close: () => page.close() };
}

describe('coo report --html', () => {
  it('fits a 390 px and a 1280 px screen with no sideways scrolling, no console error and no outside request', async () => {
    const out = join(dir, 'demo.html');
    expect(coo(['report', '--ledger', join(demo, 'ledger.git'), '--html', out]).status).toBe(0);
    for (const width of [390, 1280]) {
      const page = await read(out, width, `report-demo-${width}.png`);
      try {
        expect(page.scrollWidth).toBeLessThanOrEqual(width);
        expect(page.errors).toEqual([]);
        expect(page.outside).toEqual([]);
      } finally {
        await page.close();
      }
    }
  });

  it('breaks no badge inside a word at 1280 px, and still fits 390 px', async () => {
    const out = join(dir, 'badges.html');
    expect(coo(['report', '--ledger', join(demo, 'ledger.git'), '--html', out]).status).toBe(0);
    // A badge on one line is about one line high (12 px text): a word broken in two doubles it.
    const broken = "[...document.querySelectorAll('.badge')].filter((badge) => badge.getBoundingClientRect().height > 24).map((badge) => badge.textContent)";
    for (const width of [1280, 390]) {
      const page = await read(out, width);
      try {
        expect(page.scrollWidth).toBeLessThanOrEqual(width);
        const badges = await page.evaluate<number>("document.querySelectorAll('#messages .badge').length");
        expect(badges).toBeGreaterThanOrEqual(3);
        if (width === 1280) expect(await page.evaluate<string[]>(broken)).toEqual([]);
      } finally {
        await page.close();
      }
    }
  });

  it('shows each message with its question and the verdict of its advice, and links to the commits that added its envelope and receipt', async () => {
    const out = join(dir, 'messages.html');
    expect(coo(['report', '--ledger', join(demo, 'ledger.git'), '--html', out]).status).toBe(0);
    const page = await read(out, 1280);
    try {
      const rows = await page.text('#messages tr.message');
      const consults = rows.filter((row) => row.includes('aa_consult'));
      expect(consults).toHaveLength(2);
      expect(consults[0]).toContain('Review add() in src/add.ts and its test.');
      expect(consults[0]).toMatch(/advice: approve_with_changes/);
      // The second consult's answer obeyed the injected text and was refused: no verdict is shown as advice.
      expect(consults[1]).toContain('Summarise the maintainer notes');
      expect(consults[1]).not.toContain('advice:');
      const links = await page.evaluate<Array<{ text: string; target: string | null }>>(
        "[...document.querySelectorAll('#messages tr.message a')].map((a) => ({ text: a.textContent, target: document.querySelector(a.getAttribute('href'))?.textContent ?? null }))",
      );
      expect(links.length).toBeGreaterThanOrEqual(6);
      for (const link of links) {
        expect(link.text).toMatch(/^(envelope|receipt \d+) #\d+$/);
        expect(link.target, link.text).toMatch(new RegExp(`^#${link.text.split('#')[1]}`));
        expect(link.target).toMatch(link.text.startsWith('envelope') ? /(aa_consult|ea_dispatch) msg_/ : /receipt msg_/);
      }
    } finally {
      await page.close();
    }
  });

  it('says whether the trust root was pinned, and pinned to another key, finds it', async () => {
    const pinned = join(dir, 'pinned.html');
    expect(coo(['report', '--ledger', join(demo, 'ledger.git'), '--html', pinned, '--trust-root', join(demo, 'keys', 'ceo.pub')]).status).toBe(0);
    const unpinned = join(dir, 'unpinned.html');
    expect(coo(['report', '--ledger', join(demo, 'ledger.git'), '--html', unpinned]).status).toBe(0);
    const ceo = /SHA256:[A-Za-z0-9+/]{43}/.exec(run('ssh-keygen', ['-l', '-f', join(demo, 'keys', 'ceo.pub')]).stdout)![0];
    expect(readFileSync(pinned, 'utf8')).toContain(`trust root pinned to <code class="fp nowrap">${ceo}</code>`);
    expect(readFileSync(unpinned, 'utf8')).toContain('trust root <strong>not pinned</strong>');
    const wrong = coo(['report', '--ledger', join(demo, 'ledger.git'), '--html', join(dir, 'wrong.html'), '--trust-root', join(demo, 'keys', 'coo.hermes.pub'), '--json']);
    expect(wrong.status).toBe(3);
    expect(readFileSync(join(dir, 'wrong.html'), 'utf8')).toContain('TRUST_ROOT_MISMATCH');
  });

  it('shows each signer with its full key fingerprint, and which trust file each genesis entry is', async () => {
    const out = join(dir, 'signers.html');
    expect(coo(['report', '--ledger', join(demo, 'ledger.git'), '--html', out]).status).toBe(0);
    // The fingerprints stock ssh-keygen prints for the demo's public keys.
    const fingerprints = ['ceo', 'coo.hermes'].map((actor) => /SHA256:[A-Za-z0-9+/]{43}/.exec(run('ssh-keygen', ['-l', '-f', join(demo, 'keys', `${actor}.pub`)]).stdout)![0]);
    const page = await read(out, 390);
    try {
      const signers = await page.text('#signers tr.signer');
      expect(signers).toHaveLength(2);
      for (const fingerprint of fingerprints) expect(signers.some((row) => row.includes(fingerprint))).toBe(true);
      const signedBy = await page.text('#timeline tr.commit td[data-label="signed by"]');
      expect(signedBy.every((cell) => fingerprints.some((fingerprint) => cell.includes(fingerprint)))).toBe(true);
      const genesis = (await page.text('#timeline tr.commit')).at(-1)!;
      expect(genesis).toMatch(/^#1/);
      for (const label of ['trust root v1', 'actor registry v1', 'actor policy v1']) expect(genesis).toContain(label);
      expect(await page.text('#trust tr.trust-file td[data-label="file"]')).toEqual(['trust/root/000001.yaml', 'trust/registry/000001.yaml', 'trust/policy/000001.yaml']);
    } finally {
      await page.close();
    }
  });

  it('prints each spend bar with its percentage of the cap', async () => {
    const out = join(dir, 'spend.html');
    expect(coo(['report', '--ledger', join(demo, 'ledger.git'), '--html', out]).status).toBe(0);
    const page = await read(out, 1280);
    try {
      const bars = await page.text('#spend .meter');
      expect(bars.length).toBeGreaterThanOrEqual(2);
      for (const bar of bars) expect(bar).toMatch(/^\d+(\.\d+)?%$/);
    } finally {
      await page.close();
    }
  });

  it('exits 3 when it reports findings, and shows every receipt warning', async () => {
    const out = join(dir, 'findings.html');
    const result = coo(['report', '--ledger', warned.gitdir, '--html', out, '--json']);
    expect(result.status).toBe(3);
    expect(json(result)).toMatchObject({ ok: false, html: out });
    for (const width of [390, 1280]) {
      const page = await read(out, width, `report-findings-${width}.png`);
      try {
        expect(page.scrollWidth).toBeLessThanOrEqual(width);
        expect(page.errors).toEqual([]);
        expect(page.outside).toEqual([]);
        expect((await page.text('#findings .finding')).join(' ')).toContain('COMMIT_UNSIGNED');
        // The WHAT column says what is wrong; the path has its own column and is not repeated.
        const placeless = await page.text('#findings .finding td[data-label="what"]');
        expect(placeless).toContainEqual(expect.stringMatching(/^has no place in the ledger layout: /));
        for (const what of placeless) expect(what.startsWith('notes.txt')).toBe(false);
        const warnings = await page.text('#warnings tr.receipt-warning');
        expect(warnings).toHaveLength(1);
        expect(warnings[0]).toContain('sandbox_unenforced');
        expect(warnings[0]).toContain(warned.messageId);
        expect((await page.text('#messages tr.message')).find((row) => row.includes(warned.messageId))).toContain('sandbox_unenforced');
      } finally {
        await page.close();
      }
    }
  });

  it('writes the page of an empty ledger', () => {
    const empty = join(dir, 'empty.git');
    git(['init', '-q', '--bare', empty]);
    const out = join(dir, 'empty.html');
    const result = coo(['report', '--ledger', empty, '--html', out]);
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    expect(readFileSync(out, 'utf8')).toContain('verified: no findings');
  });

  it('fails with IO_ERROR and leaves no partial file when the page cannot be written', () => {
    const folder = join(dir, 'unwritable');
    const out = join(folder, 'report.html');
    mkdirSync(out, { recursive: true });
    const result = coo(['report', '--ledger', join(demo, 'ledger.git'), '--html', out]);
    expect(result.status).toBe(1);
    expect(result.stderr).toMatch(/^coo: IO_ERROR: cannot write the report /);
    expect(readdirSync(folder)).toEqual(['report.html']);
    expect(existsSync(join(out, 'index.html'))).toBe(false);
  });
});

describe('receipt warnings beyond the report', () => {
  it('coo show names each receipt warning with what it means, and coo cite carries it in its evidence table', () => {
    const shown = coo(['show', warned.messageId, '--ledger', warned.gitdir]);
    expect(shown.status).toBe(0);
    expect(shown.stdout).toMatch(/^ {4}warning sandbox_unenforced: .*without bubblewrap/m);
    const cited = coo(['cite', warned.messageId, '--ledger', warned.gitdir]);
    expect(cited.stdout).toMatch(/^\| warnings \| `sandbox_unenforced`: .*without bubblewrap.* \|$/m);
  });
});
