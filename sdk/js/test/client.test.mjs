// The client against a fake fetch: requests as the server expects them, bodies back,
// errors mapped to ApplianceError, and one method per operation of the OpenAPI document.
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { test } from "node:test";

import { ApplianceError, createClient, operations } from "@appliance/sdk";

const BASE = "https://appliance.test:8443";

/** A fetch answering `reply(request)` and recording each request. */
function fakeFetch(reply) {
  const requests = [];
  const fetch = async (input, init) => {
    const request = new Request(input, init);
    requests.push({
      method: request.method,
      url: request.url,
      headers: Object.fromEntries(request.headers),
      body: request.method === "GET" ? undefined : await request.clone().text(),
    });
    return reply(request);
  };
  return { fetch, requests };
}

function json(status, body, headers = {}) {
  return new Response(JSON.stringify(body), {
    status,
    headers: { "content-type": "application/json", "x-request-id": "req-123", ...headers },
  });
}

test("a POST sends the JSON body and the key, and resolves with the body", async () => {
  const { fetch, requests } = fakeFetch(() => json(200, { group_id: "7" }));
  const client = createClient({ baseUrl: `${BASE}/`, apiKey: "k3y", fetch, headers: { "X-Correlation-Id": "c1" } });
  const got = await client.addGroup({ group_name: "ops", pkp_ids_permitted: [], cid_hashes_permitted: [] });
  assert.deepEqual(got, { group_id: "7" });
  assert.equal(requests.length, 1);
  const [r] = requests;
  assert.equal(r.method, "POST");
  assert.equal(r.url, `${BASE}/core/v1/add_group`);
  assert.equal(r.headers.authorization, "Bearer k3y");
  assert.equal(r.headers["x-correlation-id"], "c1");
  assert.equal(r.headers["content-type"], "application/json");
  assert.deepEqual(JSON.parse(r.body), { group_name: "ops", pkp_ids_permitted: [], cid_hashes_permitted: [] });
});

test("a GET sends the query; withApiKey and withWalletAuth change only the credential", async () => {
  const { fetch, requests } = fakeFetch(() => json(200, []));
  const client = createClient({ baseUrl: BASE, fetch });
  await client.listApiKeys({ page_number: 2, page_size: 50 });
  await client.withApiKey("other").listWalletsInGroup({ group_id: "9" });
  await client.withApiKey("x").withWalletAuth("d2FsbGV0").balance();
  await client.balance({ headers: { "X-Wallet-Auth": "cGVyY2FsbA==" } });
  assert.equal(requests[0].url, `${BASE}/core/v1/list_api_keys?page_number=2&page_size=50`);
  assert.equal(requests[0].headers.authorization, undefined);
  assert.equal(requests[1].url, `${BASE}/core/v1/list_wallets_in_group?group_id=9`);
  assert.equal(requests[1].headers.authorization, "Bearer other");
  assert.equal(requests[2].headers["x-wallet-auth"], "d2FsbGV0");
  assert.equal(requests[2].headers.authorization, undefined);
  assert.equal(requests[3].headers["x-wallet-auth"], "cGVyY2FsbA==");
  for (const r of requests) assert.equal(r.method, "GET");
});

test("usage sends its time range and paging as the query, and resolves with the entries", async () => {
  const entry = {
    id: "12",
    at_unix: 1764590400,
    at: "2025-12-01T12:00:00Z",
    kind: "charge",
    amount_cents: -1,
    balance_after_cents: 499,
    operation: "lit_action",
    action_cid: "QmWzEQYxa5VHJ1r4iJSyY5KyXs4yTFzJR9SNDTGvZTnyaS",
    request_id: "req-1",
    payment_intent_id: null,
  };
  const { fetch, requests } = fakeFetch(() => json(200, [entry]));
  const client = createClient({ baseUrl: BASE, apiKey: "k", fetch });
  assert.deepEqual(await client.usage({ from: 1764547200, to: 1767225600, page_number: 1, page_size: 20 }), [entry]);
  await client.usage();
  assert.equal(requests[0].method, "GET");
  assert.equal(requests[0].url, `${BASE}/core/v1/billing/usage?from=1764547200&to=1767225600&page_number=1&page_size=20`);
  assert.equal(requests[0].headers.authorization, "Bearer k");
  assert.equal(requests[1].url, `${BASE}/core/v1/billing/usage`);
});

test("createWallet without a body sends {}", async () => {
  const { fetch, requests } = fakeFetch(() => json(200, { wallet_address: "0x1" }));
  await createClient({ baseUrl: BASE, apiKey: "k", fetch }).createWallet();
  assert.equal(requests[0].body, "{}");
});

test("the server's error body becomes an ApplianceError with its fields and request id", async () => {
  const body = { error: { code: 403, reason: "Forbidden", description: "the usage key lacks manage_groups" } };
  const { fetch } = fakeFetch(() => json(403, body, { "x-request-id": "01HXYZ" }));
  const client = createClient({ baseUrl: BASE, apiKey: "k", fetch });
  const err = await client.addGroup({ group_name: "x" }).then(
    () => assert.fail("resolved"),
    (e) => e,
  );
  assert.ok(err instanceof ApplianceError);
  assert.ok(err instanceof Error);
  assert.equal(err.name, "ApplianceError");
  assert.equal(err.status, 403);
  assert.equal(err.code, 403);
  assert.equal(err.reason, "Forbidden");
  assert.equal(err.description, "the usage key lacks manage_groups");
  assert.equal(err.requestId, "01HXYZ");
  assert.equal(err.operation, "POST /core/v1/add_group");
  assert.match(err.message, /POST \/core\/v1\/add_group: 403 Forbidden: the usage key lacks manage_groups \(request id 01HXYZ\)/);
  // The key never appears in the error.
  assert.doesNotMatch(JSON.stringify({ ...err, message: err.message }), /Bearer/);
});

test("a body that is not the server's error shape still gives a clear ApplianceError", async () => {
  const { fetch } = fakeFetch(
    () => new Response("<html>bad gateway</html>", { status: 502, statusText: "Bad Gateway", headers: { "content-type": "text/html" } }),
  );
  const err = await createClient({ baseUrl: BASE, fetch }).prices().catch((e) => e);
  assert.ok(err instanceof ApplianceError);
  assert.equal(err.status, 502);
  assert.equal(err.code, 502);
  assert.equal(err.reason, "Bad Gateway");
  assert.match(err.description, /not the appliance's error body.*bad gateway/);
  assert.equal(err.requestId, undefined);
});

test("no response at all is an ApplianceError with status 0", async () => {
  const refused = Object.assign(new TypeError("fetch failed"), {
    cause: Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:8443"), { code: "ECONNREFUSED" }),
  });
  const client = createClient({
    baseUrl: BASE,
    fetch: async () => {
      throw refused;
    },
  });
  const err = await client.version().catch((e) => e);
  assert.ok(err instanceof ApplianceError);
  assert.equal(err.status, 0);
  assert.equal(err.code, 0);
  assert.equal(err.reason, "Network Error");
  assert.match(err.description, /no response from https:\/\/appliance\.test:8443\/version: fetch failed \(ECONNREFUSED/);
  assert.equal(err.cause, refused);

  const cert = Object.assign(new TypeError("fetch failed"), {
    cause: Object.assign(new Error("self-signed certificate"), { code: "DEPTH_ZERO_SELF_SIGNED_CERT" }),
  });
  const certErr = await createClient({ baseUrl: BASE, fetch: async () => { throw cert; } }).version().catch((e) => e);
  assert.match(certErr.description, /NODE_EXTRA_CA_CERTS/);

  // A real fetch to a closed port (nothing listens on port 1).
  const real = await createClient({ baseUrl: "http://127.0.0.1:1" }).health().catch((e) => e);
  assert.ok(real instanceof ApplianceError, String(real));
  assert.equal(real.status, 0);
});

test("an aborted call is an ApplianceError with status 0", async () => {
  const controller = new AbortController();
  controller.abort();
  const { fetch } = fakeFetch((request) => {
    request.signal.throwIfAborted();
    return json(200, {});
  });
  const err = await createClient({ baseUrl: BASE, fetch }).info({ signal: controller.signal }).catch((e) => e);
  assert.ok(err instanceof ApplianceError);
  assert.equal(err.status, 0);
  assert.equal(err.reason, "Aborted");
});

test("health resolves with the degraded body on 503; other 503s throw", async () => {
  const degraded = { status: "degraded", checks: { keyservice: "down" } };
  const { fetch } = fakeFetch((request) =>
    request.url.endsWith("/health")
      ? json(503, degraded)
      : json(503, { error: { code: 503, reason: "Service Unavailable", description: "billing is disabled" } }),
  );
  const client = createClient({ baseUrl: BASE, fetch });
  assert.deepEqual(await client.health(), degraded);
  await assert.rejects(client.stripeConfig(), (e) => e instanceof ApplianceError && e.status === 503 && e.description === "billing is disabled");
});

test("bad options are refused", () => {
  assert.throws(() => createClient({}), /baseUrl/);
  assert.throws(() => createClient({ baseUrl: "localhost:8443" }), /baseUrl/);
  assert.throws(() => createClient({ baseUrl: BASE, apiKey: "" }), /apiKey/);
});

test("every operation of the OpenAPI document has its method", async () => {
  const doc = JSON.parse(await readFile(new URL("../../../appliance/tests/data/openapi.json", import.meta.url), "utf8"));
  const camel = (id) => id.replace(/_([a-z])/g, (_, c) => c.toUpperCase());
  // Not methods: the GET variant of create_wallet (the POST one is createWallet) and the
  // evidence files (static downloads for `evidence verify`).
  const skipped = new Set(["create_wallet_get", "evidences_index", "evidence_quote", "evidence_file"]);
  const named = { create_wallet_post: "createWallet" };
  const expected = {};
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(item)) {
      if (skipped.has(op.operationId)) continue;
      expected[named[op.operationId] ?? camel(op.operationId)] = { method: method.toUpperCase(), path };
    }
  }
  assert.deepEqual({ ...operations }, expected);
  const client = createClient({ baseUrl: BASE });
  for (const name of Object.keys(expected)) assert.equal(typeof client[name], "function", name);
});
