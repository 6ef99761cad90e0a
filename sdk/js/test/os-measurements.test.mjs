// checkOsMeasurements on real dstack quotes from the repository's test vectors
// (evidence/tests/data, see its PROVENANCE.md): the near-mpc deployment's quote, with a
// policy built from the registers its guest agent reported in tcb_info.json (a source
// independent of the quote parser), and dstack's own verifier fixture with its vm_config.
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { test } from "node:test";

import {
  OsMeasurementError,
  RECOMPUTE_NOTE,
  checkDeploymentOs,
  checkOsMeasurements,
  parseOsPolicy,
  quoteRegisters,
} from "@appliance/sdk";

const data = async (rel) => readFile(new URL(`../../../evidence/tests/data/${rel}`, import.meta.url), "utf8");

const nearQuote = Uint8Array.from(JSON.parse(await data("dstack-near-mpc/quote.json")));
const tcb = JSON.parse(await data("dstack-near-mpc/tcb_info.json"));
const lite = JSON.parse(await data("dstack-verifier/tdx-lite-getquote.json"));
const LITE_IMAGE = "e6f5cfec20c02e7b97baa213d0f718020b55e040172d90ccbcb946d56c8b09db";

/** A policy file for the near-mpc deployment, as `evidence os-measure` writes one. */
function nearPolicy(change = {}) {
  return {
    entries: [
      {
        os_image_hash: tcb.os_image_hash,
        vm_shape: {},
        mrtd: [tcb.mrtd],
        rtmr0: tcb.rtmr0,
        rtmr1: tcb.rtmr1,
        rtmr2: tcb.rtmr2,
        ...change,
      },
    ],
  };
}

/** `hex` with its last digit changed. */
function offByOne(hex) {
  const last = hex.at(-1) === "0" ? "1" : "0";
  return hex.slice(0, -1) + last;
}

const near = (policy, extra = {}) => checkOsMeasurements({ quote: nearQuote, tcbInfo: tcb, vmConfig: "", policy, ...extra });

test("the quote's registers are the ones the guest agent reported", () => {
  const r = quoteRegisters(nearQuote);
  assert.equal(r.version, 4);
  assert.equal(r.simulated, false);
  assert.deepEqual([r.mrtd, r.rtmr0, r.rtmr1, r.rtmr2, r.rtmr3], [tcb.mrtd, tcb.rtmr0, tcb.rtmr1, tcb.rtmr2, tcb.rtmr3]);
  // Hex in, same registers out.
  assert.deepEqual(quoteRegisters(Buffer.from(nearQuote).toString("hex")), r);
});

test("a policy with the deployment's registers passes", () => {
  const r = near(nearPolicy());
  assert.equal(r.status, "pass", r.detail);
  assert.equal(r.ok, true);
  assert.equal(r.entry, 0);
  assert.equal(r.osImageHash, tcb.os_image_hash);
  assert.deepEqual(r.pinned, ["MRTD", "RTMR0", "RTMR1", "RTMR2"]);
  assert.deepEqual(r.unpinned, []);
  // Says what it did not do: the registers were taken from the policy, not recomputed.
  assert.match(r.detail, /taken on trust from the policy file/);
  assert.ok(r.detail.includes("evidence verify --os-image"), r.detail);
  // The policy file's text, uppercase and 0x-prefixed values, and one MRTD of several.
  const text = JSON.stringify(nearPolicy({ mrtd: ["00".repeat(48), `0x${tcb.mrtd.toUpperCase()}`] }));
  assert.equal(near(text).status, "pass");
});

for (const [field, register] of [
  ["mrtd", "MRTD"],
  ["rtmr0", "RTMR0"],
  ["rtmr1", "RTMR1"],
  ["rtmr2", "RTMR2"],
]) {
  test(`one digit off in ${register} fails and names it`, () => {
    const r = near(nearPolicy({ [field]: offByOne(tcb[field]) }));
    assert.equal(r.status, "fail");
    assert.equal(r.ok, false);
    assert.match(r.detail, new RegExp(`entry 0 differs in ${register}\\b`));
    assert.equal(r.entry, null);
  });
}

test("without a policy the OS is not pinned, and that is not ok unless accepted", () => {
  for (const policy of [undefined, null, ""]) {
    const r = near(policy);
    assert.equal(r.status, "unpinned");
    assert.equal(r.ok, false);
    assert.deepEqual(r.unpinned, ["MRTD", "RTMR0", "RTMR1", "RTMR2"]);
    assert.match(r.detail, /The OS is NOT pinned/);
    assert.ok(r.detail.includes(RECOMPUTE_NOTE), r.detail);
  }
  assert.equal(near(null, { allowUnpinnedOs: true }).ok, true);
});

test("an entry without rtmr0 leaves RTMR0 unpinned", () => {
  const r = near(nearPolicy({ rtmr0: null }));
  assert.equal(r.status, "unpinned");
  assert.deepEqual(r.unpinned, ["RTMR0"]);
  assert.deepEqual(r.pinned, ["MRTD", "RTMR1", "RTMR2"]);
  assert.match(r.detail, /RTMR0 is NOT pinned/);
});

test("a policy for another OS image has no entry for this one", () => {
  const r = near(nearPolicy({ os_image_hash: LITE_IMAGE }));
  assert.equal(r.status, "fail");
  assert.match(r.detail, new RegExp(`no entry for os_image_hash ${tcb.os_image_hash}`));
});

test("vm_config and /info must name the same image", () => {
  const vmConfig = JSON.stringify({ os_image_hash: LITE_IMAGE });
  const r = near(nearPolicy(), { vmConfig });
  assert.equal(r.status, "fail");
  assert.match(r.detail, /vm_config names os_image_hash e6f5cfec.*tcb_info names 7d47512f/);
});

test("dstack's verifier fixture: image hash and VM shape from vm_config", () => {
  const regs = quoteRegisters(lite.quote);
  const entry = {
    os_image_hash: LITE_IMAGE,
    version: "0.6.0",
    is_dev: false,
    vm_shape: { cpu_count: 2, memory_size: 2147483648, qemu_version: "8.2.2" },
    mrtd: regs.mrtd,
    rtmr0: regs.rtmr0,
    rtmr1: regs.rtmr1,
    rtmr2: regs.rtmr2,
  };
  const check = (e) => checkOsMeasurements({ quote: lite.quote, vmConfig: lite.vm_config, policy: { entries: [e] } });
  const ok = check(entry);
  assert.equal(ok.status, "pass", ok.detail);
  assert.equal(ok.osImageHash, LITE_IMAGE);
  assert.equal(ok.version, "0.6.0");
  assert.equal(ok.isDev, false);
  // Same registers, another shape: not this deployment's entry.
  const other = check({ ...entry, vm_shape: { ...entry.vm_shape, cpu_count: 4 } });
  assert.equal(other.status, "fail");
  assert.match(other.detail, /vm_config cpu_count 2 != 4 \(entry\)/);
  // Without a policy the host's image name still tells the version, as the host's word.
  const unpinned = checkOsMeasurements({ quote: lite.quote, vmConfig: lite.vm_config });
  assert.equal(unpinned.status, "unpinned");
  assert.equal(unpinned.osImageHash, LITE_IMAGE);
  assert.equal(unpinned.version, "0.6.0");
});

test("a simulated quote has no OS to pin", () => {
  const simulated = nearQuote.slice();
  simulated.set(new TextEncoder().encode("SIMULATED-TDX-DEV"), 28);
  const r = checkOsMeasurements({ quote: simulated, policy: nearPolicy() });
  assert.equal(r.status, "n/a");
  assert.equal(r.ok, false);
  assert.match(r.detail, /no OS measurement to pin/);
  assert.equal(checkOsMeasurements({ quote: simulated, allowSimulated: true }).ok, true);
});

test("malformed policies and quotes are refused with the reason", () => {
  const bad = [
    ["{", /policy file/],
    [{ entry: [] }, /no "entries" array/],
    [nearPolicy({ mrtd: [] }), /entry 0: mrtd: no value/],
    [nearPolicy({ rtmr1: "abcd" }), /entry 0: rtmr1: not 96 hex digits/],
    [nearPolicy({ os_image_hash: tcb.mrtd }), /entry 0: os_image_hash: not 64 hex digits/],
  ];
  for (const [policy, message] of bad) {
    assert.throws(() => parseOsPolicy(policy), (e) => e instanceof OsMeasurementError && message.test(e.message));
    assert.throws(() => near(policy), OsMeasurementError);
  }
  assert.throws(() => quoteRegisters(nearQuote.slice(0, 300)), /truncated/);
});

test("checkDeploymentOs reads /attestation and /info through the client", async () => {
  const client = {
    attestation: async () => ({ quote: Buffer.from(nearQuote).toString("hex"), event_log: "[]", vm_config: "" }),
    info: async () => ({ tcb_info: tcb }),
  };
  assert.equal((await checkDeploymentOs(client, { policy: nearPolicy() })).status, "pass");
  assert.equal((await checkDeploymentOs(client)).status, "unpinned");
});
