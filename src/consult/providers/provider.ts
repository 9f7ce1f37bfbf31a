import type { BlockerCode } from '../../schema/receipt.js';
import type { OracleRoute } from '../../schema/registry.js';
import { loopbackAddress } from '../../lane/endpoint.js';

/** The rules of an endpoint's URL are the lanes' own (lane/endpoint.ts): Oracle's routes and the executors' --ea-base-url share them. */
export { endpointProblem } from '../../lane/endpoint.js';

/**
 * A route through Oracle to one provider's API, and what the runner's own configuration says of
 * it. One file per provider (openai.ts, anthropic.ts, google.ts, openrouter.ts, gateway.ts) says
 * which names go there, the one key Oracle is given, what points it at an endpoint, and what the
 * provider's errors and limits mean. Pure: facts in, plan out.
 */

/** A route's name, as the registry's schema lists them (ORACLE_ROUTES). */
export type OracleRouteName = OracleRoute;

/**
 * Where the runner sends each route: overrides of the providers' own endpoints, for gateways and
 * offline models. The operator's configuration (`coo watch` flags), never the registry's: the
 * registry names the route, the runner says where its endpoint is when it is not the provider's own.
 */
export interface OracleEndpoints {
  /** An OpenAI-compatible base URL for the OpenAI route (`--base-url`). */
  readonly openaiBaseUrl?: string;
  /** Azure OpenAI for the OpenAI route (`--azure-endpoint`, `--azure-deployment`): Oracle's Responses API path. */
  readonly azure?: { readonly endpoint: string; readonly deployment: string };
  /** The Anthropic route's full Messages endpoint (ANTHROPIC_BASE_URL); its host is api.anthropic.com. */
  readonly anthropic?: string;
  /** The Gemini API's base URL (GOOGLE_GEMINI_BASE_URL, which @google/genai reads). */
  readonly google?: string;
  /** OpenRouter's API base URL (`--base-url`). */
  readonly openrouter?: string;
  /** OpenAI-compatible gateways (LiteLLM, vLLM) by the name a registry entry gives them. */
  readonly gateways?: Readonly<Record<string, string>>;
  /** Host names resolved to these addresses inside the sandbox (a hosts file bubblewrap binds over /etc/hosts). */
  readonly hosts?: ReadonlyArray<{ readonly name: string; readonly address: string }>;
}

/** What a registry entry says of the call: its model, the key it names, the gateway of an openai_compatible route. */
export interface RouteEntry {
  readonly model: string;
  readonly keyEnv: string;
  readonly gateway?: string;
}

/** One call's route, as the transport starts it. */
export interface RoutePlan {
  readonly route: OracleRouteName;
  /** The one provider key Oracle is given. */
  readonly keyEnv: string;
  /** Variables set for Oracle besides the key: an endpoint override. */
  readonly env: Readonly<Record<string, string>>;
  /** Arguments the route adds: `--base-url`, `--provider openai`, Azure's. */
  readonly args: readonly string[];
  /** What the receipt says of the route. */
  readonly label: { readonly provider: string; readonly offline: boolean };
  /** Output tokens Oracle asks the provider for whatever `--max-output` says (Claude: 2048), or null when it sends the cap. */
  readonly fixedOutputTokens: number | null;
  /** The endpoint the runner named for the route, or null for the provider's own. */
  readonly endpoint: string | null;
}

export interface OracleProvider {
  readonly route: OracleRouteName;
  /** The plan of a call along this route, or why it cannot be made here (a model Oracle would send elsewhere, an endpoint the runner lacks). */
  plan(entry: RouteEntry, endpoints: OracleEndpoints): RoutePlan | string;
  /** What this provider's error text says, where it words things its own way; null leaves it to the common rules. */
  classify?(text: string): BlockerCode | null;
  /**
   * True when the usage Oracle records for this route leaves out output tokens the provider bills
   * (Gemini's thinking): its figures are a part, and the receipt charges the attempt's whole
   * output cap, which bounds everything the provider may bill as output.
   */
  readonly usageOmitsOutput?: boolean;
}

/** Whether a URL reaches only this machine: its host is loopback, or pinned to a loopback address in the sandbox (lane/endpoint.ts). */
export function isOfflineUrl(url: string | undefined, hosts: OracleEndpoints['hosts'] = []): boolean {
  return url !== undefined && loopbackAddress(url, hosts) !== null;
}
