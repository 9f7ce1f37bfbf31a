import type { ErrorCode } from '../errors.js';
import type { Problem } from '../lane/runner-lane.js';

/**
 * The start-up decision, pure: from what the checks found before anything is claimed, run (with
 * the targets that must wait, and what to say once at start) or refuse to start (exit 2, nothing
 * claimed). A problem that no lane can run past (the repository, the key, the sandbox, a flag that
 * names nothing) refuses; one that stops a target (its provider key, its executor) makes that
 * target's messages wait, queued and unclaimed, while the rest run. When no target can run at all,
 * the runner refuses too: a runner that can do nothing must not look as if it works. A runner that
 * keeps running (looksAgain) counts a target that waits only for its model server on this machine
 * to answer as one that can run: it looks again each pass, and runs it once it answers.
 */

export type Lane = 'consult' | 'dispatch';

export interface TargetFacts {
  /** The actor messages are addressed to (`aa.chatgpt`, `ea.codex`). */
  readonly actor: string;
  readonly lane: Lane;
  /** Why this target's attempts could not run here; empty when they can. */
  readonly problems: readonly Problem[];
  /**
   * Why they cannot run now, in what may pass while the runner runs: nothing answers yet at an
   * endpoint on this machine it calls (a model server started beside the runner, or restarting).
   */
  readonly passing?: readonly Problem[];
}

export interface StartupFacts {
  /** Problems no lane runs past, in the order they were checked. */
  readonly shared: readonly Problem[];
  readonly isolation: 'bwrap' | 'none';
  /** Every target the policy in force lets the active COO consult or dispatch to. */
  readonly targets: readonly TargetFacts[];
  /**
   * The runner keeps running (a watch, an MCP server's runner) and looks again, each pass, at what
   * may pass: such a target is not held for good, and no start is refused for it. A single pass
   * (`--once`) holds it, as any other problem, and refuses when no target can run.
   */
  readonly looksAgain?: boolean;
}

export type StartupPlan =
  | { readonly kind: 'refuse'; readonly code: ErrorCode; readonly message: string }
  | {
      readonly kind: 'run';
      /** Targets whose messages stay queued: actor -> why (the first problem's code), said once at start. */
      readonly waiting: ReadonlyMap<string, Problem>;
      /** Lines for the operator at start: an explicit `--isolation none` (target null), and each target that waits and why. */
      readonly notes: ReadonlyArray<{ readonly target: string | null; readonly text: string }>;
    };

const NOUN: Record<Lane, string> = { consult: 'consults', dispatch: 'dispatches' };

function why(problems: readonly Problem[], actor?: string): string {
  // An adapter's message may start with the actor it is about; the line names the actor already.
  return problems.map((problem) => (actor !== undefined && problem.message.startsWith(`${actor}: `) ? problem.message.slice(actor.length + 2) : problem.message)).join('; ');
}

const LANE_ORDER: Record<Lane, number> = { consult: 0, dispatch: 1 };

export function planStartup(facts: StartupFacts): StartupPlan {
  const first = facts.shared[0];
  if (first !== undefined) return { kind: 'refuse', code: first.code, message: why(facts.shared) };
  const held = (target: TargetFacts): TargetFacts => (facts.looksAgain === true ? target : { ...target, problems: [...target.problems, ...(target.passing ?? [])] });
  const blocked = facts.targets.map(held).filter((target) => target.problems.length > 0).sort((a, b) => LANE_ORDER[a.lane] - LANE_ORDER[b.lane]);
  if (facts.targets.length > 0 && blocked.length === facts.targets.length) {
    return {
      kind: 'refuse',
      code: blocked[0]!.problems[0]!.code,
      message: `no lane can run here, so nothing is claimed: ${blocked.map((target) => `${NOUN[target.lane]} to ${target.actor}: ${why(target.problems, target.actor)}`).join('; ')}`,
    };
  }
  const waiting = new Map(blocked.map((target) => [target.actor, { code: target.problems[0]!.code, message: why(target.problems, target.actor) }] as const));
  const notes = blocked.map((target) => ({ target: target.actor as string | null, text: `${NOUN[target.lane]} to ${target.actor} wait, queued and unclaimed: ${why(target.problems, target.actor)}` }));
  if (facts.looksAgain === true) {
    for (const target of facts.targets) {
      if (target.problems.length > 0 || (target.passing ?? []).length === 0) continue;
      notes.push({ target: target.actor, text: `${NOUN[target.lane]} to ${target.actor} wait, queued and unclaimed, until it answers (looked at again while they wait): ${why(target.passing!, target.actor)}` });
    }
  }
  if (facts.isolation === 'none') {
    notes.unshift({
      target: null,
      text: 'no OS sandbox (--isolation none): Oracle and the execution agents run in a clean folder and environment only, with every path of this machine in reach; every receipt says sandbox_unenforced',
    });
  }
  return { kind: 'run', waiting, notes };
}
