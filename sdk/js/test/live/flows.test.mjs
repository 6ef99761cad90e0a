// The SDK against a running appliance (tests/e2e/sdk_js.rs starts one, with billing on
// against localstripe, and runs this file). By hand, against `scripts/dev` (from the
// repository root; billing is off there, so its steps are skipped):
//
//   APPLIANCE_CLI_URL=https://127.0.0.1:8443 NODE_EXTRA_CA_CERTS=.appliance-dev/tls/self-signed.pem \
//     node --test sdk/js/test/live/
//
// The tests run in order and share the account they create.
import assert from "node:assert/strict";
import { test } from "node:test";

import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { ApplianceError, computeCidV0, createClient, hashedCid, listAll, paginate } from "@appliance/sdk";
import { signChainSecured, walletAuthHeader } from "@appliance/sdk/chain-secured";

const baseUrl = process.env.APPLIANCE_CLI_URL;
if (!baseUrl) throw new Error("APPLIANCE_CLI_URL is not set: these tests need a running appliance (see the top of this file)");
const stripeUrl = process.env.LOCALSTRIPE_URL;
const stripeKey = process.env.LOCALSTRIPE_SECRET_KEY;
const noBilling = stripeUrl && stripeKey ? false : "no LOCALSTRIPE_URL / LOCALSTRIPE_SECRET_KEY: billing is not tested";

const anonymous = createClient({ baseUrl, headers: { "X-Correlation-Id": "sdk-live-test" } });
const CODE = `async function main(p) { console.log("hi", p.n); return { doubled: p.n * 2 }; }`;
const state = {};

/** The ApplianceError `promise` rejects with (fails when it resolves or throws something else). */
async function failure(promise) {
  const err = await promise.then(
    (value) => assert.fail(`expected an ApplianceError, got ${JSON.stringify(value)}`),
    (e) => e,
  );
  assert.ok(err instanceof ApplianceError, `expected an ApplianceError, got ${err?.stack ?? err}`);
  return err;
}

test("the root and configuration endpoints answer", async () => {
  const health = await anonymous.health();
  assert.equal(health.status, "ok", JSON.stringify(health));
  const version = await anonymous.version();
  assert.equal(typeof version.version, "string");
  const chain = await anonymous.getNodeChainConfig();
  assert.ok(Number.isInteger(chain.chain_id) && chain.chain_id > 0, JSON.stringify(chain));
  state.chainId = chain.chain_id;
  const prices = await anonymous.prices();
  assert.equal(typeof prices.billing_enabled, "boolean");
  state.prices = prices;
  await anonymous.getLitActionClientConfig();
});

test("a new account, a group, a wallet in it", async () => {
  const account = await anonymous.newAccount({ account_name: "sdk live test" });
  assert.match(account.wallet_address, /^0x[0-9a-fA-F]{40}$/);
  state.accountKey = account.api_key;
  const admin = anonymous.withApiKey(account.api_key);
  state.admin = admin;
  assert.equal(await admin.accountExists(), true);

  const group = await admin.addGroup({ group_name: "sdk", group_description: "from the JS SDK" });
  assert.equal(group.success, true);
  state.groupId = group.group_id;
  const groups = await listAll((q) => admin.listGroups(q));
  assert.ok(groups.some((g) => g.id === group.group_id && g.name === "sdk"), JSON.stringify(groups));

  const wallet = await admin.createWallet({ name: "hot", description: "sdk" });
  assert.match(wallet.wallet_address, /^0x[0-9a-fA-F]{40}$/);
  state.wallet = wallet;
  const wallets = await listAll((q) => admin.listWallets(q));
  assert.ok(wallets.some((w) => w.wallet_address === wallet.wallet_address && w.name === "hot"), JSON.stringify(wallets));
  await admin.addPkpToGroup({ group_id: group.group_id, pkp_id: wallet.pkp_id });
  const inGroup = await listAll((q) => admin.listWalletsInGroup({ group_id: group.group_id, ...q }));
  assert.deepEqual(
    inGroup.map((w) => w.pkp_id),
    [wallet.pkp_id],
  );
});

test("the CID computed locally is the server's, and the action is registered under it", async () => {
  const { admin, groupId } = state;
  const cid = await computeCidV0(CODE);
  assert.equal(await anonymous.getLitActionIpfsId(CODE), cid);
  const added = await admin.addAction({ action_ipfs_cid: cid, name: "double", description: "doubles n" });
  assert.equal(added.hashed_cid, hashedCid(cid));
  await admin.addActionToGroup({ group_id: groupId, action_ipfs_cid: cid });
  const actions = await listAll((q) => admin.listActions({ group_id: groupId, ...q }));
  assert.deepEqual(
    actions.map((a) => [a.ipfs_cid, a.hashed_cid, a.name]),
    [[cid, hashedCid(cid), "double"]],
  );
  state.cid = cid;
});

test("usage keys with permissions, listed with paginate", async () => {
  const { admin, groupId } = state;
  const made = [];
  for (const name of ["runner", "second", "third"]) {
    const key = await admin.addUsageApiKey({
      name,
      description: `sdk ${name}`,
      can_create_groups: false,
      can_delete_groups: false,
      can_create_pkps: false,
      manage_ipfs_ids_in_groups: [],
      add_pkp_to_groups: [],
      remove_pkp_from_groups: [],
      execute_in_groups: [groupId],
    });
    assert.equal(key.success, true);
    made.push(key);
  }
  state.usageKey = made[0].usage_api_key;
  // Pages of 2: three keys take two requests, the second one short.
  const pages = [];
  const listed = [];
  for await (const item of paginate(
    async (q) => {
      pages.push(q.page_number);
      return admin.listApiKeys(q);
    },
    { pageSize: 2 },
  )) {
    listed.push(item);
  }
  assert.deepEqual(pages, [0, 1]);
  assert.deepEqual(
    listed.map((k) => k.api_key_hash).sort(),
    made.map((k) => k.api_key_hash).sort(),
  );
  const runner = listed.find((k) => k.name === "runner");
  assert.deepEqual(runner.execute_in_groups, [groupId]);
  assert.equal(runner.can_create_groups, false);
});

test("a usage key runs the action by code and by CID; response and logs come back", async () => {
  const runner = anonymous.withApiKey(state.usageKey);
  const byCode = await runner.litAction({ code: CODE, js_params: { n: 21 } });
  assert.equal(byCode.has_error, false, JSON.stringify(byCode));
  assert.deepEqual(byCode.response, { doubled: 42 });
  assert.equal(byCode.logs, "hi 21\n");
  const byCid = await runner.litAction({ ipfs_id: state.cid, js_params: { n: 5 } });
  assert.deepEqual([byCid.response, byCid.logs], [{ doubled: 10 }, "hi 5\n"]);
  const thrown = await state.admin.litAction({ code: `async function main() { throw new Error("nope"); }` });
  assert.equal(thrown.has_error, true);
  assert.equal(thrown.error.kind, "exception");
});

test("errors carry the server's code, reason, description and request id", async () => {
  const bad = await failure(anonymous.withApiKey("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=").listGroups());
  assert.equal(bad.status, 401);
  assert.equal(bad.code, 401);
  assert.equal(bad.reason, "Unauthorized");
  assert.ok(bad.description.length > 10, bad.description);
  assert.match(bad.requestId ?? "", /\S/);
  assert.equal(bad.operation, "GET /core/v1/list_groups");

  const missing = await failure(state.admin.removeGroup({ group_id: "999999999" }));
  assert.equal(missing.status, 404);
  assert.equal(missing.reason, "Not Found");

  const forbidden = await failure(anonymous.withApiKey(state.usageKey).addGroup({ group_name: "not allowed" }));
  assert.equal(forbidden.status, 403);
  assert.equal(forbidden.reason, "Forbidden");

  const invalid = await failure(state.admin.addAction({ action_ipfs_cid: "not a cid", name: "x" }));
  assert.equal(invalid.status, 400);
  assert.match(invalid.description, /CID/i);
});

test("ChainSecured: a wallet for a fresh viem account, and the replay refused", async () => {
  const signer = privateKeyToAccount(generatePrivateKey());
  const signed = await signChainSecured(signer, "CreateWallet", { chainId: state.chainId });
  assert.equal(signed.typed_data.message.address, signer.address);
  const wallet = await anonymous.createWalletWithSignature(signed);
  assert.match(wallet.wallet_address, /^0x[0-9a-fA-F]{40}$/);
  assert.match(wallet.derivation_path, /^0x[0-9a-f]{64}$/);
  const replay = await failure(anonymous.createWalletWithSignature(signed));
  assert.equal(replay.status, 422);
  assert.match(replay.description, /already accepted/);

  // A fresh signature from the same signer is accepted (default issuedAt moves on).
  const key = await anonymous.addUsageApiKeyWithSignature(
    await signChainSecured(signer, "AddUsageApiKey", { chainId: state.chainId }),
  );
  assert.ok(key.usage_api_key.length > 40);
  // Signed for another chain: refused, naming the chain id.
  const wrongChain = await failure(
    anonymous.createWalletWithSignature(await signChainSecured(signer, "CreateWallet", { chainId: state.chainId + 1 })),
  );
  assert.equal(wrongChain.status, 422);
  assert.match(wrongChain.description, /chainId/);
});

/** Pays `intent` on localstripe with the test card, as Stripe.js would in a browser. */
async function payWithTestCard(intent) {
  for (const [path, form] of [
    [`/v1/payment_intents/${intent}`, { payment_method: "pm_card_visa" }],
    [`/v1/payment_intents/${intent}/confirm`, {}],
  ]) {
    const response = await fetch(`${stripeUrl}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${stripeKey}`, "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams(form),
    });
    assert.ok(response.ok, `localstripe ${path}: ${response.status} ${await response.text()}`);
  }
}

test("billing: prices, balance, a card top-up", { skip: noBilling }, async () => {
  const { admin } = state;
  assert.equal(state.prices.billing_enabled, true);
  assert.equal((await anonymous.stripeConfig()).publishable_key.startsWith("pk_test_"), true);
  const before = await admin.balance();
  assert.ok(before.balance_cents > 0, JSON.stringify(before));
  const intent = await admin.createPaymentIntent({ amount_cents: 500 });
  await payWithTestCard(intent.payment_intent_id);
  const confirmed = await admin.confirmPayment({ payment_intent_id: intent.payment_intent_id });
  assert.deepEqual(confirmed, { success: true, balance_cents: before.balance_cents + 500, credited_cents: 500 });
  assert.equal((await admin.balance()).balance_cents, before.balance_cents + 500);
  // A usage key may read the balance, not pay.
  const runner = anonymous.withApiKey(state.usageKey);
  assert.equal((await runner.balance()).balance_cents, before.balance_cents + 500);
  assert.equal((await failure(runner.createPaymentIntent({ amount_cents: 500 }))).status, 403);
});

test("ChainSecured: convert an account, then pay with X-Wallet-Auth", { skip: noBilling }, async () => {
  const { chainId } = state;
  const { api_key } = await anonymous.newAccount({ account_name: "sdk convert" });
  const owner = anonymous.withApiKey(api_key);
  const credit = (await owner.balance()).balance_cents;
  const admin = privateKeyToAccount(generatePrivateKey());
  const convert = await signChainSecured(admin, "ConvertAccount", { chainId });
  const converted = await owner.convertToChainSecuredAccount({ ...convert, new_admin_wallet_address: admin.address });
  assert.equal(converted.success, true);
  assert.equal((await failure(owner.balance())).status, 403);

  const billingAuth = async () => walletAuthHeader(await signChainSecured(admin, "BillingAuth", { chainId }));
  const header = await billingAuth();
  assert.equal((await anonymous.withWalletAuth(header).balance()).balance_cents, credit);
  // The same header again is a replay.
  const replay = await failure(anonymous.withWalletAuth(header).balance());
  assert.equal(replay.status, 422);
  // Per call, with a fresh signature each time.
  const intent = await anonymous.createPaymentIntent({ amount_cents: 700 }, { headers: { "X-Wallet-Auth": await billingAuth() } });
  await payWithTestCard(intent.payment_intent_id);
  const done = await anonymous.confirmPayment(
    { payment_intent_id: intent.payment_intent_id },
    { headers: { "X-Wallet-Auth": await billingAuth() } },
  );
  assert.equal(done.balance_cents, credit + 700);
});
