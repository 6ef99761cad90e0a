// The dashboard's shell: the session (the API key in memory, or in this tab's
// sessionStorage when the user asks; never in a URL, never in localStorage), the theme,
// the navigation (hash routes, so nothing about the page reaches the server) and the page
// dispatch. Every API call goes through the SDK bundle (appliance-sdk.js).

import { createClient } from './appliance-sdk.js';
import { h, replace, errorBox } from './dom.js';
import { signInPage, keysPage, groupsPage, walletsPage, actionsPage, runnerPage } from './pages.js';
import { billingPage } from './billing.js';
import { evidencePage } from './evidence-page.js';

const SESSION_KEY = 'appliance-dashboard.key';
const THEME_KEY = 'appliance-dashboard.theme';

const ROUTES = [
  { path: 'keys', title: 'Usage keys', page: keysPage, auth: true },
  { path: 'groups', title: 'Groups', page: groupsPage, auth: true },
  { path: 'wallets', title: 'Wallets', page: walletsPage, auth: true },
  { path: 'actions', title: 'Actions', page: actionsPage, auth: true },
  { path: 'run', title: 'Run', page: runnerPage, auth: true },
  { path: 'billing', title: 'Billing', page: billingPage, auth: true },
  { path: 'evidence', title: 'Evidence', page: evidencePage, auth: false },
  { path: 'signin', title: 'Sign in', page: signInPage, auth: false, hidden: true },
];

const state = {
  key: null,
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

function signOut() {
  state.key = null;
  state.client = null;
  state.handoff = {};
  try {
    sessionStorage.removeItem(SESSION_KEY);
  } catch {
    // Nothing stored.
  }
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
  const visible = ROUTES.filter((r) => !r.hidden && (state.key || !r.auth));
  const items = visible.map((r) =>
    h('li', {}, h('a', { href: `#/${r.path}`, 'aria-current': r.path === path ? 'page' : false }, r.title)),
  );
  if (!state.key) {
    items.unshift(
      h('li', {}, h('a', { href: '#/signin', 'aria-current': path === 'signin' ? 'page' : false }, 'Sign in')),
    );
  }
  replace(nav, h('ul', {}, items));
  document.getElementById('signout').hidden = !state.key;
}

async function route() {
  let path = currentPath();
  let entry = ROUTES.find((r) => r.path === path);
  if (!entry || (entry.auth && !state.key)) {
    path = state.key ? 'keys' : 'signin';
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
