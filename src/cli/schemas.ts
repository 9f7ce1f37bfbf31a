import * as fs from 'node:fs';
import { join } from 'node:path';
import type { Command } from 'commander';
import { DOCUMENT_KINDS } from '../schema/documents.js';
import { toJsonSchema } from '../schema/json-schema.js';
import { markRejected } from './outcome.js';

export function schemaFiles(): Map<string, string> {
  return new Map(DOCUMENT_KINDS.map((kind) => [`${kind}.json`, `${JSON.stringify(toJsonSchema(kind), null, 2)}\n`]));
}

export function schemasVerb(program: Command): void {
  program
    .command('schemas')
    .description('write the JSON Schema (draft 2020-12) of every document kind, or check that a folder matches')
    .option('--out <dir>', 'folder to write to', 'schemas')
    .option('--check', 'compare instead of writing; exit 3 when the folder has drifted')
    .action((opts: { out: string; check?: boolean }) => {
      const files = schemaFiles();
      if (opts.check === true) {
        const drifted = [...files].filter(([name, text]) => !fs.existsSync(join(opts.out, name)) || fs.readFileSync(join(opts.out, name), 'utf8') !== text);
        if (drifted.length > 0) {
          markRejected();
          process.stdout.write(`drifted: ${drifted.map(([name]) => name).join(', ')} (run: coo schemas --out ${opts.out})\n`);
        } else process.stdout.write(`ok: ${files.size} schemas match\n`);
        return;
      }
      fs.mkdirSync(opts.out, { recursive: true });
      for (const [name, text] of files) fs.writeFileSync(join(opts.out, name), text);
      process.stdout.write(`wrote ${files.size} schemas to ${opts.out}\n`);
    });
}
