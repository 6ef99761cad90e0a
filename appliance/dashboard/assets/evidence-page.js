// The evidence page: what this appliance runs and what vouches for it, checked in the
// browser (evidence.js) from same-origin fetches of /info, /attestation and /evidences/,
// and the quote's OS measurements against a policy file the user pastes or uploads.

import { h, replace, copyable, errorBox, field, notice, section, table } from './dom.js';
import { verifyEvidence, listingNames, Status } from './evidence.js';
import { parseOsPolicy } from './appliance-sdk.js';

const MAX_POLICY_BYTES = 1024 * 1024;
/** The OS measurements policy the user gave (kept in this page's memory only). */
let osPolicyText = '';

const MAX_FILES = 64;
const MAX_FILE_BYTES = 16 * 1024 * 1024;

async function fetchBytes(path) {
  let r;
  try {
    r = await fetch(path, { credentials: 'omit', cache: 'no-store' });
  } catch (err) {
    throw Object.assign(new Error(`${path}: ${err.message}`), { status: 0 });
  }
  if (!r.ok) throw Object.assign(new Error(`${path} answered HTTP ${r.status}`), { status: r.status });
  const bytes = new Uint8Array(await r.arrayBuffer());
  if (bytes.length > MAX_FILE_BYTES) throw new Error(`${path} is larger than 16 MiB`);
  return bytes;
}

/** Everything the checks read, fetched from this page's own origin. */
async function gather(ctx) {
  const [info, attestation, listing] = await Promise.all([
    ctx.publicClient.info(),
    ctx.publicClient.attestation(),
    fetchBytes('/evidences/').then((b) => new TextDecoder().decode(b)),
  ]);
  const names = listingNames(listing).slice(0, MAX_FILES);
  const files = {};
  await Promise.all(
    names.map(async (name) => {
      files[name] = await fetchBytes(`/evidences/${encodeURIComponent(name)}`);
    }),
  );
  return { info, attestation, files, origin: ctx.origin, osPolicy: osPolicyText || null };
}

const LABELS = {
  [Status.PASS]: ['PASS', 'status-pass'],
  [Status.FAIL]: ['FAIL', 'status-fail'],
  [Status.NOT_APPLICABLE]: ['N/A', 'status-na'],
  [Status.CANNOT_CHECK]: ['NOT IN A BROWSER', 'status-cannot'],
  [Status.COMPARE]: ['COMPARE', 'status-compare'],
  [Status.UNPINNED]: ['NOT PINNED', 'status-compare'],
};

function statusPill(status) {
  const [text, cls] = LABELS[status] || [status, 'status-na'];
  return h('span', { class: `status ${cls}`, 'data-status': status }, text);
}

function kv(pairs) {
  return h(
    'dl',
    { class: 'kv' },
    pairs.flatMap(([k, v, testid]) => [h('dt', {}, k), h('dd', testid ? { 'data-testid': testid } : {}, v)]),
  );
}

function render(out, report) {
  const failed = report.checks.filter((c) => c.status === Status.FAIL);
  const banner = report.simulated
    ? h(
        'div',
        { class: 'notice warn banner', role: 'alert', 'data-testid': 'simulated-warning' },
        'SIMULATED QUOTE: a development stack, NOT confidential. No Intel TDX hardware vouches for this evidence; anyone can produce it. Never put real keys or funds here.',
      )
    : null;
  const unpinned = report.checks.some((c) => c.status === Status.UNPINNED);
  const verdict = failed.length
    ? h('div', { class: 'notice error', role: 'alert', 'data-testid': 'evidence-verdict' }, h('strong', {}, 'Evidence does NOT hold: '), `failed checks: ${failed.map((c) => c.id).join(', ')}. Do not send secrets to this appliance; tell its operator.`)
    : unpinned
      ? h('div', { class: 'notice warn', 'data-testid': 'evidence-verdict' }, h('strong', {}, 'The OS is NOT pinned: '), 'no policy file pins MRTD and RTMR0-2, so this page cannot say which firmware, kernel and command line produced the quote. Give the policy file of the OS release you trust below. The other checks a browser can compute passed.')
      : h('div', { class: 'notice ok', 'data-testid': 'evidence-verdict' }, 'Every check a browser can compute passed. The rest are listed with the command that decides them.');

  const m = report.measurements || {};
  const measurements = kv([
    ['Compose hash', report.composeHash ? copyable(report.composeHash) : '—', 'compose-hash'],
    ['App id', report.appId ? h('code', {}, report.appId) : '—'],
    ['Instance id', report.instanceId ? h('code', {}, report.instanceId) : '—'],
    ['MRTD', h('code', {}, m.mrtd || '—')],
    ['RTMR0', h('code', {}, m.rtmr0 || '—')],
    ['RTMR1', h('code', {}, m.rtmr1 || '—')],
    ['RTMR2', h('code', {}, m.rtmr2 || '—')],
    ['RTMR3', h('code', {}, m.rtmr3 || '—')],
    ['OS image hash', report.os && report.os.osImageHash ? h('code', {}, report.os.osImageHash) : '—', 'os-image-hash'],
    ['OS version', report.os && report.os.version ? `${report.os.version}${report.os.isDev ? ' (dev image)' : ''}${report.os.entry === null ? " (the host's image name, not measured)" : ' (the policy entry)'}` : '—'],
  ]);
  const images = report.images.length
    ? h('ul', { 'data-testid': 'images' }, report.images.map((i) => h('li', {}, h('code', {}, i))))
    : h('p', { class: 'empty' }, 'No image found in the compose file.');
  const c = report.certificate;
  const certificate = c
    ? kv([
        ['File', h('code', {}, `evidences/${c.file}`)],
        ['Subject', c.subject || '—'],
        ['Issuer', `${c.issuer || '—'}${c.selfIssued ? ' (self-signed)' : ''}`],
        ['Valid', `${c.notBefore} to ${c.notAfter}`],
        ['SHA-256 fingerprint', copyable(c.sha256Colons), 'cert-fingerprint'],
        ['Public key (SPKI) SHA-256', h('code', {}, c.spkiSha256Base64)],
      ])
    : notice('No certificate in /evidences/.', 'error');
  const checks = table(
    'Evidence checks',
    ['Check', 'Status', 'Detail'],
    report.checks.map((ch) => [h('span', {}, h('code', {}, ch.id), h('br'), h('small', { class: 'hint' }, ch.title)), statusPill(ch.status), h('span', { 'data-check': ch.id }, ch.detail)]),
  );
  replace(
    out,
    banner,
    verdict,
    section('Checks', checks),
    section('Measurements (from the quote)', measurements),
    section('Images (from the compose file)', images),
    section(
      'Served certificate',
      h('p', {}, 'A web page cannot read the certificate of its own connection. Compare this SHA-256 fingerprint with the one your browser shows for this site (padlock, then certificate details).'),
      certificate,
    ),
    section(
      'Verify outside the browser',
      h('p', {}, 'This page is served by the appliance it checks: a tampered appliance could serve a page that lies. For a verdict that does not depend on it, including the TCB status (Intel collateral from a PCCS), DNS CAA and the governance contract, run on your own machine:'),
      h('p', {}, copyable(report.commands.evidence, 'Copy command')),
      h('p', {}, copyable(report.commands.cli, 'Copy command')),
      h('p', {}, 'To recompute MRTD, RTMR1 and RTMR2 from the OS image itself (a browser cannot):'),
      h('p', {}, copyable(report.commands.os, 'Copy command')),
      h('p', { class: 'hint' }, 'The checks above are the Rust verifier\'s (evidence verify) reimplemented in JavaScript with WebCrypto, and tested against it.'),
    ),
  );
}

/** The form where the user pastes or uploads an OS measurements policy file. */
function policyForm(onChange) {
  const text = field(
    'Policy file (JSON)',
    { tag: 'textarea', class: 'code', spellcheck: 'false', 'data-testid': 'os-policy', value: osPolicyText, placeholder: '{"entries": [{"os_image_hash": "…", "mrtd": ["…"], "rtmr0": "…", "rtmr1": "…", "rtmr2": "…", "vm_shape": {…}}]}' },
    'The format of evidence verify --os-measurements FILE, as evidence os-measure writes it.',
  );
  const upload = field('Or upload it', { type: 'file', accept: '.json,application/json' });
  const status = h('div', { 'aria-live': 'polite', 'data-testid': 'os-policy-status' });
  const apply = h('button', { type: 'button', 'data-testid': 'os-policy-apply' }, 'Check against this policy');
  const clear = h('button', { type: 'button', class: 'ghost' }, 'Clear');
  function use(value) {
    const trimmed = value.trim();
    if (trimmed) {
      try {
        const p = parseOsPolicy(trimmed);
        replace(status, notice(`Policy with ${p.entries.length} entr${p.entries.length === 1 ? 'y' : 'ies'}: checking.`, 'info'));
      } catch (err) {
        replace(status, notice(`Not a usable policy file: ${err.message}`, 'error'));
        return;
      }
    } else {
      replace(status, notice('No policy: the OS is not pinned.', 'info'));
    }
    osPolicyText = trimmed;
    onChange();
  }
  apply.addEventListener('click', () => use(text.input.value));
  clear.addEventListener('click', () => {
    text.input.value = '';
    use('');
  });
  upload.input.addEventListener('change', async () => {
    const file = upload.input.files && upload.input.files[0];
    if (!file) return;
    if (file.size > MAX_POLICY_BYTES) {
      replace(status, notice('The file is larger than 1 MiB: not a policy file.', 'error'));
      return;
    }
    text.input.value = await file.text();
    use(text.input.value);
  });
  return section(
    'Check the OS measurements',
    h('p', {}, "The quote's MRTD and RTMR0-2 say which firmware, kernel, command line and initrd booted this machine. Compare them with the measurements of an OS release you trust: paste or upload a policy file (its operator publishes it; evidence os-measure writes one from the OS image). The page only compares the registers the quote states with the file; recomputing them from an OS image is a job for the command line (evidence verify --os-image DIR). Without a policy the OS is not pinned."),
    text.wrap,
    upload.wrap,
    h('div', { class: 'row' }, apply, clear),
    status,
  );
}

export async function evidencePage(body, ctx) {
  const out = h('div', { 'aria-live': 'polite', 'data-testid': 'evidence' }, h('p', { class: 'empty' }, 'Fetching /info, /attestation and /evidences/ …'));
  const again = h('button', { type: 'button', class: 'ghost' }, 'Check again');
  async function run() {
    again.disabled = true;
    try {
      const evidence = await gather(ctx);
      const report = await verifyEvidence(evidence);
      render(out, report);
      out.dataset.done = 'true';
      window.__evidenceReport = report;
    } catch (err) {
      replace(out, errorBox('Fetching the evidence', err));
      out.dataset.done = 'error';
    } finally {
      again.disabled = false;
    }
  }
  again.addEventListener('click', run);
  replace(
    body,
    h('p', {}, 'What this appliance runs (its compose file, images and measurements) and what vouches for it, checked in your browser.'),
    h('div', { class: 'row' }, again),
    out,
    policyForm(() => run()),
  );
  await run();
}
