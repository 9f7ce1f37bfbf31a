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

/** `YYYY-MM-DDTHH:MM:SS` with an optional fraction of one to three digits and a `Z`: the shape of every entry timestamp. */
export const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,3})?Z$/;

const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

function digits(text: string, from: number, count: number): number {
  let value = 0;
  for (let i = from; i < from + count; i += 1) value = value * 10 + text.charCodeAt(i) - 48;
  return value;
}

/** Days from 1970-01-01 to a date of the proleptic Gregorian calendar (H. Hinnant's days_from_civil). */
function daysFromCivil(year: number, month: number, day: number): number {
  const y = month <= 2 ? year - 1 : year;
  const era = Math.floor(y / 400);
  const yearOfEra = y - era * 400;
  const dayOfYear = Math.floor((153 * (month > 2 ? month - 3 : month + 9) + 2) / 5) + day - 1;
  return era * 146_097 + yearOfEra * 365 + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100) + dayOfYear - 719_468;
}

/**
 * Milliseconds since the epoch of a string of ISO_UTC's shape, or NaN when it names no real date
 * and time (month 13, 30 February, hour 24, second 60). The same verdicts and values as
 * `new Date(text)` with its round trip, by arithmetic: a long replay checks several timestamps per
 * entry, and building a Date for each was a measurable share of it.
 */
export function isoUtcMillis(text: string): number {
  if (!ISO_UTC.test(text)) return Number.NaN;
  const year = digits(text, 0, 4);
  const month = digits(text, 5, 2);
  const day = digits(text, 8, 2);
  const hour = digits(text, 11, 2);
  const minute = digits(text, 14, 2);
  const second = digits(text, 17, 2);
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  if (month < 1 || month > 12 || day < 1 || day > (month === 2 && leap ? 29 : DAYS_IN_MONTH[month - 1]!)) return Number.NaN;
  if (hour > 23 || minute > 59 || second > 59) return Number.NaN;
  const fraction = text.length - 21;
  const millis = fraction > 0 ? digits(text, 20, fraction) * 10 ** (3 - fraction) : 0;
  return ((daysFromCivil(year, month, day) * 24 + hour) * 60 + minute) * 60_000 + second * 1000 + millis;
}
