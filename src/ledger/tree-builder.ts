import { CooError } from '../errors.js';
import type { TreeReader } from './history.js';
import type { ObjectSink } from './object-store.js';
import { renderTree, type TreeEntry } from './tree-format.js';

interface Node {
  entries: Map<string, TreeEntry>;
  children: Map<string, Node>;
}

/**
 * Adds files to a tree without an index: only the directories on the added paths are read and
 * rewritten, so the cost of a commit does not grow with the ledger. Replaces a file only when the
 * caller says so (a forge file, layout.ts); the validator decides whether that replacement stands.
 */
export class TreeBuilder {
  private readonly root: Promise<Node>;

  constructor(
    private readonly trees: TreeReader,
    base: string | null,
  ) {
    this.root = this.load(base);
  }

  private async load(oid: string | null): Promise<Node> {
    const entries = oid === null ? [] : await this.trees.entries(oid);
    return { entries: new Map(entries.map((entry) => [entry.name, entry])), children: new Map() };
  }

  /**
   * Adds `path`; with `replace`, an existing file at `path` is replaced. Says which it did, as a diff
   * of the trees would: replacing a file with the same bytes changes nothing.
   */
  async add(path: string, blobOid: string, options: { readonly replace?: boolean } = {}): Promise<'added' | 'modified' | 'unchanged'> {
    const parts = path.split('/');
    let node = await this.root;
    for (let i = 0; i < parts.length - 1; i += 1) {
      const name = parts[i]!;
      let child = node.children.get(name);
      if (child === undefined) {
        const existing = node.entries.get(name);
        if (existing !== undefined && existing.mode !== '40000') {
          throw new CooError('WRITE_ONCE', `${parts.slice(0, i + 1).join('/')} is a file, not a folder`, { where: path });
        }
        child = await this.load(existing?.oid ?? null);
        node.children.set(name, child);
      }
      node = child;
    }
    const name = parts[parts.length - 1]!;
    const existing = node.entries.get(name);
    const replacing = options.replace === true && existing !== undefined && existing.mode === '100644' && !node.children.has(name);
    if (!replacing && (existing !== undefined || node.children.has(name))) {
      throw new CooError('WRITE_ONCE', `${path} already exists: ledger files are write-once`, { where: path });
    }
    node.entries.set(name, { name, mode: '100644', oid: blobOid });
    return !replacing ? 'added' : existing.oid === blobOid ? 'unchanged' : 'modified';
  }

  /** Writes the changed trees bottom-up; returns the new root tree id. */
  async write(writer: ObjectSink): Promise<string> {
    return this.writeNode(await this.root, writer);
  }

  private async writeNode(node: Node, writer: ObjectSink): Promise<string> {
    for (const [name, child] of node.children) {
      node.entries.set(name, { name, mode: '40000', oid: await this.writeNode(child, writer) });
    }
    return writer.write('tree', renderTree([...node.entries.values()]));
  }
}
