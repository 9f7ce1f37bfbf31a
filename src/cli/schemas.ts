import * as fs from 'node:fs';
import { join } from 'node:path';
import type { Command } from 'commander';
import { DOCUMENT_KINDS } from '../schema/documents.js';
import { toJsonSchema } from '../schema/json-schema.js';
import { readBounded } from '../util/bounded-read.js';
import { emit, jsonOption, refuseOutputPath, writeOutput } from './common.js';
import { markRejected } from './outcome.js';

export function schemaFiles(): Map<string, string> {
  return new Map(DOCUMENT_KINDS.map((kind) => [`${kind}.json`, `${JSON.stringify(toJsonSchema(kind), null, 2)}\n`]));
}

function isWritten(path: string, text: string): boolean {
  const read = readBounded(path, { maxBytes: Buffer.byteLength(text), follow: true });
  return read.kind === 'file' && read.bytes.toString('utf8') === text;
}

export function schemasVerb(program: Command): void {
  program
    .command('schemas')
    .description('write the JSON Schema (draft 2020-12) of every document kind, or check that a folder matches')
    .option('--out <dir>', 'folder to write to', 'schemas')
    .option('--check', 'compare instead of writing; exit 3 when the folder has drifted')
    .addOption(jsonOption())
    .action((opts: { out: string; check?: boolean; json?: boolean }) => {
      const files = schemaFiles();
      const names = [...files.keys()];
      if (opts.check === true) {
        // Read within a bound and never from a FIFO: anything but the file as written has drifted.
        const drifted = [...files].filter(([name, text]) => !isWritten(join(opts.out, name), text)).map(([name]) => name);
        if (drifted.length > 0) markRejected();
        emit(opts.json, { out: opts.out, ok: drifted.length === 0, schemas: names, drifted }, () =>
          drifted.length > 0 ? `drifted: ${drifted.join(', ')} (run: coo schemas --out ${opts.out})` : `ok: ${files.size} schemas match`,
        );
        return;
      }
      fs.mkdirSync(opts.out, { recursive: true });
      // Every name is looked at before any is written: something in the way of the tenth file must not leave nine new ones beside nine old.
      for (const name of names) refuseOutputPath(join(opts.out, name), '--out', false);
      for (const [name, text] of files) writeOutput(join(opts.out, name), text, '--out', 'the schema');
      emit(opts.json, { out: opts.out, written: names }, () => `wrote ${files.size} schemas to ${opts.out}`);
    });
}
