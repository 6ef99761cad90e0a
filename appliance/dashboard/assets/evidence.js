// The attestation checks the dashboard runs in the browser, with WebCrypto only.
//
// A JavaScript reimplementation of what `evidence verify` (the Rust `evidence` crate:
// evidence/src/check.rs, quote.rs, event_log.rs) computes without leaving the page's own
// origin: the TDX quote's fields, the dstack event log's replay to RTMR0-3, the compose
// hash and its event, the pinned images and the report data binding `/evidences/`. It
// is cross-tested against the Rust verifier (tests/browser/evidence.test.mjs on the real
// vectors of evidence/tests/data, and tests/e2e/dashboard.rs against a live appliance).
// What a page cannot decide (the TLS leaf it is connected with, DNS CAA records, the
// governance contract on another origin, the TCB status from Intel's collateral) is
// reported as such, with the command that decides it. The OS measurements (MRTD,
// RTMR0-2) are compared with a policy file the user gives (the SDK's checkOsMeasurements,
// the rules of `evidence verify --os-measurements`); recomputing them from an OS image
// is a command-line job. No DOM here: it also runs in node.

import { checkOsMeasurements, parseQuote } from './appliance-sdk.js';

const subtle = globalThis.crypto.subtle;
const utf8 = new TextEncoder();

/** The check ids and titles, in the order of `evidence verify`. */
export const CHECKS = [
  ['compose-hash', 'rule 1: sha256(tcb_info.app_compose) = compose_hash'],
  ['images-pinned', 'rule 2: every image pinned by @sha256:'],
  ['report-data', 'rule 3: report_data = sha256(sha256sum.txt), zero-padded'],
  ['tls-certificate', 'rule 4: TLS leaf = evidence certificate'],
  ['acme-caa', "rule 5: ACME account URI in the domain's CAA accounturi"],
  ['governance', 'rule 6: allowedComposeHashes(compose_hash) on 0x‖app_id'],
  ['quote', 'TCB status: DCAP verification of the quotes'],
  ['rtmr-replay', "event log replays to the quote's RTMR0-3"],
  ['os-image', 'MRTD and RTMR0-2 (firmware, kernel, cmdline, initrd) = a pinned OS'],
  ['compose-hash-event', 'compose-hash event (before system-ready) = /info'],
];

/** Statuses: computed here (pass/fail/n/a), or out of a page's reach. */
export const Status = Object.freeze({
  PASS: 'pass',
  FAIL: 'fail',
  NOT_APPLICABLE: 'n/a',
  /** The page cannot decide it; `detail` says why and what can. */
  CANNOT_CHECK: 'cannot-check-here',
  /** The user can: compare the shown value with the browser's own display. */
  COMPARE: 'compare',
  /** Nothing pins the OS (no policy file, or an entry without RTMR0): not a failure, not verified. */
  UNPINNED: 'unpinned',
});

export const RUNTIME_EVENT_TYPE = 0x08000001;
export const SIMULATED_MARKER = 'SIMULATED-TDX-DEV';

// ---------------------------------------------------------------------------- bytes

export function hexToBytes(text) {
  let t = String(text).trim();
  if (t.startsWith('0x') || t.startsWith('0X')) t = t.slice(2);
  if (t.length % 2 !== 0 || !/^[0-9a-fA-F]*$/.test(t)) {
    throw new Error('not hex');
  }
  const out = new Uint8Array(t.length / 2);
  for (let i = 0; i < out.length; i += 1) out[i] = parseInt(t.slice(2 * i, 2 * i + 2), 16);
  return out;
}

export function bytesToHex(bytes) {
  let s = '';
  for (const b of bytes) s += b.toString(16).padStart(2, '0');
  return s;
}

function concat(...parts) {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

function equalBytes(a, b) {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i += 1) if (a[i] !== b[i]) return false;
  return true;
}

export async function sha256(bytes) {
  return new Uint8Array(await subtle.digest('SHA-256', bytes));
}

export async function sha384(bytes) {
  return new Uint8Array(await subtle.digest('SHA-384', bytes));
}

export async function sha256Hex(bytes) {
  return bytesToHex(await sha256(typeof bytes === 'string' ? utf8.encode(bytes) : bytes));
}

function strip0x(s) {
  const t = String(s).trim();
  return t.startsWith('0x') ? t.slice(2) : t;
}

function base64ToBytes(b64) {
  const bin = atob(b64.replace(/\s+/g, ''));
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i += 1) out[i] = bin.charCodeAt(i);
  return out;
}

function bytesToBase64(bytes) {
  let bin = '';
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin);
}

// ---------------------------------------------------------------------------- quote

/** A quote given as hex (optionally 0x) or as a JSON array of bytes. */
export function decodeQuoteText(text) {
  const t = String(text).trim();
  if (t.startsWith('[')) return Uint8Array.from(JSON.parse(t));
  return hexToBytes(t);
}

/**
 * Parses a TDX quote, v4 or v5: the header and the TD report's fields as bytes (the SDK's
 * parser, which the OS-measurement check uses too). Only slices; whether it is genuine is
 * not decided here.
 */
export { parseQuote };

// ---------------------------------------------------------------------------- event log

/** SHA-384(u32-le(event_type) ‖ ":" ‖ name ‖ ":" ‖ payload). */
export async function runtimeDigest(eventType, name, payload) {
  const type = new Uint8Array(4);
  new DataView(type.buffer).setUint32(0, eventType >>> 0, true);
  const colon = utf8.encode(':');
  return sha384(concat(type, colon, utf8.encode(name), colon, payload));
}

/**
 * Parses a dstack event log (a JSON array, or a string holding one), recomputing every
 * runtime event's digest; a supplied digest that disagrees makes the log invalid.
 */
export async function parseEventLog(value) {
  const raw = typeof value === 'string' ? JSON.parse(value) : value;
  if (!Array.isArray(raw)) throw new Error('event log is not a JSON array');
  const events = [];
  for (let index = 0; index < raw.length; index += 1) {
    const e = raw[index];
    const imr = Number(e.imr);
    if (!Number.isInteger(imr) || imr < 0 || imr > 3) throw new Error(`event ${index}: imr ${e.imr} is not 0..=3`);
    const eventType = Number(e.event_type);
    const name = String(e.event ?? '');
    let payload;
    try {
      payload = hexToBytes(e.event_payload ?? '');
    } catch {
      throw new Error(`event ${index}: event_payload is not hex`);
    }
    let supplied = null;
    const d = String(e.digest ?? '').trim();
    if (d) {
      try {
        supplied = hexToBytes(d);
      } catch {
        throw new Error(`event ${index}: digest is not hex`);
      }
      if (supplied.length !== 48) throw new Error(`event ${index}: digest is ${supplied.length} bytes, not 48`);
    }
    let digest;
    if (eventType === RUNTIME_EVENT_TYPE) {
      digest = await runtimeDigest(eventType, name, payload);
      if (supplied && !equalBytes(supplied, digest)) {
        throw new Error(`event ${index} (${name}): supplied digest differs from the recomputed one; the log was altered`);
      }
    } else {
      if (!supplied) throw new Error(`event ${index}: digest is 0 bytes, not 48`);
      digest = supplied;
    }
    events.push({ imr, eventType, name, payload, digest });
  }
  return events;
}

/** RTMR0-3 from 48 zero bytes: RTMR ← SHA-384(RTMR ‖ digest). */
export async function replay(events) {
  const rtmrs = [0, 1, 2, 3].map(() => new Uint8Array(48));
  for (const e of events) rtmrs[e.imr] = await sha384(concat(rtmrs[e.imr], e.digest));
  return rtmrs;
}

/** The identity events before system-ready (app-id, compose-hash, …), as hex. */
export function identity(events) {
  const id = { appId: null, composeHash: null, instanceId: null, keyProvider: null, systemReady: false };
  const slots = { 'app-id': 'appId', 'compose-hash': 'composeHash', 'instance-id': 'instanceId', 'key-provider': 'keyProvider' };
  for (let index = 0; index < events.length; index += 1) {
    const e = events[index];
    if (e.imr !== 3 || e.eventType !== RUNTIME_EVENT_TYPE) continue;
    if (e.name === 'system-ready') {
      id.systemReady = true;
      break;
    }
    const slot = slots[e.name];
    if (!slot) continue;
    if (id[slot] !== null) throw new Error(`event ${index}: a ${e.name} event appears twice before system-ready`);
    id[slot] = slot === 'keyProvider' ? new TextDecoder().decode(e.payload) : bytesToHex(e.payload);
  }
  return id;
}

// ---------------------------------------------------------------------------- compose

/** Every `image:` of a docker-compose file, as written. */
export function composeImages(dockerCompose) {
  const out = [];
  for (const line of String(dockerCompose).split('\n')) {
    let t = line.trimStart();
    while (t.startsWith('- ')) t = t.slice(2);
    t = t.trimStart();
    if (!t.startsWith('image:')) continue;
    let v = t.slice('image:'.length);
    v = v.split(' #')[0].trim();
    v = v.replace(/^["']+|["']+$/g, '');
    out.push(v);
  }
  return out;
}

/** `name@sha256:<64 lowercase hex>`. */
export function imageIsPinned(image) {
  const i = image.lastIndexOf('@sha256:');
  if (i <= 0) return false;
  return /^[0-9a-f]{64}$/.test(image.slice(i + '@sha256:'.length));
}

// ---------------------------------------------------------------------------- files

/** A `sha256sum` line: [hash, file name] or null. */
export function parseSumLine(line) {
  const t = line.trim();
  const m = /^(\S+)\s+(.*)$/.exec(t);
  if (!m) return null;
  let name = m[2].trimStart().replace(/^\*+/, '');
  name = name.split('/').pop();
  return m[1].length === 64 && name ? [m[1], name] : null;
}

/** The names linked from the `/evidences/` HTML listing. */
export function listingNames(html) {
  const out = [];
  for (const m of String(html).matchAll(/href="([A-Za-z0-9._-]+)"/g)) {
    if (!m[1].startsWith('.') && !out.includes(m[1])) out.push(m[1]);
  }
  return out;
}

export function certFileName(files) {
  return Object.keys(files).sort().find((n) => n.startsWith('cert-') && n.endsWith('.pem')) || null;
}

/** The first certificate of a PEM text, as DER. */
export function firstPemCert(pem) {
  const text = typeof pem === 'string' ? pem : new TextDecoder().decode(pem);
  const m = /-----BEGIN CERTIFICATE-----([\s\S]*?)-----END CERTIFICATE-----/.exec(text);
  return m ? base64ToBytes(m[1]) : null;
}

// ---------------------------------------------------------------------------- X.509

function tlv(bytes, at) {
  if (at + 2 > bytes.length) throw new Error('DER: truncated');
  const tag = bytes[at];
  let len = bytes[at + 1];
  let head = 2;
  if (len & 0x80) {
    const n = len & 0x7f;
    if (n === 0 || n > 4 || at + 2 + n > bytes.length) throw new Error('DER: bad length');
    len = 0;
    for (let i = 0; i < n; i += 1) len = len * 256 + bytes[at + 2 + i];
    head += n;
  }
  const start = at + head;
  const end = start + len;
  if (end > bytes.length) throw new Error('DER: truncated');
  return { tag, start, end, raw: bytes.subarray(at, end) };
}

function children(bytes, node) {
  const out = [];
  for (let at = node.start; at < node.end; ) {
    const c = tlv(bytes, at);
    out.push(c);
    at = c.end;
  }
  return out;
}

const NAME_OIDS = { '550403': 'CN', '55040a': 'O', '55040b': 'OU', '550406': 'C' };

function nameText(bytes, node) {
  const parts = [];
  for (const set of children(bytes, node)) {
    for (const attr of children(bytes, set)) {
      const [oid, value] = children(bytes, attr);
      const key = NAME_OIDS[bytesToHex(bytes.subarray(oid.start, oid.end))];
      if (key) parts.push(`${key}=${new TextDecoder().decode(bytes.subarray(value.start, value.end))}`);
    }
  }
  return parts.join(', ');
}

function timeText(bytes, node) {
  const s = new TextDecoder().decode(bytes.subarray(node.start, node.end));
  // UTCTime YYMMDDHHMMSSZ or GeneralizedTime YYYYMMDDHHMMSSZ.
  const full = node.tag === 0x17 ? `${Number(s.slice(0, 2)) >= 50 ? '19' : '20'}${s}` : s;
  return `${full.slice(0, 4)}-${full.slice(4, 6)}-${full.slice(6, 8)} ${full.slice(8, 10)}:${full.slice(10, 12)}:${full.slice(12, 14)} UTC`;
}

/**
 * The parts of a certificate a person compares: subject, issuer, validity, whether it
 * is self-issued, its SHA-256 fingerprint and its SubjectPublicKeyInfo's SHA-256.
 */
export async function describeCertificate(der) {
  const cert = tlv(der, 0);
  const [tbs] = children(der, cert);
  const f = children(der, tbs);
  const i = f[0].tag === 0xa0 ? 1 : 0;
  const issuer = f[i + 2];
  const validity = children(der, f[i + 3]);
  const subject = f[i + 4];
  const spki = f[i + 5];
  const fingerprint = bytesToHex(await sha256(der));
  const spkiHash = await sha256(spki.raw);
  return {
    subject: nameText(der, subject),
    issuer: nameText(der, issuer),
    notBefore: timeText(der, validity[0]),
    notAfter: timeText(der, validity[1]),
    selfIssued: equalBytes(issuer.raw, subject.raw),
    sha256: fingerprint,
    sha256Colons: fingerprint.toUpperCase().match(/../g).join(':'),
    spkiSha256Base64: bytesToBase64(spkiHash),
    spkiSha256Hex: bytesToHex(spkiHash),
  };
}

// ---------------------------------------------------------------------------- checks

function tcbInfo(info) {
  const t = info && info.tcb_info;
  if (t === undefined || t === null) throw new Error('/info has no tcb_info');
  return typeof t === 'string' ? JSON.parse(t) : t;
}

function appCompose(info) {
  const c = tcbInfo(info).app_compose;
  if (typeof c !== 'string') throw new Error('/info has no tcb_info.app_compose');
  return c;
}

function infoComposeHash(info) {
  if (!info || typeof info.compose_hash !== 'string') throw new Error('/info has no compose_hash');
  return strip0x(info.compose_hash).toLowerCase();
}

function attestationQuote(attestation) {
  if (!attestation || typeof attestation.quote !== 'string') throw new Error('/attestation has no quote');
  return parseQuote(decodeQuoteText(attestation.quote));
}

function attestationEventLog(info, attestation) {
  if (attestation && attestation.event_log !== undefined) return attestation.event_log;
  const log = tcbInfo(info).event_log;
  if (log === undefined) throw new Error('no event log in /attestation or /info');
  return log;
}

async function checkComposeHash(ev) {
  const actual = await sha256Hex(appCompose(ev.info));
  const claimed = infoComposeHash(ev.info);
  if (actual !== claimed) throw new Error(`sha256(app_compose) = ${actual}, but /info says compose_hash = ${claimed}`);
  return `sha256(app_compose) = ${actual}`;
}

async function checkImagesPinned(ev) {
  let compose;
  try {
    compose = JSON.parse(appCompose(ev.info));
  } catch (err) {
    throw new Error(`app_compose is not JSON: ${err.message}`);
  }
  const dc = compose.docker_compose_file;
  if (typeof dc !== 'string') throw new Error('app_compose has no docker_compose_file');
  const images = composeImages(dc);
  if (!images.length) throw new Error('docker_compose_file names no image');
  const unpinned = images.filter((i) => !imageIsPinned(i));
  if (unpinned.length) throw new Error(`not pinned by @sha256: ${unpinned.join(', ')}`);
  return `${images.length} image(s), all pinned by digest`;
}

function selfSignedWithoutAcme(ev) {
  return !('acme-account.json' in ev.files) && ev.certificate !== null && ev.certificate.selfIssued;
}

async function checkReportData(ev) {
  const sums = ev.files['sha256sum.txt'];
  if (!sums) throw new Error('no evidences/sha256sum.txt');
  const expected = await sha256Hex(sums);
  const raw = ev.files['quote.json'];
  if (!raw) throw new Error('no evidences/quote.json');
  const v = JSON.parse(new TextDecoder().decode(raw));
  if (typeof v.quote !== 'string') throw new Error('evidences/quote.json has no quote');
  if (typeof v.report_data !== 'string') throw new Error('evidences/quote.json has no report_data');
  const claimed = strip0x(v.report_data).toLowerCase();
  if (claimed.slice(0, 64) !== expected) {
    throw new Error(`report_data starts ${claimed.slice(0, 64)}, sha256(sha256sum.txt) = ${expected}`);
  }
  if (claimed.length !== 128 || /[^0]/.test(claimed.slice(64))) {
    throw new Error('report_data is not the hash zero-padded to 64 bytes');
  }
  const quote = parseQuote(decodeQuoteText(v.quote));
  if (bytesToHex(quote.report.reportData) !== claimed) {
    throw new Error("the evidence quote's own report_data differs from quote.json's");
  }
  ev.evidenceQuote = quote;
  const covered = [];
  for (const line of new TextDecoder().decode(sums).split('\n')) {
    const parsed = parseSumLine(line);
    if (!parsed) continue;
    const [hash, name] = parsed;
    const content = ev.files[name];
    if (content === undefined) continue;
    if ((await sha256Hex(content)) !== hash.toLowerCase()) {
      throw new Error(`sha256sum.txt: ${name} does not match its checksum`);
    }
    covered.push(name);
  }
  const needed = [certFileName(ev.files), selfSignedWithoutAcme(ev) ? null : 'acme-account.json'].filter(Boolean);
  for (const name of needed) {
    if (!covered.includes(name)) throw new Error(`sha256sum.txt does not cover ${name}`);
  }
  return `report_data = sha256(sha256sum.txt) = ${expected}…; it covers ${covered.join(', ')}`;
}

async function checkRtmrReplay(ev) {
  const quote = attestationQuote(ev.attestation);
  const events = await parseEventLog(attestationEventLog(ev.info, ev.attestation));
  const replayed = await replay(events);
  ev.replayed = replayed.map(bytesToHex);
  const bad = [];
  replayed.forEach((r, i) => {
    if (!equalBytes(r, quote.report.rtmrs[i])) bad.push(`RTMR${i}`);
  });
  if (bad.length) throw new Error(`replay of the event log differs from the quote in ${bad.join(', ')}`);
  return `${events.length} events replay to RTMR0-3 of the quote`;
}

async function checkComposeHashEvent(ev) {
  const events = await parseEventLog(attestationEventLog(ev.info, ev.attestation));
  const id = identity(events);
  if (!id.composeHash) throw new Error('no compose-hash event before system-ready');
  const claimed = infoComposeHash(ev.info);
  if (id.composeHash !== claimed) throw new Error(`compose-hash event ${id.composeHash} != /info compose_hash ${claimed}`);
  const notes = [`compose-hash event = /info = ${id.composeHash}`];
  if (id.appId && typeof ev.info.app_id === 'string') {
    if (id.appId !== strip0x(ev.info.app_id).toLowerCase()) {
      throw new Error(`app-id event ${id.appId} != /info app_id ${ev.info.app_id}`);
    }
    notes.push('app-id matches');
  }
  let quote = null;
  try {
    quote = attestationQuote(ev.attestation);
  } catch {
    quote = null;
  }
  if (quote && quote.report.mrConfigId[0] === 1) {
    if (bytesToHex(quote.report.mrConfigId.slice(1, 33)) !== claimed) {
      throw new Error("quote's mr_config_id names another compose hash");
    }
    notes.push('mr_config_id matches');
  }
  if (!id.systemReady) notes.push('(no system-ready event yet)');
  return notes.join('; ');
}

const OS_STATUS = { pass: Status.PASS, fail: Status.FAIL, unpinned: Status.UNPINNED, 'n/a': Status.NOT_APPLICABLE };

/**
 * The quote's OS registers against the user's policy file (text or parsed; null: none).
 * Returns [status, detail, the SDK's result or null].
 */
function checkOsImage(ev, osPolicy, commands) {
  let r;
  try {
    if (!ev.attestation || typeof ev.attestation.quote !== 'string') throw new Error('/attestation has no quote');
    r = checkOsMeasurements({
      quote: decodeQuoteText(ev.attestation.quote),
      vmConfig: ev.attestation.vm_config,
      tcbInfo: ev.info ? ev.info.tcb_info : null,
      policy: osPolicy,
    });
  } catch (err) {
    return [Status.FAIL, err && err.message ? err.message : String(err), null];
  }
  let detail = r.detail;
  if (r.status === 'unpinned' && r.entry === null) {
    detail += ' Paste or upload the policy file of the OS release you trust (Check the OS measurements, below).';
  }
  if (r.status === 'pass' || r.status === 'fail') {
    detail += ` The page compares the registers the quote states; that the quote is genuine is the quote check's job (${commands.evidence}).`;
  }
  return [OS_STATUS[r.status] || Status.FAIL, detail, r];
}

/** The commands that decide what a page cannot. */
export function verifyCommands(origin, simulated) {
  const dev = simulated ? ' --allow-simulated --ca-file .appliance-dev/tls/self-signed.pem' : '';
  return {
    evidence: `evidence verify --url ${origin}${dev} --pccs-url https://<your PCCS> --rpc-url https://<settlement-chain RPC>`,
    cli: `appliance-cli --url ${origin} verify`,
    os: `evidence verify --url ${origin}${dev} --os-measurements os-policy.json --os-image <dstack OS image directory>`,
  };
}

/**
 * Runs every check over what the page fetched from its own origin:
 * `info` (GET /info), `attestation` (GET /attestation), `files` (name → bytes of each
 * /evidences/ file) and `origin` (for the commands shown). Returns the report.
 */
export async function verifyEvidence({ info, attestation, files = {}, origin = '', osPolicy = null }) {
  const ev = { info, attestation, files, certificate: null, evidenceQuote: null, replayed: null };
  const certName = certFileName(files);
  let certError = null;
  if (certName) {
    try {
      const der = firstPemCert(files[certName]);
      if (!der) throw new Error(`${certName} holds no PEM certificate`);
      ev.certificate = await describeCertificate(der);
      ev.certificate.file = certName;
    } catch (err) {
      certError = err.message;
    }
  }
  let quote = null;
  let quoteError = null;
  try {
    quote = attestationQuote(attestation);
  } catch (err) {
    quoteError = err.message;
  }
  const simulated = Boolean(quote && quote.simulated);
  const commands = verifyCommands(origin, simulated);

  const run = async (fn) => {
    try {
      return [Status.PASS, await fn(ev)];
    } catch (err) {
      return [Status.FAIL, err && err.message ? err.message : String(err)];
    }
  };
  const results = {};
  results['compose-hash'] = await run(checkComposeHash);
  results['images-pinned'] = await run(checkImagesPinned);
  results['report-data'] = await run(checkReportData);
  results['tls-certificate'] = ev.certificate
    ? [
        Status.COMPARE,
        `A web page cannot see the TLS certificate its own connection uses. Compare: the certificate in evidences/${ev.certificate.file} has SHA-256 fingerprint ${ev.certificate.sha256Colons}; open your browser's certificate viewer (the padlock, then the certificate) and check that it shows the same SHA-256 fingerprint.`,
      ]
    : [Status.FAIL, certError || 'no evidences/cert-*.pem'];
  results['acme-caa'] = selfSignedWithoutAcme(ev)
    ? [
        Status.NOT_APPLICABLE,
        'The served certificate is self-signed and the deployment publishes no ACME account (a development stack): there is no CA account for a CAA record to name.',
      ]
    : [
        Status.CANNOT_CHECK,
        `A web page cannot query DNS for CAA records. Run: ${commands.evidence}`,
      ];
  results.governance = [
    Status.CANNOT_CHECK,
    `Needs the settlement chain's JSON-RPC, another origin this page may not contact. Run: ${commands.evidence}`,
  ];
  results.quote = quote
    ? [
        Status.CANNOT_CHECK,
        `${simulated ? 'SIMULATED quote: development only, NOT confidential. ' : ''}The TCB status is not decidable in a browser: it needs Intel's collateral from a PCCS (another origin) and the DCAP signature chain. Run: ${commands.evidence} (or ${commands.cli}).`,
      ]
    : [Status.FAIL, quoteError];
  results['rtmr-replay'] = await run(checkRtmrReplay);
  const [osStatus, osDetail, os] = checkOsImage(ev, osPolicy, commands);
  results['os-image'] = [osStatus, osDetail];
  results['compose-hash-event'] = await run(checkComposeHashEvent);

  // The evidence quote must come from the same TD as the attestation quote.
  if (quote && ev.evidenceQuote) {
    const a = quote.report;
    const b = ev.evidenceQuote.report;
    const same = equalBytes(a.mrTd, b.mrTd) && equalBytes(a.mrConfigId, b.mrConfigId) && equalBytes(a.rtmr0, b.rtmr0);
    if (!same) {
      results['report-data'] = [Status.FAIL, 'the evidence quote comes from a different TD than /attestation (mr_td/mr_config_id/rtmr0 differ)'];
    } else if (results['report-data'][0] === Status.PASS) {
      results['report-data'][1] += '; the evidence quote comes from the same TD as /attestation';
    }
  }

  const checks = CHECKS.map(([id, title]) => ({ id, title, status: results[id][0], detail: results[id][1] }));
  let tcb = null;
  try {
    tcb = tcbInfo(info);
  } catch {
    tcb = null;
  }
  let images = [];
  try {
    images = composeImages(JSON.parse(appCompose(info)).docker_compose_file || '');
  } catch {
    images = [];
  }
  return {
    ok: checks.every((c) => c.status !== Status.FAIL),
    /** True only when a policy entry pinned MRTD and RTMR0-2 of a genuine-looking quote. */
    osPinned: osStatus === Status.PASS,
    os: os
      ? { status: os.status, osImageHash: os.osImageHash, version: os.version, isDev: os.isDev, entry: os.entry, pinned: os.pinned, unpinned: os.unpinned }
      : null,
    simulated,
    checks,
    composeHash: info && typeof info.compose_hash === 'string' ? strip0x(info.compose_hash).toLowerCase() : null,
    appId: info && info.app_id ? String(info.app_id) : null,
    instanceId: info && info.instance_id ? String(info.instance_id) : null,
    images,
    measurements: quote
      ? {
          mrtd: bytesToHex(quote.report.mrTd),
          rtmr0: bytesToHex(quote.report.rtmr0),
          rtmr1: bytesToHex(quote.report.rtmr1),
          rtmr2: bytesToHex(quote.report.rtmr2),
          rtmr3: bytesToHex(quote.report.rtmr3),
          mrConfigId: bytesToHex(quote.report.mrConfigId),
        }
      : tcb
        ? { mrtd: tcb.mrtd, rtmr0: tcb.rtmr0, rtmr1: tcb.rtmr1, rtmr2: tcb.rtmr2, rtmr3: tcb.rtmr3 }
        : null,
    certificate: ev.certificate,
    commands,
  };
}
