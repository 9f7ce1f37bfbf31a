/**
 * Why the provider key a lane hands its model call cannot be used, or null when it can: one rule for
 * Oracle and every executor. Unset or empty, it is missing. Provider keys are printable ASCII
 * without spaces; one that is only whitespace, or holds a space, tab or newline (read from a file
 * with its line end, pasted with a blank) is sent as a header no provider takes, so every attempt
 * would be claimed and fail: it is refused at start instead, the message waiting unclaimed. So is
 * one that holds a quote mark (no provider's key does): pasted with the quotes of a shell or .env
 * line (`"sk-..."`), a systemd Environment= or a Compose file passes them on as part of the value.
 * `name` is the environment variable's; the value is never repeated.
 */
export function providerKeyProblem(name: string, value: string | undefined): string | null {
  if (value === undefined || value === '') return `${name} is not set in the runner's environment`;
  if (value.trim() === '') return `${name} is set to whitespace alone in the runner's environment: set it to the provider's key`;
  if (!/^[\x21-\x7e]+$/.test(value)) return `${name} holds a space, a line end or another character no provider key has (a key read from a file with its newline?): set it to the key alone`;
  if (/["'`]/.test(value)) return `${name} holds a quote mark, which no provider key has (pasted with the quotes of a shell or .env line?): set it to the key alone, without quotes`;
  return null;
}
