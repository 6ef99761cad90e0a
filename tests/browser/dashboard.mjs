// Drives the dashboard in Debian's chromium (headless) through playwright-core, both from
// the tools cache scripts/setup fills, against a running dev appliance with billing on
// against a localstripe. Run by tests/e2e/dashboard.rs; by hand:
//
//   NODE_EXTRA_CA_CERTS=DATA/tls/self-signed.pem \
//   node tests/browser/dashboard.mjs --url https://127.0.0.1:PORT --spki BASE64 \
//     --artifacts DIR --localstripe http://127.0.0.1:PORT --stripe-secret sk_test_… \
//     --rpc http://127.0.0.1:PORT (the dev appliance's anvil)
//
// The browser trusts exactly the appliance's certificate (its SPKI hash, --spki), and
// nothing else is relaxed. Steps: create an account and sign in, a usage key (listed), a
// group, a wallet, an action (its CID), a run (its logs and charge), a card top-up on
// localstripe (the balance grows), the evidence page (simulated warning, every computable
// rule, the OS policy form: a malformed file refused, os-image N/A), the 360 px layout, the dark theme and the keyboard;
// then a browser wallet: an EIP-1193 provider injected into the page whose every request
// is answered here by a viem local account (signatures) and the anvil node (--rpc: calls,
// logs, transactions). With it: the usage history, converting the account to
// ChainSecured, minting a wallet and a usage key, sending their AccountConfig calls from
// the wallet (the usage key then works), a card top-up paid with X-Wallet-Auth, and signing
// in with the wallet (a declined prompt, a wallet without an account). A screenshot of each page goes
// to DIR; DIR/evidence-report.json holds the page's evidence verdicts (compared with the
// Rust verifier's by the Rust test). Every request of every page is watched: none may go to
// an origin other than the appliance's (the Stripe origin only during the top-up), and no
// URL may contain the API key. Exit status 0 when every step passed.

import { createRequire } from 'node:module';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
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
    rpc: { type: 'string' },
    chromium: { type: 'string', default: '/usr/bin/chromium' },
    'node-modules': { type: 'string', default: process.env.NODE_PATH || '' },
  },
});
for (const required of ['url', 'spki', 'artifacts', 'localstripe', 'stripe-secret', 'rpc']) {
  if (!args[required]) {
    console.error(`missing --${required}`);
    process.exit(2);
  }
}

const require = createRequire(join(args['node-modules'] || process.cwd(), 'noop.js'));
const { chromium } = require('playwright-core');
const viem = require('viem');
const { privateKeyToAccount, generatePrivateKey } = require('viem/accounts');

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

// ---- The browser wallet: EIP-1193 in the page, a viem local account here ----------------

const chainConfig = await (await fetch(`${base}/core/v1/get_node_chain_config`)).json();
const walletChain = viem.defineChain({
  id: chainConfig.chain_id,
  name: chainConfig.chain_name || 'dev chain',
  nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
  rpcUrls: { default: { http: [args.rpc] } },
});
const admin = privateKeyToAccount(generatePrivateKey());
const stranger = privateKeyToAccount(generatePrivateKey());
const wallet = {
  account: admin,
  // What the page asked for, in order: {method, primaryType?, typed?}.
  log: [],
  // Set to decline the next request that needs the user (a signature or a transaction).
  declineNext: false,
};

let rpcId = 0;
async function rpc(method, params) {
  rpcId += 1;
  const r = await fetch(args.rpc, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: rpcId, method, params }),
  });
  const body = await r.json();
  if (body.error) throw Object.assign(new Error(body.error.message), { code: body.error.code });
  return body.result;
}

// Gas for the admin wallet, which sends the AccountConfig calls itself.
await rpc('anvil_setBalance', [admin.address, viem.toHex(10n ** 20n)]);

const rejected = () => Object.assign(new Error('User rejected the request.'), { code: 4001 });

/** One EIP-1193 request, answered as a wallet would (MetaMask's rules where they matter). */
async function walletRequest(method, params) {
  const entry = { method };
  wallet.log.push(entry);
  const account = wallet.account;
  switch (method) {
    case 'eth_requestAccounts':
    case 'eth_accounts':
      return [account.address];
    case 'eth_chainId':
      return viem.toHex(walletChain.id);
    case 'wallet_switchEthereumChain':
      if (Number(params[0].chainId) === walletChain.id) return null;
      throw Object.assign(new Error(`Unrecognized chain ID ${params[0].chainId}`), { code: 4902 });
    case 'eth_signTypedData_v4': {
      const [address, json] = params;
      if (String(address).toLowerCase() !== account.address.toLowerCase()) {
        throw Object.assign(new Error(`not this wallet's account: ${address}`), { code: 4100 });
      }
      const typed = JSON.parse(json);
      entry.primaryType = typed.primaryType;
      entry.typed = typed;
      // Wallets sign typed data only for the chain they are on.
      if (Number(typed.domain.chainId) !== walletChain.id) {
        throw Object.assign(new Error(`chainId ${typed.domain.chainId} is not the active chain ${walletChain.id}`), { code: -32602 });
      }
      if (wallet.declineNext) {
        wallet.declineNext = false;
        throw rejected();
      }
      const { EIP712Domain: _domain, ...types } = typed.types;
      return account.signTypedData({ domain: typed.domain, types, primaryType: typed.primaryType, message: typed.message });
    }
    case 'eth_sendTransaction': {
      const [tx] = params;
      entry.tx = tx;
      if (String(tx.from).toLowerCase() !== account.address.toLowerCase()) {
        throw Object.assign(new Error(`not this wallet's account: ${tx.from}`), { code: 4100 });
      }
      if (wallet.declineNext) {
        wallet.declineNext = false;
        throw rejected();
      }
      const client = viem.createWalletClient({ account, chain: walletChain, transport: viem.http(args.rpc) });
      return client.sendTransaction({ to: tx.to, data: tx.data, value: tx.value ? BigInt(tx.value) : undefined });
    }
    case 'eth_call':
    case 'eth_getLogs':
    case 'eth_getTransactionReceipt':
    case 'eth_blockNumber':
      return rpc(method, params);
    default:
      throw Object.assign(new Error(`the test wallet does not support ${method}`), { code: 4200 });
  }
}

await context.exposeBinding('__testWallet', async (_source, method, params) => {
  try {
    return { result: await walletRequest(method, params) };
  } catch (err) {
    return { error: { code: typeof err.code === 'number' ? err.code : -32603, message: err.shortMessage || err.message || String(err) } };
  }
});
// The provider the page sees (top frame only, as extensions inject it): requests go to
// the binding above; `__emitWallet(event, value)` plays the wallet's events.
await context.addInitScript(() => {
  if (window.top !== window) return;
  const listeners = {};
  const provider = {
    request({ method, params } = {}) {
      return window.__testWallet(method, params === undefined ? null : params).then((r) => {
        if (r.error) throw Object.assign(new Error(r.error.message), { code: r.error.code });
        return r.result;
      });
    },
    on(event, fn) {
      (listeners[event] = listeners[event] || []).push(fn);
      return provider;
    },
    removeListener(event, fn) {
      listeners[event] = (listeners[event] || []).filter((f) => f !== fn);
      return provider;
    },
  };
  window.__emitWallet = (event, value) => (listeners[event] || []).forEach((fn) => fn(value));
  Object.defineProperty(window, 'ethereum', { value: provider, configurable: false, writable: false });
});

/**
 * A BillingAuth X-Wallet-Auth value signed here (each is good for one request), issued
 * 200 s in the past: well inside the appliance's ±300 s window, and never the `issuedAt`
 * of one the page signs (now or later), which would be the same signature and refused
 * as a replay.
 */
let ownIssuedAt = 0;
async function walletAuthHere(account) {
  ownIssuedAt = Math.max(Math.floor(Date.now() / 1000) - 200, ownIssuedAt + 1);
  const types = { BillingAuth: [{ name: 'address', type: 'address' }, { name: 'issuedAt', type: 'uint256' }] };
  const domain = { name: 'Service ChainSecured', version: '1', chainId: walletChain.id };
  const message = { address: account.address, issuedAt: ownIssuedAt };
  const signature = await account.signTypedData({ domain, types, primaryType: 'BillingAuth', message });
  const typed_data = {
    types: { EIP712Domain: [{ name: 'name', type: 'string' }, { name: 'version', type: 'string' }, { name: 'chainId', type: 'uint256' }], ...types },
    primaryType: 'BillingAuth',
    domain,
    message,
  };
  return Buffer.from(JSON.stringify({ typed_data, signature })).toString('base64');
}

/** An API call from here (the appliance's certificate is trusted through NODE_EXTRA_CA_CERTS). */
async function api(method, path, { key, walletAuth, body } = {}) {
  const headers = {};
  if (key) headers.authorization = `Bearer ${key}`;
  if (walletAuth) headers['x-wallet-auth'] = walletAuth;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const r = await fetch(`${base}/core/v1${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  let json = null;
  try {
    json = JSON.parse(text);
  } catch {
    json = text;
  }
  return { status: r.status, json };
}

const keyHash = (key) => viem.keccak256(Buffer.from(key, 'base64'));

const seen = new Set();
function watch(page) {
  if (seen.has(page)) return;
  seen.add(page);
  page.on('request', (req) => {
    const url = req.url();
    const headers = req.headers();
    requests.push({ url, method: req.method(), page: page.url(), stripeAllowed, walletAuth: headers['x-wallet-auth'] || null, bearer: Boolean(headers.authorization) });
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

let intentId = null;
page.on('response', async (r) => {
  if (r.url().endsWith('/core/v1/billing/create_payment_intent') && r.ok()) {
    intentId = (await r.json()).payment_intent_id;
  }
});

/**
 * A card top-up of `amount` dollars (`cents`) on the Billing page, from a balance of
 * `before` cents: Stripe's stand-in on localstripe, a 3-D Secure test card. Returns the
 * balance the page shows after.
 */
async function cardTopUp(amount, cents, before, shotName) {
  intentId = null;
  await page.fill('[data-testid="topup-amount"]', amount);
  stripeAllowed = true;
  await page.click('[data-testid="topup-start"]');
  await page.waitForSelector('[data-testid="card-element"] input');
  const cardInputs = await page.$$('[data-testid="card-element"] input');
  const card = ['4000002760003184', '12', '30', '123', '10001'];
  for (let i = 0; i < cardInputs.length && i < card.length; i += 1) await cardInputs[i].fill(card[i]);
  if (shotName) await shot(shotName);
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
  check(paid.includes(`$${amount} credited`), `the payment is credited: ${paid}`);
  await page.waitForFunction(
    ([b, c]) => Number(document.querySelector('[data-testid="balance-value"]')?.dataset.cents) === b + c,
    [before, cents],
  );
  stripeAllowed = false;
  return Number(await page.getAttribute('[data-testid="balance-value"]', 'data-cents'));
}

try {
  step('sign-in page and CSP headers');
  const response = await page.goto(`${base}/dashboard`, { waitUntil: 'networkidle' });
  const csp = response.headers()['content-security-policy'] || '';
  check(csp.includes("default-src 'none'") && csp.includes("script-src 'self'"), `strict CSP on the page: ${csp}`);
  await page.waitForSelector('body[data-ready="true"]');
  await page.waitForSelector('[data-testid="new-account-name"]');
  check(!(await page.isVisible('#signout')), 'signed out: no Sign out button');
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
  const after = await cardTopUp('12.34', 1234, before, '09-card');
  check(after === before + 1234, `the balance grew by $12.34: ${before} → ${after}`);
  await shot('10-billing-after');

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
  for (const route of ['keys', 'run', 'usage', 'chainsecured', 'evidence']) {
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

  step('usage history with the account key');
  await page.fill('[data-testid="signin-key"]', apiKey);
  await page.click('button:has-text("Sign in")');
  await page.waitForSelector('.page[data-page="keys"]');
  await go('usage');
  await page.waitForSelector('[data-testid="usage-list"] tbody tr');
  const usageRows = await page.$$eval('[data-testid="usage-list"] tbody tr', (rows) =>
    rows.map((r) => ({
      kind: r.querySelector('[data-kind]')?.dataset.kind,
      cents: Number(r.querySelectorAll('[data-cents]')[0]?.dataset.cents),
      text: r.textContent,
    })),
  );
  check(usageRows.some((r) => r.kind === 'top_up' && r.cents === 1234 && /\+\$12\.34/.test(r.text)), `the $12.34 top-up is listed: ${JSON.stringify(usageRows.slice(0, 5))}`);
  check(usageRows.some((r) => r.kind === 'charge' && r.cents < 0 && /−\$/.test(r.text)), 'charges are listed as negative amounts');
  check(/Page 1/.test(await page.textContent('[data-testid="usage-page"]')), 'the page number is shown');
  const served = (await api('GET', '/billing/usage?page_number=0&page_size=50', { key: apiKey })).json;
  check(served.length === usageRows.length, `the page lists what the API answers: ${usageRows.length} rows, ${served.length} entries`);
  await shot('17-usage');

  step('ChainSecured: convert the account with the browser wallet');
  await go('chainsecured');
  await page.click('[data-testid="convert-connect"]');
  await page.waitForSelector('[data-testid="convert-wallet"]');
  check((await page.textContent('[data-testid="convert-wallet"]')).includes(admin.address), `the wallet to become admin is shown: ${admin.address}`);
  await page.click('[data-testid="convert-start"]');
  await page.waitForSelector('[data-testid="convert-result"] .notice.error');
  check(/Tick the box first/.test(await page.textContent('[data-testid="convert-result"]')), 'converting needs the box ticked');
  await page.check('[data-testid="convert-confirm"]');
  await shot('18-convert');
  await page.click('[data-testid="convert-start"]');
  await page.waitForSelector('[data-testid="converted"]');
  const convertedText = await page.textContent('[data-testid="converted"]');
  check(convertedText.includes(admin.address) && /account key no longer works/.test(convertedText), `the conversion is confirmed: ${convertedText}`);
  const accountHash = keyHash(apiKey);
  check((await page.inputValue('[data-testid="cs-api-key-hash"]')) === accountHash, `the apiKeyHash shown is keccak256 of the former key: ${accountHash}`);
  const convertSig = wallet.log.filter((e) => e.primaryType === 'ConvertAccount');
  check(
    convertSig.length === 1 && convertSig[0].typed.domain.chainId === walletChain.id && convertSig[0].typed.message.address === admin.address,
    'the wallet signed one ConvertAccount for the node\'s chain, about itself',
  );
  const navText = await page.textContent('#nav');
  check(/ChainSecured/.test(navText) && /Billing/.test(navText) && /Usage/.test(navText) && !/Usage keys/.test(navText) && !/Run/.test(navText), `signed in with the wallet: the nav offers what a wallet can do: ${navText}`);
  const former = await api('GET', '/list_wallets', { key: apiKey });
  check(former.status === 403 && JSON.stringify(former.json).toLowerCase().includes(admin.address.toLowerCase()), `the API refuses the former account key (403, naming the wallet): ${former.status}`);
  const viaWallet = await api('GET', '/billing/balance', { walletAuth: await walletAuthHere(admin) });
  check(viaWallet.status === 200, `the API takes the admin wallet's X-Wallet-Auth: ${JSON.stringify(viaWallet.json)}`);
  const storedAfter = await page.evaluate(() => JSON.stringify(sessionStorage));
  check(!storedAfter.includes(apiKey), 'the former key is forgotten by the tab');
  await shot('19-converted');

  step('ChainSecured: the conversion reaches the chain');
  let onChain = '';
  for (let i = 0; i < 60 && !/administered by your wallet/.test(onChain); i += 1) {
    await page.click('[data-testid="cs-check"]');
    await page.waitForSelector('[data-testid="cs-onchain"] .notice');
    onChain = await page.textContent('[data-testid="cs-onchain"]');
    if (!/administered by your wallet/.test(onChain)) await page.waitForTimeout(500);
  }
  check(/ChainSecured on chain, administered by your wallet/.test(onChain), `the page reads the account on chain: ${onChain}`);

  step('ChainSecured: mint a wallet and a usage key with wallet signatures');
  await page.fill('[data-testid="mint-wallet-name"]', 'minted-hot');
  await page.click('[data-testid="mint-wallet"]');
  await page.waitForSelector('[data-testid="minted-wallet"] .copy-value');
  const mintedWallet = (await page.textContent('[data-testid="minted-wallet"] .copy-value')).trim();
  check(/^0x[0-9a-fA-F]{40}$/.test(mintedWallet), `the minted wallet is shown: ${mintedWallet}`);
  await page.fill('[data-testid="mint-key-name"]', 'chain-key');
  await page.fill('[data-testid="mint-key-execute"]', 'x');
  await page.click('[data-testid="mint-key"]');
  await page.waitForSelector('[data-testid="minted-key"] .notice.error');
  check(/must be a non-negative integer/.test(await page.textContent('[data-testid="minted-key"]')), 'a bad group id is refused before any signature');
  await page.fill('[data-testid="mint-key-execute"]', '0');
  await page.click('[data-testid="mint-key"]');
  await page.waitForSelector('[data-testid="minted-key"] [data-testid="secret-once"] .copy-value');
  const mintedKey = (await page.textContent('[data-testid="minted-key"] [data-testid="secret-once"] .copy-value')).trim();
  check((await page.textContent('[data-testid="minted-key-hash"]')).trim() === keyHash(mintedKey), 'the usage key and its hash (keccak256 of its bytes) are shown');
  check(
    wallet.log.filter((e) => e.primaryType === 'CreateWallet').length === 1 && wallet.log.filter((e) => e.primaryType === 'AddUsageApiKey').length === 1,
    'one CreateWallet and one AddUsageApiKey signature',
  );
  const before401 = await api('GET', '/list_wallets', { key: mintedKey });
  check(before401.status === 401, `the minted key has no identity before the chain calls: ${before401.status}`);

  step('ChainSecured: the on-chain calls still to make');
  const calls = await page.$$eval('[data-testid="pending-calls"] li.call', (items) =>
    items.map((li) => ({ fn: li.dataset.call, data: li.querySelector('.copy-value')?.textContent.trim(), text: li.textContent })),
  );
  check(
    calls.map((c) => c.fn).join(',') === 'registerWalletDerivation,registerWalletDerivation,setUsageApiKey',
    `three calls are listed: ${calls.map((c) => c.fn)}`,
  );
  const abi = JSON.parse(readFileSync(new URL('../../contracts/artifacts/AccountConfig.json', import.meta.url), 'utf8')).abi;
  const decoded = calls.map((c) => viem.decodeFunctionData({ abi, data: c.data }));
  check(decoded.every((d) => d.args[0] === BigInt(accountHash)), 'every call names the account (its apiKeyHash)');
  check(decoded[0].args[1] === mintedWallet && decoded[0].args[3] === 'minted-hot', 'the first registers the minted wallet, with its name');
  check(BigInt(decoded[0].args[2]) >> 96n === BigInt(admin.address), 'its derivation path begins with the admin address');
  check(decoded[2].args[1] === BigInt(keyHash(mintedKey)) && decoded[2].args[6].executeInGroups.join() === '0', 'the last sets the usage key, executing in every group');
  check(calls.every((c) => c.text.includes('Calldata')) && /AccountConfig 0x[0-9a-fA-F]{40}/.test(await page.textContent('[data-testid="pending-calls"]')), 'the contract and each call\'s calldata are shown');
  await shot('20-pending-calls');
  await page.setViewportSize({ width: 360, height: 780 });
  await page.waitForTimeout(300);
  const callsWidth = await page.evaluate(() => document.documentElement.scrollWidth);
  check(callsWidth <= 361, `no horizontal scrolling on the calls at 360 px (${callsWidth})`);
  await shot('20-narrow-360-calls');
  await page.setViewportSize({ width: 1280, height: 860 });

  step('ChainSecured: send the calls from the wallet; the usage key then works');
  wallet.declineNext = true;
  await page.click('[data-testid="send-calls"]');
  await page.waitForSelector('[data-testid="send-result"] .notice.error');
  check(/declined the request in your wallet/.test(await page.textContent('[data-testid="send-result"]')), 'a declined transaction says so, and what to do');
  await page.click('[data-testid="send-calls"]');
  await page.waitForSelector('[data-testid="send-result"] .notice.ok', { timeout: 60000 });
  const sent = await page.textContent('[data-testid="send-result"]');
  check(/mined in block \d+/.test(sent), `the transaction is mined: ${sent}`);
  const txs = wallet.log.filter((e) => e.method === 'eth_sendTransaction');
  check(txs.length === 2 && txs[1].tx.to.toLowerCase() === chainConfig.contract_address.toLowerCase(), 'one transaction (after the declined one), to AccountConfig');
  check(viem.decodeFunctionData({ abi, data: txs[1].tx.data }).functionName === 'multicall', 'the three calls went as one multicall');
  check(/Nothing to send/.test(await page.textContent('[data-testid="pending-calls"]')), 'nothing is left to send');
  let listed = null;
  for (let i = 0; i < 100; i += 1) {
    listed = await api('GET', '/list_wallets', { key: mintedKey });
    if (listed.status === 200 && listed.json.some((w) => w.wallet_address === mintedWallet)) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  check(listed.status === 200 && listed.json.some((w) => w.wallet_address === mintedWallet), `the minted usage key works and lists the registered wallet: ${listed.status}`);
  await shot('21-sent');

  step('billing: top up by card with X-Wallet-Auth');
  const signaturesBefore = wallet.log.filter((e) => e.primaryType === 'BillingAuth').length;
  await go('billing');
  await page.waitForSelector('[data-testid="balance-value"]');
  const walletBefore = Number(await page.getAttribute('[data-testid="balance-value"]', 'data-cents'));
  const apiBefore = (await api('GET', '/billing/balance', { walletAuth: await walletAuthHere(admin) })).json.balance_cents;
  check(walletBefore === apiBefore, `the balance read with the wallet is the account's: ${walletBefore} = ${apiBefore}`);
  const walletAfter = await cardTopUp('7.89', 789, walletBefore, null);
  check(walletAfter === walletBefore + 789, `the balance grew by $7.89: ${walletBefore} → ${walletAfter}`);
  const apiAfter = (await api('GET', '/billing/balance', { walletAuth: await walletAuthHere(admin) })).json.balance_cents;
  check(apiAfter === walletBefore + 789, `the API agrees: ${apiAfter}`);
  check(wallet.log.filter((e) => e.primaryType === 'BillingAuth').length - signaturesBefore === 3, 'the wallet signed three BillingAuth: balance, payment intent, crediting');
  const billingCalls = requests.filter((r) => /\/core\/v1\/billing\/(balance|create_payment_intent|confirm_payment)$/.test(r.url) && r.walletAuth);
  check(billingCalls.length >= 3 && billingCalls.every((r) => !r.bearer), 'the billing requests carried X-Wallet-Auth and no key');
  check(new Set(billingCalls.map((r) => r.walletAuth)).size === billingCalls.length, 'every X-Wallet-Auth was a fresh signature');
  await shot('22-wallet-billing');

  step('usage history with the wallet');
  await go('usage');
  await page.waitForSelector('[data-testid="usage-list"] tbody tr, [data-testid="usage-list"] .notice.error');
  const walletRows = await page.$$eval('[data-testid="usage-list"] [data-kind="top_up"]', (els) => els.map((e) => e.closest('tr').textContent));
  check(walletRows.some((t) => /\+\$7\.89/.test(t)), `the wallet's top-up is listed: ${walletRows.length} top-ups`);
  const usageRequest = requests.filter((r) => r.url.includes('/core/v1/billing/usage')).pop();
  check(Boolean(usageRequest && usageRequest.walletAuth && !usageRequest.bearer), 'the usage history was read with X-Wallet-Auth');
  await shot('23-wallet-usage');

  step('sign in with the wallet');
  await page.click('#signout');
  await page.waitForSelector('[data-testid="wallet-signin"]');
  await page.evaluate(() => sessionStorage.clear());
  wallet.declineNext = true;
  await page.click('[data-testid="wallet-signin"]');
  await page.waitForSelector('[data-testid="wallet-signin-result"] .notice.error');
  check(/declined the request in your wallet/.test(await page.textContent('[data-testid="wallet-signin-result"]')), 'a declined signature says so');
  wallet.account = stranger;
  await page.click('[data-testid="wallet-signin"]');
  await page.waitForSelector('[data-testid="wallet-signin-result"] .notice.error');
  const strangerText = await page.textContent('[data-testid="wallet-signin-result"]');
  check(strangerText.includes(stranger.address) && /administers no ChainSecured account/.test(strangerText), `a wallet without an account is told how to get one: ${strangerText}`);
  await shot('24-wallet-signin-refused');
  wallet.account = admin;
  await page.click('[data-testid="wallet-signin"]');
  await page.waitForSelector('.page[data-page="chainsecured"] [data-testid="cs-admin"]');
  check((await page.textContent('[data-testid="cs-admin"]')) === admin.address, 'signed in as the admin wallet');
  await page.waitForFunction((h) => document.querySelector('[data-testid="cs-api-key-hash"]')?.value === h, accountHash);
  check(true, 'the apiKeyHash is found on chain (the AccountConverted log naming the wallet)');
  await page.evaluate(() => window.__emitWallet('accountsChanged', ['0x000000000000000000000000000000000000dEaD']));
  await page.waitForSelector('[data-testid="wallet-signin"]');
  check(/switched account/.test(await page.textContent('.page[data-page="signin"]')), 'switching the wallet account signs out, and says so');
  check(!(await page.isVisible('#signout')) && !/Billing/.test(await page.textContent('#nav')), 'signed out: no Sign out button, no Billing page');
  await shot('25-wallet-switched');
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
