import type * as OctokitRest from '@octokit/rest';
import { CooError } from '../errors.js';
import { positiveInt } from '../schema/common.js';
import { importPackage } from '../util/import-package.js';

/** Where a citation goes: `OWNER/REPO#N`, an issue or a pull request. */
export interface IssueRef {
  readonly owner: string;
  readonly repo: string;
  readonly number: number;
}

/**
 * `--post OWNER/REPO#N`. The number is an issue number as an envelope's issue_number is (positiveInt,
 * as `coo dispatch --issue` takes it): #0 names no issue, and past 2^53 - 1 a double no longer holds
 * every whole number, so #9007199254740993 was read as 9007199254740992 and the comment was to go on
 * another issue than the one named.
 */
export function parseIssueRef(text: string): IssueRef {
  const match = /^([A-Za-z0-9_.-]+)\/([A-Za-z0-9_.-]+)#(\d+)$/.exec(text);
  if (match === null) throw new CooError('USAGE', `--post takes OWNER/REPO#NUMBER, got ${JSON.stringify(text)}`);
  const number = Number(match[3]);
  if (!positiveInt.safeParse(number).success) throw new CooError('USAGE', `--post takes OWNER/REPO#NUMBER with an issue number from 1 to ${Number.MAX_SAFE_INTEGER}, got ${JSON.stringify(text)}`);
  return { owner: match[1]!, repo: match[2]!, number };
}

export interface PostResult {
  readonly url: string;
  readonly created: boolean;
}

/**
 * Posts a comment unless one carrying `marker` is already there: posting the same citation twice
 * leaves one comment. The only user of the GitHub API; the token never leaves this call.
 */
export async function postComment(ref: IssueRef, body: string, marker: string, options: { token: string; baseUrl?: string }): Promise<PostResult> {
  const { Octokit } = await importPackage<typeof OctokitRest>('@octokit/rest');
  const octokit = new Octokit({ auth: options.token, ...(options.baseUrl === undefined ? {} : { baseUrl: options.baseUrl }), userAgent: 'coo-commons' });
  try {
    const comments = await octokit.paginate(octokit.rest.issues.listComments, { owner: ref.owner, repo: ref.repo, issue_number: ref.number, per_page: 100 });
    const existing = comments.find((comment) => (comment.body ?? '').includes(marker));
    if (existing !== undefined) return { url: existing.html_url, created: false };
    const created = await octokit.rest.issues.createComment({ owner: ref.owner, repo: ref.repo, issue_number: ref.number, body });
    return { url: created.data.html_url, created: true };
  } catch (error) {
    const status = (error as { status?: number }).status;
    throw new CooError('GITHUB_FAILED', `GitHub ${status ?? ''} on ${ref.owner}/${ref.repo}#${ref.number}: ${(error as Error).message.split('\n')[0]}`.replace('  ', ' '));
  }
}
