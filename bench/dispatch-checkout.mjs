// node bench/dispatch-checkout.mjs [rounds]   (after npm run build)
// What verifying on a fresh checkout of the signed commit costs the dispatch lane: coo's checkout
// (a worktree made without checking out, its files written from the objects byte for byte), the
// walk that checks what the verification left, and its removal, against its peer, a stock
// `git worktree add` and `git worktree remove` of the same commit. On the bench's two-file target
// and on a repository of 2,000 files in 40 folders (2 KB each). Prints medians.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const dist = join(import.meta.dirname, '..', 'dist');
const { checkoutCommit, removeWorktree } = await import(join(dist, 'dispatch', 'worktree.js'));
const { checkoutDifferences } = await import(join(dist, 'dispatch', 'evidence.js'));

const ROUNDS = Number(process.argv[2] ?? 9);
const dir = mkdtempSync(join(tmpdir(), 'coo-bench-checkout-'));
const env = { ...process.env, GIT_AUTHOR_NAME: 'b', GIT_AUTHOR_EMAIL: 'b@x', GIT_COMMITTER_NAME: 'b', GIT_COMMITTER_EMAIL: 'b@x' };
const git = (args, cwd) => execFileSync('git', args, { cwd, encoding: 'utf8', env });

function repository(name, files) {
  const repo = join(dir, name);
  mkdirSync(repo, { recursive: true });
  git(['init', '-q', '-b', 'main', repo]);
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(join(repo, path, '..'), { recursive: true });
    writeFileSync(join(repo, path), content);
  }
  git(['add', '-A'], repo);
  git(['commit', '-q', '-m', 'base'], repo);
  return { repo, gitdir: join(repo, '.git'), commit: git(['rev-parse', 'HEAD'], repo).trim() };
}

const small = repository('small', { 'src/add.js': 'export const add = (a, b) => a + b;\n', 'test.sh': 'grep -q "a + b" src/add.js\n', '.gitignore': 'build/\n' });
const many = {};
for (let folder = 0; folder < 40; folder += 1) for (let file = 0; file < 50; file += 1) many[`src/m${folder}/f${file}.js`] = `// ${folder}/${file}\n${'x'.repeat(2000)}\n`;
many['.gitignore'] = 'build/\nnode_modules/\n';
const large = repository('large', many);

const NO_RULES = { ignored: (paths) => Promise.resolve(paths.map(() => false)), close: () => undefined };
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
let n = 0;

async function timed(fn) {
  const started = performance.now();
  await fn();
  return performance.now() - started;
}

for (const [name, target] of [['two files', small], ['2,000 files', large]]) {
  const stock = [];
  const made = [];
  const removed = [];
  const walk = [];
  for (let round = 0; round < ROUNDS; round += 1) {
    n += 1;
    const stockPath = join(dir, `stock-${n}`);
    stock.push(
      await timed(async () => {
        git(['--git-dir', target.gitdir, 'worktree', 'add', '-q', '--detach', stockPath, target.commit]);
        git(['--git-dir', target.gitdir, 'worktree', 'remove', '--force', stockPath]);
      }),
    );
    const path = join(dir, `coo-${n}`);
    let checkout;
    made.push(await timed(async () => (checkout = await checkoutCommit({ gitdir: target.gitdir, commit: target.commit, path }))));
    walk.push(await timed(() => checkoutDifferences(path, checkout.files, NO_RULES)));
    removed.push(await timed(() => removeWorktree(target.gitdir, path)));
  }
  console.log(`${name}: coo's checkout of the signed commit ${median(made).toFixed(1)} ms to make (before the verification), ${median(walk).toFixed(1)} ms to walk (after it), ${median(removed).toFixed(1)} ms to remove (after the receipt); stock git worktree add + remove ${median(stock).toFixed(1)} ms`);
}
console.log(`rounds: ${ROUNDS}, medians`);
rmSync(dir, { recursive: true, force: true });
