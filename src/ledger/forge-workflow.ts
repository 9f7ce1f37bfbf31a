import { readAsset } from '../assets.js';
import { CooError } from '../errors.js';
import type { PrivateKey } from '../crypto/keys.js';
import { readDocument } from '../schema/documents.js';
import { forgeWorkflowPath, trustPath } from './layout.js';
import type { Ledger } from './ledger.js';
import { requireHolder } from '../authority/keys.js';
import { displayUrl, urlCredentials } from '../util/display-url.js';
import { refuseSignerSecrets } from './held-secrets.js';

/** Where GitHub Actions finds the ledger's check. */
export const GITHUB_WORKFLOW_PATH = forgeWorkflowPath('coo-verify.yml');

/** The template in this package that `coo forge github` fills in and the CEO signs. */
const TEMPLATE = 'ledger/github/coo-verify.yml';

export interface ForgeWorkflowPins {
  /** What npm installs: NAME@X.Y.Z, or one .tgz by https:// URL or absolute path. */
  readonly packageSpec: string;
  /** The key id (`SHA256:...`) the ledger's first trust root must name. */
  readonly trustRoot: string;
}

const KEY_ID = /^SHA256:[A-Za-z0-9+/]{43}$/;
const EXACT_VERSION = /^(@[a-z0-9][a-z0-9._~-]*\/)?[a-z0-9][a-z0-9._~-]*@\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$/;
const TARBALL = /^(https:\/\/|\/)[A-Za-z0-9@/:._+~%=-]+\.tgz$/;

/**
 * The check's pins, refused unless each names one thing: a package range or tag would install
 * whatever is newest when the check runs, and a value starting with `-` would reach npm as an option.
 */
export function checkPins(pins: ForgeWorkflowPins): void {
  if (!EXACT_VERSION.test(pins.packageSpec) && !TARBALL.test(pins.packageSpec)) {
    throw new CooError('USAGE', `package ${JSON.stringify(pins.packageSpec)} does not pin one version: give NAME@X.Y.Z, or a .tgz by https:// URL or absolute path`);
  }
  if (!KEY_ID.test(pins.trustRoot)) throw new CooError('USAGE', `trust root ${JSON.stringify(pins.trustRoot)} is not a SHA256:... key id`);
  if (urlCredentials(pins.packageSpec).length > 0) {
    throw new CooError('USAGE', `package ${displayUrl(pins.packageSpec)} carries credentials in its URL: the check is signed into the ledger and published with it; give a URL the check can fetch without them`);
  }
}

/**
 * The workflow with its pins written in. Pure. Each value lands in a double-quoted YAML scalar of
 * the workflow's `env`, and the steps read it only as a quoted shell variable, never as an
 * expression GitHub would expand into the script.
 */
export function renderGithubWorkflow(template: string, pins: ForgeWorkflowPins): Buffer {
  checkPins(pins);
  const values: Record<string, string> = { '@COO_PACKAGE@': pins.packageSpec, '@COO_TRUST_ROOT@': pins.trustRoot };
  let text = template;
  for (const [placeholder, value] of Object.entries(values)) {
    if (!text.includes(`"${placeholder}"`)) throw new CooError('INTERNAL', `the workflow template has no ${placeholder}`);
    text = text.replace(`"${placeholder}"`, JSON.stringify(value));
  }
  return Buffer.from(text, 'utf8');
}

export interface LaidWorkflow {
  readonly path: string;
  /** The commit that laid this version, or the head when it was already in place. */
  readonly commit: string | null;
  readonly seq: number;
  readonly changed: boolean;
}

/**
 * Lays (or replaces) the ledger's GitHub workflow, signed by `key`, which must be a trust-root
 * authority in force: the validator refuses the file from anyone else. The pinned trust root is
 * checked against the ledger's first trust root, since a check pinned to another key fails on
 * every push. Writes nothing when the same workflow is already in place.
 */
export async function layGithubWorkflow(ledger: Ledger, pins: ForgeWorkflowPins, key: PrivateKey, now: Date): Promise<LaidWorkflow> {
  const bytes = renderGithubWorkflow(readAsset(TEMPLATE).toString('utf8'), pins);
  const state = await ledger.state();
  if (state.genesis === null || state.root === null) throw new CooError('LEDGER_NOT_FOUND', `${ledger.gitdir} has no genesis commit`);
  if (!requireHolder(state, key.publicKey.keyId, 'the signing key').rootAuthority) {
    throw new CooError('TRUST_AUTHORITY', `key ${key.publicKey.keyId} is not a trust-root authority in force: the forge workflow is the CEO's`);
  }
  const genesisRoot = await ledger.readFile(trustPath('root', 1), state.genesis);
  const named = genesisRoot === null ? [] : readDocument('trust_root.v0', genesisRoot, trustPath('root', 1)).authorities.map((authority) => authority.key_id);
  if (!named.includes(pins.trustRoot)) {
    throw new CooError('TRUST_ROOT_MISMATCH', `the ledger's first trust root does not name ${pins.trustRoot}, so a check pinned to it would fail on every push; pin one of ${named.join(', ')}`);
  }
  const current = await ledger.readFile(GITHUB_WORKFLOW_PATH);
  if (current !== null && current.equals(bytes)) return { path: GITHUB_WORKFLOW_PATH, commit: ledger.head(), seq: state.seq, changed: false };
  refuseSignerSecrets([{ path: GITHUB_WORKFLOW_PATH, bytes }], key, ledger.gitdir);
  const result = await ledger.append({ files: [{ path: GITHUB_WORKFLOW_PATH, bytes }], key, now, summary: `forge: ${current === null ? 'lay' : 'replace'} the GitHub check ${GITHUB_WORKFLOW_PATH}` });
  if ('skipped' in result) throw new CooError('INTERNAL', 'forge workflow skipped');
  return { path: GITHUB_WORKFLOW_PATH, commit: result.commit, seq: result.seq, changed: true };
}
