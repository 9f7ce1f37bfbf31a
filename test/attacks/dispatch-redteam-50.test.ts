import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { answerBatches, attributesFiles, checkoutAttributeChanges, filteredChanges } from '../../src/dispatch/checkout-attributes.js';
import { gitObjectId, type TreeFile } from '../../src/dispatch/git-tree.js';
import { attack } from '../helpers/attack-kit.js';
import { coo } from '../helpers/cli.js';
import { agentScript, codesOf, dispatchTo, FIX, hostilePlaces, receiptsFor, watchOnce, type HostilePlace } from '../helpers/hostile-agent.js';
import { git, gitEnv, tempDir } from '../helpers/tmp.js';

/**
 * The dispatch lane against a hostile execution agent, round fifty: work that would change how git
 * reads it (attributes naming line-ending conversion, `ident`, `export-subst`, a filter and a diff
 * driver; a repository nested in the work, a `.git` file naming another), names git and a shell read
 * apart (a line break, a tab, a leading dash, bytes that are not UTF-8), a folder replaced by a link.
 * Each agent is a script in place of the executor that does one hostile thing, under bubblewrap; each
 * case judges the receipt against the commit it names, as stock git reads that commit, and against
 * what the verification read.
 */

const dir = tempDir('dispatch-redteam-50');

async function attempted(where: HostilePlace, name: string, action: string, overrides: Parameters<typeof dispatchTo>[2] = {}) {
  const { messageId } = await dispatchTo(where, name, overrides);
  const watch = watchOnce(where, agentScript(where.world.dir, action), { timeoutMs: 40_000 });
  const [receipt] = watch.hung ? [] : await receiptsFor(where, messageId);
  return { messageId, receipt, unreceipted: watch.hung ? 'hung' : `no receipt (exit ${watch.status}) ${watch.stderr.slice(-300)}` };
}

const sha256 = (bytes: Buffer): string => `sha256:${createHash('sha256').update(bytes).digest('hex')}`;

/** Every file of a commit as stock git lists it (`ls-tree -r -z`), by its path's bytes (latin1), with its blob's bytes. */
function filesAt(where: HostilePlace, commit: string): Map<string, Buffer> {
  const listed = execFileSync('git', ['ls-tree', '-r', '-z', '--full-tree', commit], { cwd: where.repo, env: gitEnv() });
  const files = new Map<string, Buffer>();
  for (let start = 0; start < listed.length; ) {
    const end = listed.indexOf(0, start);
    const entry = listed.subarray(start, end);
    start = end + 1;
    const tab = entry.indexOf(0x09);
    const oid = entry.subarray(0, tab).toString('latin1').split(' ')[2]!;
    files.set(entry.subarray(tab + 1).toString('latin1'), execFileSync('git', ['cat-file', 'blob', oid], { cwd: where.repo, env: gitEnv() }));
  }
  return files;
}

/** The paths of the receipt's files, as bytes (latin1), each with the hash the receipt names. */
function hashesOf(receipt: Record<string, unknown>): Array<{ key: string; path: string; sha256: string | null }> {
  return (receipt['file_hashes'] as Array<{ path: string; sha256: string | null }>).map((file) => ({ key: Buffer.from(file.path, 'utf8').toString('latin1'), ...file }));
}

/**
 * Where the receipt and its commit part, as stock git reads the commit: a file the receipt names
 * with a hash its commit's blob at that path does not have, or a file the commit changes from the
 * base that the receipt does not name. Null when they agree.
 */
function disagreement(where: HostilePlace, receipt: Record<string, unknown>): string | null {
  const head = receipt['head_sha'] as string | null;
  if (head === null) return null;
  const after = filesAt(where, head);
  const before = filesAt(where, receipt['base_sha'] as string);
  const named = hashesOf(receipt);
  for (const file of named) {
    const blob = after.get(file.key);
    if ((blob === undefined ? null : sha256(blob)) !== file.sha256) return `the receipt names ${JSON.stringify(file.path)} as ${String(file.sha256)}, its commit holds ${blob === undefined ? 'no such file' : sha256(blob)}`;
  }
  const keys = new Set(named.map((file) => file.key));
  const changed = [...new Set([...after.keys(), ...before.keys()])].filter((key) => !before.get(key)?.equals(after.get(key) ?? Buffer.alloc(0)) || !after.has(key));
  const unnamed = changed.filter((key) => !keys.has(key));
  return unnamed.length === 0 ? null : `the commit changes ${unnamed.map((key) => JSON.stringify(Buffer.from(key, 'latin1').toString('utf8'))).join(', ')}, which the receipt does not name`;
}

/** The log of the receipt's `index`th verification command (1-based), as the ledger holds it. */
async function verifyLog(where: HostilePlace, receipt: Record<string, unknown>, index: number): Promise<string> {
  const name = `verify-${String(index).padStart(2, '0')}.log`;
  const log = (receipt['attachments'] as Array<{ path: string }>).find((item) => item.path.endsWith(name));
  return log === undefined ? '' : ((await where.world.ledger.readFile(log.path))?.toString('utf8') ?? '');
}

describe("a hostile agent's work that tells git to read it another way", () => {
  const place = hostilePlaces(dir, 'attributes');

  attack("a hostile agent: src/.gitattributes asks for CRLF line ends, ident, export-subst, a filter, a diff and a merge driver, over a file holding $Id$, $Format:%H$ and a CRLF", 'runner', 'refused', async () => {
    // Guard: the runner reads and hashes the bytes the agent left, writes those bytes as the blobs, and the
    // verification's checkout is written from those blobs byte for byte: no attribute plays a part anywhere.
    const where = await place('crlf');
    const content = Buffer.from('export const add = (a, b) => a + b; // $Id$ $Format:%H$\r\nexport const lf = 1;\n');
    const action = [
      "printf '* text eol=crlf ident export-subst filter=x diff=x merge=x\\n' > src/.gitattributes",
      `printf '%s' '${content.toString('base64')}' | base64 -d > src/add.js`,
    ].join('\n');
    const { receipt, unreceipted } = await attempted(where, 'crlf', action, { verify: ['sh test.sh', 'sha256sum src/add.js src/.gitattributes'] });
    if (receipt === undefined) return unreceipted;
    const parted = disagreement(where, receipt);
    if (parted !== null) return `accepted: ${parted}`;
    const hashes = new Map(hashesOf(receipt).map((file) => [file.path, file.sha256]));
    if (hashes.get('src/add.js') !== sha256(content)) return `accepted: the receipt names src/add.js as ${String(hashes.get('src/add.js'))}, not the bytes the agent left`;
    const log = await verifyLog(where, receipt, 2);
    for (const [path, hash] of hashes) if (!log.includes(`${hash!.slice('sha256:'.length)}  ${path}`)) return `accepted: the verification read other bytes at ${path} than the receipt names: ${log}`;
    // A stock checkout of the commit writes other bytes than those (the next case): such attributes are not work.
    expect(receipt['status']).toBe('failed');
    expect(JSON.stringify(receipt['blockers'])).toContain('src/.gitattributes (checkout_attributes: text eol=crlf: CRLF for every file on every checkout, ident, filter=x, export-subst on src/.gitattributes; text eol=crlf: CRLF for every file on every checkout, ident, filter=x, export-subst on src/add.js)');
    return 'refused';
  });

  attack("a hostile agent: src/.gitattributes gives its fix `ident`, and the fix adds only while $Id$ is unexpanded, as the verification reads it and no checkout writes it", 'runner', 'refused', async () => {
    const where = await place('ident');
    const fix = Buffer.from("export const add = (a, b) => ('$Id$'.length === 4 ? a + b : a - b);\n");
    const action = ["printf 'add.js ident\\n' > src/.gitattributes", `printf '%s' '${fix.toString('base64')}' | base64 -d > src/add.js`].join('\n');
    const check = `node -e "import('./src/add.js').then((m) => process.exit(m.add(1, 2) === 3 ? 0 : 1))"`;
    const { receipt, unreceipted } = await attempted(where, 'ident', action, { verify: ['sh test.sh', check] });
    if (receipt === undefined) return unreceipted;
    const head = receipt['head_sha'] as string | null;
    if (head === null) return `no commit named (status ${String(receipt['status'])}, ${codesOf(receipt).join(', ')})`;
    // The check passed on the blobs as stored, which the receipt names.
    expect(receipt['inner_exit_codes']).toEqual([0, 0]);
    expect(disagreement(where, receipt)).toBeNull();
    // As a reviewer, CI or a deploy has it: a stock checkout of that commit, and the same check there.
    const stock = join(where.world.dir, 'stock');
    git(['worktree', 'add', '--quiet', '--detach', stock, head], { cwd: where.repo });
    const there = spawnSync('/bin/sh', ['-c', check], { cwd: stock, env: { PATH: `${dirname(process.execPath)}:/usr/bin:/bin` } });
    expect(there.status).toBe(1);
    if (receipt['status'] === 'succeeded') return 'accepted: the verification passed the commit the receipt names, and its stock checkout fails the same check';
    expect(codesOf(receipt)).toContain('scope_violation');
    // Named apart from files that are not work, with what it changes.
    const blockers = receipt['blockers'] as Array<{ code: string; detail: string }>;
    expect(blockers.find((blocker) => blocker.detail.includes('src/.gitattributes'))).toEqual({
      code: 'scope_violation',
      detail: "changes how a checkout or an archive writes the commit's files, other than as verified: src/.gitattributes (checkout_attributes: ident on src/add.js)",
    });
    return 'refused';
  });

  attack("a hostile agent: the same fix with `ident` given by src/.GITATTRIBUTES, which a macOS or Windows checkout opens for src/.gitattributes", 'runner', 'refused', async () => {
    const where = await place('folded');
    const fix = Buffer.from("export const add = (a, b) => ('$Id$'.length === 4 ? a + b : a - b);\n");
    const action = ["printf 'add.js ident\\n' > src/.GITATTRIBUTES", `printf '%s' '${fix.toString('base64')}' | base64 -d > src/add.js`].join('\n');
    const { receipt, unreceipted } = await attempted(where, 'folded', action);
    if (receipt === undefined) return unreceipted;
    expect(disagreement(where, receipt)).toBeNull();
    if (receipt['status'] === 'succeeded') return 'accepted: a file such a checkout reads as .gitattributes passed as work';
    expect(JSON.stringify(receipt['blockers'])).toContain('src/.GITATTRIBUTES (checkout_attributes: read as .gitattributes by a macOS or Windows checkout: not judged)');
    return 'refused';
  });

  attack("a hostile agent: src/Fix/.gitattributes gives *.js `ident`, and src/fix/impl.js adds only while $Id$ is unexpanded: a macOS or Windows checkout holds src/Fix and src/fix as one folder, and reads those rules for it", 'runner', 'refused', async () => {
    // Here git reads src/Fix/.gitattributes for src/Fix/ alone, where no file changes; such a checkout writes src/fix/impl.js by it.
    const where = await place('sibling');
    const impl = Buffer.from("export const add = (a, b) => ('$Id$'.length === 4 ? a + b : a - b);\n");
    const action = [FIX, 'mkdir -p src/Fix src/fix', "printf '*.js ident\\n' > src/Fix/.gitattributes", `printf '%s' '${impl.toString('base64')}' | base64 -d > src/fix/impl.js`].join('\n');
    const { receipt, unreceipted } = await attempted(where, 'sibling', action);
    if (receipt === undefined) return unreceipted;
    expect(disagreement(where, receipt)).toBeNull();
    expect(receipt['files_changed']).toEqual(['src/Fix/.gitattributes', 'src/add.js', 'src/fix/impl.js']);
    if (receipt['status'] === 'succeeded') return 'accepted: rules a macOS or Windows checkout reads for src/fix/ passed unjudged';
    expect(codesOf(receipt)).toContain('scope_violation');
    expect(JSON.stringify(receipt['blockers'])).toContain('src/Fix/.gitattributes (checkout_attributes: in a folder a macOS or Windows checkout holds as one with another folder of the commit spelt otherwise: not judged)');
    return 'refused';
  });

  attack("a hostile agent: src/.gitattributes gives `*.JS` `ident`, which git here matches to no file and a macOS or Windows checkout (core.ignorecase) matches to its fix in src/add.js", 'runner', 'refused', async () => {
    const where = await place('case');
    const fix = Buffer.from("export const add = (a, b) => ('$Id$'.length === 4 ? a + b : a - b);\n");
    const action = ["printf '*.JS ident\\n' > src/.gitattributes", `printf '%s' '${fix.toString('base64')}' | base64 -d > src/add.js`].join('\n');
    const { receipt, unreceipted } = await attempted(where, 'case', action);
    if (receipt === undefined) return unreceipted;
    expect(disagreement(where, receipt)).toBeNull();
    if (receipt['status'] === 'succeeded') return 'accepted: rules a macOS or Windows checkout applies to src/add.js passed as changing nothing';
    expect(JSON.stringify(receipt['blockers'])).toContain('src/.gitattributes (checkout_attributes: ident on src/add.js)');
    return 'refused';
  });

  attack("a hostile agent: src/.gitattributes gives *.js `working-tree-encoding` with no value, with which every clone and archive of the commit dies", 'runner', 'refused', async () => {
    const where = await place('encoding');
    const { receipt, unreceipted } = await attempted(where, 'encoding', `${FIX}\nprintf '*.js working-tree-encoding\\n' > src/.gitattributes`);
    if (receipt === undefined) return unreceipted;
    expect(disagreement(where, receipt)).toBeNull();
    if (receipt['status'] === 'succeeded') return 'accepted: a commit no stock checkout can write passed as work';
    expect(JSON.stringify(receipt['blockers'])).toContain('src/.gitattributes (checkout_attributes: working-tree-encoding=true (every checkout fails) on src/add.js)');
    return 'refused';
  });

  attack("a hostile agent: src/.gitattributes gives *.js `ident` on a line padded to 2048 bytes, which git 2.39.1 and later ignore and older git and libgit2 read whole", 'runner', 'refused', async () => {
    const where = await place('padded');
    const fix = Buffer.from("export const add = (a, b) => ('$Id$'.length === 4 ? a + b : a - b);\n");
    const action = [`printf '*.js%2039sident\\n' '' > src/.gitattributes`, `printf '%s' '${fix.toString('base64')}' | base64 -d > src/add.js`].join('\n');
    const { receipt, unreceipted } = await attempted(where, 'padded', action);
    if (receipt === undefined) return unreceipted;
    expect(disagreement(where, receipt)).toBeNull();
    if (receipt['status'] === 'succeeded') return 'accepted: rules an older git or libgit2 checkout applies to src/add.js passed as changing nothing';
    // git 2.39.1 and later refuse such a file in a commit themselves (git fsck: gitattributesLineLength), so it is not committed
    // (dispatch-redteam-58); an older git on the runner's machine leaves it to the attributes judge, which refuses it unjudged.
    expect(JSON.stringify(receipt['blockers'])).toMatch(/src\/\.gitattributes \((?:git_refuses: gitattributesLineLength|checkout_attributes: holds a NUL or a line of 2048 bytes or more)/);
    return 'refused';
  });

  attack("a hostile agent: under the base's `* text=auto`, its .gitattributes adds `*.js eol=crlf`, which every checkout writes with CRLF", 'runner', 'refused', async () => {
    // A new way of writing is refused, and only the files written in a new way are named: test.sh stays as the base has it.
    const where = await place('crlf-over-auto', { '.gitattributes': '* text=auto\n' });
    const { receipt, unreceipted } = await attempted(where, 'crlf-over-auto', `${FIX}\nprintf '* text=auto\\n*.js eol=crlf\\n' > .gitattributes`, { scope: ['src/**', '.gitattributes'] });
    if (receipt === undefined) return unreceipted;
    if (receipt['status'] === 'succeeded') return 'accepted: a .gitattributes that has every checkout write src/add.js with CRLF passed as work';
    expect(JSON.stringify(receipt['blockers'])).toContain('.gitattributes (checkout_attributes: text=auto eol=crlf: CRLF for files detected as text on Linux and macOS checkouts on src/add.js)');
    return 'refused';
  });

  it("work whose .gitattributes has a checkout write files as their blobs, where the base's rules converted them, succeeds: `*.png binary` under `* text=auto`, `*.sh text eol=lf`, an `ident` removed", async () => {
    // Control: moving toward no conversion is no new way of writing a file: each is written as its blob, which was verified.
    const where = await place('toward-blobs', { '.gitattributes': '* text=auto\n', 'src/.gitattributes': '*.js ident diff=javascript\n' });
    const action = [FIX, "printf '* text=auto\\n*.png binary\\n*.sh text eol=lf\\n' > .gitattributes", "printf '*.js diff=javascript\\n' > src/.gitattributes", "printf 'PNG\\r\\n' > src/logo.png"].join('\n');
    const { receipt, unreceipted } = await attempted(where, 'toward-blobs', action, { scope: ['src/**', '.gitattributes'] });
    if (receipt === undefined) throw new Error(unreceipted);
    expect(disagreement(where, receipt)).toBeNull();
    expect(receipt['files_changed']).toEqual(['.gitattributes', 'src/.gitattributes', 'src/add.js', 'src/logo.png']);
    expect(receipt['blockers']).toEqual([]);
    expect(receipt['status']).toBe('succeeded');
  });

  it('work whose src/.gitattributes names only a diff driver and a language, which change no byte a checkout writes, succeeds', async () => {
    // Control: attributes that play no part in a checkout or an archive are work like any other.
    const where = await place('diff');
    const { receipt, unreceipted } = await attempted(where, 'diff', `${FIX}\nprintf '*.js diff=javascript linguist-language=JavaScript\\n' > src/.gitattributes`);
    if (receipt === undefined) throw new Error(unreceipted);
    expect(disagreement(where, receipt)).toBeNull();
    expect(receipt['files_changed']).toEqual(['src/.gitattributes', 'src/add.js']);
    expect(receipt['status']).toBe('succeeded');
  });
});

describe("a hostile agent's change to a file the base's rules hand to a filter", () => {
  const place = hostilePlaces(dir, 'lfs');
  const pointer = (oid: string, size: number): string => `version https://git-lfs.github.com/spec/v1\noid sha256:${oid}\nsize ${size}\n`;

  attack('a hostile agent: a new LFS pointer for assets/model.bin, and an .lfsconfig naming its own server, where every checkout with git-lfs writes what that server holds', 'runner', 'refused', async () => {
    // What the verification read is the pointer's text; what a reviewer's, CI's or a deploy's checkout holds there is
    // whatever the agent's server answers for the oid it chose, which nothing the runner did ever read.
    const where = await place('pointer', { '.gitattributes': '*.bin filter=lfs diff=lfs merge=lfs -text\n', 'assets/model.bin': pointer('1'.repeat(64), 12) });
    const action = [FIX, `printf '%s' '${pointer('e'.repeat(64), 4096)}' > assets/model.bin`, "printf '[lfs]\\n\\turl = https://lfs.agent.invalid/\\n' > .lfsconfig"].join('\n');
    const { receipt, unreceipted } = await attempted(where, 'pointer', action, { scope: ['src/**', 'assets/**', '.lfsconfig'] });
    if (receipt === undefined) return unreceipted;
    expect(disagreement(where, receipt)).toBeNull();
    expect(receipt['files_changed']).toEqual(['.lfsconfig', 'assets/model.bin', 'src/add.js']);
    if (receipt['status'] === 'succeeded') return 'accepted: a change to a file a checkout writes through a filter passed the verification on its stored form';
    expect(JSON.stringify(receipt['blockers'])).toContain('assets/model.bin (filtered)');
    expect(JSON.stringify(receipt['blockers'])).not.toContain('src/add.js (filtered)');
    return 'refused';
  });

  it("work beside such a file, and the file's removal, are work like any other", async () => {
    const where = await place('beside', { '.gitattributes': '*.bin filter=lfs diff=lfs merge=lfs -text\n', 'assets/model.bin': pointer('1'.repeat(64), 12) });
    const { receipt, unreceipted } = await attempted(where, 'beside', `${FIX}\nrm assets/model.bin`, { scope: ['src/**', 'assets/**'] });
    if (receipt === undefined) throw new Error(unreceipted);
    expect(receipt['files_changed']).toEqual(['assets/model.bin', 'src/add.js']);
    expect(receipt['status']).toBe('succeeded');
  });
});

describe('a hostile agent that nests a repository in its work', () => {
  const place = hostilePlaces(dir, 'nested');

  for (const [name, action] of [
    ['a repository of its own, made by git init and committed to, under src/inner', 'mkdir -p src/inner && cd src/inner && git init -q && echo x > f && git add f && git -c user.name=a -c user.email=a@b commit -qm x'],
    ['a .git file naming another repository as the folder of src/inner', "mkdir -p src/inner && printf 'gitdir: /\\n' > src/inner/.git && echo x > src/inner/f"],
    ['a .git folder of its own at the root of a new folder, with a hook and a config', "mkdir -p src/inner/.git/hooks && printf '[core]\\n\\tfsmonitor = /bin/false\\n' > src/inner/.git/config && printf 'ref: refs/heads/main\\n' > src/inner/.git/HEAD && echo x > src/inner/f"],
  ] as const) {
    attack(`a hostile agent: ${name}`, 'runner', 'refused', async () => {
      // Guard: no name .git is taken as work at any depth; the attempt fails naming it, and the commit holds none.
      const where = await place(name.split(' ').slice(1, 3).join('-'));
      const { receipt, unreceipted } = await attempted(where, 'nested', `${FIX}\n${action}`);
      if (receipt === undefined) return unreceipted;
      const parted = disagreement(where, receipt);
      if (parted !== null) return `accepted: ${parted}`;
      const head = receipt['head_sha'] as string | null;
      const inCommit = head === null ? [] : [...filesAt(where, head).keys()].filter((key) => key.split('/').some((part) => part.toLowerCase() === '.git'));
      if (inCommit.length > 0) return `accepted: the commit holds ${inCommit.join(', ')}`;
      if (receipt['status'] === 'succeeded') return 'accepted: a nested repository passed as work';
      expect(codesOf(receipt)).toContain('scope_violation');
      return 'refused';
    });
  }
});

describe("a hostile agent's names that git, a shell and the ledger read apart", () => {
  const place = hostilePlaces(dir, 'names');

  attack('a hostile agent: files named with a line break, a tab, a leading dash and a trailing space', 'runner', 'refused', async () => {
    // Guard: each is one name the ledger records as its bytes, its hash the blob's at that name in the commit.
    const where = await place('odd');
    const action = [FIX, "printf 'a\\n' > \"$(printf 'src/line\\nbreak.js')\"", "printf 'b\\n' > \"$(printf 'src/tab\\there.js')\"", "printf 'c\\n' > src/-rf", "printf 'd\\n' > 'src/space '"].join('\n');
    const { receipt, unreceipted } = await attempted(where, 'odd', action);
    if (receipt === undefined) return unreceipted;
    const parted = disagreement(where, receipt);
    if (parted !== null) return `accepted: ${parted}`;
    expect([...(receipt['files_changed'] as string[])].sort()).toEqual(['src/-rf', 'src/add.js', 'src/line\nbreak.js', 'src/space ', 'src/tab\there.js'].sort());
    expect(coo(['verify', '--ledger', where.world.gitdir, '--no-checkpoint']).status).toBe(0);
    return 'refused';
  });

  attack('a hostile agent: a file whose name is not UTF-8, beside the fix', 'runner', 'refused', async () => {
    // Guard: a name the ledger cannot record is not committed, and the attempt fails naming it.
    const where = await place('latin1');
    const { receipt, unreceipted } = await attempted(where, 'latin1', `${FIX}\nprintf 'x\\n' > "$(printf 'src/caf\\351.js')"`);
    if (receipt === undefined) return unreceipted;
    const parted = disagreement(where, receipt);
    if (parted !== null) return `accepted: ${parted}`;
    if (receipt['status'] === 'succeeded') return 'accepted: a name the receipt cannot hold passed as work';
    expect(codesOf(receipt)).toContain('scope_violation');
    return 'refused';
  });

  attack("a hostile agent: src replaced by a link to a folder of its work holding the fix", 'runner', 'refused', async () => {
    // Guard: a link is never followed; the link is named and refused, and the files behind it are read where they are.
    const where = await place('linked');
    const { receipt, unreceipted } = await attempted(where, 'linked', `${FIX}\nmv src lib && ln -s lib src`, { scope: ['src/**', 'src', 'lib/**'] });
    if (receipt === undefined) return unreceipted;
    const parted = disagreement(where, receipt);
    if (parted !== null) return `accepted: ${parted}`;
    if (receipt['status'] === 'succeeded') return 'accepted: a linked folder passed as work';
    expect(codesOf(receipt)).toContain('scope_violation');
    return 'refused';
  });
});

describe('the attributes judge, asked directly', () => {
  it("judges a .gitattributes change at the top of a commit of many files in parts, so git's answers for every file never pass the bound on its output", async () => {
    // 9,000 files of long names: git's answers for them all (the eight attributes each, path and name) pass 64 MiB,
    // the bound safeGit reads, which a repository of 100,000 files of ordinary names passes as well.
    const rules = Buffer.from('* ident\n');
    const blob = Buffer.from('x\n');
    const blobs = new Map([rules, blob].map((bytes) => [gitObjectId('blob', bytes), bytes]));
    const files: TreeFile[] = Array.from({ length: 9_000 }, (_, index) => ({ path: Buffer.from(`d/${'x'.repeat(1000)}${index}.js`), mode: '100644', oid: gitObjectId('blob', blob) }));
    const attributes: TreeFile = { path: Buffer.from('.gitattributes'), mode: '100644', oid: gitObjectId('blob', rules) };
    const converted = await checkoutAttributeChanges(files, [attributes, ...files], [attributes.path], join(dir, 'many'), (oids) => Promise.resolve(oids.map((oid) => blobs.get(oid)!)));
    expect(converted.length).toBe(9_001);
    expect(converted.every((file) => file.conversions.join() === 'ident')).toBe(true);
    expect(converted.at(-1)!.path.toString()).toBe(`d/${'x'.repeat(1000)}8999.js`);
  }, 60_000);

  it('sizes the batches of git check-attr by the longest rules line there is, not by the longest git would read', () => {
    // A root change in a commit of 100,000 files ran near a thousand check-attr at 2048 bytes a value (about a
    // hundred a side and reading): three do, 37 MB of answers at most.
    const paths = Array.from({ length: 100_000 }, (_, index) => Buffer.from(`src/module-${index}/index.js`));
    const names = ['text', 'eol', 'crlf', 'ident', 'working-tree-encoding', 'filter', 'export-subst', 'export-ignore'];
    expect(answerBatches(paths, names, [Buffer.from('* text=auto\n*.png binary\n')]).length).toBe(3);
    // A value as long as the longest line: every answer still within the bound, in more batches.
    const long = Buffer.from(`* filter=${'x'.repeat(2030)}\n`);
    const ends = answerBatches(paths, names, [long]);
    expect(ends.at(-1)).toBe(100_000);
    expect(ends.length).toBeGreaterThan(1);
    // A line longer than git reads (refused unjudged in the work) sizes no batch: one of 2 MB had every path asked alone.
    const longest = answerBatches(paths, names, [Buffer.from(`*.js ${'x'.repeat(2042)}\n`)]);
    expect(longest.length).toBeLessThan(200);
    expect(answerBatches(paths, names, [long, Buffer.from(`*.js ${'x'.repeat(2_100_000)}\n`)])).toEqual(longest);
    let start = 0;
    for (const end of ends) {
      const bytes = paths.slice(start, end).reduce((sum, path) => sum + names.reduce((all, name) => all + path.length + name.length + long.length + 2, 0), 0);
      expect(bytes).toBeLessThanOrEqual(16 * 1024 * 1024);
      start = end;
    }
  });

  it("names a folder a .gitattributes of the work has an archive leave out, and no attribute of a folder's that changes no byte", async () => {
    // `/src export-ignore` matches the folder, not its files: `git archive` leaves out src/ and all in it.
    const rules = Buffer.from('/src export-ignore\n/test ident eol=crlf\n');
    const blob = Buffer.from('x\n');
    const blobs = new Map([rules, blob].map((bytes) => [gitObjectId('blob', bytes), bytes]));
    const files: TreeFile[] = ['src/add.js', 'test/add.test.js', 'test.sh'].map((path) => ({ path: Buffer.from(path), mode: '100644', oid: gitObjectId('blob', blob) }));
    const attributes: TreeFile = { path: Buffer.from('.gitattributes'), mode: '100644', oid: gitObjectId('blob', rules) };
    const converted = await checkoutAttributeChanges(files, [attributes, ...files], [attributes.path], join(dir, 'folders'), (oids) => Promise.resolve(oids.map((oid) => blobs.get(oid)!)));
    expect(converted.map((file) => `${file.path.toString()}: ${file.conversions.join(', ')}`)).toEqual(['src/: export-ignore']);
  });

  it("reads no path of the commit's files when the work changes no file named as .gitattributes", async () => {
    // Every dispatch passes here: folding each path of a commit of 100,000 files costs half a second of CPU, for nothing.
    let read = 0;
    const file = { mode: '100644', oid: '0'.repeat(40), get path(): Buffer { read += 1; return Buffer.from('src/add.js'); } } as TreeFile;
    const none = (): Promise<Buffer[]> => Promise.reject(new Error('no blob is read'));
    expect(await attributesFiles([Buffer.from('src/add.js'), Buffer.from('src/.gitignore')], [file, file], none)).toEqual({ judged: [], unjudged: [] });
    expect(read).toBe(0);
    // Control: a changed .gitattributes has the commit's folders read, to find another spelling of its own.
    expect((await attributesFiles([Buffer.from('src/.gitattributes')], [file], none)).judged.map(String)).toEqual(['src/.gitattributes']);
    expect(read).toBeGreaterThan(0);
  });

  it('leaves unjudged a changed .gitattributes holding a line of 2048 bytes or more (a CR counted) or a NUL, which git here ignores or stops at and older git and libgit2 read, or a filter or encoding named set, unset or unspecified', async () => {
    const cases = {
      'a/.gitattributes': `*.js${' '.repeat(2039)}ident\n`,
      'b/.gitattributes': `*.js${' '.repeat(2038)}ident\r\n`,
      'c/.gitattributes': '*.js diff\n\0*.js ident\n',
      'd/.gitattributes': `*.js${' '.repeat(2038)}ident\n*.js${' '.repeat(2037)}ident\r\n`,
      'e/.gitattributes': '*.js diff working-tree-encoding=unspecified\n',
      'f/.gitattributes': '*.bin\tfilter=set -text\n',
      'g/.gitattributes': '*.js working-tree-encoding=unspecified-8 filter=lfs\n',
      // `text=unset` reads through check-attr as `-text`; a checkout reads it as no state of text, and eol=crlf still converts.
      'h/.gitattributes': '* text=unset eol=crlf\n',
      'i/.gitattributes': '* crlf=unset\n',
    };
    const blobs = new Map(Object.values(cases).map((text) => [gitObjectId('blob', Buffer.from(text)), Buffer.from(text)]));
    const regular: TreeFile[] = Object.entries(cases).map(([path, text]) => ({ path: Buffer.from(path), mode: '100644', oid: gitObjectId('blob', Buffer.from(text)) }));
    // A link named .gitattributes: git here reads no rules from it; a checkout and an archive read its target's text as rules.
    const files: TreeFile[] = [...regular, { path: Buffer.from('j/.gitattributes'), mode: '120000', oid: gitObjectId('blob', Buffer.from('* ident')) }];
    const { judged, unjudged } = await attributesFiles(
      files.map((file) => file.path),
      files,
      (oids) => Promise.resolve(oids.map((oid) => blobs.get(oid)!)),
    );
    expect(unjudged.map((entry) => entry.path.toString())).toEqual(['a/.gitattributes', 'b/.gitattributes', 'c/.gitattributes', 'e/.gitattributes', 'f/.gitattributes', 'h/.gitattributes', 'i/.gitattributes', 'j/.gitattributes']);
    expect(unjudged[0]!.detail).toBe('holds a NUL or a line of 2048 bytes or more, which git 2.39.1 and later ignore and older git and libgit2 read: not judged');
    // `working-tree-encoding=unspecified` reads through check-attr as none; every checkout errs on it (failed to encode).
    expect(unjudged[3]!.detail).toBe('gives working-tree-encoding the value unspecified, which git check-attr reports as that state and a checkout reads as a value: not judged');
    expect(unjudged[5]!.detail).toBe('gives text the value unset, which git check-attr reports as that state and a checkout reads as a value: not judged');
    expect(unjudged[7]!.detail).toBe('is a link, whose target text a checkout and an archive read as rules: not judged');
    // Control: lines of 2047 bytes, a CR counted, git here reads as every reader does, and so a value that only begins as such a word.
    expect(judged.map(String)).toEqual(['d/.gitattributes', 'g/.gitattributes']);
  });

  /** What the judge names, file by file, for `rules` added as the top `.gitattributes` of a commit of `paths`. */
  async function judged(name: string, rules: string, paths: readonly string[] = ['src/add.js'], base?: string): Promise<string[]> {
    const blob = Buffer.from('x\n');
    const [rulesBlob, baseBlob] = [Buffer.from(rules), Buffer.from(base ?? '')];
    const blobs = new Map([rulesBlob, baseBlob, blob].map((bytes) => [gitObjectId('blob', bytes), bytes]));
    const files: TreeFile[] = paths.map((path) => ({ path: Buffer.from(path), mode: '100644', oid: gitObjectId('blob', blob) }));
    const attributes: TreeFile = { path: Buffer.from('.gitattributes'), mode: '100644', oid: gitObjectId('blob', rulesBlob) };
    const before = base === undefined ? files : [{ ...attributes, oid: gitObjectId('blob', baseBlob) }, ...files];
    const converted = await checkoutAttributeChanges(before, [attributes, ...files], [attributes.path], join(dir, name), (oids) => Promise.resolve(oids.map((oid) => blobs.get(oid)!)));
    return converted.map((file) => `${file.path.toString()}: ${file.conversions.join(', ')}`);
  }

  it('names `working-tree-encoding` set or unset alone, with which every checkout and archive of the commit dies, and no empty or UTF-8 one', async () => {
    // git: "true/false are no valid working-tree-encodings" (exit 128) on `git clone` and `git archive` alike.
    expect(await judged('encoding-set', '*.js working-tree-encoding\n')).toEqual(['src/add.js: working-tree-encoding=true (every checkout fails)']);
    expect(await judged('encoding-unset', '*.js -working-tree-encoding\n')).toEqual(['src/add.js: working-tree-encoding=false (every checkout fails)']);
    expect(await judged('encoding-named', '*.js working-tree-encoding=UTF-16LE\n')).toEqual(['src/add.js: working-tree-encoding=UTF-16LE']);
    // Control: an empty value names none, and UTF-8 in any spelling git's same_encoding takes is the blob's own.
    expect(await judged('encoding-none', '*.js working-tree-encoding=\nsrc/add.js working-tree-encoding=utf8\n', ['src/a.js', 'src/add.js'])).toEqual([]);
    expect(await judged('encoding-utf8', '*.js working-tree-encoding=Utf-8\n')).toEqual([]);
  });

  it('asks git nothing about filters when no .gitattributes of the commit says `filter`', async () => {
    // Every dispatch into a repository with a .gitattributes passes here: two check-attr over every written file, for nothing.
    const rules = Buffer.from('* text=auto\n*.png binary\n');
    const blob = Buffer.from('x\n');
    const blobs = new Map([rules, blob].map((bytes) => [gitObjectId('blob', bytes), bytes]));
    const after: TreeFile[] = [
      { path: Buffer.from('.gitattributes'), mode: '100644', oid: gitObjectId('blob', rules) },
      { path: Buffer.from('src/add.js'), mode: '100644', oid: gitObjectId('blob', blob) },
    ];
    const folder = join(dir, 'no-filter');
    expect(await filteredChanges(after, [Buffer.from('src/add.js')], folder, (oids) => Promise.resolve(oids.map((oid) => blobs.get(oid)!)))).toEqual([]);
    // No rules folder was made for git to judge in.
    expect(existsSync(folder)).toBe(false);
  });

  it('judges line ends by what each stock reader writes: refuses a change any reader writes with more CRs, passes one none does', async () => {
    // Git for Windows (core.autocrlf=true) writes a file given nothing as `text=auto` does: CRLF for files detected as text.
    expect(await judged('eol-auto-added', '* text=auto\n')).toEqual([]);
    expect(await judged('eol-binary-removed', '*.md diff\n', ['src/add.js'], '* -text\n')).toEqual(['.gitattributes: no text or eol attribute: CRLF for files detected as text on Windows checkouts (core.autocrlf=true)', 'src/add.js: no text or eol attribute: CRLF for files detected as text on Windows checkouts (core.autocrlf=true)']);
    expect(await judged('eol-lf-removed', '', ['src/add.js'], '* eol=lf\n')).toEqual(['.gitattributes: no text or eol attribute: CRLF for files detected as text on Windows checkouts (core.autocrlf=true)', 'src/add.js: no text or eol attribute: CRLF for files detected as text on Windows checkouts (core.autocrlf=true)']);
    // `text` converts every file, one holding a NUL too, where `text=auto` leaves what looks binary as stored.
    expect(await judged('eol-auto-to-text', '* text\n', ['src/add.js'], '* text=auto\n')).toEqual(['.gitattributes: text: CRLF for every file on Windows checkouts (core.autocrlf=true)', 'src/add.js: text: CRLF for every file on Windows checkouts (core.autocrlf=true)']);
    // Control: toward the blob as stored on every reader passes; so does `text` over `eol=crlf`, which Linux no longer converts.
    expect(await judged('eol-toward-stored', '* -text\n*.sh text eol=lf\n', ['src/add.js', 'test.sh'], '* text=auto\n')).toEqual([]);
    expect(await judged('eol-crlf-to-text', '* text\n', ['src/add.js'], '* eol=crlf\n')).toEqual([]);
  });

  it('names of a link (mode 120000), which every checkout writes as its target as stored, only `export-ignore`', async () => {
    const rules = Buffer.from('*.js ident eol=crlf working-tree-encoding=UTF-16LE\n/src/gone.js export-ignore\n');
    const blob = Buffer.from('add.js');
    const blobs = new Map([rules, blob].map((bytes) => [gitObjectId('blob', bytes), bytes]));
    const files: TreeFile[] = ['src/link.js', 'src/gone.js'].map((path) => ({ path: Buffer.from(path), mode: '120000', oid: gitObjectId('blob', blob) }));
    const attributes: TreeFile = { path: Buffer.from('.gitattributes'), mode: '100644', oid: gitObjectId('blob', rules) };
    const converted = await checkoutAttributeChanges(files, [attributes, ...files], [attributes.path], join(dir, 'links'), (oids) => Promise.resolve(oids.map((oid) => blobs.get(oid)!)));
    // An archive leaves the link out: that is a change. Its target is written as stored whatever ident or eol says.
    expect(converted.map((file) => `${file.path.toString()}: ${file.conversions.join(', ')}`)).toEqual(['src/gone.js: export-ignore']);
  });

  it('a filter given by a pattern that only a macOS or Windows checkout (core.ignorecase) matches names the file as filtered', async () => {
    const rules = Buffer.from('*.BIN filter=lfs\n');
    const pointer = Buffer.from('version https://git-lfs.github.com/spec/v1\n');
    const blobs = new Map([rules, pointer].map((bytes) => [gitObjectId('blob', bytes), bytes]));
    const after: TreeFile[] = [
      { path: Buffer.from('.gitattributes'), mode: '100644', oid: gitObjectId('blob', rules) },
      { path: Buffer.from('assets/model.bin'), mode: '100644', oid: gitObjectId('blob', pointer) },
      { path: Buffer.from('src/add.js'), mode: '100644', oid: gitObjectId('blob', pointer) },
    ];
    const filtered = await filteredChanges(after, [Buffer.from('assets/model.bin'), Buffer.from('src/add.js')], join(dir, 'case-filter'), (oids) => Promise.resolve(oids.map((oid) => blobs.get(oid)!)));
    expect(filtered.map((path) => path.toString())).toEqual(['assets/model.bin']);
  });
});
