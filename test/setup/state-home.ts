import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';

// Each test file's runners get a state root of their own (src/util/runner-folders.ts): every sandbox hides
// each runner folder listed there, and a folder that a test of another file, running at the same time, deleted
// between that listing and bubblewrap's start failed the sandbox ("Can't mkdir ...: Read-only file system").
const root = mkdtempSync(join(tmpdir(), 'coo-test-state-'));
process.env['XDG_STATE_HOME'] = root;
afterAll(() => rmSync(root, { recursive: true, force: true }));
