import { describe, expect, it } from 'vitest';
import { loopbackAddress } from '../../../src/lane/endpoint.js';
import { tokenOrigin } from '../../../src/util/token-url.js';

describe('which host is this machine\'s loopback', () => {
  it('is one rule for a token over plain http and for a model endpoint the start reaches on this machine', () => {
    for (const host of ['127.0.0.1', 'localhost', '[::1]']) {
      expect(tokenOrigin(`http://${host}:8080/x`, 'URL')).toBe(`http://${host}:8080`);
      expect(loopbackAddress(`http://${host}:8080/v1`)).toEqual({ host: host.replace(/^\[(.*)\]$/, '$1'), port: 8080 });
    }
    for (const host of ['10.0.0.1', 'example.test', '127.0.0.1.example.test']) {
      expect(() => tokenOrigin(`http://${host}:8080/x`, 'URL')).toThrow(/refusing to send the token over plain http/);
      expect(loopbackAddress(`http://${host}:8080/v1`)).toBeNull();
    }
  });
});
