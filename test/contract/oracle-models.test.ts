import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ORACLE_MODELS, resolveOracleModel } from '../../src/consult/providers/oracle-models.js';

/**
 * The lane's mirror of how the pinned Oracle resolves a model name (providers/oracle-models.ts),
 * held to Oracle's own functions: its `resolveApiModel` and its table of models.
 */
const oracleDist = join(dirname(createRequire(import.meta.url).resolve('@steipete/oracle/package.json')), 'dist');
const load = async <T>(path: string): Promise<T> => (await import(pathToFileURL(join(oracleDist, path)).href)) as T;

describe("the lane's mirror of Oracle's model names", () => {
  it("knows every model Oracle knows, with its provider and the id it sends", async () => {
    const { MODEL_CONFIGS } = await load<{ MODEL_CONFIGS: Record<string, { provider: string; apiModel?: string }> }>('src/oracle/config.js');
    const { resolveGeminiModelId } = await load<{ resolveGeminiModelId: (model: string) => string }>('src/oracle/geminiModels.js');
    expect(Object.keys(ORACLE_MODELS).sort()).toEqual(Object.keys(MODEL_CONFIGS).sort());
    for (const [key, config] of Object.entries(MODEL_CONFIGS)) {
      expect(ORACLE_MODELS[key]!.family, key).toBe(config.provider);
      const wire = key.startsWith('gemini') ? resolveGeminiModelId(key) : (config.apiModel ?? key);
      expect(ORACLE_MODELS[key]!.wire ?? key, key).toBe(wire);
    }
  });

  it.each([
    'gpt-5.5', 'GPT-5.5', 'gpt-5.5-pro', 'gpt-5.4', 'gpt-5.1-codex', 'codex', 'gpt-5', 'gpt-5.0-mini',
    'claude-4.6-sonnet', 'claude-sonnet-4-5', 'claude-3-7-sonnet-latest', 'sonnet', 'claude', 'claude-opus-4-7', 'opus', 'claude-haiku-4-5', 'claude-pro-x',
    'gemini-3.1-pro', 'gemini-3-pro', 'gemini-2.5-flash', 'gemini-2.5-pro', 'gemini-3.5-flash', 'gemini-3.1-flash-lite', 'gemini-flash-lite-latest',
    'grok-4.1', 'grok', 'anthropic/claude-sonnet-4.5', 'meta-llama/Llama-3.1-8B-Instruct', 'qwen3-coder-pro', 'llama-3.1-8b', 'my-proxy-model',
  ])('resolves %s as Oracle does', async (name) => {
    const { resolveApiModel } = await load<{ resolveApiModel: (name: string) => string }>('src/cli/options.js');
    const mine = resolveOracleModel(name);
    expect(mine).not.toBeNull();
    expect(mine!.key).toBe(resolveApiModel(name));
  });
});
