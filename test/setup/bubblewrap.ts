import { findBwrap } from '../../src/util/bubblewrap.js';

// Every lane fails closed without bubblewrap (src/util/bubblewrap.ts): say so once per test file, so
// that a test that runs a lane is read as failing for want of it, not on whatever it asserts next.
if (findBwrap() === null) {
  process.stderr.write('coo tests: bubblewrap is not installed, so every lane refuses to run (SANDBOX_UNAVAILABLE) and the tests that run one fail: apt-get install bubblewrap\n');
}
