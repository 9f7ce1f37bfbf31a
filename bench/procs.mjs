// CPU time of processes, read from /proc, for the benches that run many processes (runners, sshd,
// git, hooks). The machine is shared: /proc/stat counts every engineer's work, so a figure of ours
// is the sum over the process trees the bench started. A tree's CPU is, over its live (and zombie)
// processes, their own time plus what their reaped children spent (utime + stime + cutime +
// cstime): a process that exited and was reaped by an ancestor inside the tree is in that
// ancestor's cutime, so the sum only grows while the tree runs. A process that leaves the tree
// (OpenSSH's ControlPersist master forks off and is reparented to init) must be counted on its own.
import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';

const TICK = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());

/** One process's /proc/PID/stat: its parent, name and CPU seconds (own and reaped children's). */
function stat(pid) {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const close = text.lastIndexOf(')');
    const comm = text.slice(text.indexOf('(') + 1, close);
    const fields = text.slice(close + 2).split(' ');
    // Fields after the name, from "state" (field 3): ppid is 4, utime 14, stime 15, cutime 16, cstime 17.
    const at = (n) => Number(fields[n - 3]);
    return { pid, ppid: at(4), comm, self: (at(14) + at(15)) / TICK, children: (at(16) + at(17)) / TICK };
  } catch {
    return null;
  }
}

function cmdline(pid) {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ');
  } catch {
    return '';
  }
}

/** Every process on the machine now, by pid. */
export function snapshot() {
  const procs = new Map();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const found = stat(Number(name));
    if (found !== null) procs.set(found.pid, found);
  }
  return procs;
}

/** The pids of `root` and every process below it. */
export function treeOf(procs, root) {
  const kids = new Map();
  for (const proc of procs.values()) {
    if (!kids.has(proc.ppid)) kids.set(proc.ppid, []);
    kids.get(proc.ppid).push(proc.pid);
  }
  const found = [];
  const stack = procs.has(root) ? [root] : [];
  while (stack.length > 0) {
    const pid = stack.pop();
    found.push(pid);
    stack.push(...(kids.get(pid) ?? []));
  }
  return found;
}

/** CPU seconds of a process tree so far: own and reaped children's, over its processes. */
export function treeCpu(procs, root) {
  return treeOf(procs, root).reduce((sum, pid) => sum + procs.get(pid).self + procs.get(pid).children, 0);
}

/** Own CPU seconds of each process whose command line contains every one of `marks`, by pid. */
export function cpuOfMatching(procs, marks) {
  const found = new Map();
  for (const proc of procs.values()) {
    const line = cmdline(proc.pid);
    if (marks.every((mark) => line.includes(mark))) found.set(proc.pid, proc.self + proc.children);
  }
  return found;
}

/** What the processes in `after` spent since `before` (a process new in `after` counts whole). */
export function grown(before, after) {
  let sum = 0;
  for (const [pid, seconds] of after) sum += seconds - (before.get(pid) ?? 0);
  return sum;
}

/** Own CPU seconds of this process and of its reaped children. */
export function selfCpu() {
  const own = stat(process.pid);
  return { self: own.self, children: own.children };
}

/** CPU seconds the whole machine spent busy (every process, every core) since boot, from /proc/stat. */
export function machineBusySeconds() {
  const [user, nice, system, , , irq, softirq, steal] = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  return (user + nice + system + irq + softirq + steal) / TICK;
}

/** The load averages (1, 5 and 15 minutes). */
export function loadAverage() {
  return readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).map(Number);
}

/**
 * A command wrapper that runs `target` with the arguments it was given and appends `label`, the
 * user and system CPU seconds of the command (and its descendants), to `log` (bash's `time`, to the
 * millisecond; GNU time prints hundredths). The command's own stdin, stdout, stderr and exit status
 * pass through. `extra` is a shell word appended to the label line (evaluated at run time).
 */
export function timingWrapper(target, label, log, extra = '') {
  return [
    '#!/bin/bash',
    `TIMEFORMAT="${label} %3U %3S${extra === '' ? '' : ` ${extra}`}"`,
    `{ time ${target} "$@" 2>&3 3>&- ; } 3>&2 2>>'${log}'`,
    '',
  ].join('\n');
}

/** Sums a wrapper log's lines by label: { label: { count, seconds } }, from line `from` on. */
export function readTimings(log, from = 0) {
  let lines;
  try {
    lines = readFileSync(log, 'utf8').split('\n').filter((line) => line.trim() !== '');
  } catch {
    lines = [];
  }
  const sums = {};
  for (const line of lines.slice(from)) {
    const [label, user, system, ...rest] = line.split(' ');
    const key = rest.length === 0 ? label : `${label} ${rest.join(' ')}`;
    sums[key] ??= { count: 0, seconds: 0 };
    sums[key].count += 1;
    sums[key].seconds += Number(user) + Number(system);
  }
  return { sums, lines: lines.length, entries: lines.slice(from) };
}
