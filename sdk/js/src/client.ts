/**
 * The typed client: one method per operation of the served OpenAPI document
 * (`src/schema.d.ts`, generated from `appliance/tests/data/openapi.json`), each resolving
 * with the response body and throwing {@link ApplianceError} on anything but 2xx.
 */
import createFetchClient, { type Client as FetchClient } from "openapi-fetch";

import { ApplianceError, errorFromResponse, networkError } from "./errors.js";
import type { components, paths } from "./schema.js";

/** Every schema of the API by name, e.g. `Schemas["UsageKeyItem"]`. */
export type Schemas = components["schemas"];

/** The openapi-fetch client typed by the API's paths (`client.raw.GET("/core/v1/…", …)`). */
export type RawClient = FetchClient<paths, "application/json">;

type Method = "get" | "post";
type Path<M extends Method> = {
  [P in keyof paths]: paths[P][M] extends { responses: unknown } ? P : never;
}[keyof paths];

/** The JSON request body of `M P`. */
export type RequestBody<P extends Path<"post">> = paths[P]["post"] extends {
  requestBody?: { content: { "application/json": infer B } };
}
  ? B
  : never;

/** The query of `GET P`. */
export type Query<P extends Path<"get">> = NonNullable<paths[P]["get"]["parameters"]["query"]>;

/** The 200 body of `M P`. */
export type ResponseBody<M extends Method, P extends Path<M>> = paths[P][M] extends {
  responses: { 200: { content: { "application/json": infer R } } };
}
  ? R
  : never;

/** Per-call options. */
export interface CallOptions {
  /** Extra headers for this call only (e.g. a fresh `X-Wallet-Auth`). */
  headers?: Record<string, string>;
  /** Aborts the request (the promise then rejects with an ApplianceError of status 0). */
  signal?: AbortSignal;
}

export interface ClientOptions {
  /** The appliance's origin, e.g. `https://keys.example.com` (paths carry `/core/v1`). */
  baseUrl: string;
  /** An account key or a usage key, sent as `Authorization: Bearer …`. */
  apiKey?: string;
  /**
   * An `X-Wallet-Auth` value (see `walletAuthHeader` in `@appliance/sdk/chain-secured`) for
   * the billing endpoints of a ChainSecured account. A signature is accepted once: prefer
   * a fresh one per call through `CallOptions.headers` or `withWalletAuth`.
   */
  walletAuth?: string;
  /** The fetch to use (default: `globalThis.fetch` at the time of the call). */
  fetch?: typeof fetch;
  /** Headers sent with every request (e.g. `X-Correlation-Id`). */
  headers?: Record<string, string>;
}

type Post<P extends Path<"post">> = (body: RequestBody<P>, options?: CallOptions) => Promise<ResponseBody<"post", P>>;
type GetWithQuery<P extends Path<"get">> = (query?: Query<P>, options?: CallOptions) => Promise<ResponseBody<"get", P>>;
type GetWithRequiredQuery<P extends Path<"get">> = (
  query: Query<P>,
  options?: CallOptions,
) => Promise<ResponseBody<"get", P>>;
type Get<P extends Path<"get">> = (options?: CallOptions) => Promise<ResponseBody<"get", P>>;

export interface ApplianceClient {
  /** The underlying openapi-fetch client (no error mapping: it returns `{data, error, response}`). */
  readonly raw: RawClient;
  /** The options this client was made with (the key included: do not log it). */
  readonly options: Readonly<ClientOptions>;
  /** The same client with another API key. */
  withApiKey(apiKey: string): ApplianceClient;
  /** The same client sending `X-Wallet-Auth: value` (and no API key). */
  withWalletAuth(value: string): ApplianceClient;

  // Accounts and usage keys
  newAccount: Post<"/core/v1/new_account">;
  accountExists: Get<"/core/v1/account_exists">;
  addUsageApiKey: Post<"/core/v1/add_usage_api_key">;
  listApiKeys: GetWithQuery<"/core/v1/list_api_keys">;
  updateUsageApiKey: Post<"/core/v1/update_usage_api_key">;
  updateUsageApiKeyMetadata: Post<"/core/v1/update_usage_api_key_metadata">;
  removeUsageApiKey: Post<"/core/v1/remove_usage_api_key">;
  // Wallets
  /** `POST /core/v1/create_wallet` (name and description optional). */
  createWallet(
    body?: RequestBody<"/core/v1/create_wallet">,
    options?: CallOptions,
  ): Promise<ResponseBody<"post", "/core/v1/create_wallet">>;
  listWallets: GetWithQuery<"/core/v1/list_wallets">;
  listWalletsInGroup: GetWithRequiredQuery<"/core/v1/list_wallets_in_group">;
  // Groups
  addGroup: Post<"/core/v1/add_group">;
  listGroups: GetWithQuery<"/core/v1/list_groups">;
  updateGroup: Post<"/core/v1/update_group">;
  removeGroup: Post<"/core/v1/remove_group">;
  addPkpToGroup: Post<"/core/v1/add_pkp_to_group">;
  removePkpFromGroup: Post<"/core/v1/remove_pkp_from_group">;
  addActionToGroup: Post<"/core/v1/add_action_to_group">;
  removeActionFromGroup: Post<"/core/v1/remove_action_from_group">;
  // Actions
  addAction: Post<"/core/v1/add_action">;
  deleteAction: Post<"/core/v1/delete_action">;
  updateActionMetadata: Post<"/core/v1/update_action_metadata">;
  listActions: GetWithQuery<"/core/v1/list_actions">;
  getLitActionIpfsId: Post<"/core/v1/get_lit_action_ipfs_id">;
  litAction: Post<"/core/v1/lit_action">;
  // Configuration
  getLitActionClientConfig: Get<"/core/v1/get_lit_action_client_config">;
  getNodeChainConfig: Get<"/core/v1/get_node_chain_config">;
  getApiPayers: Get<"/core/v1/get_api_payers">;
  getAdminApiPayer: Get<"/core/v1/get_admin_api_payer">;
  // Billing
  stripeConfig: Get<"/core/v1/billing/stripe_config">;
  balance: Get<"/core/v1/billing/balance">;
  /** The account's credits and charges, newest first (`from`/`to` in Unix seconds; pages as the list endpoints). */
  usage: GetWithQuery<"/core/v1/billing/usage">;
  createPaymentIntent: Post<"/core/v1/billing/create_payment_intent">;
  confirmPayment: Post<"/core/v1/billing/confirm_payment">;
  prices: Get<"/core/v1/billing/prices">;
  // Wallet signatures (ChainSecured): bodies from `signChainSecured`
  createWalletWithSignature: Post<"/core/v1/create_wallet_with_signature">;
  addUsageApiKeyWithSignature: Post<"/core/v1/add_usage_api_key_with_signature">;
  convertToChainSecuredAccount: Post<"/core/v1/convert_to_chain_secured_account">;
  // Root endpoints
  /** `GET /health`; also resolves (with `status: "degraded"` and the failing check) on 503. */
  health: Get<"/health">;
  version: Get<"/version">;
  info: Get<"/info">;
  attestation: Get<"/attestation">;
}

type Kind = "post" | "get" | "getQuery";

/** Method name → operation. Kept in the order of the OpenAPI document. */
const OPERATIONS = {
  newAccount: ["post", "/core/v1/new_account"],
  accountExists: ["get", "/core/v1/account_exists"],
  addUsageApiKey: ["post", "/core/v1/add_usage_api_key"],
  listApiKeys: ["getQuery", "/core/v1/list_api_keys"],
  updateUsageApiKey: ["post", "/core/v1/update_usage_api_key"],
  updateUsageApiKeyMetadata: ["post", "/core/v1/update_usage_api_key_metadata"],
  removeUsageApiKey: ["post", "/core/v1/remove_usage_api_key"],
  createWallet: ["post", "/core/v1/create_wallet"],
  listWallets: ["getQuery", "/core/v1/list_wallets"],
  listWalletsInGroup: ["getQuery", "/core/v1/list_wallets_in_group"],
  addGroup: ["post", "/core/v1/add_group"],
  listGroups: ["getQuery", "/core/v1/list_groups"],
  updateGroup: ["post", "/core/v1/update_group"],
  removeGroup: ["post", "/core/v1/remove_group"],
  addPkpToGroup: ["post", "/core/v1/add_pkp_to_group"],
  removePkpFromGroup: ["post", "/core/v1/remove_pkp_from_group"],
  addActionToGroup: ["post", "/core/v1/add_action_to_group"],
  removeActionFromGroup: ["post", "/core/v1/remove_action_from_group"],
  addAction: ["post", "/core/v1/add_action"],
  deleteAction: ["post", "/core/v1/delete_action"],
  updateActionMetadata: ["post", "/core/v1/update_action_metadata"],
  listActions: ["getQuery", "/core/v1/list_actions"],
  getLitActionIpfsId: ["post", "/core/v1/get_lit_action_ipfs_id"],
  litAction: ["post", "/core/v1/lit_action"],
  getLitActionClientConfig: ["get", "/core/v1/get_lit_action_client_config"],
  getNodeChainConfig: ["get", "/core/v1/get_node_chain_config"],
  getApiPayers: ["get", "/core/v1/get_api_payers"],
  getAdminApiPayer: ["get", "/core/v1/get_admin_api_payer"],
  stripeConfig: ["get", "/core/v1/billing/stripe_config"],
  balance: ["get", "/core/v1/billing/balance"],
  usage: ["getQuery", "/core/v1/billing/usage"],
  createPaymentIntent: ["post", "/core/v1/billing/create_payment_intent"],
  confirmPayment: ["post", "/core/v1/billing/confirm_payment"],
  prices: ["get", "/core/v1/billing/prices"],
  createWalletWithSignature: ["post", "/core/v1/create_wallet_with_signature"],
  addUsageApiKeyWithSignature: ["post", "/core/v1/add_usage_api_key_with_signature"],
  convertToChainSecuredAccount: ["post", "/core/v1/convert_to_chain_secured_account"],
  health: ["get", "/health"],
  version: ["get", "/version"],
  info: ["get", "/info"],
  attestation: ["get", "/attestation"],
} as const satisfies Record<string, readonly [Kind, string]>;

/** Every method of {@link ApplianceClient} that calls an endpoint, with its HTTP method and path. */
export const operations: Readonly<Record<keyof typeof OPERATIONS, { method: "GET" | "POST"; path: string }>> =
  Object.freeze(
    Object.fromEntries(
      Object.entries(OPERATIONS).map(([name, [kind, path]]) => [
        name,
        Object.freeze({ method: kind === "post" ? "POST" : "GET", path }),
      ]),
    ) as Record<keyof typeof OPERATIONS, { method: "GET" | "POST"; path: string }>,
  );

/** A response whose non-2xx body is still the answer (the body has the endpoint's 200 shape). */
const BODY_ON_ERROR: Record<string, number[]> = { "/health": [503] };

function checkOptions(opts: ClientOptions): void {
  if (typeof opts?.baseUrl !== "string" || !/^https?:\/\//i.test(opts.baseUrl)) {
    throw new TypeError("createClient needs baseUrl, the appliance's origin such as https://keys.example.com");
  }
  if (opts.apiKey !== undefined && (typeof opts.apiKey !== "string" || !opts.apiKey)) {
    throw new TypeError("apiKey must be a non-empty string (an account key or a usage key)");
  }
}

/**
 * A client of the appliance at `opts.baseUrl`. Every method resolves with the typed 200 body
 * and throws {@link ApplianceError} otherwise (status 0 when no response arrived).
 *
 * This client trusts whatever TLS certificate the platform trusts: it does not verify the
 * appliance's TDX evidence (see the SDK's README).
 */
export function createClient(opts: ClientOptions): ApplianceClient {
  checkOptions(opts);
  const baseUrl = opts.baseUrl.replace(/\/+$/, "");
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.apiKey) headers["Authorization"] = `Bearer ${opts.apiKey}`;
  if (opts.walletAuth) headers["X-Wallet-Auth"] = opts.walletAuth;
  // Resolved at call time, so a fetch installed later (a test, a polyfill) is used.
  const doFetch = (request: Request): Promise<Response> => (opts.fetch ?? globalThis.fetch)(request);
  const raw = createFetchClient<paths, "application/json">({ baseUrl, headers, fetch: doFetch });

  async function call(kind: Kind, path: string, input: unknown, options?: CallOptions): Promise<unknown> {
    const method = kind === "post" ? "POST" : "GET";
    const operation = `${method} ${path}`;
    const init: Record<string, unknown> = {};
    if (kind === "post") init.body = input ?? {};
    if (kind === "getQuery" && input !== undefined) init.params = { query: input };
    if (options?.headers) init.headers = options.headers;
    if (options?.signal) init.signal = options.signal;
    let result: { data?: unknown; error?: unknown; response: Response };
    try {
      // The path and init are checked by the typed signatures above; openapi-fetch's own
      // generics cannot follow a path chosen at run time.
      result = await (raw as unknown as Record<string, (p: string, i: unknown) => Promise<typeof result>>)[method]!(
        path,
        init,
      );
    } catch (cause) {
      if (cause instanceof ApplianceError) throw cause;
      throw networkError(cause, `${baseUrl}${path}`, operation);
    }
    const { response } = result;
    if (response.ok) return result.data;
    if (BODY_ON_ERROR[path]?.includes(response.status) && result.error && typeof result.error === "object") {
      return result.error;
    }
    throw errorFromResponse(response, result.error, operation);
  }

  const client: Record<string, unknown> = {
    raw,
    options: Object.freeze({ ...opts }),
    withApiKey(apiKey: string) {
      return createClient({ ...opts, apiKey });
    },
    withWalletAuth(value: string) {
      const { apiKey: _drop, ...rest } = opts;
      return createClient({ ...rest, walletAuth: value });
    },
  };
  for (const [name, [kind, path]] of Object.entries(OPERATIONS) as [string, readonly [Kind, string]][]) {
    client[name] =
      kind === "post" || kind === "getQuery"
        ? (input: unknown, options?: CallOptions) => call(kind, path, input, options)
        : (options?: CallOptions) => call(kind, path, undefined, options);
  }
  return client as unknown as ApplianceClient;
}
