/**
 * Characters that act rather than read when untrusted text is shown: C0 and C1 controls (a
 * terminal's escape sequences among them), the soft hyphen, zero-width characters, line and
 * paragraph separators, and every bidirectional control (the Arabic letter mark, LRM and RLM, the
 * embeddings, overrides and isolates), and the byte order mark. One set for every place that shows
 * such text (the CLI's lines, inert Markdown, pull-request bodies), so no place misses one the
 * others catch: each had its own list, and two of them let U+061C and U+00AD through.
 */
export function invisibleCharacters(): RegExp {
  // eslint-disable-next-line no-control-regex -- control characters are what this finds
  return /[\u0000-\u001f\u007f-\u009f\u00ad\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/gu;
}
