// CORS in a real browser: Debian's chromium (headless) through playwright-core, both from the
// tools cache scripts/setup fills. Run by tests/e2e/cors.rs; by hand:
//
//   node tests/browser/cors.mjs --url https://127.0.0.1:PORT --spki BASE64 \
//     --allowed http://127.0.0.1:PORT_A/ --refused http://127.0.0.1:PORT_B/
//
// Each page URL serves a page that imports the SDK's browser bundle (sdk/js/dist) and sets
// `window.sdk`, and `window.seen`, which turns what a promise rejected with into plain
// data. From the allowed page: an account is created, the new key lists its groups (both
// preflighted: JSON body, Authorization header) and an error's request id is read
// (exposed by the appliance). From the refused page: a plain GET, a JSON POST and an SDK
// call, each of which the browser must refuse. The browser trusts exactly the appliance's
// certificate (its SPKI hash, --spki). Prints one JSON document of what each page saw;
// tests/e2e/cors.rs judges it. Exit status 0 unless the browser itself failed.

import { createRequire } from 'node:module';
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { parseArgs } from 'node:util';

const { values: args } = parseArgs({
  options: {
    url: { type: 'string' },
    spki: { type: 'string' },
    allowed: { type: 'string' },
    refused: { type: 'string' },
    chromium: { type: 'string', default: '/usr/bin/chromium' },
    'node-modules': { type: 'string', default: process.env.NODE_PATH || '' },
  },
});
for (const required of ['url', 'spki', 'allowed', 'refused']) {
  if (!args[required]) {
    console.error(`missing --${required}`);
    process.exit(2);
  }
}

const require = createRequire(join(args['node-modules'] || process.cwd(), 'noop.js'));
const { chromium } = require('playwright-core');

const base = args.url.replace(/\/+$/, '');
const profile = mkdtempSync(join(tmpdir(), 'cors-chromium-'));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: args.chromium,
  headless: true,
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

const console_ = [];
async function open(url) {
  const page = await context.newPage();
  page.setDefaultTimeout(30000);
  page.on('console', (msg) => console_.push(`${url}: ${msg.type()}: ${msg.text()}`));
  page.on('pageerror', (err) => console_.push(`${url}: page error: ${err.message}`));
  await page.goto(url);
  await page.waitForFunction(() => window.sdk !== undefined);
  return page;
}

let result;
try {
  const allowedPage = await open(args.allowed);
  const allowed = await allowedPage.evaluate(
    async (base) => {
      const seen = window.seen;
      const out = { origin: location.origin };
      const client = window.sdk.createClient({ baseUrl: base });
      // Chromium fails requests in flight with ERR_NETWORK_CHANGED when an interface
      // appears or goes (other tests of the suite create network namespaces and container
      // networks): a call that got no response at all is tried again, twice at most. A
      // refused CORS check is refused every time, so the retries cannot hide one.
      const settled = async (call) => {
        for (let attempt = 1; ; attempt++) {
          try {
            return await call();
          } catch (e) {
            if (attempt >= 3 || e.status !== 0) throw e;
            out.retried = (out.retried || 0) + 1;
            await new Promise((r) => setTimeout(r, 500));
          }
        }
      };
      try {
        const account = await settled(() => client.newAccount({ account_name: 'cors page' }));
        out.accountKeyLength = account.api_key.length;
        out.groups = await settled(() => client.withApiKey(account.api_key).listGroups());
      } catch (e) {
        out.callError = seen(e);
      }
      // A 401: its request id must be readable (Access-Control-Expose-Headers).
      try {
        await client.withApiKey('BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=').listGroups();
        out.unauthorized = 'no error';
      } catch (e) {
        out.unauthorized = seen(e);
      }
      return out;
    },
    base,
  );

  const refusedPage = await open(args.refused);
  const refused = await refusedPage.evaluate(
    async (base) => {
      const seen = window.seen;
      const out = { origin: location.origin };
      // A simple request (no preflight): sent, but its answer is withheld from the page.
      try {
        const r = await fetch(`${base}/core/v1/get_node_chain_config`);
        out.simpleGet = { status: r.status };
      } catch (e) {
        out.simpleGet = seen(e);
      }
      // A preflighted request: the preflight is refused, the POST never sent.
      try {
        const r = await fetch(`${base}/core/v1/new_account`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ account_name: 'refused page' }),
        });
        out.jsonPost = { status: r.status };
      } catch (e) {
        out.jsonPost = seen(e);
      }
      try {
        await window.sdk.createClient({ baseUrl: base }).newAccount({ account_name: 'refused sdk' });
        out.sdkCall = 'no error';
      } catch (e) {
        out.sdkCall = seen(e);
      }
      return out;
    },
    base,
  );
  result = { allowed, refused, console: console_ };
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
console.log(JSON.stringify(result));
