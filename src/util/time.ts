/** A UTC timestamp without milliseconds, the form entries use. */
export function isoSeconds(date: Date): string {
  return date.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

export function addSeconds(date: Date, seconds: number): Date {
  return new Date(date.getTime() + seconds * 1000);
}

/** Parses `90s`, `15m`, `2h`, `1d` or a plain number of seconds. */
export function parseDuration(text: string): number | null {
  const match = /^(\d+(?:\.\d+)?)(s|m|h|d)?$/.exec(text.trim());
  if (match === null) return null;
  const value = Number(match[1]);
  const unit = { s: 1, m: 60, h: 3600, d: 86_400 }[(match[2] ?? 's') as 's' | 'm' | 'h' | 'd'];
  return Math.round(value * unit);
}
