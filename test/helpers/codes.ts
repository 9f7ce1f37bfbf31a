import { isCooError } from '../../src/errors.js';

/** The CooError code a call throws, or 'no error'. Anything that is not a CooError fails the test. */
export function codeOf(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    if (isCooError(error)) return error.code;
    throw error;
  }
  return 'no error';
}

export async function codeOfAsync(fn: () => Promise<unknown>): Promise<string> {
  try {
    await fn();
  } catch (error) {
    if (isCooError(error)) return error.code;
    throw error;
  }
  return 'no error';
}
