import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { packageRoot, readAsset } from '../../../src/assets.js';
import { codeOf } from '../../helpers/codes.js';

describe("coo's own files", () => {
  it('are found at the package root, from the sources as from the build', () => {
    expect(existsSync(join(packageRoot(), 'package.json'))).toBe(true);
    expect(readAsset('policy/actor_registry.v0.yaml').toString('utf8')).toContain('schema_version: actor_registry.v0');
  });

  it('name the missing file and the way out when one is gone, with a code, not a raw system error', () => {
    expect(codeOf(() => readAsset('policy/no-such-file.yaml'))).toBe('NOT_FOUND');
    expect(() => readAsset('policy/no-such-file.yaml')).toThrow(/policy\/no-such-file\.yaml cannot be read \(ENOENT\): the installation is incomplete; reinstall coo-commons/);
  });
});
