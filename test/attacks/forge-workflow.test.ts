import { beforeAll, describe, expect, it } from 'vitest';
import { forgeWorkflowPath, sigPath } from '../../src/ledger/layout.js';
import { LIMITS } from '../../src/limits.js';
import { attack, firstOr, sshSign, useKit, type Kit } from '../helpers/attack-kit.js';
import { tempDir } from '../helpers/tmp.js';

const dir = tempDir();
const getKit = useKit(dir);
let kit: Kit;

/** A workflow that would make the forge's check pass whatever the ledger holds. */
const ALWAYS_PASSES = 'on:\n  push:\n    branches: [main]\njobs:\n  verify:\n    runs-on: ubuntu-24.04\n    steps:\n      - run: "true"\n';
const WORKFLOW = forgeWorkflowPath('coo-verify.yml');
const SIG = sigPath(WORKFLOW);

beforeAll(async () => {
  kit = getKit();
  expect(await kit.append([{ path: WORKFLOW, bytes: Buffer.from(`${ALWAYS_PASSES}# the CEO's check\n`) }], kit.keys.ceo.key)).toBe('accepted');
});

describe("the forge's check: only the CEO sets what it runs", () => {
  attack('the check replaced by the COO, pushed with stock git', 'hook', 'TRUST_AUTHORITY', () =>
    kit.push({ [WORKFLOW]: ALWAYS_PASSES }, { key: kit.keys.coo.file, sign: [WORKFLOW] }),
  );

  attack('the check replaced through the library with the COO key', 'library', 'TRUST_AUTHORITY', () => kit.append([{ path: WORKFLOW, bytes: Buffer.from(ALWAYS_PASSES) }], kit.keys.coo.key));

  attack('a second check laid by an execution agent', 'hook', 'TRUST_AUTHORITY', () =>
    kit.push({ [forgeWorkflowPath('also.yml')]: ALWAYS_PASSES }, { key: kit.keys.codex.file, sign: [forgeWorkflowPath('also.yml')] }),
  );

  attack('the check replaced by an unknown key', 'hook', 'SIGNER_UNKNOWN', () => kit.push({ [WORKFLOW]: ALWAYS_PASSES }, { key: kit.keys.intruder.file, sign: [WORKFLOW] }));

  attack('the check replaced without a new signature', 'hook', 'SIG_MISSING', () => kit.push({ [WORKFLOW]: ALWAYS_PASSES }, { key: kit.keys.ceo.file, sign: false }));

  attack('the check replaced beside a CEO signature of other bytes', 'hook', 'SIG_INVALID', () =>
    kit.push({ [WORKFLOW]: ALWAYS_PASSES, [SIG]: sshSign('on: workflow_dispatch\n', kit.keys.ceo.file) }, { key: kit.keys.ceo.file, sign: false }),
  );

  attack("the check signed by the CEO in a commit the COO signs (the CEO's signature carried over)", 'hook', 'SIGNER_MISMATCH', () =>
    kit.push({ [WORKFLOW]: ALWAYS_PASSES, [SIG]: sshSign(ALWAYS_PASSES, kit.keys.ceo.file) }, { key: kit.keys.coo.file, sign: false }),
  );

  attack('the check signed in the namespace of git commits', 'hook', 'SIG_NAMESPACE', () =>
    kit.push({ [WORKFLOW]: ALWAYS_PASSES, [SIG]: sshSign(ALWAYS_PASSES, kit.keys.ceo.file, 'git') }, { key: kit.keys.ceo.file, sign: false }),
  );

  attack('a new signature of the check without the check', 'hook', 'ENTRY_UNPAIRED', async () => {
    const current = (await kit.world.ledger.readFile(WORKFLOW))!.toString('utf8');
    return kit.push({ [SIG]: sshSign(`${current}\n`, kit.keys.ceo.file) }, { key: kit.keys.ceo.file, sign: false });
  });

  attack('the check removed by the CEO', 'verify', 'WRITE_ONCE', async () => {
    let code = '';
    await kit.bypass({}, { key: kit.keys.ceo.file, remove: [WORKFLOW, SIG] }, () => {
      code = firstOr(kit.verifyCodes(), 'WRITE_ONCE');
    });
    return code;
  });

  attack('a check larger than a forge file may be', 'hook', 'POLICY_LIMIT', () =>
    kit.push({ [WORKFLOW]: `${ALWAYS_PASSES}# ${'x'.repeat(LIMITS.forgeFileBytes)}\n` }, { key: kit.keys.ceo.file, sign: [WORKFLOW] }),
  );

  attack('a file elsewhere under .github (an action the check could call)', 'hook', 'PATH_INVALID', () =>
    kit.push({ '.github/actions/verify/action.yml': 'runs:\n  using: node24\n' }, { key: kit.keys.ceo.file, sign: ['.github/actions/verify/action.yml'] }),
  );

  attack('the same check laid again, which changes nothing', 'library', 'PATH_INVALID', async () => {
    const current = (await kit.world.ledger.readFile(WORKFLOW))!;
    return kit.append([{ path: WORKFLOW, bytes: current }], kit.keys.ceo.key);
  });

  it('takes a new version of the check that the CEO signed with ssh-keygen and committed with stock git through the hook, and coo verify agrees', async () => {
    const replaced = `${ALWAYS_PASSES}# version 2\n`;
    expect(await kit.push({ [WORKFLOW]: replaced }, { key: kit.keys.ceo.file, sign: [WORKFLOW] })).toBe('accepted');
    expect((await kit.world.ledger.readFile(WORKFLOW))!.toString('utf8')).toBe(replaced);
    expect(kit.verifyCodes()).toEqual([]);
  });
});
