// The appliance from node with the JavaScript SDK: an account, a group with a wallet and
// an action, a usage key that may only run that group's actions, and the action run with
// that key, by its CID. Each step prints what it got.
//
//   npm install /path/to/appliance/sdk/js     (or the tarball `npm pack` makes there)
//   NODE_EXTRA_CA_CERTS=.appliance-dev/tls/self-signed.pem node quickstart.mjs https://127.0.0.1:8443
//
// NODE_EXTRA_CA_CERTS trusts the development stack's self-signed certificate; a deployment
// with an ACME certificate needs nothing. The SDK does not verify the deployment's TDX
// evidence: run `evidence verify` (or the Rust client, examples/verify-pin-run) first.
// Exit status 0 when every step worked.

import { ApplianceError, computeCidV0, createClient, hashedCid } from "@appliance/sdk";

const baseUrl = process.argv[2];
if (!baseUrl) {
  console.error("usage: node quickstart.mjs <appliance URL, such as https://127.0.0.1:8443>");
  process.exit(2);
}

// An action that signs with a wallet of its group: `pkpId` is the wallet's address.
const CODE = `async function main({ pkpId, message }) {
  const wallet = new ethers.Wallet(await Lit.Actions.getPrivateKey({ pkpId }));
  console.log("signing as", wallet.address);
  return { message, signature: await wallet.signMessage(message) };
}`;

try {
  const anonymous = createClient({ baseUrl });
  const { api_key, wallet_address } = await anonymous.newAccount({ account_name: "quickstart" });
  console.log(`account created (its own wallet ${wallet_address}); the key is shown once: keep it`);
  const admin = anonymous.withApiKey(api_key);

  const { group_id } = await admin.addGroup({ group_name: "signers", group_description: "quickstart" });
  const wallet = await admin.createWallet({ name: "signer" });
  await admin.addPkpToGroup({ group_id, pkp_id: wallet.pkp_id });
  console.log(`group ${group_id} holds wallet ${wallet.wallet_address}`);

  // The server learns the code and answers its CID, the one computed here from the code.
  const cid = await admin.getLitActionIpfsId(CODE);
  if (cid !== (await computeCidV0(CODE))) throw new Error("the server's CID is not the code's");
  const added = await admin.addAction({ action_ipfs_cid: cid, name: "sign", description: "signs a message" });
  if (added.hashed_cid !== hashedCid(cid)) throw new Error("the server hashed the CID differently");
  await admin.addActionToGroup({ group_id, action_ipfs_cid: cid });
  console.log(`action ${cid} registered in group ${group_id}`);

  const { usage_api_key } = await admin.addUsageApiKey({
    name: "runner",
    description: "runs the group's actions, nothing else",
    can_create_groups: false,
    can_delete_groups: false,
    can_create_pkps: false,
    manage_ipfs_ids_in_groups: [],
    add_pkp_to_groups: [],
    remove_pkp_from_groups: [],
    execute_in_groups: [group_id],
  });
  const runner = anonymous.withApiKey(usage_api_key);
  console.log("usage key created: it may execute in that group only");

  const answer = await runner.litAction({
    ipfs_id: cid,
    js_params: { pkpId: wallet.wallet_address, message: "hello from quickstart" },
  });
  if (answer.has_error) throw new Error(`the action failed: ${answer.error?.message}`);
  process.stdout.write(`action logs: ${answer.logs}`);
  console.log("action response:", JSON.stringify(answer.response));

  // The usage key cannot manage the account:
  try {
    await runner.addGroup({ group_name: "not allowed" });
    throw new Error("a usage key without can_create_groups created a group");
  } catch (e) {
    if (!(e instanceof ApplianceError)) throw e;
    console.log(`as expected, the usage key may not create groups (${e.status})`);
  }
} catch (e) {
  console.error(e instanceof ApplianceError ? e.message : e);
  process.exit(1);
}
