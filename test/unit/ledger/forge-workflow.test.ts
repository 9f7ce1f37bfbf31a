import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { renderGithubWorkflow } from '../../../src/ledger/forge-workflow.js';

const TEMPLATE = readFileSync(join(import.meta.dirname, '..', '..', '..', 'ledger', 'github', 'coo-verify.yml'), 'utf8');
const KEY_ID = 'SHA256:a91p5oBp9cW/Z4gPl5ikEpUQQZayeNW4Tonh8rkrq0I';

function codeOf(fn: () => unknown): string {
  try {
    fn();
    return 'accepted';
  } catch (error) {
    return (error as { code?: string }).code ?? String(error);
  }
}

describe('the GitHub check rendered from its template', () => {
  it('writes the two pins into the env of the workflow, as the yaml package reads them back, and nothing else changes', () => {
    const pins = { packageSpec: 'coo-commons@0.1.0', trustRoot: KEY_ID };
    const text = renderGithubWorkflow(TEMPLATE, pins).toString('utf8');
    expect(text).not.toMatch(/@COO_[A-Z_]+@/);
    const workflow = parse(text) as { env: Record<string, string> };
    expect(workflow.env).toEqual({ COO_PACKAGE: 'coo-commons@0.1.0', COO_TRUST_ROOT: KEY_ID });
    const template = parse(TEMPLATE) as { env: Record<string, string> };
    expect({ ...workflow, env: template.env }).toEqual(template);
  });

  it('reads pins only from env and never through an expression GitHub would write into a script', () => {
    expect(TEMPLATE).not.toContain('${{');
  });

  it('takes an exact version, or one .tgz by https URL or absolute path', () => {
    for (const packageSpec of ['coo-commons@0.1.0', '@acme/coo-commons@1.2.3-rc.1', 'https://example.com/releases/coo-commons-0.1.0.tgz', '/srv/packages/coo-commons-0.1.0.tgz']) {
      expect(codeOf(() => renderGithubWorkflow(TEMPLATE, { packageSpec, trustRoot: KEY_ID })), packageSpec).toBe('accepted');
    }
  });

  it('refuses a package that names no one version, or that npm would read as an option', () => {
    for (const packageSpec of ['coo-commons', 'coo-commons@latest', 'coo-commons@^0.1.0', 'coo-commons@0.1', '--registry=https://evil.example/', 'http://example.com/coo.tgz', 'relative/coo.tgz', 'coo-commons@0.1.0\nrun: curl', 'coo-commons@0.1.0"', '']) {
      expect(codeOf(() => renderGithubWorkflow(TEMPLATE, { packageSpec, trustRoot: KEY_ID })), packageSpec).toBe('USAGE');
    }
  });

  it('refuses a trust root that is not a SHA256 key id', () => {
    for (const trustRoot of ['ceo.pub', 'SHA256:short', `${KEY_ID}\n`, `"${KEY_ID}`]) {
      expect(codeOf(() => renderGithubWorkflow(TEMPLATE, { packageSpec: 'coo-commons@0.1.0', trustRoot })), trustRoot).toBe('USAGE');
    }
  });
});
