import { execFileSync } from 'node:child_process';
import { createReadStream, existsSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';

/**
 * Test fixture: an npm registry on 127.0.0.1 that serves the packages this checkout's lockfile
 * installs (its production dependencies), each version's metadata taken from the lockfile and its
 * tarball from the local npm cache by the integrity the lockfile records. `npm install` of the
 * packed checkout then resolves and fetches every dependency without leaving the machine, as it
 * would from the public registry.
 */
export interface NpmRegistry {
  readonly url: string;
  close(): Promise<void>;
}

interface LockEntry {
  readonly name?: string;
  readonly version: string;
  readonly integrity?: string;
  readonly dev?: boolean;
  readonly link?: boolean;
  readonly [field: string]: unknown;
}

/** The fields of a lockfile entry that npm reads from a version's metadata to build its tree. */
const MANIFEST_FIELDS = ['dependencies', 'optionalDependencies', 'peerDependencies', 'peerDependenciesMeta', 'bin', 'engines', 'os', 'cpu'];

function cacheContentPath(cache: string, integrity: string): string {
  const [algorithm, digest] = integrity.split('-');
  const hex = Buffer.from(digest!, 'base64').toString('hex');
  return join(cache, '_cacache', 'content-v2', algorithm!, hex.slice(0, 2), hex.slice(2, 4), hex.slice(4));
}

export async function startNpmRegistry(repo: string): Promise<NpmRegistry> {
  const lock = JSON.parse(readFileSync(join(repo, 'package-lock.json'), 'utf8')) as { packages: Record<string, LockEntry> };
  const cache = execFileSync('npm', ['config', 'get', 'cache'], { encoding: 'utf8' }).trim();
  const versions = new Map<string, Map<string, Record<string, unknown>>>();
  const tarballs = new Map<string, string>();
  for (const [path, entry] of Object.entries(lock.packages)) {
    if (path === '' || entry.dev === true || entry.link === true || entry.integrity === undefined) continue;
    const name = entry.name ?? path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length);
    const file = `/${name}/-/${name.split('/').pop()}-${entry.version}.tgz`;
    tarballs.set(file, cacheContentPath(cache, entry.integrity));
    const manifest: Record<string, unknown> = { name, version: entry.version, dist: { integrity: entry.integrity, tarball: file } };
    for (const field of MANIFEST_FIELDS) if (entry[field] !== undefined) manifest[field] = entry[field];
    if (!versions.has(name)) versions.set(name, new Map());
    versions.get(name)!.set(entry.version, manifest);
  }
  let base = '';
  const server = createServer((request, response) => {
    const path = decodeURIComponent(new URL(request.url ?? '/', 'http://127.0.0.1').pathname);
    const tarball = tarballs.get(path);
    if (tarball !== undefined && existsSync(tarball)) {
      response.writeHead(200, { 'content-type': 'application/octet-stream' });
      createReadStream(tarball).pipe(response);
      return;
    }
    const known = versions.get(path.slice(1));
    if (known === undefined) {
      response.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not found"}');
      return;
    }
    const list = [...known].map(([version, manifest]) => [version, { ...manifest, dist: { ...(manifest['dist'] as object), tarball: `${base}${(manifest['dist'] as { tarball: string }).tarball}` } }] as const);
    const body = { name: path.slice(1), 'dist-tags': { latest: list[list.length - 1]![0] }, versions: Object.fromEntries(list) };
    response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url: `${base}/`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
