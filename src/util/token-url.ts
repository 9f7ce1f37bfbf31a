import { CooError } from '../errors.js';
import { isLoopbackHost } from './loopback-host.js';

/**
 * The origin of a URL a token is sent to: https, or plain http on a loopback address only (a test
 * server), and no credentials of its own in the URL. One rule for every place a token leaves the
 * runner (the push, the GitHub API). `others` names, for the message, the further forms the caller
 * accepts itself (a local path for a push).
 */
export function tokenOrigin(text: string, what: string, others = ''): string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new CooError('USAGE', `the ${what} is not a URL`);
  }
  if (url.username !== '' || url.password !== '') throw new CooError('USAGE', `the ${what} carries credentials: the runner gives its token itself`);
  if (url.protocol === 'http:' && !isLoopbackHost(url.hostname)) throw new CooError('USAGE', `refusing to send the token over plain http to ${url.hostname}: use https`);
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new CooError('USAGE', `the ${what} must be https:// or a loopback http://${others}, not ${url.protocol}`);
  return url.origin;
}

