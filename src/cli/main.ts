#!/usr/bin/env node
/**
 * The `coo` command. npm run build bundles the CLI (cli/coo.ts and all it imports) into coo.cjs
 * beside this file, then runs the offline demo once to record V8's code cache for it (coo.cjs.cache):
 * loaded with that cache, the bundle and the functions a run calls are not compiled again on every
 * start (`coo --version` about 0.19 s to 0.13 s, measured). A cache that does not match the source,
 * this node or its flags is ignored and the bundle compiled as usual. Without a bundle (tsc alone),
 * the CLI's modules load one by one.
 */
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleScript, type BundleMain } from './bundle-script.js';

const here = dirname(fileURLToPath(import.meta.url));
const bundle = join(here, 'coo.cjs');

if (existsSync(bundle)) {
  const cacheFile = `${bundle}.cache`;
  const script = bundleScript(bundle, existsSync(cacheFile) ? readFileSync(cacheFile) : undefined);
  const module = { exports: {} };
  (script.runInThisContext() as BundleMain).call(module.exports, module.exports, createRequire(bundle), module, bundle, here);
  if (process.env['COO_RECORD_CODE_CACHE'] === '1') {
    // Build time only (scripts/bundle-cli.mjs): at exit, so the functions the run called are in the cache.
    process.on('exit', () => {
      try {
        writeFileSync(`${cacheFile}.tmp`, script.createCachedData());
        renameSync(`${cacheFile}.tmp`, cacheFile);
      } catch (error) {
        process.stderr.write(`coo: cannot record the code cache ${cacheFile}: ${(error as Error).message}\n`);
      }
    });
  }
} else {
  await import('./coo.js');
}
