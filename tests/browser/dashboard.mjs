// Drives the dashboard in Debian's chromium (headless) through playwright-core, both from
// the tools cache scripts/setup fills, against a running dev appliance with billing on
// against a localstripe. Run by tests/e2e/dashboard.rs; by hand:
//
//   node tests/browser/dashboard.mjs --url https://127.0.0.1:PORT --spki BASE64 \
//     --artifacts DIR --localstripe http://127.0.0.1:PORT --stripe-secret sk_test_…
//
// The browser trusts exactly the appliance's certificate (its SPKI hash, --spki), and
// nothing else is relaxed. Steps: create an account and sign in, a usage key (listed), a
// group, a wallet, an action (its CID), a run (its logs and charge), a card top-up on
// localstripe (the balance grows), the evidence page (simulated warning, every computable
// rule, the OS policy form: a malformed file refused, os-image N/A), the 360 px layout, the dark theme and the keyboard. A screenshot of each page goes
// to DIR; DIR/evidence-report.json holds the page's evidence verdicts (compared with the
// Rust verifier's by the Rust test). Every request of every page is watched: none may go to
// an origin other than the appliance's (the Stripe origin only during the top-up), and no
// URL may contain the API key. Exit status 0 when every step passed.

import { createRequire } from 'node:module';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { parseArgs } from 'node:util';

const { values: args } = parseArgs({
  options: {
    url: { type: 'string' },
    spki: { type: 'string' },
    artifacts: { type: 'string' },
    localstripe: { type: 'string' },
    'stripe-secret': { type: 'string' },
    chromium: { type: 'string', default: '/usr/bin/chromium' },
    'node-modules': { type: 'string', default: process.env.NODE_PATH || '' },
  },
});
for (const required of ['url', 'spki', 'artifacts', 'localstripe', 'stripe-secret']) {
  if (!args[required]) {
    console.error(`missing --${required}`);
    process.exit(2);
  }
}

const require = createRequire(join(args['node-modules'] || process.cwd(), 'noop.js'));
const { chromium } = require('playwright-core');

const base = args.url.replace(/\/+$/, '');
const applianceOrigin = new URL(base).origin;
const stripeOrigin = new URL(args.localstripe).origin;
const artifacts = args.artifacts;
mkdirSync(artifacts, { recursive: true });

const failures = [];
const requests = [];
let stripeAllowed = false;
let apiKey = null;
const step = (name) => console.log(`== ${name}`);
function check(ok, what) {
  if (ok) {
    console.log(`ok   ${what}`);
  } else {
    console.log(`FAIL ${what}`);
    failures.push(what);
  }
}

async function localstripe(path, form) {
  const r = await fetch(`${args.localstripe}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${args['stripe-secret']}`, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(form).toString(),
  });
  const body = await r.json();
  if (!r.ok) throw new Error(`localstripe ${path}: ${r.status} ${JSON.stringify(body)}`);
  return body;
}

const profile = mkdtempSync(join(tmpdir(), 'dashboard-chromium-'));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: args.chromium,
  headless: true,
  viewport: { width: 1280, height: 860 },
  colorScheme: 'light',
  args: [
    '--no-sandbox',
    '--disable-gpu',
    '--disable-quic',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
    `--ignore-certificate-errors-spki-list=${args.spki}`,
  ],
});

const seen = new Set();
function watch(page) {
  if (seen.has(page)) return;
  seen.add(page);
  page.on('request', (req) => {
    const url = req.url();
    requests.push({ url, page: page.url(), stripeAllowed });
  });
  page.on('console', (msg) => {
    const text = msg.text();
    if (/Content Security Policy|Refused to/i.test(text)) {
      failures.push(`CSP violation: ${text}`);
      console.log(`FAIL CSP violation: ${text}`);
    } else if (msg.type() === 'error') {
      console.log(`(console error) ${text}`);
    }
  });
  page.on('pageerror', (err) => {
    failures.push(`page error: ${err.message}`);
    console.log(`FAIL page error: ${err.message}`);
  });
}
context.on('page', watch);

const page = context.pages()[0] || (await context.newPage());
watch(page);
page.setDefaultTimeout(30000);

const shot = async (name, opts = {}) => {
  await page.screenshot({ path: join(artifacts, `${name}.png`), fullPage: opts.fullPage ?? true });
  console.log(`     screenshot ${name}.png`);
};
const go = async (route) => {
  await page.evaluate((r) => {
    location.hash = `#/${r}`;
  }, route);
  await page.waitForSelector(`.page[data-page="${route}"]`);
};

try {
  step('sign-in page and CSP headers');
  const response = await page.goto(`${base}/dashboard`, { waitUntil: 'networkidle' });
  const csp = response.headers()['content-security-policy'] || '';
  check(csp.includes("default-src 'none'") && csp.includes("script-src 'self'"), `strict CSP on the page: ${csp}`);
  await page.waitForSelector('body[data-ready="true"]');
  await page.waitForSelector('[data-testid="new-account-name"]');
  await shot('01-signin');

  step('keyboard: the skip link, then the navigation');
  await page.keyboard.press('Tab');
  check((await page.evaluate(() => document.activeElement && document.activeElement.className)) === 'skip', 'first Tab reaches the skip link');
  await page.keyboard.press('Tab');
  check((await page.evaluate(() => document.activeElement && document.activeElement.closest('nav') !== null)), 'second Tab reaches the navigation');

  step('create an account and sign in');
  await page.fill('[data-testid="new-account-name"]', 'browser-test');
  await page.click('button:has-text("Create account")');
  await page.waitForSelector('[data-testid="secret-once"] .copy-value');
  apiKey = (await page.textContent('[data-testid="secret-once"] .copy-value')).trim();
  check(apiKey.length >= 40, 'the new account key is shown once');
  await shot('02-new-account');
  await page.click('[data-testid="continue-signed-in"]');
  await page.waitForSelector('.page[data-page="keys"]');
  check(await page.isVisible('#signout'), 'signed in (Sign out shown)');

  step('groups: create one');
  await go('groups');
  await page.fill('[data-testid="group-name"]', 'team-a');
  await page.click('button:has-text("Create group")');
  await page.waitForSelector('[data-testid="groups-list"] td:has-text("team-a")');
  check(true, 'the group is listed');
  await shot('03-groups');

  step('usage keys: create one with the permission matrix, see it listed');
  await go('keys');
  await page.waitForSelector('table.matrix');
  await page.fill('[data-testid="key-name"]', 'ci-runner');
  await page.check('input[aria-label="Execute actions in All groups (present and future)"]');
  await page.check('input[aria-label^="Add wallets in team-a"]');
  await page.click('button:has-text("Create usage key")');
  await page.waitForSelector('[data-testid="secret-once"] .copy-value');
  const usageKey = (await page.textContent('[data-testid="secret-once"] .copy-value')).trim();
  check(usageKey.length >= 40 && usageKey !== apiKey, 'the new usage key is shown once');
  await page.waitForSelector('[data-testid="keys-list"] td:has-text("ci-runner")');
  const perms = await page.textContent('[data-testid="keys-list"] tbody tr');
  check(/execute actions: all groups/.test(perms) && /add wallets: group \d+/.test(perms), `its permissions are listed: ${perms}`);
  await shot('04-keys');

  step('wallets: create one, see its address');
  await go('wallets');
  await page.fill('[data-testid="wallet-name"]', 'hot-wallet');
  await page.click('button:has-text("Create wallet")');
  await page.waitForSelector('[data-testid="wallets-list"] td:has-text("hot-wallet")');
  const address = await page.textContent('[data-testid="wallets-list"] tbody tr .copy-value');
  check(/^0x[0-9a-fA-F]{40}$/.test(address.trim()), `the wallet's address is listed: ${address}`);
  await shot('05-wallets');

  step('actions: register by code, see the CID');
  await go('actions');
  await page.fill('[data-testid="action-name"]', 'doubler');
  await page.click('button:has-text("Register action")');
  await page.waitForSelector('[data-testid="action-cid"] .copy-value');
  const cid = (await page.textContent('[data-testid="action-cid"] .copy-value')).trim();
  check(/^Qm[1-9A-HJ-NP-Za-km-z]{44}$/.test(cid), `the CID is shown: ${cid}`);
  await page.waitForSelector(`[data-testid="actions-list"] .copy-value:has-text("${cid}")`);
  await shot('06-actions');

  step('runner: run code, see the response, logs and charge');
  await go('run');
  await page.click('[data-testid="runner-code"]');
  // The editor: Tab indents instead of leaving.
  await page.keyboard.press('Control+End');
  await page.keyboard.press('Tab');
  check(
    (await page.evaluate(() => document.activeElement.dataset.testid)) === 'runner-code',
    'Tab in the code editor indents (focus stays)',
  );
  await page.keyboard.press('Escape');
  await page.keyboard.press('Tab');
  check(
    (await page.evaluate(() => document.activeElement.dataset.testid)) !== 'runner-code',
    'Escape then Tab leaves the editor',
  );
  await page.click('[data-testid="run"]');
  await page.waitForSelector('[data-testid="run-logs"]');
  const logs = await page.textContent('[data-testid="run-logs"]');
  check(logs.includes('hello from the appliance 21'), `the logs are shown: ${JSON.stringify(logs)}`);
  const result = await page.textContent('[data-testid="run-response"]');
  check(/"doubled": 42/.test(result), `the response is shown: ${result}`);
  const charge = await page.textContent('[data-testid="run-charge"]');
  check(/charged \(balance \$[\d.]+ → \$[\d.]+\)/.test(charge), `the charge is shown: ${charge}`);
  check(/\d+ ms/.test(await page.textContent('[data-testid="run-time"]')), 'the run time is shown');
  // The README's picture (docs/dashboard.png is a copy of it).
  await page.setViewportSize({ width: 1024, height: 760 });
  await page.screenshot({ path: join(artifacts, 'readme.png'), fullPage: true });
  await page.setViewportSize({ width: 1280, height: 860 });
  await shot('07-run');

  step('runner: an exception shows its kind');
  await page.fill('[data-testid="runner-code"]', 'async function main() { throw new Error("boom"); }');
  await page.click('[data-testid="run"]');
  await page.waitForSelector('[data-testid="run-error"]');
  const errorText = await page.textContent('[data-testid="run-error"]');
  check(/exception/.test(errorText) && /boom/.test(errorText), `the error kind is shown: ${errorText}`);

  step('billing: top up by card on localstripe');
  await go('billing');
  await page.waitForSelector('[data-testid="balance-value"]');
  const before = Number(await page.getAttribute('[data-testid="balance-value"]', 'data-cents'));
  check(Number.isFinite(before), `the balance is shown: ${before} cents`);
  await shot('08-billing');
  let intentId = null;
  page.on('response', async (r) => {
    if (r.url().endsWith('/core/v1/billing/create_payment_intent') && r.ok()) {
      intentId = (await r.json()).payment_intent_id;
    }
  });
  await page.fill('[data-testid="topup-amount"]', '12.34');
  stripeAllowed = true;
  await page.click('[data-testid="topup-start"]');
  await page.waitForSelector('[data-testid="card-element"] input');
  const cardInputs = await page.$$('[data-testid="card-element"] input');
  const card = ['4000002760003184', '12', '30', '123', '10001'];
  for (let i = 0; i < cardInputs.length && i < card.length; i += 1) await cardInputs[i].fill(card[i]);
  await shot('09-card');
  await page.click('[data-testid="topup-pay"]');
  // localstripe's stand-in Stripe.js performs only the 3-D Secure step of
  // confirmCardPayment (it sends no card). The test plays the card network's part:
  // it attaches a 3-D-Secure test card to the intent through localstripe's API, then
  // completes the authentication in the stand-in's dialog.
  await page.waitForSelector('button:has-text("Complete authentication")');
  for (let i = 0; i < 100 && !intentId; i += 1) await new Promise((r) => setTimeout(r, 50));
  check(Boolean(intentId), `the appliance created payment intent ${intentId}`);
  const pm = await localstripe('/v1/payment_methods', {
    type: 'card',
    'card[number]': card[0],
    'card[exp_month]': '12',
    'card[exp_year]': '2030',
    'card[cvc]': '123',
  });
  await localstripe(`/v1/payment_intents/${intentId}`, { payment_method: pm.id });
  const confirmed = await localstripe(`/v1/payment_intents/${intentId}/confirm`, {});
  check(confirmed.status === 'requires_action', `the intent waits for 3-D Secure: ${confirmed.status}`);
  await page.click('button:has-text("Complete authentication")');
  await page.waitForSelector('[data-testid="topup-result"] .notice.ok');
  const paid = await page.textContent('[data-testid="topup-result"]');
  check(/\$12\.34 credited/.test(paid), `the payment is credited: ${paid}`);
  await page.waitForFunction(
    (b) => Number(document.querySelector('[data-testid="balance-value"]')?.dataset.cents) === b + 1234,
    before,
  );
  const after = Number(await page.getAttribute('[data-testid="balance-value"]', 'data-cents'));
  check(after === before + 1234, `the balance grew by $12.34: ${before} → ${after}`);
  await shot('10-billing-after');
  stripeAllowed = false;

  step('evidence page against the dev stack');
  await go('evidence');
  await page.waitForSelector('[data-testid="evidence"][data-done]');
  check((await page.getAttribute('[data-testid="evidence"]', 'data-done')) === 'true', 'the evidence was fetched and checked');
  check(await page.isVisible('[data-testid="simulated-warning"]'), 'the SIMULATED warning is shown');
  const report = await page.evaluate(() => window.__evidenceReport);
  writeFileSync(join(artifacts, 'evidence-report.json'), JSON.stringify(report, null, 2));
  const statuses = Object.fromEntries(report.checks.map((c) => [c.id, c.status]));
  console.log(`     evidence: ${JSON.stringify(statuses)}`);
  for (const id of ['compose-hash', 'report-data', 'rtmr-replay', 'compose-hash-event']) {
    check(statuses[id] === 'pass', `evidence ${id}: ${statuses[id]} (${report.checks.find((c) => c.id === id).detail})`);
  }
  check(['pass', 'fail'].includes(statuses['images-pinned']), `images-pinned is computed: ${statuses['images-pinned']}`);
  check(statuses['tls-certificate'] === 'compare', 'tls-certificate: compare the fingerprint');
  check(statuses['acme-caa'] === 'n/a', 'acme-caa: N/A on the self-signed dev stack');
  check(statuses.governance === 'cannot-check-here', 'governance: said to need another origin');
  check(statuses.quote === 'cannot-check-here' && /SIMULATED/.test(report.checks.find((c) => c.id === 'quote').detail), 'TCB status: not decidable here, simulated said');
  check(/^[0-9A-F]{2}(:[0-9A-F]{2}){31}$/.test(report.certificate?.sha256Colons || ''), 'the certificate fingerprint is shown');
  check(report.certificate?.spkiSha256Base64 === args.spki, 'the served certificate is the one the browser trusts (same SPKI)');
  await shot('11-evidence');
  const osDetail = report.checks.find((c) => c.id === 'os-image')?.detail || '';
  check(statuses['os-image'] === 'n/a' && /no OS measurement to pin/.test(osDetail), `os-image: N/A on a simulated quote (${osDetail})`);
  await page.fill('[data-testid="os-policy"]', '{"entries": [{"os_image_hash": "00", "mrtd": []}]}');
  await page.click('[data-testid="os-policy-apply"]');
  await page.waitForSelector('[data-testid="os-policy-status"] .notice.error');
  const refused = await page.textContent('[data-testid="os-policy-status"]');
  check(/Not a usable policy file: policy file entry 0/.test(refused), `a malformed OS policy is refused with the reason: ${refused}`);
  const register = 'ab'.repeat(48);
  const policy = { entries: [{ os_image_hash: 'cd'.repeat(32), mrtd: [register], rtmr0: register, rtmr1: register, rtmr2: register }] };
  await page.evaluate(() => {
    window.__evidenceReport = null;
  });
  await page.fill('[data-testid="os-policy"]', JSON.stringify(policy));
  await page.click('[data-testid="os-policy-apply"]');
  await page.waitForFunction(() => window.__evidenceReport);
  const rechecked = await page.evaluate(() => window.__evidenceReport.checks.find((c) => c.id === 'os-image'));
  check(rechecked.status === 'n/a', `with a policy, a simulated quote stays N/A: ${rechecked.status}`);
  check(/Policy with 1 entry/.test(await page.textContent('[data-testid="os-policy-status"]')), 'the pasted policy is taken');

  step('360 px wide');
  await page.setViewportSize({ width: 360, height: 780 });
  for (const route of ['keys', 'run', 'evidence']) {
    await go(route);
    await page.waitForTimeout(300);
    const width = await page.evaluate(() => document.documentElement.scrollWidth);
    check(width <= 361, `no horizontal scrolling on ${route} at 360 px (${width})`);
  }
  await shot('12-narrow-360-evidence');
  await go('keys');
  await page.waitForSelector('[data-testid="keys-list"] table');
  await shot('13-narrow-360-keys');
  await page.setViewportSize({ width: 1280, height: 860 });

  step('dark theme');
  await go('wallets');
  await page.waitForSelector('[data-testid="wallets-list"] table');
  while (!(await page.textContent('#theme')).includes('dark')) await page.click('#theme');
  const bg = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  check(bg === 'rgb(15, 19, 24)', `the dark theme applies: ${bg}`);
  await shot('14-dark-wallets');
  await go('evidence');
  await page.waitForSelector('[data-testid="evidence"][data-done]');
  await shot('15-dark-evidence');
  while (!(await page.textContent('#theme')).includes('auto')) await page.click('#theme');

  step('the key is kept in this tab only');
  const stored = await page.evaluate(() => ({ local: JSON.stringify(localStorage), session: JSON.stringify(sessionStorage) }));
  check(!stored.local.includes(apiKey), 'the key is not in localStorage');
  check(!stored.session.includes(apiKey), 'the key is not in sessionStorage (not asked to stay signed in)');
  await page.click('#signout');
  await page.waitForSelector('[data-testid="signin-key"]');
  await page.fill('[data-testid="signin-key"]', apiKey);
  await page.check('text=Stay signed in while this tab is open');
  await page.click('button:has-text("Sign in")');
  await page.waitForSelector('.page[data-page="keys"]');
  await page.reload({ waitUntil: 'networkidle' });
  await page.waitForSelector('.page[data-page="keys"]');
  check(true, 'signed in again with the key, kept across a reload of the tab');
  const after2 = await page.evaluate(() => JSON.stringify(localStorage));
  check(!after2.includes(apiKey), 'still not in localStorage');
  await page.click('#signout');
  await page.waitForSelector('[data-testid="signin-key"]');
  check(!(await page.evaluate(() => JSON.stringify(sessionStorage))).includes(apiKey), 'signing out forgets the key');
  await page.fill('[data-testid="signin-key"]', 'not-a-key');
  await page.click('button:has-text("Sign in")');
  await page.waitForSelector('.notice.error');
  const signinError = await page.textContent('.notice.error');
  check(/Signing in failed/.test(signinError) && /sign/.test(signinError), `a wrong key says what failed and what to do: ${signinError}`);
  await shot('16-signin-error');
} catch (err) {
  failures.push(`step failed: ${err.stack || err}`);
  console.log(`FAIL ${err.stack || err}`);
  try {
    await page.screenshot({ path: join(artifacts, 'failure.png'), fullPage: true });
  } catch {
    // The page may be gone.
  }
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}

step('requests');
const encodedKey = apiKey ? [apiKey, encodeURIComponent(apiKey)] : [];
let stripeRequests = 0;
for (const r of requests) {
  if (r.url.startsWith('data:')) continue;
  const origin = new URL(r.url).origin;
  if (origin === stripeOrigin && r.stripeAllowed) {
    stripeRequests += 1;
  } else if (origin !== applianceOrigin) {
    failures.push(`request to another origin: ${r.url} (from ${r.page})`);
    console.log(`FAIL request to another origin: ${r.url}`);
  }
  if (encodedKey.some((k) => r.url.includes(k))) {
    failures.push(`the API key appears in a URL: ${r.url.replace(apiKey, '<key>')}`);
    console.log('FAIL the API key appears in a requested URL');
  }
}
check(requests.length > 20, `${requests.length} requests watched`);
check(stripeRequests > 0, `${stripeRequests} requests to the Stripe origin, all during the top-up`);
writeFileSync(join(artifacts, 'requests.json'), JSON.stringify(requests, null, 2).replaceAll(apiKey || '\u0000', '<key>'));

if (failures.length) {
  console.log(`\n${failures.length} failed:\n${failures.map((f) => `  - ${f}`).join('\n')}`);
  process.exit(1);
}
console.log('\nevery dashboard step passed');
