import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { formatPrivateKey } from '../../src/crypto/keys.js';
import { toYaml } from '../../src/schema/strict-yaml.js';
import { COO } from '../helpers/cli.js';
import { agentScript, dispatchTo, FIX, hostilePlaces, receiptsFor, watchOnce, type HostilePlace } from '../helpers/hostile-agent.js';
import { tempDir } from '../helpers/tmp.js';

/**
 * A dispatch is judged before its claim, and stopped while it runs, at its model's price in the
 * policy then. The CEO may change the policy while the agent works: a dispatch's receipt is charged
 * at the price it was judged by, as a consult's is, never at a lower one (or none) that landed
 * meanwhile. The agent here (run without a sandbox) lands the CEO's policy change itself, at the one
 * moment that matters, then does the work and states tokens with no cost, as Codex does.
 */

const dir = tempDir('dispatch-price');

describe("a policy the CEO changes while a dispatch's agent runs", () => {
  const place = hostilePlaces(dir, 'price');

  /** The dispatch's receipt when the agent first runs `during` (a shell command), then fixes add(). */
  async function receiptAfter(name: string, during: (where: HostilePlace) => Promise<string> | string): Promise<Record<string, unknown>> {
    const where = await place(name);
    const { messageId } = await dispatchTo(where, name);
    const watch = watchOnce(where, agentScript(where.world.dir, `${await during(where)}\n${FIX}`), { isolation: 'none' });
    expect(watch.hung).toBe(false);
    const [receipt] = await receiptsFor(where, messageId);
    expect(receipt, watch.stderr).toBeDefined();
    return receipt!;
  }

  /** A shell command that lands the next policy, `change` of the one in force, signed by the CEO. */
  async function policyChange(where: HostilePlace, change: (models: Record<string, Record<string, unknown>>) => Record<string, Record<string, unknown>>): Promise<string> {
    const policy = (await where.world.ledger.state()).policy!;
    const file = join(where.world.dir, 'next-policy.yaml');
    const ceoKey = join(where.world.dir, 'keys', 'ceo.key');
    writeFileSync(ceoKey, formatPrivateKey(where.world.actors.ceo), { mode: 0o600 });
    writeFileSync(file, toYaml({ ...policy.doc, version: policy.version + 1, models: change(policy.doc.models as unknown as Record<string, Record<string, unknown>>) }));
    const log = join(where.world.dir, 'trust.log');
    return `"${process.execPath}" "${COO}" trust --ledger "${where.world.gitdir}" --ceo-key "${ceoKey}" --policy "${file}" >"${log}" 2>&1 || { cat "${log}" >&2; exit 1; }`;
  }

  it("is charged at the price it was judged by: the model's price cut a thousandfold, or the model dropped, while it ran, changes nothing", async () => {
    const honest = await receiptAfter('unchanged', () => 'true');
    expect(honest['status']).toBe('succeeded');
    const cost = honest['actual_cost_usd'] as number;
    expect(cost).toBeGreaterThan(0);

    const model = honest['model'] as string;
    const cheaper = await receiptAfter('cheaper', (where) =>
      policyChange(where, (models) => ({ ...models, [model]: { ...models[model], input_usd_per_million: (models[model]!['input_usd_per_million'] as number) / 1000, output_usd_per_million: (models[model]!['output_usd_per_million'] as number) / 1000 } })),
    );
    expect(cheaper['status']).toBe('succeeded');
    expect(cheaper['actual_cost_usd']).toBe(cost);

    const dropped = await receiptAfter('dropped', (where) => policyChange(where, (models) => Object.fromEntries(Object.entries(models).filter(([name]) => name !== model))));
    expect(dropped['actual_cost_usd']).toBe(cost);
  });
});
