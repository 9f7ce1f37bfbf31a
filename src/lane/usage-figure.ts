/**
 * A figure of usage (a token count, a cost in USD) as a model's caller states it: an execution
 * agent's event stream, or Oracle's session record of what the provider answered. One rule for
 * both lanes. Pure.
 *
 * Absent (undefined or null): nothing stated. A plain non-negative number (a count whole, within
 * the largest safe integer; a cost finite): itself. Anything else (a string, a negative, a fraction
 * of a token, a count past the largest safe integer, an object) no honest caller states: it is
 * implausible, and the attempt is charged as if its usage were not stated, never below what the
 * figure can be read as (a numeric string's value, a fraction read up, at most the largest safe integer).
 */
export interface Figure {
  /** What the figure can be read as; null when nothing is stated or it reads as no non-negative number. */
  readonly value: number | null;
  /** False when the figure is stated and is not a plain non-negative number. */
  readonly plain: boolean;
}

export function readFigure(stated: unknown, kind: 'count' | 'usd' = 'count'): Figure {
  if (stated === undefined || stated === null) return { value: null, plain: true };
  const plain = typeof stated === 'number' && stated >= 0 && (kind === 'usd' ? Number.isFinite(stated) : Number.isSafeInteger(stated));
  const read = typeof stated === 'number' ? stated : typeof stated === 'string' && stated.trim() !== '' ? Number(stated) : Number.NaN;
  if (!(read >= 0)) return { value: null, plain };
  return { value: kind === 'usd' ? read : Math.min(Number.MAX_SAFE_INTEGER, Math.ceil(read)), plain };
}
