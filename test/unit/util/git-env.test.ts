import { afterEach, describe, expect, it } from 'vitest';
import { GIT_NO_FETCH, GIT_OWN_OBJECTS, gitEnvironment, isolatedGitEnvironment } from '../../../src/util/git-env.js';

/** git's own variables in coo's environment: which reach the gits coo starts. */

const SET = {
  GIT_DIR: '/elsewhere/.git',
  GIT_CEILING_DIRECTORIES: '/home',
  GIT_CONFIG_COUNT: '1',
  GIT_CONFIG_KEY_0: 'attr.tree',
  GIT_CONFIG_VALUE_0: '4b825dc642cb6eb9a060e54bf8d69288fbee4904',
  GIT_CONFIG_PARAMETERS: "'fsck.gitmodulesurl'='ignore'",
  GIT_ATTR_SOURCE: '4b825dc642cb6eb9a060e54bf8d69288fbee4904',
  GIT_ALLOW_PROTOCOL: 'file:https',
};
const before = Object.fromEntries(Object.keys(SET).map((name) => [name, process.env[name]]));
afterEach(() => {
  for (const [name, value] of Object.entries(before)) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
});

describe('the environment of a git coo starts', () => {
  it("drops what points git at another repository, keeps the operator's settings and a ceiling (which points git at none), and says what coo tells every git last", () => {
    Object.assign(process.env, SET);
    const env = gitEnvironment({ EXTRA: '1' });
    expect(env['GIT_DIR']).toBeUndefined();
    expect(env['GIT_CEILING_DIRECTORIES']).toBe('/home');
    expect(env['GIT_CONFIG_COUNT']).toBe('1');
    expect(env['GIT_ALLOW_PROTOCOL']).toBe(GIT_NO_FETCH['GIT_ALLOW_PROTOCOL']);
    expect(env['EXTRA']).toBe('1');
  });

  it("for a git that judges the work by git's own rules (fsck, check-attr): none of the runner's GIT_* variables, so no setting turns a check or the attributes read off; what coo tells every git stays", () => {
    Object.assign(process.env, SET);
    const env = isolatedGitEnvironment({ GIT_CONFIG_NOSYSTEM: '1' });
    expect(Object.keys(env).filter((name) => name.startsWith('GIT_')).sort()).toEqual([...Object.keys(GIT_OWN_OBJECTS), ...Object.keys(GIT_NO_FETCH), 'GIT_CONFIG_NOSYSTEM'].sort());
    expect(env['GIT_ALLOW_PROTOCOL']).toBe(GIT_NO_FETCH['GIT_ALLOW_PROTOCOL']);
    expect(env['PATH']).toBe(process.env['PATH']);
  });
});
