import { readFileSync } from 'node:fs';
import { Script } from 'node:vm';

/**
 * The bundled CLI (coo.cjs) as a script: CommonJS's own wrapper around it, on its first line so line
 * numbers stay those of the file, compiled with V8's code cache when there is one. V8 checks the
 * cache against the source, its own version and its flags; `script.cachedDataRejected` says whether
 * it took it.
 */
export function bundleScript(bundle: string, cachedData: Buffer | undefined): Script {
  const source = `(function (exports, require, module, __filename, __dirname) {${readFileSync(bundle, 'utf8')}\n})`;
  return new Script(source, { filename: bundle, ...(cachedData === undefined ? {} : { cachedData }) });
}

export type BundleMain = (exports: object, require: NodeJS.Require, module: object, filename: string, dirname: string) => void;
