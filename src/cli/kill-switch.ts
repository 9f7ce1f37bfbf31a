import type { Command } from 'commander';
import { CooError } from '../errors.js';
import { requireHolder } from '../authority/keys.js';
import { appendKillSwitch } from '../ledger/trust-update.js';
import { emit, jsonOption, keyOption, ledgerOption, loadPrivateKey, now, required } from './common.js';
import { remoteJson, remoteOption, remoteText, writeLedger } from './remote-option.js';

export function killSwitchVerb(program: Command): void {
  program
    .command('kill-switch')
    .description('stop (on) or allow (off) every advisory consult; a signed control entry. A stop belongs to whoever set it: the COO may release only a stop it set itself, and cannot take over a CEO stop by setting it again')
    .argument('<state>', 'on or off')
    .addOption(ledgerOption())
    .addOption(keyOption('the CEO or active COO private key; default $COO_KEY'))
    .option('--reason <text>', 'why, for the record')
    .addOption(remoteOption())
    .addOption(jsonOption())
    .action(async (state: string, opts: { ledger?: string; key?: string; reason?: string; remote?: string; json?: boolean }) => {
      if (state !== 'on' && state !== 'off') throw new CooError('USAGE', `kill-switch takes on or off, got ${JSON.stringify(state)}`);
      const reason = required(opts.reason, '--reason', 'why the switch is set, for the record');
      const key = loadPrivateKey(required(opts.key, '--key', 'a CEO or COO private key or $COO_KEY'));
      const gitdir = required(opts.ledger, '--ledger', 'the ledger path or $COO_LEDGER');
      const { result, remote } = await writeLedger(gitdir, opts.remote, async (ledger) => {
        const current = await ledger.state();
        const { actor } = requireHolder(current, key.publicKey.keyId, '--key');
        return { ...(await appendKillSwitch(ledger, state, reason, actor, key, now())), actor };
      });
      emit(opts.json, { state, version: result.version, commit: result.commit, set_by: result.actor, ...remoteJson(remote) }, () =>
        `kill switch ${state} (version ${result.version}, set by ${result.actor}) in ${result.commit}${remoteText(remote)}`,
      );
    });
}
