/**
 * import() of a package that only some verbs load, on demand. One place for it: the bundled CLI runs
 * from V8's code cache through vm.Script (cli/main.ts), where Node 20 refuses import() without
 * --experimental-vm-modules, so the bundle takes this function from a CommonJS file beside it
 * (dist/cli/import-package.cjs, written by scripts/bundle-cli.mjs), where import() works as here.
 */
export function importPackage<T>(specifier: string): Promise<T> {
  return import(specifier) as Promise<T>;
}
