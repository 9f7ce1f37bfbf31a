/**
 * The named character references of HTML that stand for a character a secret or a path may hold
 * (ASCII punctuation, the no-break space) or for one a reader does not see (the soft hyphen,
 * zero-width and invisible operators, direction marks, the tab and line break), by name as HTML
 * spells it (case matters: `&Tab;`). For the scrubber's decode pass (util/scrub.ts): a name not
 * here is left as written.
 */
const ENTITIES: Readonly<Record<string, string>> = {
  amp: '&', AMP: '&', lt: '<', LT: '<', gt: '>', GT: '>', quot: '"', QUOT: '"', apos: "'",
  sol: '/', bsol: '\\', plus: '+', equals: '=', num: '#', percnt: '%', excl: '!', quest: '?', commat: '@',
  lpar: '(', rpar: ')', lsqb: '[', lbrack: '[', rsqb: ']', rbrack: ']', lcub: '{', lbrace: '{', rcub: '}', rbrace: '}',
  ast: '*', midast: '*', Hat: '^', grave: '`', DiacriticalGrave: '`', verbar: '|', vert: '|', VerticalLine: '|',
  dollar: '$', semi: ';', colon: ':', comma: ',', period: '.', lowbar: '_', UnderBar: '_',
  nbsp: '\u00a0', NonBreakingSpace: '\u00a0', Tab: '\t', NewLine: '\n',
  shy: '\u00ad', ZeroWidthSpace: '\u200b', NegativeVeryThinSpace: '\u200b', NegativeThinSpace: '\u200b', NegativeMediumSpace: '\u200b', NegativeThickSpace: '\u200b',
  zwnj: '\u200c', zwj: '\u200d', lrm: '\u200e', rlm: '\u200f', NoBreak: '\u2060',
  af: '\u2061', ApplyFunction: '\u2061', it: '\u2062', InvisibleTimes: '\u2062', ic: '\u2063', InvisibleComma: '\u2063',
};

/** The character `&name;` stands for, or null when it is not one of ENTITIES. */
export function htmlEntity(name: string): string | null {
  return Object.hasOwn(ENTITIES, name) ? ENTITIES[name]! : null;
}
