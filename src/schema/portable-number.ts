/**
 * Whether a number's text reads as the same number to every reader an auditor may use. coo reads
 * YAML 1.2 core; PyYAML and Go's yaml.v2 read YAML 1.1, where `010` is eight, `0o10` and `1e3` are
 * strings, and a text whose value underflows to 0 is a number the signer did not write. An entry is
 * signed over its text, so a number in it must mean one value to all of them. Pure.
 */

/** Forms both versions read as the same number: decimal, no leading zero, a fraction's exponent signed. */
const INTEGER = /^[-+]?(0|[1-9][0-9]*)$/;
const FRACTION = /^([-+]?(0|[1-9][0-9]*)\.[0-9]*|\.[0-9]+)([eE][-+][0-9]+)?$/;
/**
 * What coo's writer wrote for a fraction below 1e-6 before it wrote `1.0e-7`: JavaScript's own form,
 * one digit and an exponent of -7 or less (`5e-7`; any other mantissa has a dot). A string to a
 * YAML 1.1 reader, never another number, and entries that hold it keep their bytes; no other
 * integer-mantissa form (`5e+2`, `50e-8`) is taken.
 */
const EARLIER_WRITER = /^-?[1-9]e-([7-9]|[1-9][0-9]+)$/;

/** Why `text`, read as `value`, is not a portable number, or null when it is. */
export function numberProblem(text: string, value: number): string | null {
  if (!INTEGER.test(text) && !FRACTION.test(text) && !EARLIER_WRITER.test(text)) {
    return `the number ${JSON.stringify(text)} reads as another value (or as a string) in YAML 1.1 readers; write it in decimal without leading zeros, a fraction with a dot and a signed exponent (1.0e-7)`;
  }
  const mantissa = text.split(/[eE]/)[0]!;
  // Underflow: a number written as more than nothing that every reader holds as nothing.
  if (value === 0 && /[1-9]/.test(mantissa)) {
    return `the number ${JSON.stringify(text)} is too small to be held: it would be read as 0`;
  }
  return null;
}
