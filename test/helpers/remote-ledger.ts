import { existsSync, mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { formatPrivateKey, generatePrivateKey } from '../../src/crypto/keys.js';
import { initLedger } from '../../src/ledger/init.js';
import { cooAsync, json, type CliResult } from './cli.js';
import type { ActorPolicy } from '../../src/schema/policy.js';
import { makeTargetRepo } from './lane.js';
import { git } from './tmp.js';

/** A served ledger: `coo init` made it, with its pre-receive hook, in a folder a transport serves. */
export interface ServedLedger {
  /** The folder the transports serve (the http-backend project root). */
  readonly root: string;
  /** The bare ledger inside it. */
  readonly gitdir: string;
  readonly name: string;
  readonly keys: { readonly ceo: string; readonly coo: string };
  readonly ceoKeyId: string;
  /** A repository consults pin their context from. */
  readonly target: string;
  head(): string;
  seq(commit?: string): number;
}

export async function makeServedLedger(dir: string, name = 'ledger.git', policy?: ActorPolicy): Promise<ServedLedger> {
  const root = join(dir, 'served');
  mkdirSync(root, { recursive: true });
  const ceo = generatePrivateKey('ceo');
  const cooKey = generatePrivateKey('coo.hermes');
  const gitdir = join(root, name);
  await initLedger({ gitdir, ceoKey: ceo, actors: new Map([['coo.hermes', cooKey.publicKey], ['ea.codex', generatePrivateKey('ea.codex').publicKey]]), ...(policy === undefined ? {} : { policy }), now: new Date() });
  const keys = { ceo: join(dir, 'ceo.key'), coo: join(dir, 'coo.key') };
  writeFileSync(keys.ceo, formatPrivateKey(ceo), { mode: 0o600 });
  writeFileSync(keys.coo, formatPrivateKey(cooKey), { mode: 0o600 });
  const target = join(dir, 'target');
  makeTargetRepo(target);
  const head = (): string => git(['--git-dir', gitdir, 'rev-parse', 'main']).trim();
  return {
    root,
    gitdir,
    name,
    keys,
    ceoKeyId: ceo.publicKey.keyId,
    target,
    head,
    seq: (commit = head()) => Number(/Ledger-Seq: (\d+)/.exec(git(['--git-dir', gitdir, 'log', '-1', '--format=%B', commit]))?.[1]),
  };
}

/** One writer's machine: its own HOME, its own clone, the transport's client settings. */
export interface Writer {
  readonly home: string;
  readonly gitdir: string;
  readonly url: string;
  readonly env: NodeJS.ProcessEnv;
  head(): string;
}

/** Makes a writer with `coo clone URL DIR --trust-root` in its own HOME (without blocking: the server may live in this process). */
export async function makeWriter(dir: string, name: string, served: ServedLedger, url: string, transportEnv: NodeJS.ProcessEnv = {}): Promise<Writer> {
  const home = join(dir, 'homes', name);
  mkdirSync(home, { recursive: true });
  const env = { HOME: home, ...transportEnv };
  const gitdir = join(home, 'ledger.git');
  const cloned = await cooAsync(['clone', url, gitdir, '--trust-root', served.ceoKeyId, '--json'], { env });
  if (cloned.status !== 0) throw new Error(`coo clone ${url} failed: ${cloned.stderr}`);
  return { home, gitdir, url, env, head: () => git(['--git-dir', gitdir, 'rev-parse', 'main']).trim() };
}

/** The arguments of one consult through the remote. */
export function consultArgs(writer: Writer, served: ServedLedger, extra: readonly string[] = []): string[] {
  return ['consult', '--ledger', writer.gitdir, '--remote', writer.url, '--key', served.keys.coo, '--to', 'aa.chatgpt', '--repo', served.target, '--file', 'README.md', '--prompt', 'Is add() correct for NaN?', '--json', ...extra];
}

export function consultThrough(writer: Writer, served: ServedLedger, extra: readonly string[] = []): Promise<CliResult> {
  return cooAsync(consultArgs(writer, served, extra), { env: writer.env });
}

/** The --json result of a published write. */
export interface PublishedJson {
  readonly message_id: string;
  readonly commit: string | null;
  readonly existing: boolean;
  readonly remote: { readonly url: string; readonly tries: number; readonly conflicts: number };
}

export function publishedJson(result: CliResult): PublishedJson {
  if (result.status !== 0) throw new Error(`coo exited with ${result.status}: ${result.stderr}`);
  return json<PublishedJson>(result);
}

/** Puts a test-fixture script in front of the ledger's own pre-receive hook, which it then runs. */
function wrapHook(served: ServedLedger, script: (ledgerHook: string) => string): void {
  const hooks = join(served.gitdir, 'hooks');
  const ledgerHook = join(hooks, 'pre-receive.ledger');
  renameSync(join(hooks, 'pre-receive'), ledgerHook);
  writeFileSync(join(hooks, 'pre-receive'), script(ledgerHook), { mode: 0o755 });
}

/**
 * A barrier in the remote's hook: each push waits there until `count` pushes have arrived, so
 * every one of them was built on the same head and at most one can land; later pushes pass.
 */
export function holdPushesUntil(served: ServedLedger, dir: string, count: number): void {
  const arrivals = join(dir, 'barrier');
  mkdirSync(arrivals, { recursive: true });
  wrapHook(
    served,
    (ledgerHook) => `#!/bin/sh
# Test fixture: holds each push until ${count} pushes have arrived (at most 30 s), then runs the ledger's hook.
touch "${arrivals}/push.$$"
i=0
while [ "$(ls "${arrivals}" | wc -l)" -lt ${count} ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
exec "${ledgerHook}"
`,
  );
}

/**
 * A gate in the remote's hook: each push waits there until the test releases it (at most 30 s),
 * so a write through the remote is certainly in hand while the test acts.
 */
export function holdPushes(served: ServedLedger, dir: string): { arrived: () => boolean; release: () => void } {
  const gate = join(dir, 'gate');
  mkdirSync(gate, { recursive: true });
  wrapHook(
    served,
    (ledgerHook) => `#!/bin/sh
# Test fixture: holds each push until the test releases it (at most 30 s), then runs the ledger's hook.
touch "${gate}/arrived"
i=0
while [ ! -e "${gate}/release" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
exec "${ledgerHook}"
`,
  );
  return { arrived: () => existsSync(join(gate, 'arrived')), release: () => writeFileSync(join(gate, 'release'), '') };
}

/**
 * A scripted stream of competing writes: before each of the next pushes, the remote's main moves
 * one commit along `chain` (valid commits another writer made, already in the remote's objects),
 * so the push, built on the head before, can no longer land. Once the chain is spent, pushes pass.
 */
export function advanceBeforeEachPush(served: ServedLedger, dir: string, chain: readonly string[]): void {
  const queue = join(dir, 'chain');
  writeFileSync(queue, chain.map((commit) => `${commit}\n`).join(''));
  wrapHook(
    served,
    (ledgerHook) => `#!/bin/sh
# Test fixture: moves main one commit along a prepared chain before the ledger's hook judges the push.
set -e
input=$(cat)
if [ -s "${queue}" ]; then
  next=$(head -n 1 "${queue}")
  tail -n +2 "${queue}" > "${queue}.next"
  mv "${queue}.next" "${queue}"
  env -u GIT_DIR -u GIT_QUARANTINE_PATH -u GIT_OBJECT_DIRECTORY -u GIT_ALTERNATE_OBJECT_DIRECTORIES git --git-dir "${served.gitdir}" update-ref refs/heads/main "$next"
fi
printf '%s\\n' "$input" | "${ledgerHook}"
`,
  );
}

/** Takes the ledger's hook away, as on a forge where no pre-receive hook can run. */
export function removeHook(served: ServedLedger): void {
  renameSync(join(served.gitdir, 'hooks', 'pre-receive'), join(served.gitdir, 'hooks', 'pre-receive.off'));
}
