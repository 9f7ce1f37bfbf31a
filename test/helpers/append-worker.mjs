// Appends N envelopes to a ledger from one process, through the library (dist build).
// Usage: node append-worker.mjs <ledger> <coo.key> <worker-id> <count>
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const dist = join(import.meta.dirname, '..', '..', 'dist');
const { Ledger } = await import(join(dist, 'ledger', 'ledger.js'));
const { appendEnvelope } = await import(join(dist, 'ledger', 'append-envelope.js'));
const { parsePrivateKey } = await import(join(dist, 'crypto', 'keys.js'));
const { newMessageId } = await import(join(dist, 'util', 'ids.js'));

const [gitdir, keyFile, worker, count] = process.argv.slice(2);
const key = parsePrivateKey(readFileSync(keyFile, 'utf8'));
const template = readFileSync(join(import.meta.dirname, '..', 'fixtures', 'dispatch.yaml'), 'utf8');
// The fixture dispatch's task (test/helpers/stock.ts FIXTURE_TASK).
const TASK = Buffer.from('Fix add() so that test.sh passes.\n');
const ledger = Ledger.open(gitdir);
for (let i = 0; i < Number(count); i += 1) {
  const id = newMessageId(Date.parse('2026-11-30T07:00:00Z'));
  const envelope = template.replace(/MESSAGE_TAIL/g, id.slice(4)).replace(/MESSAGE_ID/g, id).replace(/IDEMPOTENCY/g, `w${worker}-${i}`);
  await appendEnvelope(ledger, Buffer.from(envelope), new Map([['prompt.md', TASK]]), key, new Date());
}
ledger.close();
process.stdout.write(`worker ${worker} appended ${count}\n`);
