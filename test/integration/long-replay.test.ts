import { beforeAll, describe, expect, it } from 'vitest';
import { sshSign, useKit, type Kit } from '../helpers/attack-kit.js';
import { dispatchEnvelope, messageFiles } from '../helpers/ledger.js';
import { fixtureEnvelope } from '../helpers/stock.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * A replay of 256 commits or more checks signatures on a worker thread, and the validator takes
 * the worker's parsed signatures and verdicts. These tamperings sit at the end of a history long
 * enough to take that path, so its verdicts are held to the same codes as the single-thread path.
 */
const dir = tempDir();
const getKit = useKit(dir);
let kit: Kit;
const LENGTH = 300;

beforeAll(async () => {
  kit = getKit();
  for (let i = 0; i < LENGTH; i += 1) expect(await kit.append([...messageFiles(dispatchEnvelope())], kit.keys.coo.key)).toBe('accepted');
  expect(await kit.seq()).toBeGreaterThanOrEqual(LENGTH);
}, 120_000);

const folder = (id: string): string => `messages/2026-11/30/07/${id}`;
const id = 'msg_01M8NQFJ01J7CG66HWNDDJ9001';

describe(`a history of more than ${LENGTH} commits`, () => {
  it('verifies clean', () => {
    expect(kit.verifyCodes()).toEqual([]);
  });

  it('finds a flipped byte in its last entry', async () => {
    const envelope = fixtureEnvelope(id, id);
    const sig = sshSign(envelope, kit.keys.coo.file);
    let codes: string[] = [];
    await kit.bypass({ [`${folder(id)}/envelope.yaml`]: envelope.replace('issue_number: 62', 'issue_number: 63'), [`${folder(id)}/envelope.yaml.sig`]: sig }, { key: kit.keys.coo.file, sign: false }, () => {
      codes = kit.verifyCodes();
    });
    expect(codes).toEqual(['SIG_INVALID']);
  });

  it('finds a flipped byte in its last commit message', async () => {
    let codes: string[] = [];
    await kit.rewriteHead((raw) => raw.replace(/\n\n(.)/, (_m, first: string) => `\n\n${first === 'X' ? 'Y' : 'X'}`), () => {
      codes = kit.verifyCodes();
    });
    expect(codes).toEqual(['SIG_INVALID']);
  });

  it('finds an entry signed in the commit namespace', async () => {
    const envelope = fixtureEnvelope(id, id);
    let codes: string[] = [];
    await kit.bypass({ [`${folder(id)}/envelope.yaml`]: envelope, [`${folder(id)}/envelope.yaml.sig`]: sshSign(envelope, kit.keys.coo.file, 'git') }, { key: kit.keys.coo.file, sign: false }, () => {
      codes = kit.verifyCodes();
    });
    expect(codes).toEqual(['SIG_NAMESPACE']);
  });
});
