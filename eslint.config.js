import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const IO_MODULES = ['fs', 'node:fs', 'fs/promises', 'node:fs/promises', 'child_process', 'node:child_process', 'isomorphic-git', 'chokidar', 'node:net', 'node:http', '@octokit/rest', 'playwright-core'];
/** The pure core: schema, crypto, authority and the lane's decisions never touch the disk, git, processes or the network. */
const PURE = ['src/schema/**', 'src/crypto/**', 'src/authority/**', 'src/consult/lane.ts', 'src/lane/budget.ts', 'src/lane/context-manifest.ts', 'src/lane/request-key.ts', 'src/consult/input-tokens.ts', 'src/lane/oracle-inputs.ts', 'src/consult/providers/**', 'src/consult/answer.ts', 'src/consult/answer-patterns.ts', 'src/consult/proposals.ts', 'src/consult/prompt.ts', 'src/ledger/layout.ts', 'src/ledger/commit-format.ts', 'src/ledger/tree-format.ts', 'src/runner/readiness.ts', 'src/dispatch/outcome.ts', 'src/dispatch/git-tree.ts', 'src/lane/raw-tree.ts', 'src/dispatch/executor.ts', 'src/dispatch/stream-state.ts', 'src/dispatch/codex-events.ts', 'src/dispatch/claude-events.ts', 'src/audit/tar.ts'];

const ROOM_MESSAGES = {
  consult: 'The dispatch lane does not import the consult lane: what both use lives in src/lane/.',
  dispatch: 'The consult lane does not import the dispatch lane: what both use lives in src/lane/.',
  lane: 'Shared lane code sits below the lanes.',
  runner: 'The lanes do not reach into the runner: it lends them a LaneContext.',
  offline: 'The offline model servers are for the demo, `coo model serve` and tests; no lane contains or imports its own fake.',
};
/** Which rooms each room may not import. */
const ROOMS = {
  'src/consult/**': ['dispatch', 'runner', 'offline'],
  'src/dispatch/**': ['consult', 'runner', 'offline'],
  'src/lane/**': ['consult', 'dispatch', 'runner', 'offline'],
  'src/runner/**': ['offline'],
};

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'coverage/**', 'test-artifacts/**', 'bench/out/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { performance: 'readonly', process: 'readonly', Buffer: 'readonly', console: 'readonly', setTimeout: 'readonly', clearTimeout: 'readonly', setInterval: 'readonly', clearInterval: 'readonly', URL: 'readonly', TextDecoder: 'readonly', TextEncoder: 'readonly', fetch: 'readonly', AbortController: 'readonly' } },
    rules: {
      'no-restricted-syntax': ['error', { selector: 'ExportDefaultDeclaration', message: 'Use named exports.' }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      eqeqeq: ['error', 'always', { null: 'ignore' }],
    },
  },
  {
    files: PURE,
    rules: {
      'no-restricted-imports': ['error', { paths: IO_MODULES.map((name) => ({ name, message: 'The pure core does no I/O: pass facts in.' })), patterns: [{ group: ['**/ledger/ledger.js', '**/ledger/object-store.js', '**/ledger/history.js', '**/runner/**', '**/cli/**'], message: 'The pure core does not reach into the I/O shell.' }] }],
    },
  },
  // Rooms: the two lanes never import each other (what both use lives in src/lane/, below them), and
  // neither they, the room below them nor the runner imports the offline model servers (src/offline/).
  // A rule of its own, so that it adds to the pure core's no-restricted-imports instead of replacing it.
  ...Object.entries(ROOMS).map(([files, group]) => ({
    files: [files],
    rules: { '@typescript-eslint/no-restricted-imports': ['error', { patterns: group.map((room) => ({ group: [`**/${room}/**`], message: ROOM_MESSAGES[room] })) }] },
  })),
  {
    files: ['eslint.config.js', 'vitest.config.ts', 'vitest.*.config.ts', 'test/setup/**', 'bench/**/*.mjs', 'test/**/*.mjs'],
    rules: { 'no-restricted-syntax': 'off' },
  },
);
