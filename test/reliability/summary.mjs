// Prints the figures `npm run test:reliability` collected, and fails if any must-be-zero is not.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const dir = join(import.meta.dirname, '..', '..', 'test-artifacts', 'reliability');
const read = (name) => (existsSync(join(dir, name)) ? readFileSync(join(dir, name), 'utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line)) : []);
const attacks = read('attacks.jsonl');
const properties = read('properties.jsonl');
const faults = read('faults.jsonl');
const load = read('load.jsonl');

const accepted = attacks.filter((a) => a.accepted);
const byVia = Object.entries(attacks.reduce((acc, a) => ({ ...acc, [a.via]: (acc[a.via] ?? 0) + 1 }), {})).map(([via, n]) => `${via} ${n}`).join(', ');
const consultFaults = faults.filter((f) => f.lane !== 'dispatch');
const dispatchFaults = faults.filter((f) => f.lane === 'dispatch');
const escapes = attacks.filter((a) => a.name.startsWith('dispatch escape:'));
const hostile = attacks.filter((a) => a.name.startsWith('a hostile agent:'));
const race = load.find((l) => l.test === 'four runners, one dispatch queue');
const orphans = dispatchFaults.reduce((sum, f) => sum + f.orphans, 0);
const doubleReceipts = race?.double_receipts ?? 0;
const dispatchPoints = Object.entries(dispatchFaults.reduce((acc, f) => ({ ...acc, [f.point]: (acc[f.point] ?? 0) + 1 }), {})).map(([p, n]) => `${p} ${n}`).join(', ');
const points = Object.entries(consultFaults.reduce((acc, f) => ({ ...acc, [f.point]: (acc[f.point] ?? 0) + 1 }), {})).map(([p, n]) => `${p} ${n}`).join(', ');
const duplicates = faults.reduce((sum, f) => sum + f.duplicate_calls, 0) + load.reduce((sum, l) => sum + (l.duplicate_calls ?? 0), 0);
const lost = faults.reduce((sum, f) => sum + f.lost, 0) + load.reduce((sum, l) => sum + (l.lost ?? 0), 0) + load.reduce((sum, l) => sum + (l.commits !== undefined ? l.commits - l.landed : 0), 0);
const lane = load.find((l) => l.test === 'lane');
const shared = load.find((l) => l.test === 'four runners');
const packing = load.find((l) => l.test === 'packing under the writer');
const remoteDrains = load.filter((l) => /^\d+ runners, \d+ clones/.test(l.test));
const takeovers = faults.filter((f) => f.point === 'remote-takeover');
const clocks = ['clock an hour ahead', 'clock an hour behind'].map((test) => load.find((l) => l.test === test)).filter(Boolean);
const collision = load.find((l) => l.test === 'two containers, one host name and pid');
const mcpRace = load.find((l) => l.test === 'identical MCP consults at once');
const mcpRefused = mcpRace?.refused ?? 0;

/** Attacks by the catalog file they come from: trust over time, and what auditors are told. */
const inFiles = (pattern) => attacks.filter((a) => pattern.test(a.file ?? ''));
const trustAttacks = inFiles(/^trust/);
const auditAttacks = inFiles(/^(audit|bundle)/);
const triedRefused = (list) => (list.length > 0 ? `${list.length} / ${list.filter((a) => !a.accepted).length}` : 'not run');

const rows = [
  ['attacks tried', `${attacks.length} (${byVia})`],
  ['attacks accepted (must be 0)', String(accepted.length)],
  ['trust attacks tried / refused', triedRefused(trustAttacks)],
  ['audit attacks tried / refused', triedRefused(auditAttacks)],
  ['property cases run', `${properties.reduce((sum, p) => sum + p.runs, 0)} over ${properties.length} properties`],
  ['crashes survived', `${consultFaults.filter((f) => f.killed).length} of ${consultFaults.length} SIGKILLed runs (${points})`],
  ['duplicate consults (must be 0)', String(duplicates)],
  ['lost envelopes (must be 0)', String(lost)],
  ['load through the lane', lane ? `${lane.completed}/${lane.consults} consults completed, ${lane.paid_calls} paid calls` : 'not run'],
  ['peak memory under load', lane ? `${lane.peak_rss_mb} MB RSS; live heap grew ${lane.heap_growth_after_warmup_mb} MB after warm-up` : 'not run'],
  ['packing under the writer', packing ? `${packing.landed}/${packing.commits} commits landed, ${packing.errors} errors, ${packing.packing_passes} packing passes` : 'not run'],
  ['four runners on one ledger', shared ? `${shared.consults} consults, ${shared.paid_calls} paid calls, ${shared.duplicate_calls} duplicates, ${shared.runners_that_claimed} runners claimed work` : 'not run'],
  ['dispatch escapes tried / refused', escapes.length > 0 ? `${escapes.length} / ${escapes.filter((a) => !a.accepted).length} (real Codex through the runner)` : 'not run'],
  ['dispatch evidence attacks tried / held', hostile.length > 0 ? `${hostile.length} / ${hostile.filter((a) => a.observed === a.expected).length} (a script in place of Codex through coo watch: receipts' hashes, signed blobs and verified bytes the same; every attempt receipted)` : 'not run'],
  ['dispatch kills survived', dispatchFaults.length > 0 ? `${dispatchFaults.filter((f) => f.killed && f.lost === 0).length} of ${dispatchFaults.length} SIGKILLed runners (${dispatchPoints}); ${dispatchFaults.reduce((sum, f) => sum + f.duplicate_calls, 0)} model calls for killed attempts` : 'not run'],
  ['executors left running (must be 0)', String(orphans)],
  ['no dispatch attempt run twice', race ? `${race.dispatches} dispatches, 4 runner processes: ${race.runs} runs, ${race.duplicate_calls} run twice, ${race.runners_that_claimed} runners claimed work` : 'not run'],
  ['attempts receipted twice (must be 0)', String(doubleReceipts)],
  [
    'runners on clones of one ssh:// remote',
    remoteDrains.length > 0
      ? remoteDrains.map((d) => `${d.test}: ${d.consults} consults, ${d.paid_calls} paid calls, ${d.duplicate_calls} duplicates, ${d.lost} lost, ${d.runners_that_claimed} runners claimed work, ${d.claims_lost_to_another_runner} claims lost to another runner, ${d.push_conflicts} push conflicts rebuilt`).join('; ')
      : 'not run',
  ],
  ['lease takeovers after SIGKILL', takeovers.length > 0 ? `${takeovers.length} run(s), ${takeovers.reduce((sum, f) => sum + f.duplicate_calls, 0)} attempts paid twice` : 'not run'],
  [
    'double payments under clock skew (must be 0)',
    clocks.length > 0 ? `${clocks.reduce((sum, l) => sum + l.duplicate_calls, 0)} (${clocks.map((l) => `${l.test}: ${l.paid_calls} paid call(s), ${l.takeovers} takeover(s) of a live claim`).join('; ')})` : 'not run',
  ],
  ['double payments under runner id collision (must be 0)', collision ? `${collision.duplicate_calls} (two runners of one host name and pid: ${collision.paid_calls} paid call(s), ${collision.takeovers} takeover(s))` : 'not run'],
  ['identical MCP consults at once (refused must be 0)', mcpRace ? `${mcpRace.calls} calls on two servers of one ledger: ${mcpRace.messages} message, ${mcpRefused} refused` : 'not run'],
];
const width = Math.max(...rows.map(([name]) => name.length));
process.stdout.write(`\ncoo-commons reliability figures\n${'-'.repeat(width + 40)}\n`);
for (const [name, value] of rows) process.stdout.write(`${name.padEnd(width)}  ${value}\n`);
for (const a of accepted) process.stdout.write(`ACCEPTED: ${a.name} (${a.via})\n`);
process.exitCode = accepted.length > 0 || duplicates > 0 || lost > 0 || orphans > 0 || doubleReceipts > 0 || mcpRefused > 0 || (mcpRace !== undefined && mcpRace.messages !== 1) || attacks.length === 0 ? 1 : 0;
