// npm run build, after tsc: bundles the `coo` command into dist/cli/coo.cjs and records V8's code
// cache for it (dist/cli/coo.cjs.cache), which dist/cli/main.js loads it with (see src/cli/main.ts).
//
// Loading the CLI as some 300 separate ES modules (ours, zod's, yaml's, commander's) took about
// 0.2 s of resolving and linking before any verb ran; bundled, `coo --help` starts in about half the
// time, and from the code cache in about a third less again. The library (dist/index.js and the
// modules beside it) stays as tsc writes it. Packages that only some verbs load, on demand, stay
// outside the bundle.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { build } from 'rolldown';

const cache = 'dist/cli/coo.cjs.cache';
rmSync(cache, { force: true });
// Code run through vm.Script may not call import() on Node 20 (src/util/import-package.ts): the one
// function that does comes from a CommonJS file beside the bundle, where it may.
const importPackage = resolve('src/util/import-package.ts');
writeFileSync('dist/cli/import-package.cjs', "'use strict';\n// Written by scripts/bundle-cli.mjs: src/util/import-package.ts for the bundled CLI.\nexports.importPackage = (specifier) => import(specifier);\n");
await build({
  input: 'src/cli/coo.ts',
  platform: 'node',
  external: [/^node:/, /^isomorphic-git(\/|$)/, /^@octokit\/rest(\/|$)/],
  plugins: [
    {
      name: 'import-package',
      resolveId: async function (source, importer) {
        const found = await this.resolve(source, importer, { skipSelf: true });
        return found?.id === importPackage ? { id: './import-package.cjs', external: true } : null;
      },
    },
  ],
  resolve: { extensionAlias: { '.js': ['.ts', '.js'] } },
  output: { file: 'dist/cli/coo.cjs', format: 'cjs', strict: true, sourcemap: true },
});

// The cache holds what a run compiled: the offline demo (a ledger, two consults, a verify) calls
// most of what the verbs share. It runs on 127.0.0.1 only and leaves nothing behind.
const dir = mkdtempSync(join(tmpdir(), 'coo-build-'));
try {
  const demo = spawnSync(process.execPath, ['dist/cli/main.js', 'demo', '--dir', join(dir, 'demo')], { env: { ...process.env, COO_RECORD_CODE_CACHE: '1' }, encoding: 'utf8' });
  if (demo.status !== 0) {
    process.stderr.write(`bundle-cli: the demo failed (exit ${demo.status}), so coo starts without a code cache:\n${demo.stderr}`);
    rmSync(cache, { force: true });
  } else if (!existsSync(cache)) {
    process.stderr.write(`bundle-cli: no code cache was recorded, so coo starts without one:\n${demo.stderr}`);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
