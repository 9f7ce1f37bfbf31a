import { chmodSync, chownSync, existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect } from 'vitest';
import { checkPins } from '../../src/lane/pins.js';
import { checkpointPath, saveCheckpoint } from '../../src/ledger/checkpoint.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { runRemoteGit } from '../../src/remote/git-remote.js';
import { lastPackingFailure, ObjectWriter, packLooseObjects } from '../../src/ledger/object-store.js';
import { attack, firstOr, useKit, type Kit } from '../helpers/attack-kit.js';
import { coo, json } from '../helpers/cli.js';
import { until } from '../helpers/damage.js';
import { loadWithPyYaml } from '../helpers/pyyaml.js';
import { fixtureEnvelope } from '../helpers/stock.js';
import { git, tempDir } from '../helpers/tmp.js';

/**
 * The third red team of what an auditor relies on: that the values coo validates and folds are the
 * values the signed bytes say to any reader, and that verification runs on the objects the commits
 * name, whatever else a hostile writer left in the ledger's folder.
 */
const dir = tempDir();
const getKit = useKit(dir);
let kit: Kit;
beforeAll(() => {
  kit = getKit();
});

let n = 0;
const nextId = (): string => `msg_01M8NQFJ01J7CG66HWNDDJ${String(9300 + (n += 1)).padStart(4, '0')}`;
const folder = (id: string): string => `messages/2026-11/30/07/${id}`;

/** A fixture dispatch whose text `edit` changed, pushed by the COO through the hook: the code it was declined with, or 'accepted'. */
async function pushEnvelope(edit: (text: string) => string): Promise<string> {
  const id = nextId();
  const text = edit(fixtureEnvelope(id, id));
  return kit.push({ [`${folder(id)}/envelope.yaml`]: text, [`${folder(id)}/prompt.md`]: 'Fix add() so that test.sh passes.\n' }, { key: kit.keys.coo.file });
}

/** What PyYAML (YAML 1.1, an auditor's outside reader) reads at `key` of `text`. */
function pyValue(text: string): unknown {
  const [loaded] = loadWithPyYaml([text]);
  return (loaded as { value: { value: unknown } }).value.value;
}

describe('numbers that read as one value to coo and another to an outside reader', () => {
  attack('an envelope for issue 062: 62 to coo, 50 to a YAML 1.1 reader', 'hook', 'YAML_NON_JSON', async () => {
    expect(pyValue('value: 062\n')).toBe(50);
    return pushEnvelope((text) => text.replace('issue_number: 62', 'issue_number: 062'));
  });

  attack('a budget written 0o1: 1 to coo, a string to a YAML 1.1 reader', 'hook', 'YAML_NON_JSON', async () => {
    expect(pyValue('value: 0o1\n')).toBe('0o1');
    return pushEnvelope((text) => text.replace('max_cost_usd: 1', 'max_cost_usd: 0o1'));
  });

  attack('a budget written 1e0: 1 to coo, a string to a YAML 1.1 reader', 'hook', 'YAML_NON_JSON', async () => {
    expect(pyValue('value: 1e0\n')).toBe('1e0');
    return pushEnvelope((text) => text.replace('max_cost_usd: 1', 'max_cost_usd: 1e0'));
  });

  attack('a budget written 1e+0, a form no coo writer wrote: 1 to coo, a string to a YAML 1.1 reader', 'hook', 'YAML_NON_JSON', async () => {
    expect(pyValue('value: 1e+0\n')).toBe('1e+0');
    return pushEnvelope((text) => text.replace('max_cost_usd: 1', 'max_cost_usd: 1e+0'));
  });

  attack('a budget of 1.0e-400 that every reader folds as nothing', 'hook', 'YAML_NON_JSON', () => pushEnvelope((text) => text.replace('max_cost_usd: 1', 'max_cost_usd: 1.0e-400')));

  attack('a quoted number given the int tag: !!int "062"', 'hook', 'YAML_NON_JSON', async () => {
    expect(pyValue('value: !!int "062"\n')).toBe(50);
    return pushEnvelope((text) => text.replace('issue_number: 62', 'issue_number: !!int "062"'));
  });

  attack('a commit behind the hook holding 062 is found by coo verify', 'verify', 'YAML_NON_JSON', async () => {
    const id = nextId();
    let code = '';
    await kit.bypass({ [`${folder(id)}/envelope.yaml`]: fixtureEnvelope(id, id).replace('issue_number: 62', 'issue_number: 062'), [`${folder(id)}/prompt.md`]: 'Fix add() so that test.sh passes.\n' }, { key: kit.keys.coo.file }, () => {
      code = firstOr(kit.verifyCodes(), 'YAML_NON_JSON');
    });
    return code;
  });
});

describe("what a ledger's git folder says beyond its objects", () => {
  /** Names a promisor remote in the ledger's config whose transport is a command, runs `check`, and takes the config back. */
  async function withPromisor(setting: Record<string, string>, check: () => Promise<string> | string): Promise<string> {
    const marker = join(dir, `ran-${(n += 1)}`);
    const config = { 'remote.evil.url': 'ssh://127.0.0.1/evil', 'remote.evil.promisor': 'true', 'core.sshCommand': `sh -c 'touch ${marker}' --`, ...setting };
    for (const [key, value] of Object.entries(config)) git(['--git-dir', kit.world.gitdir, 'config', key, value.replace('MARKER', marker)]);
    try {
      const code = await check();
      return existsSync(marker) ? 'RAN_COMMAND' : code;
    } finally {
      for (const key of Object.keys(config)) git(['--git-dir', kit.world.gitdir, 'config', '--unset-all', key]);
    }
  }

  /** coo verify of a head whose commit names a tree the ledger does not hold. */
  const verifyMissingTree = (): Promise<string> => {
    let code = '';
    return kit
      .rewriteHead(
        (raw) => raw.replace(/^tree [0-9a-f]{40}$/m, `tree ${'7'.repeat(40)}`),
        () => {
          code = firstOr(kit.verifyCodes(), 'NOT_FOUND');
        },
      )
      .then(() => code);
  };

  attack('a promisor remote whose ssh command coo verify would run to fetch a missing tree', 'verify', 'NOT_FOUND', () => withPromisor({}, verifyMissingTree));

  attack('a promisor remote whose upload-pack is a command, reached over the file transport', 'verify', 'NOT_FOUND', () =>
    withPromisor({ 'remote.evil.url': kit.world.gitdir, 'remote.evil.uploadpack': "sh -c 'touch MARKER; exec git-upload-pack \"$@\"' --" }, verifyMissingTree),
  );
});

describe("what a target repository's config says beyond its objects", () => {
  attack('a target repository whose promisor remote would run a command when a pinned commit is missing', 'library', 'PIN_REFUSED', async () => {
    const repo = join(dir, `target-${(n += 1)}`);
    const marker = join(dir, `ran-${n}`);
    git(['init', '-q', repo]);
    for (const [key, value] of Object.entries({ 'remote.evil.url': 'ssh://127.0.0.1/evil', 'remote.evil.promisor': 'true', 'core.sshCommand': `sh -c 'touch ${marker}' --` })) git(['-C', repo, 'config', key, value]);
    const checked = await checkPins(repo, '7'.repeat(40), [{ path: 'README.md', sha256: `sha256:${'0'.repeat(64)}` }]);
    if (existsSync(marker)) return 'RAN_COMMAND';
    return checked.ok ? 'accepted' : 'PIN_REFUSED';
  });
});

describe('what coo verify says', () => {
  attack("a ledger folder whose main names an unsigned tag of the head commit, written behind git's back", 'verify', 'COMMIT_MALFORMED', () => {
    const head = kit.head();
    const tag = git(['--git-dir', kit.world.gitdir, 'mktag'], { input: `object ${head}\ntype commit\ntag head\ntagger Anyone <anyone@example.com> 1700000000 +0000\n\nwhatever its writer says\n` }).trim();
    // git refuses to point a branch at a tag; the file is written by hand.
    writeFileSync(join(kit.world.gitdir, 'refs', 'heads', 'main'), `${tag}\n`);
    try {
      const result = coo(['verify', '--ledger', kit.world.gitdir, '--no-checkpoint', '--json']);
      const out = json<{ findings?: Array<{ code: string }>; error?: { code: string } }>(result);
      const codes = out.error === undefined ? (out.findings ?? []).map((finding) => finding.code) : [out.error.code];
      expect(result.status === 0).toBe(codes.length === 0);
      return firstOr(codes, 'COMMIT_MALFORMED');
    } finally {
      git(['--git-dir', kit.world.gitdir, 'update-ref', 'refs/heads/main', head]);
    }
  });

  attack('a ledger whose main was removed, verified for the first time against a pinned trust root', 'verify', 'TRUST_ROOT_MISMATCH', () => {
    const head = kit.head();
    git(['--git-dir', kit.world.gitdir, 'update-ref', '-d', 'refs/heads/main']);
    try {
      const result = coo(['verify', '--ledger', kit.world.gitdir, '--no-checkpoint', '--trust-root', kit.keys.ceo.key.publicKey.keyId, '--json']);
      const codes = json<{ findings: Array<{ code: string }> }>(result).findings.map((finding) => finding.code);
      expect(result.status === 0).toBe(codes.length === 0);
      return firstOr(codes, 'TRUST_ROOT_MISMATCH');
    } finally {
      git(['--git-dir', kit.world.gitdir, 'update-ref', 'refs/heads/main', head]);
    }
  });
});

describe("the git coo starts on a ledger's folder on its own", () => {
  attack("a pre-auto-gc hook the ledger's config points git at, run by a writer's background packing", 'library', 'HOOK_NOT_RUN', async () => {
    const gitdir = join(dir, `packed-${(n += 1)}.git`);
    const hooks = join(dir, `hooks-${n}`);
    const marker = join(dir, `ran-${n}`);
    git(['init', '-q', '--bare', gitdir]);
    mkdirSync(hooks);
    writeFileSync(join(hooks, 'pre-auto-gc'), `#!/bin/sh\ntouch ${marker}\n`, { mode: 0o755 });
    for (const [key, value] of Object.entries({ 'core.hooksPath': hooks, 'gc.auto': '1' })) git(['--git-dir', gitdir, 'config', key, value]);
    // Loose objects enough for gc --auto at gc.auto=1: more than one in the folder git samples (objects/17).
    const writer = new ObjectWriter(gitdir);
    let sampled = 0;
    for (let i = 0; sampled < 3; i += 1) if ((await writer.write('blob', Buffer.from(`loose ${i}\n`))).startsWith('17')) sampled += 1;
    packLooseObjects(gitdir);
    // The objects are unreachable, so git leaves them loose and says so in gc.log as its detached run ends: the run is over.
    await until('the background packing', () => lastPackingFailure(gitdir) !== null);
    return existsSync(marker) ? 'RAN_COMMAND' : 'HOOK_NOT_RUN';
  });
});

describe("the state cache in a ledger's folder", () => {
  attack('a state cache another account left in the ledger folder, with a state no commit gives', 'library', 'CACHE_PASSED_OVER', async () => {
    const gitdir = kit.world.gitdir;
    const tree = git(['--git-dir', gitdir, 'rev-parse', 'main^{tree}']).trim();
    const stateOf = async (): Promise<number> => {
      const ledger = Ledger.open(gitdir);
      try {
        return (await ledger.state()).seq;
      } finally {
        ledger.close();
      }
    };
    const real = await stateOf();
    const forged = { ...(await kit.world.ledger.state()), seq: real + 1000 };
    try {
      // This account's own cache is taken as it is: the forgery below differs from it only in who could write it.
      saveCheckpoint(gitdir, forged, tree);
      expect(await stateOf()).toBe(real + 1000);
      saveCheckpoint(gitdir, forged, tree);
      if (process.getuid?.() === 0) chownSync(checkpointPath(gitdir), 4242, 4242);
      else chmodSync(checkpointPath(gitdir), 0o666);
      return (await stateOf()) === real ? 'CACHE_PASSED_OVER' : 'FORGED_STATE_USED';
    } finally {
      rmSync(checkpointPath(gitdir), { force: true });
    }
  });

  attack('a state cache of this account that others may write', 'library', 'CACHE_PASSED_OVER', async () => {
    const gitdir = kit.world.gitdir;
    const tree = git(['--git-dir', gitdir, 'rev-parse', 'main^{tree}']).trim();
    const real = (await kit.world.ledger.state()).seq;
    try {
      saveCheckpoint(gitdir, { ...(await kit.world.ledger.state()), seq: real + 1000 }, tree);
      chmodSync(checkpointPath(gitdir), 0o664);
      const ledger = Ledger.open(gitdir);
      try {
        return (await ledger.state()).seq === real ? 'CACHE_PASSED_OVER' : 'FORGED_STATE_USED';
      } finally {
        ledger.close();
      }
    } finally {
      rmSync(checkpointPath(gitdir), { force: true });
    }
  });
});

describe("the git coo starts to talk to a remote from a ledger's folder", () => {
  attack("a pre-push hook the ledger clone's config points git at, run when coo publishes", 'library', 'HOOK_NOT_RUN', async () => {
    const hooks = join(dir, `push-hooks-${(n += 1)}`);
    const marker = join(dir, `ran-${n}`);
    const remote = join(dir, `remote-${n}.git`);
    git(['init', '-q', '--bare', remote]);
    mkdirSync(hooks);
    writeFileSync(join(hooks, 'pre-push'), `#!/bin/sh\ntouch ${marker}\n`, { mode: 0o755 });
    git(['--git-dir', kit.world.gitdir, 'config', 'core.hooksPath', hooks]);
    try {
      const pushed = await runRemoteGit(['push', '--quiet', remote, `${kit.head()}:refs/heads/main`], { gitdir: kit.world.gitdir });
      expect(pushed.ok).toBe(true);
      return existsSync(marker) ? 'RAN_COMMAND' : 'HOOK_NOT_RUN';
    } finally {
      git(['--git-dir', kit.world.gitdir, 'config', '--unset-all', 'core.hooksPath']);
    }
  });
});
