/**
 * The keys that say whose they are by their start, by the variable each provider's own clients read.
 * A key is matched only against the others: a gateway's or an offline model's key may look like anything.
 */
const KEY_SHAPES: ReadonlyArray<{ readonly provider: string; readonly variable: string; readonly prefix: RegExp; readonly start: string }> = [
  { provider: 'Anthropic', variable: 'ANTHROPIC_API_KEY', prefix: /^sk-ant-/, start: 'sk-ant-' },
  { provider: 'OpenRouter', variable: 'OPENROUTER_API_KEY', prefix: /^sk-or-/, start: 'sk-or-' },
  { provider: 'Google', variable: 'GEMINI_API_KEY', prefix: /^AIza/, start: 'AIza' },
  { provider: 'OpenAI', variable: 'OPENAI_API_KEY', prefix: /^sk-(proj|svcacct|admin)-/, start: 'sk-proj-, sk-svcacct- or sk-admin-' },
];

/**
 * Why the provider key a lane hands its model call cannot be used, or null when it can: one rule for
 * Oracle and every executor. Unset or empty, it is missing. Provider keys are printable ASCII
 * without spaces; one that is only whitespace, or holds a space, tab or newline (read from a file
 * with its line end, pasted with a blank) is sent as a header no provider takes, so every attempt
 * would be claimed and fail: it is refused at start instead, the message waiting unclaimed. So is
 * one that holds a quote mark (no provider's key does): pasted with the quotes of a shell or .env
 * line (`"sk-..."`), a systemd Environment= or a Compose file passes them on as part of the value.
 * `ownApi`: the key goes to the provider's own API (no endpoint the runner names), where a key that
 * reads as another provider's (an Anthropic key in OPENAI_API_KEY) is refused on every call: each
 * attempt would be claimed and end unauthorised, so it is refused at start too.
 * `name` is the environment variable's; the value is never repeated.
 */
export function providerKeyProblem(name: string, value: string | undefined, ownApi = false): string | null {
  if (value === undefined || value === '') return `${name} is not set in the runner's environment`;
  if (value.trim() === '') return `${name} is set to whitespace alone in the runner's environment: set it to the provider's key`;
  if (!/^[\x21-\x7e]+$/.test(value)) return `${name} holds a space, a line end or another character no provider key has (a key read from a file with its newline?): set it to the key alone`;
  if (/["'`]/.test(value)) return `${name} holds a quote mark, which no provider key has (pasted with the quotes of a shell or .env line?): set it to the key alone, without quotes`;
  // Sent to the provider's own API (`ownApi`: no endpoint the runner names), another provider's key is refused there every time.
  const own = KEY_SHAPES.find((shape) => shape.variable === name);
  const other = own === undefined || !ownApi ? undefined : KEY_SHAPES.find((shape) => shape !== own && shape.prefix.test(value));
  if (other !== undefined) {
    return `${name} holds what reads as ${other.provider}'s key (it starts ${other.start}), which ${own!.provider}'s own API refuses on every call: set ${name} to ${own!.provider}'s key (${other.provider}'s goes in ${other.variable})`;
  }
  return null;
}
