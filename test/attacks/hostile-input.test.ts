import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe } from 'vitest';
import { attack, useKit, type Kit } from '../helpers/attack-kit.js';
import { coo } from '../helpers/cli.js';
import { fixtureEnvelope } from '../helpers/stock.js';
import { tempDir } from '../helpers/tmp.js';

const dir = tempDir();
const getKit = useKit(dir);
let kit: Kit;
beforeAll(async () => {
  kit = getKit();
});

let n = 0;
/** `coo append` of a file with these bytes: the code it exits with, or 'accepted'. */
function appendBytes(bytes: string | Buffer): string {
  n += 1;
  const file = join(dir, `hostile-${n}.yaml`);
  writeFileSync(file, bytes);
  const before = kit.head();
  const result = coo(['append', '--ledger', kit.world.gitdir, '--key', kit.keys.coo.file, file, '--json']);
  if (result.status === 0) return 'accepted';
  if (kit.head() !== before) return 'LEDGER_CHANGED';
  if (/\n\s+at /.test(result.stderr)) return 'STACK_TRACE';
  return (JSON.parse(result.stdout) as { error: { code: string } }).error.code;
}

const base = fixtureEnvelope('msg_01M8NQFJ01J7CG66HWNDDJ8600', 'hostile-base');

describe('hostile input through coo append', () => {
  attack('a billion-laughs alias bomb', 'cli', 'YAML_ALIAS', () => appendBytes(`a: &a ["x","x","x"]\nb: &b [*a,*a,*a]\nc: &c [*b,*b,*b]\nd: [*c,*c,*c]\n${base}`));
  attack('a nesting bomb', 'cli', 'YAML_DEPTH', () => appendBytes(`x: ${'['.repeat(200)}${']'.repeat(200)}\n`));
  attack('a duplicate key that would hide a second target', 'cli', 'YAML_DUPLICATE_KEY', () => appendBytes(`${base}target_actor: ea.claude_code\n`));
  attack('a custom tag', 'cli', 'YAML_TAG', () => appendBytes(base.replace('intent: ea_dispatch', 'intent: !!python/object:os.system ea_dispatch')));
  attack('an enormous file', 'cli', 'YAML_TOO_LARGE', () => appendBytes(`${base}padding: "${'x'.repeat(400_000)}"\n`));
  attack('invalid UTF-8', 'cli', 'YAML_INVALID_UTF8', () => appendBytes(Buffer.concat([Buffer.from(base), Buffer.from([0xc3, 0x28, 0x0a])])));
  attack('a wrong type', 'cli', 'SCHEMA_INVALID', () => appendBytes(base.replace('max_hops: 3', 'max_hops: "three"')));
  attack('an unknown field smuggling a command', 'cli', 'SCHEMA_INVALID', () => appendBytes(`${base}run: "rm -rf /"\n`));
  attack('a YAML 1.1 directive that would turn yes into true', 'cli', 'YAML_SYNTAX', () => appendBytes(`%YAML 1.1\n---\n${base}`));
  attack('two documents in one file', 'cli', 'YAML_MULTI_DOCUMENT', () => appendBytes(`${base}---\n${base}`));
});
