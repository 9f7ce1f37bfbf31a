import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { BUNDLE_KIND, renderBundle } from '../../src/audit/bundle.js';
import { verifyBundle } from '../../src/audit/bundle-verify.js';
import { renderCitation, type Evidence } from '../../src/audit/cite.js';
import { gatherEvidence } from '../../src/audit/evidence.js';
import { parseTar, renderTar } from '../../src/audit/tar.js';
import { formatPublicKeyLine } from '../../src/crypto/keys.js';
import { killSwitchPath, trustPath } from '../../src/ledger/layout.js';
import { readDocument } from '../../src/schema/documents.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { isoSeconds } from '../../src/util/time.js';
import { attack, codeOf, useKit, type Kit } from '../helpers/attack-kit.js';
import { coo, json } from '../helpers/cli.js';
import { makeWorld, type World } from '../helpers/lane.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * What auditors are told: evidence is clean only when history is, a citation cannot be reshaped
 * by the advice it quotes, and a bundle is canonical and names its ledger.
 */
const dir = tempDir('coo-audit-attacks-');
const getKit = useKit(dir);
let kit: Kit;
let staging: World;
let consult = '';
let stagingConsult = '';
let good: Buffer = Buffer.alloc(0);
let stagingBundle: Buffer = Buffer.alloc(0);

async function consultOnce(world: World, key: string): Promise<string> {
  const { messageId } = await world.consult({ idempotencyKey: key });
  await world.runner({ transport: world.fakeOracle('ok') }).runOnce();
  return messageId;
}

function bundleOf(gitdir: string, messageId: string, name: string): Buffer {
  const out = join(dir, name);
  const result = coo(['cite', messageId, '--ledger', gitdir, '--bundle', out]);
  if (result.status !== 0) throw new Error(result.stderr);
  return readFileSync(out);
}

const cliCode = (result: { status: number | null; stderr: string }): string => (result.status === 0 ? 'accepted' : (/^coo: ([A-Z_]+):/.exec(result.stderr)?.[1] ?? 'DECLINED'));

beforeAll(async () => {
  kit = getKit();
  consult = await consultOnce(kit.world, 'audited-consult');
  good = bundleOf(kit.world.gitdir, consult, 'good.tar');
  // A staging ledger under the same CEO and COO keys, with a policy of its own.
  staging = await makeWorld(join(dir, 'staging'), { actors: kit.world.actors, policy: (policy) => ({ ...policy, heartbeat: { ...policy.heartbeat, ttl_seconds: policy.heartbeat.ttl_seconds + 60 } }) });
  stagingConsult = await consultOnce(staging, 'staging-consult');
  stagingBundle = bundleOf(staging.gitdir, stagingConsult, 'staging.tar');
}, 180_000);

/** The invalid commits an attacker with write access to the ledger's files could add after the consult. */
async function invalidCommit(kind: 'stranger' | 'wrong-actor'): Promise<{ files: Record<string, string>; key: string }> {
  const state = await kit.world.ledger.state();
  if (kind === 'stranger') {
    const version = (state.killSwitch?.version ?? 0) + 1;
    return { files: { [killSwitchPath(version)]: toYaml({ schema_version: 'kill_switch.v0', version, state: 'off', reason: 'stranger', set_by: 'coo.hermes', created_at: isoSeconds(new Date()) }) }, key: kit.keys.intruder.file };
  }
  const version = state.policy!.version + 1;
  return { files: { [trustPath('policy', version)]: toYaml({ ...state.policy!.doc, version }) }, key: kit.keys.coo.file };
}

describe('evidence is clean only when history is', () => {
  for (const [kind, code] of [['stranger', 'SIGNER_UNKNOWN'], ['wrong-actor', 'TRUST_AUTHORITY']] as const) {
    const what = kind === 'stranger' ? 'a stranger-signed file' : 'a trust file signed by the wrong actor';
    attack(`coo cite over a ledger with ${what} after the consult`, 'cli', code, async () => {
      let observed = '';
      const { files, key } = await invalidCommit(kind);
      await kit.bypass(files, { key }, () => {
        const cited = json<{ verified: boolean; findings: Array<{ code: string }>; markdown: string }>(coo(['cite', consult, '--ledger', kit.world.gitdir, '--json']));
        const says = cited.markdown.includes('history clean to') ? 'history clean' : cited.markdown.includes('**NOT VERIFIED**') ? 'not verified' : 'silent';
        observed = cited.verified || says !== 'not verified' ? 'accepted' : (cited.findings[0]?.code ?? 'accepted');
      });
      return observed;
    });
  }

  attack('coo attest over a ledger with a stranger-signed file after the consult', 'cli', 'SIG_INVALID', async () => {
    let observed = '';
    const { files, key } = await invalidCommit('stranger');
    await kit.bypass(files, { key }, () => {
      const result = coo(['attest', consult, '--ledger', kit.world.gitdir, '--key', kit.keys.coo.file, '--out', join(dir, 'attest.json')]);
      observed = cliCode(result);
      if (observed === 'SIG_INVALID' && !/SIGNER_UNKNOWN/.test(result.stderr)) observed = 'SIG_INVALID without naming the finding';
    });
    return observed;
  });

  attack('coo cite --bundle over a ledger with a stranger-signed file after the consult', 'cli', 'SIG_INVALID', async () => {
    let observed = '';
    const { files, key } = await invalidCommit('stranger');
    await kit.bypass(files, { key }, () => {
      observed = cliCode(coo(['cite', consult, '--ledger', kit.world.gitdir, '--bundle', join(dir, 'over-invalid.tar')]));
    });
    return observed;
  });
});

describe('a bundle is canonical and names its ledger', () => {
  const rewrite = (bytes: Buffer, change: (files: Array<{ name: string; content: Buffer }>) => Array<{ name: string; content: Buffer }>): Buffer => renderTar(change(parseTar(bytes)));

  attack('a bundle with two entries swapped out of canonical order', 'library', 'BUNDLE_INVALID', () =>
    codeOf(async () => {
      verifyBundle(
        rewrite(good, (files) => {
          const at = files.findIndex((file) => file.name.startsWith('ledger/'));
          return [...files.slice(0, at), files[at + 1]!, files[at]!, ...files.slice(at + 2)];
        }),
      );
    }),
  );

  attack("a bundle with a file coo would not write (the attempt's prompt-sent.md beside the answer)", 'library', 'BUNDLE_INVALID', () =>
    codeOf(async () => {
      const answer = parseTar(good).find((file) => file.name.endsWith('/answer.md'))!.name;
      const extra = answer.replace(/answer\.md$/, 'prompt-sent.md');
      const content = execFileSync('git', ['--git-dir', kit.world.gitdir, 'show', `main:${extra.slice('ledger/'.length)}`]);
      const { commit, ledger } = manifestOf(good);
      verifyBundle(rewrite(good, (files) => canonicalOrder([...files, { name: extra, content }], [commit, ledger])));
    }),
  );

  attack('a bundle with a git object its proof does not use (the claims folder of the message)', 'library', 'BUNDLE_INVALID', () =>
    codeOf(async () => {
      const receipt = parseTar(good).find((file) => /\/receipts\/\d+\.yaml$/.test(file.name))!.name.slice('ledger/'.length);
      const oid = git(['--git-dir', kit.world.gitdir, 'rev-parse', `main:${receipt.replace(/receipts\/.*$/, 'claims')}`]).trim();
      const { commit, ledger } = manifestOf(good);
      verifyBundle(rewrite(good, (files) => canonicalOrder([...files, { name: `git/${oid}`, content: readRaw(oid, 'tree') }], [commit, ledger])));
    }),
  );

  attack("evidence from a staging ledger under the same CEO key, checked against this ledger's genesis", 'cli', 'LEDGER_MISMATCH', async () => {
    const file = join(dir, 'staging-check.tar');
    writeFileSync(file, stagingBundle);
    const genesis = git(['--git-dir', kit.world.gitdir, 'rev-list', '--max-parents=0', 'main']).trim();
    writeFileSync(join(dir, 'ceo.pub'), `${formatPublicKeyLine(kit.keys.ceo.key.publicKey)}\n`);
    return cliCode(coo(['verify-bundle', file, '--trust-root', join(dir, 'ceo.pub'), '--genesis', genesis]));
  });

  attack("a staging bundle that names this ledger's genesis and carries its genesis commit", 'library', 'LEDGER_MISMATCH', () =>
    codeOf(async () => {
      const genesisOid = git(['--git-dir', kit.world.gitdir, 'rev-list', '--max-parents=0', 'main']).trim();
      const files = parseTar(stagingBundle);
      const manifest = manifestOf(stagingBundle);
      const trees = new Map<string, Buffer>();
      for (const file of files) if (file.name.startsWith('git/') && file.name !== `git/${manifest.commit}` && file.name !== `git/${manifest.ledger}`) trees.set(file.name.slice(4), file.content);
      // This ledger's genesis trees, down to its first trust files.
      for (const path of ['', 'trust', 'trust/root', 'trust/registry', 'trust/policy']) {
        const oid = git(['--git-dir', kit.world.gitdir, 'rev-parse', `${genesisOid}:${path}`]).trim();
        trees.set(oid, readRaw(oid, 'tree'));
      }
      const ledgerFiles = new Map(files.filter((file) => file.name.startsWith('ledger/')).map((file) => [file.name.slice(7), file.content] as const));
      const roots = [...ledgerFiles].filter(([path]) => /^trust\/root\/\d+\.yaml$/.test(path)).map(([path, bytes]) => readDocument('trust_root.v0', bytes, path));
      const registries = [...ledgerFiles].filter(([path]) => /^trust\/registry\/\d+\.yaml$/.test(path)).map(([path, bytes]) => readDocument('actor_registry.v0', bytes, path));
      const commit = files.find((file) => file.name === `git/${manifest.commit}`)!.content;
      const forged = renderBundle({ kind: BUNDLE_KIND, messageId: manifest.message_id, receiptPath: manifest.receipt, commit, genesis: readRaw(genesisOid, 'commit'), trees, files: ledgerFiles }, roots, registries);
      verifyBundle(forged, { genesis: genesisOid });
    }),
  );
});

/** A raw git object of the kit's ledger, as bytes (trees are binary). */
function readRaw(oid: string, type: 'tree' | 'commit'): Buffer {
  return execFileSync('git', ['--git-dir', kit.world.gitdir, 'cat-file', type, oid]);
}

/** A bundle's entries with the `ledger/` and `git/` sections each in coo's order, after a change. */
function canonicalOrder(files: Array<{ name: string; content: Buffer }>, commits: readonly string[]): Array<{ name: string; content: Buffer }> {
  const head = files.filter((file) => file.name === 'bundle.json' || file.name === 'allowed_signers');
  const git_ = files.filter((file) => file.name.startsWith('git/'));
  const first = commits.flatMap((oid) => git_.filter((file) => file.name === `git/${oid}`));
  const trees = git_.filter((file) => !first.includes(file)).sort((a, b) => (a.name < b.name ? -1 : 1));
  const ledger = files.filter((file) => file.name.startsWith('ledger/')).sort((a, b) => (a.name < b.name ? -1 : 1));
  return [...head, ...first, ...trees, ...ledger];
}

function manifestOf(bytes: Buffer): { commit: string; ledger: string; receipt: string; message_id: string } {
  return JSON.parse(parseTar(bytes).find((file) => file.name === 'bundle.json')!.content.toString('utf8')) as { commit: string; ledger: string; receipt: string; message_id: string };
}

describe('a ledger pinned by its genesis, not only by its CEO key', () => {
  const genesisOf = (gitdir: string): string => git(['--git-dir', gitdir, 'rev-list', '--max-parents=0', 'main']).trim();
  const ceoPub = (): string => {
    writeFileSync(join(dir, 'ceo.pub'), `${formatPublicKeyLine(kit.keys.ceo.key.publicKey)}\n`);
    return join(dir, 'ceo.pub');
  };

  attack("coo verify of a staging ledger under the same CEO key, pinned to this ledger's genesis", 'cli', 'LEDGER_MISMATCH', () => {
    const result = coo(['verify', '--ledger', staging.gitdir, '--no-checkpoint', '--trust-root', ceoPub(), '--genesis', genesisOf(kit.world.gitdir), '--json']);
    const report = JSON.parse(result.stdout) as { ok: boolean; findings: Array<{ code: string }> };
    return result.status === 3 && !report.ok ? (report.findings.map((finding) => finding.code).join(',') || 'DECLINED') : 'accepted';
  });

  attack("coo clone of a staging ledger under the same CEO key, pinned to this ledger's genesis: nothing is cloned", 'cli', 'LEDGER_MISMATCH', () => {
    const target = join(dir, 'cloned-staging');
    const code = cliCode(coo(['clone', staging.gitdir, target, '--trust-root', ceoPub(), '--genesis', genesisOf(kit.world.gitdir)]));
    return existsSync(target) ? `${code} leaving ${target}` : code;
  });

  attack('coo report of a staging ledger, pinned to this ledger\'s genesis', 'cli', 'LEDGER_MISMATCH', () => {
    const result = coo(['report', '--ledger', staging.gitdir, '--html', join(dir, 'staging.html'), '--trust-root', ceoPub(), '--genesis', genesisOf(kit.world.gitdir)]);
    return result.status === 3 ? (/LEDGER_MISMATCH/.exec(readFileSync(join(dir, 'staging.html'), 'utf8'))?.[0] ?? 'DECLINED') : 'accepted';
  });

  attack('--genesis that is not a full commit id, given to verify, clone, report and verify-bundle', 'cli', 'USAGE', () => {
    const given = genesisOf(kit.world.gitdir).slice(0, 12);
    const codes = new Set([
      cliCode(coo(['verify', '--ledger', kit.world.gitdir, '--no-checkpoint', '--genesis', given])),
      cliCode(coo(['clone', kit.world.gitdir, join(dir, 'never'), '--trust-root', ceoPub(), '--genesis', given])),
      cliCode(coo(['report', '--ledger', kit.world.gitdir, '--html', join(dir, 'never.html'), '--genesis', given])),
      cliCode(coo(['verify-bundle', join(dir, 'good.tar'), '--genesis', given.toUpperCase()])),
    ]);
    return existsSync(join(dir, 'never')) || existsSync(join(dir, 'never.html')) ? 'wrote' : [...codes].join(',');
  });

  it("clones and verifies the ledger its genesis names, printing that genesis (a guard)", () => {
    const genesis = genesisOf(kit.world.gitdir);
    const target = join(dir, 'cloned-main');
    const cloned = json<{ ok: boolean; genesis: string; genesis_pinned: boolean }>(coo(['clone', kit.world.gitdir, target, '--trust-root', ceoPub(), '--genesis', genesis, '--json']));
    expect(cloned).toMatchObject({ ok: true, genesis, genesis_pinned: true });
    const verified = json<{ ok: boolean; genesis: string }>(coo(['verify', '--ledger', target, '--no-checkpoint', '--trust-root', ceoPub(), '--genesis', genesis, '--json']));
    expect(verified).toMatchObject({ ok: true, genesis });
  });
});

describe('the citation comment cannot be reshaped by the advice it quotes', () => {
  const shaped = async (text: string): Promise<string> => {
    const evidence: Evidence = await gatherEvidence(kit.world.gitdir, consult);
    const { marked } = await import('marked');
    const saying = (words: string): string => marked.parse(renderCitation({ ...evidence, answer: { ...evidence.answer!, summary: words, recommendations: [words] } }), { gfm: true, async: false });
    const html = saying(text);
    const plain = saying('all good');
    const shape = (value: string): string => [...value.matchAll(/<([a-z0-9]+)/g)].map((match) => match[1]).join(' ');
    return shape(html) === shape(plain) && !/href=|<img|<h[1-6]|<pre/.test(html) ? 'inert' : 'accepted';
  };

  attack('an answer that ends a line with a lone carriage return and opens a heading', 'library', 'inert', () => shaped('all good\r# Approved by the CEO'));

  attack('an answer that ends a line with a lone carriage return and opens a fence over the evidence table', 'library', 'inert', () => shaped('all good\r~~~\nthe rest is code'));

  attack("an answer that plants a link reference definition for the comment's own [!NOTE]", 'library', 'inert', () => shaped('x\r[!NOTE]: https://evil.example'));

  attack('an answer with a bare URL and a www link', 'library', 'inert', () => shaped('see https://evil.example and www.evil.example'));
});
