// checkOsMeasurements on real dstack quotes from the repository's test vectors
// (evidence/tests/data, see its PROVENANCE.md): the near-mpc deployment's quote, with a
// policy built from the registers its guest agent reported in tcb_info.json (a source
// independent of the quote parser), and dstack's own verifier fixture with its vm_config;
// and the policy match on the cases of evidence/tests/data/os-policy-cases.json, which the
// Rust verifier's tests (evidence/tests/evidence/os_image.rs) hold `evidence verify` to as well.
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
function nearPolicy() {
  return {
    entries: [
      {
        os_image_hash: tcb.os_image_hash,
        vm_shape: {},
        mrtd: [tcb.mrtd],
        rtmr0: tcb.rtmr0,
        rtmr1: tcb.rtmr1,
        rtmr2: tcb.rtmr2,
      },
    ],
  };
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
});

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

test("a truncated quote is refused with the reason", () => {
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

// The policy match on the cases shared with the Rust verifier's tests.

const shared = JSON.parse(await data("os-policy-cases.json")).cases;

/** The near-mpc quote (v4: TD report at 48) with MRTD (at 136) and RTMR0-2 (328, 376, 424) replaced. */
function quoteWith(observed) {
  const q = nearQuote.slice();
  for (const [offset, hex] of [
    [136, observed.mrtd],
    [328, observed.rtmr0],
    [376, observed.rtmr1],
    [424, observed.rtmr2],
  ]) {
    q.set(Buffer.from(hex, "hex"), 48 + offset);
  }
  return q;
}

test("the shared policy cases are there", () => {
  assert.ok(shared.length >= 30, `${shared.length} cases`);
});

for (const c of shared) {
  test(`shared policy case: ${c.name}`, () => {
    const text = typeof c.policy === "string" ? c.policy : JSON.stringify(c.policy);
    const o = c.observed;
    const check = (extra = {}) =>
      checkOsMeasurements({
        quote: quoteWith(o),
        vmConfig: o.vm_config === null ? "" : JSON.stringify(o.vm_config),
        tcbInfo: o.tcb_info,
        policy: text,
        ...extra,
      });
    const { verdict } = c.expect;
    if (verdict === "error") {
      const refused = (e) => e instanceof OsMeasurementError && e.message.includes(c.expect.error);
      assert.throws(() => parseOsPolicy(text), refused);
      assert.throws(() => check(), refused);
      return;
    }
    if (verdict === "refused") {
      // The deployment's vm_config is malformed: refused whatever the policy says.
      parseOsPolicy(text);
      const refused = (e) => e instanceof OsMeasurementError && e.message.includes(c.expect.error);
      assert.throws(() => check(), refused);
      assert.throws(() => check({ allowUnpinnedOs: true }), refused);
      return;
    }
    const r = check();
    if (verdict === "pass") {
      assert.equal(r.status, "pass", r.detail);
      assert.equal(r.ok, true);
      assert.equal(r.entry, c.expect.entry);
      assert.deepEqual(r.pinned, ["MRTD", "RTMR0", "RTMR1", "RTMR2"]);
      assert.deepEqual(r.unpinned, []);
    } else if (verdict === "unpinned") {
      assert.equal(r.status, "unpinned", r.detail);
      assert.equal(r.ok, false);
      assert.equal(r.entry, c.expect.entry);
      assert.deepEqual(r.pinned, ["MRTD", "RTMR1", "RTMR2"]);
      assert.deepEqual(r.unpinned, ["RTMR0"]);
      assert.match(r.detail, /RTMR0 is NOT pinned/);
      // Accepted unpinned on request.
      assert.equal(check({ allowUnpinnedOs: true }).ok, true);
    } else {
      assert.equal(verdict, "fail");
      assert.equal(r.status, "fail", r.detail);
      assert.equal(r.ok, false);
      assert.equal(r.entry, null);
      for (const want of c.expect.detail) assert.ok(r.detail.includes(want), `${r.detail} lacks ${want}`);
      // Not a matter of accepting an unpinned OS.
      assert.equal(check({ allowUnpinnedOs: true }).ok, false);
    }
  });
}
