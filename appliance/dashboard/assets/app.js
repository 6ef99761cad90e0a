// The dashboard's shell: the session (the API key in memory, or in this tab's
// sessionStorage when the user asks; never in a URL, never in localStorage; or, for a
// ChainSecured account, a browser wallet that signs every billing request, its address
// in memory only), the theme, the navigation (hash routes, so nothing about the page
// reaches the server) and the page dispatch. Every API call goes through the SDK bundle
// (appliance-sdk.js).

import { createClient } from './appliance-sdk.js';
import { h, replace, errorBox } from './dom.js';
import { signInPage, keysPage, groupsPage, walletsPage, actionsPage, runnerPage } from './pages.js';
import { billingPage } from './billing.js';
import { evidencePage } from './evidence-page.js';
import { chainSecuredPage } from './chainsecured.js';
import { usagePage } from './usage.js';

const SESSION_KEY = 'appliance-dashboard.key';
const THEME_KEY = 'appliance-dashboard.theme';

// `auth`: 'key' (the account key), 'any' (the key or a ChainSecured admin wallet), or
// false (no sign-in needed).
const ROUTES = [
  { path: 'keys', title: 'Usage keys', page: keysPage, auth: 'key' },
  { path: 'groups', title: 'Groups', page: groupsPage, auth: 'key' },
  { path: 'wallets', title: 'Wallets', page: walletsPage, auth: 'key' },
  { path: 'actions', title: 'Actions', page: actionsPage, auth: 'key' },
  { path: 'run', title: 'Run', page: runnerPage, auth: 'key' },
  { path: 'chainsecured', title: 'ChainSecured', page: chainSecuredPage, auth: 'any' },
  { path: 'billing', title: 'Billing', page: billingPage, auth: 'any' },
  { path: 'usage', title: 'Usage', page: usagePage, auth: 'any' },
  { path: 'evidence', title: 'Evidence', page: evidencePage, auth: false },
  { path: 'signin', title: 'Sign in', page: signInPage, auth: false, hidden: true },
];

function allowed(route) {
  if (!route.auth) return true;
  if (route.auth === 'key') return Boolean(state.key);
  return Boolean(state.key || state.wallet);
}

function signedIn() {
  return Boolean(state.key || state.wallet);
}

/** Where a signed-in user lands. */
function home() {
  return state.wallet ? 'chainsecured' : 'keys';
}

const state = {
  key: null,
  // A WalletSession (wallet.js) while a ChainSecured account's admin wallet is signed in.
  wallet: null,
  stopWatchingWallet: null,
  config: { billing_enabled: false, stripe_js_url: null, api_base: '/core/v1' },
  publicClient: null,
  client: null,
  // Data one page hands to another (the code of an action opened in the runner).
  handoff: {},
};

function readStoredKey() {
  try {
    return sessionStorage.getItem(SESSION_KEY);
  } catch {
    return null;
  }
}

/** Signs in with `key`; `remember` keeps it in this tab's sessionStorage. */
function signIn(key, remember) {
  forgetWallet();
  state.key = key;
  state.client = state.publicClient.withApiKey(key);
  try {
    if (remember) sessionStorage.setItem(SESSION_KEY, key);
    else sessionStorage.removeItem(SESSION_KEY);
  } catch {
    // Storage refused (private mode): memory only.
  }
  renderChrome();
}

function forgetKey() {
  state.key = null;
  state.client = null;
  try {
    sessionStorage.removeItem(SESSION_KEY);
  } catch {
    // Nothing stored.
  }
}

function forgetWallet() {
  if (state.stopWatchingWallet) state.stopWatchingWallet();
  state.stopWatchingWallet = null;
  state.wallet = null;
}

/**
 * Signs in a ChainSecured account's admin wallet (a WalletSession whose BillingAuth
 * signature the appliance accepted). The account key, if any, is forgotten: after a
 * conversion it no longer works.
 */
function signInWallet(session) {
  forgetKey();
  forgetWallet();
  state.wallet = session;
  state.stopWatchingWallet = session.onChange(() => {
    // Another account (or none) in the wallet: this session is not that wallet's.
    if (state.wallet === session) {
      signOut('The wallet switched account or disconnected: you were signed out. Sign in again with the wallet that administers the account.');
    }
  });
  renderChrome();
}

/** Signs out; `notice` (a sentence) is shown on the sign-in page. */
function signOut(notice) {
  forgetKey();
  forgetWallet();
  state.handoff = typeof notice === 'string' ? { signinNotice: notice } : {};
  renderChrome();
  navigate('signin');
}

function navigate(path) {
  if (location.hash === `#/${path}`) route();
  else location.hash = `#/${path}`;
}

function currentPath() {
  const m = /^#\/([a-z]+)/.exec(location.hash);
  return m ? m[1] : '';
}

// ---------------------------------------------------------------------------- theme

function applyTheme(theme) {
  if (theme === 'light' || theme === 'dark') document.documentElement.dataset.theme = theme;
  else delete document.documentElement.dataset.theme;
  const button = document.getElementById('theme');
  if (button) {
    button.textContent = `Theme: ${theme || 'auto'}`;
    button.setAttribute('aria-label', `Colour theme: ${theme || 'auto (follows the system)'}; change`);
  }
}

function cycleTheme() {
  let current = null;
  try {
    current = localStorage.getItem(THEME_KEY);
  } catch {
    current = document.documentElement.dataset.theme || null;
  }
  const next = current === 'light' ? 'dark' : current === 'dark' ? null : 'light';
  try {
    if (next) localStorage.setItem(THEME_KEY, next);
    else localStorage.removeItem(THEME_KEY);
  } catch {
    // Not kept: this page only.
  }
  applyTheme(next);
}

// ---------------------------------------------------------------------------- chrome

function renderChrome() {
  const nav = document.getElementById('nav');
  const path = currentPath();
  const visible = ROUTES.filter((r) => !r.hidden && allowed(r));
  const items = visible.map((r) =>
    h('li', {}, h('a', { href: `#/${r.path}`, 'aria-current': r.path === path ? 'page' : false }, r.title)),
  );
  if (!signedIn()) {
    items.unshift(
      h('li', {}, h('a', { href: '#/signin', 'aria-current': path === 'signin' ? 'page' : false }, 'Sign in')),
    );
  }
  replace(nav, h('ul', {}, items));
  document.getElementById('signout').hidden = !signedIn();
}

async function route() {
  let path = currentPath();
  let entry = ROUTES.find((r) => r.path === path);
  if (!entry || !allowed(entry)) {
    path = signedIn() ? home() : 'signin';
    if (location.hash !== `#/${path}`) {
      history.replaceState(null, '', `#/${path}`);
    }
    entry = ROUTES.find((r) => r.path === path);
  }
  renderChrome();
  const main = document.getElementById('main');
  const heading = h('h1', { tabindex: '-1' }, entry.title);
  const body = h('div', { class: 'page', 'data-page': entry.path });
  replace(main, heading, body);
  document.title = `${entry.title} · Appliance dashboard`;
  const ctx = {
    get client() {
      return state.client;
    },
    get wallet() {
      return state.wallet;
    },
    /**
     * The client for one billing request: the account key's, or (signed in with a
     * wallet) one carrying a fresh X-Wallet-Auth (the wallet signs BillingAuth; each
     * signature is good for one request).
     */
    async billingClient() {
      if (state.wallet) return state.publicClient.withWalletAuth(await state.wallet.authHeader());
      return state.client;
    },
    signInWallet,
    publicClient: state.publicClient,
    config: state.config,
    handoff: state.handoff,
    signIn,
    signOut,
    navigate,
    origin: location.origin,
  };
  try {
    await entry.page(body, ctx);
  } catch (err) {
    body.append(errorBox(`Opening ${entry.title}`, err));
  }
  // Focus the page's heading after a navigation (keyboard and screen-reader users land
  // on the new content), but not on the first load.
  if (state.navigated) heading.focus();
  state.navigated = true;
}

async function loadConfig() {
  try {
    const r = await fetch('/dashboard/config.json', { cache: 'no-store', credentials: 'omit' });
    if (r.ok) state.config = await r.json();
  } catch {
    // Defaults: billing off.
  }
}

async function start() {
  let theme = null;
  try {
    theme = localStorage.getItem(THEME_KEY);
  } catch {
    theme = null;
  }
  applyTheme(theme);
  document.getElementById('theme').addEventListener('click', cycleTheme);
  document.getElementById('signout').addEventListener('click', signOut);
  await loadConfig();
  state.publicClient = createClient({ baseUrl: location.origin });
  const stored = readStoredKey();
  if (stored) signIn(stored, true);
  window.addEventListener('hashchange', route);
  await route();
  document.body.dataset.ready = 'true';
}

start();
