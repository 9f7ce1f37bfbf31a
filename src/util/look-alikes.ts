/**
 * Letters of other scripts drawn like Latin letters (Unicode TR39's confusables, the Cyrillic, Greek
 * and Latin-extension ones a reader takes for ASCII), each with the Latin letter it reads as. NFKC
 * folds fullwidth and mathematical letters but not these: `еа.codex` in Cyrillic is NFKC-stable and
 * reads as `ea.codex` to whoever acts on it.
 */
const LOOK_ALIKES: Readonly<Record<string, string>> = {
  // Cyrillic, small then capital.
  а: 'a', е: 'e', ё: 'e', һ: 'h', і: 'i', ї: 'i', ј: 'j', к: 'k', ӏ: 'l', о: 'o', р: 'p', ԛ: 'q', с: 'c', ѕ: 's', у: 'y', ү: 'y', ԝ: 'w', х: 'x', ԁ: 'd',
  А: 'A', В: 'B', Е: 'E', Ё: 'E', Һ: 'H', І: 'I', Ї: 'I', Ј: 'J', К: 'K', Ӏ: 'I', М: 'M', Н: 'H', О: 'O', Р: 'P', Ԛ: 'Q', С: 'C', Ѕ: 'S', Т: 'T', У: 'Y', Ү: 'Y', Ԝ: 'W', Х: 'X', Ԁ: 'D',
  // Greek, small then capital.
  α: 'a', ι: 'i', κ: 'k', ν: 'v', ο: 'o', ρ: 'p', υ: 'u', χ: 'x',
  Α: 'A', Β: 'B', Ε: 'E', Ζ: 'Z', Η: 'H', Ι: 'I', Κ: 'K', Μ: 'M', Ν: 'N', Ο: 'O', Ρ: 'P', Τ: 'T', Υ: 'Y', Χ: 'X',
  // Latin letters without their dot or with another shape of the same letter.
  ı: 'i', ȷ: 'j', ɑ: 'a', ɡ: 'g', ɩ: 'i',
};

const PATTERN = new RegExp(`[${Object.keys(LOOK_ALIKES).join('')}]`, 'gu');

/** A word every letter of which a reader can take for a Latin one: ASCII letters and look-alikes only. */
const READS_AS_LATIN = new RegExp(`^[A-Za-z${Object.keys(LOOK_ALIKES).join('')}]+$`, 'u');

/**
 * Text with every word that reads as Latin (each of its letters ASCII or a look-alike) spelled in
 * ASCII: what a reader takes it to say. A word of its own script stays as it is (`сообщение` has
 * letters no Latin reader would take for Latin, and is not `coo` followed by Cyrillic). Pure.
 */
export function asLatin(text: string): string {
  return text.replace(/\p{L}+/gu, (word) => (READS_AS_LATIN.test(word) ? word.replace(PATTERN, (char) => LOOK_ALIKES[char] ?? char) : word));
}
