import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// Each test file's runners get a state root of their own (src/util/runner-folders.ts): every sandbox hides
// each runner folder listed there, and a folder that a test of another file, running at the same time, deleted
// between that listing and bubblewrap's start failed the sandbox ("Can't mkdir ...: Read-only file system").
process.env['XDG_STATE_HOME'] = mkdtempSync(join(tmpdir(), 'coo-test-state-'));
