/**
 * The HTTP statuses that are a redirect: the ones fetch follows by itself (301, 302, 303, 307, 308)
 * and git follows by default on its first request. coo follows none of them on any route that carries
 * a credential (a ledger remote, a provider endpoint, the GitHub API); each route refuses and tells
 * them apart by this one list.
 */
export const REDIRECT_STATUSES: readonly number[] = [301, 302, 303, 307, 308];

/** A regular expression's alternative matching any of REDIRECT_STATUSES as a whole number. */
export const REDIRECT_STATUS_PATTERN = `(?:${REDIRECT_STATUSES.join('|')})\\b`;
