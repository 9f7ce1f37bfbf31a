import { defineConfig } from 'vitest/config';

/** `npm run test:reliability`: the attack catalog, the properties at full strength, 30 seeded crashes and full load. */
export default defineConfig({
  test: {
    include: ['test/attacks/**/*.test.ts', 'test/properties/**/*.test.ts', 'test/reliability/**/*.test.ts'],
    globalSetup: ['test/setup/clear-tally.ts'],
    setupFiles: ['test/setup/bubblewrap.ts', 'test/setup/state-home.ts'],
    environment: 'node',
    testTimeout: 20 * 60_000,
    hookTimeout: 120_000,
    pool: 'forks',
    env: { COO_RELIABILITY: 'full', COO_PROPERTY_RUNS: '2000' },
  },
});
