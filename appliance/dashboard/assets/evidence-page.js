// The evidence page: what this appliance runs and what vouches for it, checked in the
// browser (evidence.js) from same-origin fetches of /info, /attestation and /evidences/.

import { h, replace, copyable, errorBox, notice, section, table } from './dom.js';
import { verifyEvidence, listingNames, Status } from './evidence.js';

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
  return { info, attestation, files, origin: ctx.origin };
}

const LABELS = {
  [Status.PASS]: ['PASS', 'status-pass'],
  [Status.FAIL]: ['FAIL', 'status-fail'],
  [Status.NOT_APPLICABLE]: ['N/A', 'status-na'],
  [Status.CANNOT_CHECK]: ['NOT IN A BROWSER', 'status-cannot'],
  [Status.COMPARE]: ['COMPARE', 'status-compare'],
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
  const verdict = failed.length
    ? h('div', { class: 'notice error', role: 'alert', 'data-testid': 'evidence-verdict' }, h('strong', {}, 'Evidence does NOT hold: '), `failed checks: ${failed.map((c) => c.id).join(', ')}. Do not send secrets to this appliance; tell its operator.`)
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
      h('p', { class: 'hint' }, 'The checks above are the Rust verifier\'s (evidence verify) reimplemented in JavaScript with WebCrypto, and tested against it.'),
    ),
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
  );
  await run();
}
