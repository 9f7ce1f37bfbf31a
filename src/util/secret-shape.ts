/** Shorter values are not looked for: they would cut ordinary words apart. */
export const MIN_SECRET_CHARS = 8;

/**
 * A value a secret-named field inside a text holds (of a configuration file, git's configuration, a
 * URL's query or user name, a connection string) that can be a key, token or password: no space in
 * it, and a digit or 20 characters or more. A word there (`"keyStatus": "completed"`, `?key=development`,
 * `Password=changeme`) is none: as a secret it would be cut out of every text that says it, and
 * every writer would refuse one that does.
 */
export function looksSecret(value: string): boolean {
  return value.length >= MIN_SECRET_CHARS && !/\s/.test(value) && (/[0-9]/.test(value) || value.length >= 20);
}
