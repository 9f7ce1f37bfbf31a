import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { bundleScript } from '../../src/cli/bundle-script.js';
import { tempDir } from '../helpers/tmp.js';

const CLI = join(import.meta.dirname, '..', '..', 'dist', 'cli');
/** Made when the file is collected: a temporary folder made inside a test is never removed. */
const scratch = tempDir();

describe('the bundled coo command', () => {
  it('was built with a V8 code cache this node accepts for it', () => {
    const bundle = join(CLI, 'coo.cjs');
    const script = bundleScript(bundle, readFileSync(`${bundle}.cache`));
    expect(script.cachedDataRejected).toBe(false);
  });

  it('refuses a cache made for other source, and runs without one', () => {
    const bundle = join(CLI, 'coo.cjs');
    const other = join(scratch, 'other.cjs');
    writeFileSync(other, `${readFileSync(bundle, 'utf8')}\n// changed\n`);
    expect(bundleScript(other, readFileSync(`${bundle}.cache`)).cachedDataRejected).toBe(true);
  });

  // A copy of the launcher beside the repository's dist/, so packages and assets resolve as from dist/cli.
  const copy = mkdtempSync(join(CLI, '..', 'launcher-test-'));
  afterAll(() => rmSync(copy, { recursive: true, force: true }));
  for (const file of ['main.js', 'bundle-script.js', 'coo.cjs', 'import-package.cjs']) copyFileSync(join(CLI, file), join(copy, file));

  const run = (args: string[]) => spawnSync(process.execPath, [join(copy, 'main.js'), ...args], { encoding: 'utf8', env: { ...process.env, COO_LEDGER: '', COO_KEY: '' } });

  it('starts when the cache is damaged or missing, and loads on-demand packages from the bundle', () => {
    writeFileSync(join(copy, 'coo.cjs.cache'), Buffer.alloc(4096, 7));
    const version = run(['--version']);
    expect(version.stderr).toBe('');
    expect(version.stdout.trim()).toBe('0.1.0');
    rmSync(join(copy, 'coo.cjs.cache'));
    // init loads isomorphic-git through import-package.cjs: import() is refused inside the vm script itself.
    const dir = scratch;
    for (const actor of ['ceo', 'coo.hermes']) expect(run(['keygen', '--actor', actor, '--out', join(dir, 'keys')]).status).toBe(0);
    const init = run(['init', '--ledger', join(dir, 'ledger.git'), '--ceo-key', join(dir, 'keys', 'ceo.key'), '--actor', `coo.hermes=${join(dir, 'keys', 'coo.hermes.pub')}`]);
    expect(init.stderr).toBe('');
    expect(init.status).toBe(0);
    expect(existsSync(join(dir, 'ledger.git', 'hooks', 'pre-receive'))).toBe(true);
    const verify = run(['verify', '--ledger', join(dir, 'ledger.git'), '--no-checkpoint', '--json']);
    expect(verify.status).toBe(0);
    expect(JSON.parse(verify.stdout)).toMatchObject({ ok: true, commits: 1 });
  });

  it('records no cache unless the build asks for it', () => {
    rmSync(join(copy, 'coo.cjs.cache'), { force: true });
    expect(run(['--version']).status).toBe(0);
    expect(existsSync(join(copy, 'coo.cjs.cache'))).toBe(false);
  });
});
