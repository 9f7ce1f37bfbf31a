import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { makeTargetRepo } from '../helpers/lane.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * coo-commons as a library, from a package of its own: the tarball `npm pack` makes is unpacked
 * into the consumer's node_modules as npm installs a package, its dependencies come from the
 * checkout's node_modules one folder up (tests reach no registry), and a TypeScript program that
 * uses the documented entry point type-checks under strict settings and runs.
 */

const REPO = join(import.meta.dirname, '..', '..');
const scratch = tempDir('coo-consumer-');

const PROGRAM = `import {
  CooError,
  Ledger,
  appendEnvelope,
  enqueueConsult,
  enqueueDispatch,
  generatePrivateKey,
  initLedger,
  isCooError,
  laneStateOf,
  readDocument,
  verifyLedger,
  viewMessage,
  type ErrorCode,
  type MessageView,
  type VerifyReport,
} from 'coo-commons';

const [dir, repo] = process.argv.slice(2) as [string, string];
const gitdir = \`\${dir}/ledger.git\`;
const ceo = generatePrivateKey('ceo');
const coo = generatePrivateKey('coo.hermes');
await initLedger({ gitdir, ceoKey: ceo, actors: new Map([['coo.hermes', coo.publicKey]]), now: new Date() });
const ledger = Ledger.open(gitdir);
const consult = await enqueueConsult({ ledger, key: coo, now: new Date(), target: 'aa.chatgpt', repo, patterns: ['src/add.ts'], question: 'Is add() right for NaN?' });
const dispatch = await enqueueDispatch({ ledger, key: coo, now: new Date(), target: 'ea.codex', repo, task: 'Fix add().', scope: ['src/**'], accept: ['add works'], verify: ['true'] });
const again = await appendEnvelope(ledger, (await ledger.readFile(consult.path))!, new Map(), coo, new Date());
const state = await ledger.state();
const record = state.messages.get(consult.messageId)!;
const view: MessageView = await viewMessage(ledger, state, record);
const envelope = readDocument('coo_message.v0', (await ledger.readFile(consult.path))!, consult.path);
ledger.close();
const pinned: VerifyReport = await verifyLedger(gitdir, { trustRoot: ceo.publicKey });
const wrong: VerifyReport = await verifyLedger(gitdir, { trustRoot: coo.publicKey });
let missing: ErrorCode | null = null;
try {
  Ledger.open(\`\${dir}/no-ledger\`);
} catch (error) {
  if (isCooError(error)) missing = error.code;
}
console.log(JSON.stringify({
  consult: consult.messageId,
  dispatch: dispatch.messageId,
  appendedAgain: again.existing,
  laneState: laneStateOf(record),
  viewState: view.lane_state,
  target: envelope.target_actor,
  pinnedFindings: pinned.findings.length,
  commits: pinned.commits,
  wrongRoot: wrong.findings.map((finding) => finding.code),
  missing,
  errorClass: new CooError('USAGE', 'x') instanceof Error,
}));
`;

describe('the library entry point', () => {
  it('installs from the packed tarball into a package of its own, type-checks from TypeScript, and opens, writes, reads and verifies a ledger', () => {
    const pack = spawnSync('npm', ['pack', '--pack-destination', scratch, '--silent'], { cwd: REPO, encoding: 'utf8' });
    expect(pack.status).toBe(0);
    const tarball = join(scratch, pack.stdout.trim().split('\n').at(-1)!);
    // The folder that holds the consumer resolves coo-commons's dependencies, as a workspace's root would.
    symlinkSync(join(REPO, 'node_modules'), join(scratch, 'node_modules'));
    const app = join(scratch, 'app');
    const installed = join(app, 'node_modules', 'coo-commons');
    mkdirSync(installed, { recursive: true });
    execFileSync('tar', ['-xzf', tarball, '-C', installed, '--strip-components=1']);
    const manifest = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')) as { dependencies: Record<string, string>; peerDependenciesMeta: Record<string, { optional: boolean }> };
    expect(readdirSync(installed).sort()).toEqual(['README.md', 'dist', 'keys.example', 'ledger', 'package.json', 'policy', 'schemas']);
    expect(manifest.dependencies['@openai/codex']).toBeUndefined();
    expect(manifest.peerDependenciesMeta['@openai/codex']).toEqual({ optional: true });

    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module', dependencies: { 'coo-commons': `file:${tarball}` } }));
    writeFileSync(join(app, 'tsconfig.json'), JSON.stringify({ compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, exactOptionalPropertyTypes: true, noUncheckedIndexedAccess: true, types: ['node'], typeRoots: [join(REPO, 'node_modules', '@types')], outDir: 'out' }, files: ['index.ts'] }));
    writeFileSync(join(app, 'index.ts'), PROGRAM);
    const tsc = spawnSync(process.execPath, [join(REPO, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', app], { encoding: 'utf8' });
    expect(tsc.stdout + tsc.stderr).toBe('');
    expect(tsc.status).toBe(0);

    const repo = join(scratch, 'repo');
    makeTargetRepo(repo);
    const ran = spawnSync(process.execPath, [join(app, 'out', 'index.js'), scratch, repo], { cwd: app, encoding: 'utf8' });
    expect(ran.stderr).toBe('');
    expect(JSON.parse(ran.stdout)).toEqual({
      consult: expect.stringMatching(/^msg_/),
      dispatch: expect.stringMatching(/^msg_/),
      appendedAgain: true,
      laneState: 'queued',
      viewState: 'queued',
      target: 'aa.chatgpt',
      pinnedFindings: 0,
      commits: 3,
      wrongRoot: ['TRUST_ROOT_MISMATCH'],
      missing: 'LEDGER_NOT_FOUND',
      errorClass: true,
    });
    // Plain JavaScript imports it too.
    const plain = spawnSync(process.execPath, ['--input-type=module', '-e', "const coo = await import('coo-commons'); console.log(typeof coo.Ledger.open, typeof coo.verifyLedger);"], { cwd: app, encoding: 'utf8' });
    expect(plain.stdout.trim()).toBe('function function');
  });
});
