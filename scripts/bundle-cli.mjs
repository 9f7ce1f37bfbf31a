// npm run build, after tsc: writes the `coo` command as one file, dist/cli/main.js.
//
// Loading the CLI as some 300 separate ES modules (ours, zod's, yaml's, commander's) took about
// 0.2 s of resolving and linking before any verb ran; bundled, `coo --help` starts in about half the
// time. The library (dist/index.js and the modules beside it) stays as tsc writes it. Packages that
// only some verbs load, on demand, stay outside the bundle.
import { build } from 'rolldown';

await build({
  input: 'src/cli/main.ts',
  platform: 'node',
  external: [/^node:/, /^isomorphic-git(\/|$)/, /^@octokit\/rest(\/|$)/],
  resolve: { extensionAlias: { '.js': ['.ts', '.js'] } },
  output: { file: 'dist/cli/main.js', format: 'esm', sourcemap: true },
});
