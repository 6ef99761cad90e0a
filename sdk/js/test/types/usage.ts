// Compiled (never run) by `npm run typecheck`: the typed surface the dashboard codes against.
import { checkDeploymentOs, createClient, paginate, type OsCheck, type Schemas } from "../../src/index.js";

export async function usage(): Promise<void> {
  const client = createClient({ baseUrl: "https://localhost:8443" });
  const account = await client.newAccount({ account_name: "demo" });
  const key: string = account.api_key;
  const admin = client.withApiKey(key);
  const group = await admin.addGroup({ group_name: "ops" } as Schemas["AddGroupRequest"]);
  void group;
  for await (const k of paginate((q) => admin.listApiKeys(q))) {
    const item: Schemas["UsageKeyItem"] = k;
    void item;
  }
  for await (const entry of paginate((q) => admin.usage({ ...q, from: 0 }))) {
    const item: Schemas["UsageItem"] = entry;
    const kind: "initial" | "top_up" | "charge" = item.kind;
    const requestId: string | null | undefined = item.request_id;
    void kind;
    void requestId;
  }
  const run = await admin.litAction({ code: "async function main() { return 1; }" });
  const logs: string = run.logs;
  void logs;
  const health = await client.health();
  const status: string = health.status;
  void status;
  // The OS measurements check takes the client itself.
  const os: OsCheck = await checkDeploymentOs(client, { policy: '{"entries": []}', allowUnpinnedOs: false });
  const verdict: "pass" | "fail" | "unpinned" | "n/a" = os.status;
  void verdict;
  // @ts-expect-error: the body of new_account has no such field
  await client.newAccount({ nope: 1 });
  // @ts-expect-error: list_wallets_in_group needs its query
  await admin.listWalletsInGroup();
}
