import { afterEach, describe, expect, it } from 'vitest';
import { commandLineSecrets, heldSecrets } from '../../../src/cli/terminal.js';

const TOKEN = 'ghp_remoteToken0123456789';
const FORGE = 'forgeToken-9876543210abc';
const argv = process.argv;
afterEach(() => {
  process.argv = argv;
});

describe("the CLI's own scrubber", () => {
  it("knows the credentials of a URL given on the command line and the token the variable --github-token-env names, and nothing of a prompt's words", () => {
    const env = { FORGE_PUSH: FORGE };
    const values = (args: string[]): string[] => commandLineSecrets(['node', 'coo', ...args], env).map((secret) => secret.value);
    expect(values(['watch', '--remote', `https://operator:${TOKEN}@127.0.0.1/ledger.git`])).toContain(TOKEN);
    expect(values(['watch', `--remote=https://${TOKEN}@127.0.0.1/ledger.git`])).toContain(TOKEN);
    expect(values(['watch', '--github-token-env', 'FORGE_PUSH'])).toEqual([FORGE]);
    expect(values(['watch', '--github-token-env=FORGE_PUSH'])).toEqual([FORGE]);
    expect(values(['watch', '--github-token-env', 'UNSET_NAME'])).toEqual([]);
    expect(values(['consult', '--prompt', 'Does lookup?key=abcdef0123456789 leak?'])).toEqual([]);
  });

  it('removes them from what the CLI says about a remote that quotes them back', () => {
    process.argv = ['node', 'coo', 'watch', '--remote', `https://operator:${TOKEN}@127.0.0.1/ledger.git`];
    const said = heldSecrets().text(`REMOTE_REJECTED: the remote said: bad credentials ${TOKEN} for operator`);
    expect(said).not.toContain(TOKEN);
    expect(said).toContain('REMOTE_REJECTED: the remote said: bad credentials');
  });
});
