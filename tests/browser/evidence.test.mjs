// The dashboard's in-browser evidence checks (appliance/dashboard/assets/evidence.js) on
// the repository's real dstack vectors (evidence/tests/data/dstack-near-mpc, see its
// PROVENANCE.md): the same inputs the Rust verifier's tests use (`evidence/tests/evidence/fixtures.rs`),
// the same verdicts, and one flipped byte anywhere that matters fails.
//
//   node --test tests/browser/evidence.test.mjs
//
// Run by tests/e2e/dashboard.rs (cargo test -p e2e dashboard::).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';

import {
  bytesToHex,
  composeImages,
  hexToBytes,
  identity,
  imageIsPinned,
  parseEventLog,
  parseQuote,
  parseSumLine,
  replay,
  runtimeDigest,
  sha256Hex,
  verifyEvidence,
} from '../../appliance/dashboard/assets/evidence.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const data = (rel) => readFileSync(join(root, 'evidence/tests/data', rel));

const quoteBytes = Uint8Array.from(JSON.parse(data('dstack-near-mpc/quote.json')));
const tcb = JSON.parse(data('dstack-near-mpc/tcb_info.json'));
const COMPOSE_HASH = '2911e1f733466216dedb862d6d669e11256ee7a34ce4dbc66c4b807ba7a9c895';

/** The event log as GetQuote returns it: a JSON string, runtime digests left empty. */
function getquoteEventLog(events = tcb.event_log) {
  return JSON.stringify(
    events.map((e) => (e.event_type === 0x08000001 ? { ...e, digest: '' } : e)),
  );
}

/** The near-mpc deployment as /info and /attestation (as `evidence/tests/evidence/fixtures.rs` builds it). */
function nearEvidence() {
  return {
    info: {
      app_id: '2911e1f733466216dedb862d6d669e11256ee7a3',
      instance_id: '',
      compose_hash: tcb.compose_hash,
      tcb_info: structuredClone(tcb),
    },
    attestation: {
      quote: bytesToHex(quoteBytes),
      event_log: getquoteEventLog(),
      vm_config: '',
    },
    files: {},
    origin: 'https://near.example',
  };
}

const status = (report, id) => report.checks.find((c) => c.id === id);

test('the quote parses to the measurements tcb_info reports', () => {
  const q = parseQuote(quoteBytes);
  assert.equal(q.version, 4);
  assert.equal(q.simulated, false);
  assert.equal(bytesToHex(q.report.mrTd), tcb.mrtd);
  for (const i of [0, 1, 2, 3]) assert.equal(bytesToHex(q.report.rtmrs[i]), tcb[`rtmr${i}`]);
  // dstack: mr_config_id = 0x01 ‖ compose_hash ‖ 0…
  assert.equal(bytesToHex(q.report.mrConfigId.slice(0, 33)), `01${COMPOSE_HASH}`);
});

test('the event log replays to RTMR0-3 and names the compose hash', async () => {
  const events = await parseEventLog(tcb.event_log);
  assert.equal(events.length, 29);
  const rtmrs = (await replay(events)).map(bytesToHex);
  assert.deepEqual(rtmrs, [tcb.rtmr0, tcb.rtmr1, tcb.rtmr2, tcb.rtmr3]);
  const id = identity(events);
  assert.equal(id.composeHash, COMPOSE_HASH);
  assert.equal(id.appId, '2911e1f733466216dedb862d6d669e11256ee7a3');
  assert.equal(id.systemReady, true);
  // The GetQuote form (runtime digests empty) recomputes the same digests.
  const fromGetQuote = await parseEventLog(getquoteEventLog());
  assert.deepEqual((await replay(fromGetQuote)).map(bytesToHex), rtmrs);
});

test('runtime digests are SHA-384(u32-le type ‖ ":" ‖ name ‖ ":" ‖ payload)', async () => {
  const e = tcb.event_log.find((x) => x.event === 'compose-hash');
  const d = await runtimeDigest(e.event_type, e.event, hexToBytes(e.event_payload));
  assert.equal(bytesToHex(d), e.digest);
});

test('the compose hash is the SHA-256 of app_compose', async () => {
  assert.equal(await sha256Hex(tcb.app_compose), COMPOSE_HASH);
});

test('every computable check passes on the real deployment', async () => {
  const report = await verifyEvidence(nearEvidence());
  assert.equal(status(report, 'compose-hash').status, 'pass', status(report, 'compose-hash').detail);
  assert.match(status(report, 'compose-hash').detail, new RegExp(COMPOSE_HASH));
  assert.equal(status(report, 'images-pinned').status, 'pass', status(report, 'images-pinned').detail);
  assert.equal(status(report, 'images-pinned').detail, '2 image(s), all pinned by digest');
  assert.equal(status(report, 'rtmr-replay').status, 'pass', status(report, 'rtmr-replay').detail);
  assert.equal(status(report, 'rtmr-replay').detail, '29 events replay to RTMR0-3 of the quote');
  const event = status(report, 'compose-hash-event');
  assert.equal(event.status, 'pass', event.detail);
  assert.match(event.detail, /app-id matches; mr_config_id matches/);
  // What a page cannot decide is said so, with the command that can.
  assert.equal(status(report, 'quote').status, 'cannot-check-here');
  assert.match(status(report, 'quote').detail, /evidence verify --url https:\/\/near\.example/);
  assert.equal(status(report, 'governance').status, 'cannot-check-here');
  assert.equal(report.simulated, false);
  assert.equal(report.measurements.mrtd, tcb.mrtd);
  assert.equal(report.composeHash, COMPOSE_HASH);
  // The vectors carry no /evidences/: rule 3 fails here (the Rust test skips it by name).
  assert.equal(status(report, 'report-data').status, 'fail');
  assert.match(status(report, 'report-data').detail, /no evidences\/sha256sum\.txt/);
});

/** A policy file (as `evidence os-measure` writes it) pinning the near-mpc OS registers. */
function nearOsPolicy(change = {}) {
  return {
    entries: [
      { os_image_hash: tcb.os_image_hash, vm_shape: {}, mrtd: [tcb.mrtd], rtmr0: tcb.rtmr0, rtmr1: tcb.rtmr1, rtmr2: tcb.rtmr2, ...change },
    ],
  };
}

test('os-image: without a policy the OS is reported NOT pinned, with what decides it', async () => {
  const report = await verifyEvidence(nearEvidence());
  const os = status(report, 'os-image');
  assert.equal(os.status, 'unpinned');
  assert.match(os.detail, /The OS is NOT pinned/);
  assert.match(os.detail, /evidence verify --os-image DIR/);
  assert.match(os.detail, /Paste or upload the policy file/);
  assert.equal(report.osPinned, false);
  assert.equal(report.os.osImageHash, tcb.os_image_hash, 'the image hash /info names');
  assert.match(report.commands.os, /--os-measurements .* --os-image/);
});

test('os-image: a pasted policy with the deployment registers passes; one register off fails', async () => {
  const pass = await verifyEvidence({ ...nearEvidence(), osPolicy: JSON.stringify(nearOsPolicy()) });
  assert.equal(status(pass, 'os-image').status, 'pass', status(pass, 'os-image').detail);
  assert.match(status(pass, 'os-image').detail, /Policy entry 0 matches/);
  assert.match(status(pass, 'os-image').detail, /taken on trust from the policy file/);
  assert.equal(pass.osPinned, true);
  for (const field of ['mrtd', 'rtmr0', 'rtmr1', 'rtmr2']) {
    const hex = tcb[field];
    const off = hex.slice(0, -1) + (hex.endsWith('0') ? '1' : '0');
    const fail = await verifyEvidence({ ...nearEvidence(), osPolicy: nearOsPolicy({ [field]: off }) });
    const os = status(fail, 'os-image');
    assert.equal(os.status, 'fail', field);
    assert.match(os.detail, new RegExp(`differs in ${field.toUpperCase()}`));
    assert.equal(fail.ok, false);
  }
  // An entry without rtmr0 leaves RTMR0 unpinned; a malformed file is a failure that says why.
  const partial = await verifyEvidence({ ...nearEvidence(), osPolicy: nearOsPolicy({ rtmr0: null }) });
  assert.equal(status(partial, 'os-image').status, 'unpinned');
  assert.deepEqual(partial.os.unpinned, ['RTMR0']);
  const bad = await verifyEvidence({ ...nearEvidence(), osPolicy: '{"entries": [{"mrtd": []}]}' });
  assert.equal(status(bad, 'os-image').status, 'fail');
  assert.match(status(bad, 'os-image').detail, /policy file entry 0/);
});

test('os-image: a simulated quote has no OS to pin (n/a, as evidence verify says)', async () => {
  const ev = nearEvidence();
  const q = quoteBytes.slice();
  q.set(new TextEncoder().encode('SIMULATED-TDX-DEV'), 28);
  ev.attestation.quote = bytesToHex(q);
  const report = await verifyEvidence({ ...ev, osPolicy: nearOsPolicy() });
  assert.equal(status(report, 'os-image').status, 'n/a');
  assert.match(status(report, 'os-image').detail, /no OS measurement to pin/);
  assert.equal(report.osPinned, false);
});

test('one flipped byte of app_compose fails the compose hash', async () => {
  const ev = nearEvidence();
  const c = ev.info.tcb_info.app_compose;
  const i = c.indexOf('image');
  ev.info.tcb_info.app_compose = `${c.slice(0, i)}jmage${c.slice(i + 5)}`;
  const report = await verifyEvidence(ev);
  assert.equal(status(report, 'compose-hash').status, 'fail');
  assert.match(status(report, 'compose-hash').detail, /but \/info says compose_hash/);
});

test('one flipped byte of an RTMR in the quote fails the replay', async () => {
  for (const rtmr of [0, 3]) {
    const ev = nearEvidence();
    const bytes = quoteBytes.slice();
    bytes[48 + 328 + 48 * rtmr + 5] ^= 0x01;
    ev.attestation.quote = bytesToHex(bytes);
    const report = await verifyEvidence(ev);
    const r = status(report, 'rtmr-replay');
    assert.equal(r.status, 'fail');
    assert.equal(r.detail, `replay of the event log differs from the quote in RTMR${rtmr}`);
  }
});

test('one flipped byte of a boot event digest fails the replay', async () => {
  const ev = nearEvidence();
  const events = JSON.parse(ev.attestation.event_log);
  const boot = events.findIndex((e) => e.imr === 1);
  const d = hexToBytes(events[boot].digest);
  d[0] ^= 0x01;
  events[boot].digest = bytesToHex(d);
  ev.attestation.event_log = JSON.stringify(events);
  const report = await verifyEvidence(ev);
  assert.equal(status(report, 'rtmr-replay').status, 'fail');
  assert.match(status(report, 'rtmr-replay').detail, /RTMR1/);
});

test('one flipped byte of a runtime payload fails the replay (digests are recomputed)', async () => {
  const ev = nearEvidence();
  const events = JSON.parse(ev.attestation.event_log);
  const i = events.findIndex((e) => e.event === 'compose-hash');
  const p = hexToBytes(events[i].event_payload);
  p[0] ^= 0x01;
  events[i].event_payload = bytesToHex(p);
  ev.attestation.event_log = JSON.stringify(events);
  const report = await verifyEvidence(ev);
  assert.equal(status(report, 'rtmr-replay').status, 'fail');
  assert.match(status(report, 'rtmr-replay').detail, /RTMR3/);
  assert.equal(status(report, 'compose-hash-event').status, 'fail');
});

test('a supplied runtime digest that disagrees makes the log invalid', async () => {
  const events = structuredClone(tcb.event_log);
  const i = events.findIndex((e) => e.event === 'app-id');
  events[i].digest = `00${events[i].digest.slice(2)}`;
  await assert.rejects(parseEventLog(events), /supplied digest differs/);
});

test('images, sums and quotes parse as the Rust verifier parses them', () => {
  assert.deepEqual(composeImages('services:\n  a:\n    image: "x@sha256:ab" # c\n  - image: y:1\n'), ['x@sha256:ab', 'y:1']);
  assert.equal(imageIsPinned(`repo/x@sha256:${'a'.repeat(64)}`), true);
  assert.equal(imageIsPinned(`repo/x@sha256:${'A'.repeat(64)}`), false);
  assert.equal(imageIsPinned(`@sha256:${'a'.repeat(64)}`), false);
  assert.equal(imageIsPinned('repo/x:latest'), false);
  assert.deepEqual(parseSumLine(`${'b'.repeat(64)}  cert-localhost.pem`), ['b'.repeat(64), 'cert-localhost.pem']);
  assert.deepEqual(parseSumLine(`${'b'.repeat(64)} *dir/quote.json`), ['b'.repeat(64), 'quote.json']);
  assert.equal(parseSumLine('short  x'), null);
  assert.throws(() => parseQuote(quoteBytes.slice(0, 100)), /truncated/);
  const v3 = quoteBytes.slice();
  v3[0] = 3;
  assert.throws(() => parseQuote(v3), /unsupported quote version 3/);
});
