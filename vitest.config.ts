import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Runners on four clones over ssh: minutes of real work, run by `npm run test:reliability` alone.
    exclude: ['test/reliability/runner-remote.test.ts', 'node_modules/**'],
    globalSetup: ['test/setup/clear-tally.ts'],
    environment: 'node',
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    reporters: ['default'],
  },
});
