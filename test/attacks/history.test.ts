import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe } from 'vitest';
import { appendTrustVersion } from '../../src/ledger/trust-update.js';
import { attack, firstOr, useKit, type Kit } from '../helpers/attack-kit.js';
import { coo, json } from '../helpers/cli.js';
import { L_PLUS } from '../helpers/malleate.js';
import { fixtureEnvelope } from '../helpers/stock.js';
import { git, gitEnv, run, tempDir } from '../helpers/tmp.js';

const dir = tempDir();
const getKit = useKit(dir);
let kit: Kit;
beforeAll(async () => {
  kit = getKit();
  await kit.world.consult({ idempotencyKey: 'history-base' });
});

const folder = (id: string): string => `messages/2026-11/30/07/${id}`;
let n = 0;
const nextId = (): string => `msg_01M8NQFJ01J7CG66HWNDDJ${String(8500 + (n += 1)).padStart(4, '0')}`;
const stateDir = join(dir, 'verified');
const verifyWithCheckpoint = (): string[] =>
  json<{ findings: Array<{ code: string }> }>(coo(['verify', '--ledger', kit.world.gitdir, '--state-dir', stateDir, '--json'])).findings.map((finding) => finding.code);

/** Verifies (saving the head), lets `between` touch the saved checkpoint, rolls main back one commit, and verifies again. */
function rollback(between: () => void = () => undefined): string {
  verifyWithCheckpoint();
  between();
  const head = kit.head();
  git(['--git-dir', kit.world.gitdir, 'update-ref', 'refs/heads/main', 'main~1']);
  try {
    return firstOr(verifyWithCheckpoint(), 'HISTORY_ROLLBACK');
  } finally {
    git(['--git-dir', kit.world.gitdir, 'update-ref', 'refs/heads/main', head]);
  }
}

describe('history', () => {
  attack('a rollback to an older head', 'verify', 'HISTORY_ROLLBACK', () => rollback());

  attack('a rollback after coo changed the shape of the state it saves (the verified head still holds)', 'verify', 'HISTORY_ROLLBACK', () =>
    rollback(() => {
      for (const name of readdirSync(stateDir).filter((file) => file.endsWith('.json'))) {
        const saved = JSON.parse(readFileSync(join(stateDir, name), 'utf8')) as { state: { shape: number } };
        writeFileSync(join(stateDir, name), JSON.stringify({ ...saved, state: { ...saved.state, shape: 1 } }));
      }
    }),
  );

  attack('a fork: another history from an earlier commit', 'verify', 'HISTORY_FORK', async () => {
    verifyWithCheckpoint();
    const head = kit.head();
    git(['--git-dir', kit.world.gitdir, 'update-ref', 'refs/heads/main', 'main~1']);
    try {
      await kit.world.consult({ idempotencyKey: `fork-${Date.now()}` });
      return firstOr(verifyWithCheckpoint(), 'HISTORY_FORK');
    } finally {
      git(['--git-dir', kit.world.gitdir, 'update-ref', 'refs/heads/main', head]);
    }
  });

  attack('a merge commit', 'verify', 'COMMIT_MERGE', async () => {
    let code = '';
    await kit.rewriteHead((raw) => raw.replace(/^(parent [0-9a-f]{40}\n)/m, `$1parent ${git(['--git-dir', kit.world.gitdir, 'rev-parse', 'main~2']).trim()}\n`), () => {
      code = firstOr(kit.verifyCodes(), 'COMMIT_MERGE');
    });
    return code;
  });

  attack('a gap in the sequence', 'hook', 'COMMIT_SEQ', async () => {
    const id = nextId();
    return kit.push({ [`${folder(id)}/envelope.yaml`]: fixtureEnvelope(id, id) }, { key: kit.keys.coo.file, seq: (await kit.seq()) + 2 });
  });

  attack('a repeated sequence number', 'hook', 'COMMIT_SEQ', async () => {
    const id = nextId();
    return kit.push({ [`${folder(id)}/envelope.yaml`]: fixtureEnvelope(id, id) }, { key: kit.keys.coo.file, seq: await kit.seq() });
  });

  attack('a force-push to the bare ledger', 'hook', 'NON_FAST_FORWARD', async () => {
    const work = join(dir, 'force');
    git(['clone', '-q', kit.world.gitdir, work]);
    git(['reset', '-q', '--hard', 'HEAD~1'], { cwd: work });
    git(['-c', 'gpg.format=ssh', '-c', `user.signingkey=${kit.keys.coo.file}`, 'commit', '-q', '-S', '--allow-empty', '-m', 'rewrite', '-m', `Ledger-Seq: ${await kit.seq()}`], { cwd: work, env: gitEnv() });
    const before = kit.head();
    const pushed = run('git', ['push', '--force', 'origin', 'main'], { cwd: work, env: gitEnv() });
    return pushed.status !== 0 && kit.head() === before ? 'NON_FAST_FORWARD' : 'accepted';
  });

  attack('a back-dated commit from a retired key (stock git accepts it with valid-before)', 'verify', 'SIGNER_RETIRED', async () => {
    const { generatePrivateKey } = await import('../../src/crypto/keys.js');
    const fresh = generatePrivateKey('coo.hermes');
    const registry = (await kit.world.ledger.state()).registry!.doc;
    await appendTrustVersion(kit.world.ledger, { role: 'registry', document: { ...registry, version: undefined }, actorKeys: new Map([['coo.hermes', fresh.publicKey]]) }, kit.keys.ceo.key, new Date());
    let code = '';
    const id = nextId();
    await kit.bypass({ [`${folder(id)}/envelope.yaml`]: fixtureEnvelope(id, id) }, { key: kit.keys.coo.file }, () => {
      code = firstOr(kit.verifyCodes(), 'SIGNER_RETIRED');
    });
    // restore the old COO key for the attacks that follow
    const now = (await kit.world.ledger.state()).registry!.doc;
    await appendTrustVersion(kit.world.ledger, { role: 'registry', document: { ...now, version: undefined }, actorKeys: new Map([['coo.hermes', kit.keys.coo.key.publicKey]]) }, kit.keys.ceo.key, new Date());
    return code;
  });

  attack('a well-formed push on top of an invalid commit that reached main behind the hook', 'hook', 'PATH_INVALID', async () => {
    let code = '';
    await kit.bypass({ 'notes/forged.yaml': 'x: 1\n' }, { key: kit.keys.coo.file }, async () => {
      const id = nextId();
      code = await kit.push({ [`${folder(id)}/envelope.yaml`]: fixtureEnvelope(id, id) }, { key: kit.keys.coo.file });
    });
    return code;
  });

  attack('an extra gpgsig-sha256 header (git still says Good)', 'verify', 'COMMIT_MALFORMED', async () => {
    let code = '';
    await kit.rewriteHead((raw) => raw.replace('gpgsig ', 'gpgsig-sha256 junk\ngpgsig '), () => {
      code = firstOr(kit.verifyCodes(), 'COMMIT_MALFORMED');
    });
    return code;
  });

  attack('a duplicated gpgsig header (git still says Good)', 'verify', 'COMMIT_MALFORMED', async () => {
    let code = '';
    await kit.rewriteHead((raw) => raw.replace(/(gpgsig [\s\S]*?-----END SSH SIGNATURE-----\n)/, '$1$1'), () => {
      code = firstOr(kit.verifyCodes(), 'COMMIT_MALFORMED');
    });
    return code;
  });

  attack('a commit signature rewritten as S+L (git still says Good)', 'verify', 'SIG_INVALID', async () => {
    let code = '';
    await kit.rewriteHead(L_PLUS, () => {
      code = firstOr(kit.verifyCodes(), 'SIG_INVALID');
    });
    return code;
  });

  attack('a commit with two tree headers', 'verify', 'COMMIT_MALFORMED', async () => {
    let code = '';
    await kit.rewriteHead((raw) => raw.replace(/^tree ([0-9a-f]{40})\n/, `tree ${git(['--git-dir', kit.world.gitdir, 'rev-parse', 'main~1^{tree}']).trim()}\ntree $1\n`), () => {
      code = firstOr(kit.verifyCodes(), 'COMMIT_MALFORMED');
    });
    return code;
  });

  attack('a push to another branch', 'hook', 'REF_FORBIDDEN', () => {
    const work = join(dir, 'branch');
    git(['clone', '-q', kit.world.gitdir, work]);
    const pushed = run('git', ['push', 'origin', 'main:refs/heads/shadow'], { cwd: work, env: gitEnv() });
    return /REF_FORBIDDEN/.test(pushed.stderr) && pushed.status !== 0 ? 'REF_FORBIDDEN' : 'accepted';
  });
});
