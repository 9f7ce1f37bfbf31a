import { describe, expect, it } from 'vitest';
import { displayUrl, urlCredentials, withoutUserInfo } from '../../../src/util/display-url.js';
import { environmentSecrets, Scrubber } from '../../../src/util/scrub.js';

const learned = (url: string): string[] => environmentSecrets({ DATABASE_URL: url }).map((secret) => secret.value);

describe("a URL's password that a port-and-path reading would hide", () => {
  it('is known and hidden when nothing, or more digits than a port has, stand before its first /', () => {
    for (const [url, password, bare] of [
      ['postgres://user:/abc9Kq2Lw@db/x', '/abc9Kq2Lw', 'postgres://db/x'],
      ['postgresql://app:/Zq81+w0rd/Lm@[2001:db8::1]:5432/app', '/Zq81+w0rd/Lm', 'postgresql://[2001:db8::1]:5432/app'],
      ['mysql://root:123456789/Kx@db.internal/app', '123456789/Kx', 'mysql://db.internal/app'],
    ] as const) {
      expect(urlCredentials(url), url).toContain(password);
      expect(learned(url), url).toContain(password);
      expect(displayUrl(url), url).toBe(bare);
      expect(withoutUserInfo(`fatal: unable to access '${url}': refused`), url).toBe(`fatal: unable to access '${bare}': refused`);
      expect(new Scrubber(environmentSecrets({ DATABASE_URL: url })).text(`login with ${password} failed`), url).toBe('login with [removed: DATABASE_URL] failed');
    }
  });

  it('is known whole when it holds an @ and a /, and the password before the first @ is known too', () => {
    const url = 'https://user:p@ss/w0rd@db.example';
    expect(learned(url)).toContain('p@ss/w0rd');
    expect(displayUrl(url)).toBe('https://db.example');
    expect(withoutUserInfo(`see ${url}/x now`)).toBe('see https://db.example/x now');
    expect(new Scrubber(environmentSecrets({ DATABASE_URL: url })).text('typed p@ss/w0rd twice')).toBe('typed [removed: DATABASE_URL] twice');
    // A path with an @ after a URL's credentials: the password WHATWG reads is still known.
    expect(learned('https://user:Pa55w0rd1@host/users/me@example.com')).toContain('Pa55w0rd1');
    expect(learned('ssh://git:Ssh/Pass9@w0rd@host/srv/L.git')).toContain('Ssh/Pass9@w0rd');
  });

  it('is known when it starts with $ and a small letter, while $PORT and ${PORT} before a / are both a port', () => {
    expect(learned('postgres://user:$ecret/x9Kq@db/x')).toContain('$ecret/x9Kq');
    for (const plain of ['http://localhost:$PORT/users/me@example.com', 'http://localhost:${PORT}/users/me@example.com', 'http://localhost:$VITE_PORT/@vite/client', 'http://localhost:$PORT/me@example.com']) {
      expect(learned(plain), plain).toEqual([]);
      expect(displayUrl(plain), plain).toBe(plain);
      expect(withoutUserInfo(`see ${plain} now`), plain).toBe(`see ${plain} now`);
    }
  });

  it('is not read into a path with an @ after a port, wherever the @ stands in the path', () => {
    for (const plain of ['http://localhost:8080/me@example.com', 'http://localhost:3000/profile@me', 'docker://localhost:5000/alpine@sha256:0123abcd', 'git+https://git.corp:8443/repo.git@v1.2.3', 'https://npm.corp.example:8443/coo-commons@1.4.0.tgz', 'https://host:8443/a/b@c', 'https://registry.example:8443/@scope/pkg', 'http://localhost:5173/@vite/client', 'https://host:8443/users/me@example.com', 'https://[::1]:8080/a@b', 'ssh://git@host:22/x@y', 'git@github.com:o/r.git']) {
      expect(learned(plain), plain).toEqual([]);
      expect(urlCredentials(plain), plain).toEqual([]);
      expect(displayUrl(plain), plain).toBe(plain);
      expect(withoutUserInfo(`see ${plain} now`), plain).toBe(`see ${plain} now`);
    }
  });
});

describe('a URL inside another URL in running text', () => {
  it('has its user info removed too, after a path or a query of the outer one', () => {
    expect(withoutUserInfo('fetching https://proxy.example/fetch/https://u:Secr3tPass@x.example/y failed')).toBe('fetching https://proxy.example/fetch/https://x.example/y failed');
    expect(withoutUserInfo('see https://a:Pa55/w0rd@b.example/go/ssh://git:S3cret@c/x now')).toBe('see https://b.example/go/ssh://git@c/x now');
    expect(displayUrl('https://proxy.example/fetch/https://u:Secr3tPass@x.example/y')).toBe('https://proxy.example/fetch/https://x.example/y');
  });
});

it('reads a proxy variable without a scheme as a URL, but not NO_PROXY, which lists hosts', () => {
  expect(environmentSecrets({ HTTPS_PROXY: 'user:Pr0xyPassw0rd@proxy:3128' }).map((secret) => secret.value)).toContain('Pr0xyPassw0rd');
  expect(environmentSecrets({ NO_PROXY: 'localhost,127.0.0.1,.corp.example,builder@host:8080', no_proxy: 'localhost,internal-registry@mirror:5000' })).toEqual([]);
});
