import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { git, gitEnv, run } from './tmp.js';

/** A valid COO -> EA dispatch (test/fixtures/dispatch.yaml), created 2026-11-30T07:00:00Z; its task is FIXTURE_TASK beside it as prompt.md. */
export function fixtureEnvelope(id: string, idempotencyKey: string): string {
  return readFileSync(join(import.meta.dirname, '..', 'fixtures', 'dispatch.yaml'), 'utf8').replace(/MESSAGE_TAIL/g, id.slice(4)).replace(/MESSAGE_ID/g, id).replace(/IDEMPOTENCY/g, idempotencyKey);
}

/** The task of every fixture dispatch. */
export const FIXTURE_TASK = 'Fix add() so that test.sh passes.\n';

/** A fixture dispatch with its task, keyed by ledger path: what one commit adds. */
export function fixtureFiles(id: string, idempotencyKey: string): Record<string, string> {
  const folder = `messages/2026-11/30/07/${id}`;
  return { [`${folder}/envelope.yaml`]: fixtureEnvelope(id, idempotencyKey), [`${folder}/prompt.md`]: FIXTURE_TASK };
}

/** Writes files into a clone, signs the YAML entries with ssh-keygen, and commits with `git commit -S` using `key`. */
export function stockCommit(
  work: string,
  files: Record<string, string>,
  options: { key: string | null; seq: number; entryKey?: string; message?: string; sign?: boolean | readonly string[]; date?: string },
): void {
  for (const [path, content] of Object.entries(files)) {
    const full = join(work, path);
    mkdirSync(dirname(full), { recursive: true });
    writeFileSync(full, content);
    const signIt = Array.isArray(options.sign) ? options.sign.includes(path) : path.endsWith('.yaml') && options.sign !== false;
    if (signIt) {
      // ssh-keygen asks before replacing a signature file, and on a closed stdin keeps the old one (exit 0).
      rmSync(`${full}.sig`, { force: true });
      const signed = run('ssh-keygen', ['-Y', 'sign', '-n', 'coo-commons.entry.v0', '-f', options.entryKey ?? options.key ?? '', full]);
      if (signed.status !== 0) throw new Error(signed.stderr);
    }
  }
  git(['add', '-A'], { cwd: work });
  const signing = options.key === null ? [] : ['-c', 'gpg.format=ssh', '-c', `user.signingkey=${options.key}`];
  const dated = options.date === undefined ? {} : { GIT_COMMITTER_DATE: options.date, GIT_AUTHOR_DATE: options.date };
  git([...signing, 'commit', '-q', ...(options.key === null ? [] : ['-S']), '-m', options.message ?? 'by hand', '-m', `Ledger-Seq: ${options.seq}`], { cwd: work, env: { ...gitEnv(), ...dated } });
}

export function push(work: string, ...args: string[]): { status: number | null; stderr: string } {
  const result = run('git', ['push', 'origin', ...args], { cwd: work, env: gitEnv() });
  return { status: result.status, stderr: result.stderr };
}
