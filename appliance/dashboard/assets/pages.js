// The account pages: sign in / create an account, usage keys, groups, wallets, actions
// and the action runner. Each page is `async (body, ctx) => void`, drawing into `body`;
// `ctx.client` is the SDK client carrying the key, `ctx.publicClient` the one without.

import { computeCidV0, paginate } from './appliance-sdk.js';
import {
  h,
  replace,
  field,
  checkbox,
  copyable,
  secretOnce,
  errorBox,
  notice,
  busy,
  table,
  section,
  dollars,
} from './dom.js';
import { walletSignInSection } from './chainsecured.js';

/** Every item of a paged list (pages of 100; at most 5000 items shown). */
async function listAll(fetchPage) {
  const out = [];
  for await (const item of paginate(fetchPage, { pageSize: 100 })) {
    out.push(item);
    if (out.length >= 5000) break;
  }
  return out;
}

function form(onSubmit, ...children) {
  return h(
    'form',
    {
      novalidate: true,
      onsubmit: (event) => {
        // The policy forbids form navigation (form-action 'none'): everything is a fetch.
        event.preventDefault();
        onSubmit(event);
      },
    },
    ...children,
  );
}

function submit(label, attrs = {}) {
  return h('button', { type: 'submit', ...attrs }, label);
}

function short(hex) {
  const s = String(hex);
  return s.length > 18 ? `${s.slice(0, 10)}…${s.slice(-6)}` : s;
}

// ---------------------------------------------------------------------------- sign in

export async function signInPage(body, ctx) {
  const key = field('Account key', {
    type: 'password',
    autocomplete: 'off',
    spellcheck: 'false',
    required: true,
    'data-testid': 'signin-key',
  }, 'The key shown once when the account was created. It stays in this tab.');
  const remember = checkbox('Stay signed in while this tab is open (session storage; cleared when the tab closes)');
  const signInOut = h('div', { 'aria-live': 'polite' });
  const signInButton = submit('Sign in');
  const signInForm = form(
    () =>
      busy(signInButton, signInOut, 'Signing in', async () => {
        const value = key.input.value.trim();
        if (!value) {
          replace(signInOut, notice('Enter the account key first.', 'error'));
          key.input.focus();
          return;
        }
        const exists = await ctx.publicClient.withApiKey(value).accountExists();
        if (exists !== true) {
          replace(
            signInOut,
            errorBox('Signing in', {
              status: 401,
              description:
                'that key is not a live account key (a usage key, a removed account, or a typo)',
            }),
          );
          return;
        }
        ctx.signIn(value, remember.input.checked);
        ctx.navigate('keys');
      }),
    key.wrap,
    remember.wrap,
    h('div', { class: 'row' }, signInButton),
    signInOut,
  );

  const name = field('Account name', { type: 'text', required: true, maxlength: '256', 'data-testid': 'new-account-name' });
  const description = field('Description (optional)', { type: 'text' });
  const email = field('Email (optional)', { type: 'email', autocomplete: 'email' }, 'Only passed on to the payment processor.');
  const createOut = h('div', { 'aria-live': 'polite' });
  const createButton = submit('Create account');
  const createForm = form(
    () =>
      busy(createButton, createOut, 'Creating the account', async () => {
        const account_name = name.input.value.trim();
        if (!account_name) {
          replace(createOut, notice('Give the account a name.', 'error'));
          name.input.focus();
          return;
        }
        const req = { account_name };
        if (description.input.value.trim()) req.account_description = description.input.value.trim();
        if (email.input.value.trim()) req.email = email.input.value.trim();
        const created = await ctx.publicClient.newAccount(req);
        const keep = checkbox('Stay signed in while this tab is open');
        const go = h(
          'button',
          {
            type: 'button',
            'data-testid': 'continue-signed-in',
            onclick: () => {
              ctx.signIn(created.api_key, keep.input.checked);
              ctx.navigate('keys');
            },
          },
          'Continue, signed in',
        );
        replace(
          createOut,
          secretOnce('Your account key', created.api_key, 'Copy it now and keep it safe: it is shown only this once, it cannot be recovered, and whoever holds it controls the account.'),
          h('p', {}, 'Account wallet: ', copyable(created.wallet_address, 'Copy address')),
          keep.wrap,
          h('div', { class: 'row' }, go),
        );
        go.focus();
      }),
    name.wrap,
    description.wrap,
    email.wrap,
    h('div', { class: 'row' }, createButton),
    createOut,
  );

  const signinNotice = ctx.handoff.signinNotice;
  delete ctx.handoff.signinNotice;
  replace(
    body,
    signinNotice ? notice(signinNotice, 'warn') : null,
    h(
      'div',
      { class: 'grid2' },
      section('Sign in with an account key', signInForm),
      section('Create an account', createForm),
    ),
    walletSignInSection(ctx),
    h(
      'p',
      { class: 'empty' },
      'No key needed for the ',
      h('a', { href: '#/evidence' }, 'evidence page'),
      ': what this appliance runs, checked in your browser.',
    ),
  );
}

// ---------------------------------------------------------------------------- usage keys

const MATRIX = [
  ['execute_in_groups', 'Execute actions'],
  ['manage_ipfs_ids_in_groups', 'Manage actions'],
  ['add_pkp_to_groups', 'Add wallets'],
  ['remove_pkp_from_groups', 'Remove wallets'],
];

function permissionSummary(k) {
  const parts = [];
  if (k.can_create_groups) parts.push('create groups');
  if (k.can_delete_groups) parts.push('delete groups');
  if (k.can_create_pkps) parts.push('create wallets');
  for (const [prop, label] of MATRIX) {
    const ids = k[prop] || [];
    if (ids.length) parts.push(`${label.toLowerCase()}: ${ids.map((i) => (String(i) === '0' ? 'all groups' : `group ${i}`)).join(', ')}`);
  }
  return parts.length ? parts.join('; ') : 'no permissions';
}

export async function keysPage(body, ctx) {
  const listOut = h('div', { 'data-testid': 'keys-list' }, h('p', { class: 'empty' }, 'Loading…'));
  const createOut = h('div', { 'aria-live': 'polite' });
  let groups = [];

  async function loadList() {
    await busy(null, null, 'Listing keys', async () => {
      let keys;
      try {
        keys = await listAll((q) => ctx.client.listApiKeys(q));
      } catch (err) {
        replace(listOut, errorBox('Listing the usage keys', err));
        return;
      }
      const rows = keys.map((k) => {
        const revokeCell = h('span', {});
        const revoke = h('button', { type: 'button', class: 'danger small' }, 'Revoke');
        revoke.addEventListener('click', () => {
          const yes = h('button', { type: 'button', class: 'danger small' }, 'Yes, revoke');
          const no = h('button', { type: 'button', class: 'ghost small' }, 'Keep');
          const out = h('span', {});
          yes.addEventListener('click', () =>
            busy(yes, out, `Revoking ${k.name}`, async () => {
              await ctx.client.removeUsageApiKey({ usage_api_key: k.api_key_hash });
              await loadList();
            }),
          );
          no.addEventListener('click', () => {
            replace(revokeCell, revoke);
            revoke.focus();
          });
          replace(revokeCell, h('span', { class: 'row' }, `Revoke ${k.name}? `, yes, no), out);
          no.focus();
        });
        revokeCell.append(revoke);
        return [k.name, h('code', { title: k.api_key_hash }, short(k.api_key_hash)), permissionSummary(k), revokeCell];
      });
      replace(listOut, table('Usage keys', ['Name', 'Key hash', 'Permissions', ''], rows, 'No usage keys yet.'));
    });
  }

  const name = field('Name', { type: 'text', required: true, 'data-testid': 'key-name' });
  const description = field('Description (optional)', { type: 'text' });
  const flags = {
    can_create_groups: checkbox('Create groups'),
    can_delete_groups: checkbox('Delete groups'),
    can_create_pkps: checkbox('Create wallets'),
  };
  const matrixHolder = h('div', {});
  let matrixInputs = [];

  function drawMatrix() {
    matrixInputs = [];
    const rows = [{ id: '0', name: 'All groups (present and future)' }, ...groups.map((g) => ({ id: g.id, name: `${g.name} (group ${g.id})` }))];
    const tbody = rows.map((g) =>
      h(
        'tr',
        {},
        h('th', { scope: 'row' }, g.name),
        MATRIX.map(([prop, label]) => {
          const input = h('input', { type: 'checkbox', 'aria-label': `${label} in ${g.name}`, 'data-prop': prop, 'data-group': g.id });
          matrixInputs.push(input);
          return h('td', { 'data-label': label }, input);
        }),
      ),
    );
    replace(
      matrixHolder,
      h(
        'div',
        { class: 'table-wrap' },
        h(
          'table',
          { class: 'matrix' },
          h('caption', { class: 'visually-hidden' }, 'Permissions per group'),
          h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Group'), MATRIX.map(([, label]) => h('th', { scope: 'col' }, label)))),
          h('tbody', {}, tbody),
        ),
      ),
    );
  }

  const createButton = submit('Create usage key');
  const createForm = form(
    () =>
      busy(createButton, createOut, 'Creating the usage key', async () => {
        const keyName = name.input.value.trim();
        if (!keyName) {
          replace(createOut, notice('Give the key a name.', 'error'));
          name.input.focus();
          return;
        }
        const req = { name: keyName, description: description.input.value.trim() };
        for (const [prop, box] of Object.entries(flags)) req[prop] = box.input.checked;
        for (const [prop] of MATRIX) req[prop] = [];
        for (const input of matrixInputs) {
          if (input.checked) req[input.dataset.prop].push(input.dataset.group);
        }
        const created = await ctx.client.addUsageApiKey(req);
        replace(
          createOut,
          secretOnce(`Usage key "${keyName}"`, created.usage_api_key),
          h('p', {}, 'Its hash (how it is listed): ', h('code', {}, created.api_key_hash)),
        );
        name.input.value = '';
        description.input.value = '';
        await loadList();
      }),
    name.wrap,
    description.wrap,
    h('fieldset', { class: 'plain' }, h('legend', {}, 'Account-wide'), Object.values(flags).map((f) => f.wrap)),
    h('h3', {}, 'Per group'),
    h('p', { class: 'hint' }, '"All groups" covers every group, including groups created later.'),
    matrixHolder,
    h('div', { class: 'row' }, createButton),
    createOut,
  );

  replace(body, section('Create a usage key', createForm), section('Your usage keys', listOut));
  try {
    groups = await listAll((q) => ctx.client.listGroups(q));
  } catch (err) {
    matrixHolder.after(errorBox('Listing the groups for the permission matrix', err));
  }
  drawMatrix();
  await loadList();
}

// ---------------------------------------------------------------------------- groups

const ALL_WALLETS = `0x${'0'.repeat(64)}`;

export async function groupsPage(body, ctx) {
  const listOut = h('div', { 'data-testid': 'groups-list' }, h('p', { class: 'empty' }, 'Loading…'));
  const createOut = h('div', { 'aria-live': 'polite' });

  async function loadList() {
    try {
      const groups = await listAll((q) => ctx.client.listGroups(q));
      const rows = groups.map((g) => [
        g.id,
        g.name,
        g.description || '',
        (g.pkp_ids_permitted || []).includes(ALL_WALLETS) ? 'all' : String((g.pkp_ids_permitted || []).length),
        (g.cid_hashes_permitted || []).includes('0') ? 'all' : String((g.cid_hashes_permitted || []).length),
      ]);
      replace(listOut, table('Groups', ['Id', 'Name', 'Description', 'Wallets', 'Actions'], rows, 'No groups yet.'));
    } catch (err) {
      replace(listOut, errorBox('Listing the groups', err));
    }
  }

  const name = field('Name', { type: 'text', required: true, 'data-testid': 'group-name' });
  const description = field('Description (optional)', { type: 'text' });
  const allWallets = checkbox('Every wallet of the account may be used in it', { checked: true });
  const allActions = checkbox('Every action of the account may run in it', { checked: true });
  const createButton = submit('Create group');
  const createForm = form(
    () =>
      busy(createButton, createOut, 'Creating the group', async () => {
        const group_name = name.input.value.trim();
        if (!group_name) {
          replace(createOut, notice('Give the group a name.', 'error'));
          name.input.focus();
          return;
        }
        const created = await ctx.client.addGroup({
          group_name,
          group_description: description.input.value.trim(),
          pkp_ids_permitted: allWallets.input.checked ? [ALL_WALLETS] : [],
          cid_hashes_permitted: allActions.input.checked ? ['0'] : [],
        });
        replace(createOut, notice(`Group "${group_name}" created (id ${created.group_id}).`));
        name.input.value = '';
        description.input.value = '';
        await loadList();
      }),
    name.wrap,
    description.wrap,
    allWallets.wrap,
    h('br'),
    allActions.wrap,
    h('div', { class: 'row' }, createButton),
    createOut,
  );
  replace(body, section('Create a group', createForm), section('Your groups', listOut));
  await loadList();
}

// ---------------------------------------------------------------------------- wallets

export async function walletsPage(body, ctx) {
  const listOut = h('div', { 'data-testid': 'wallets-list' }, h('p', { class: 'empty' }, 'Loading…'));
  const createOut = h('div', { 'aria-live': 'polite' });

  async function loadList() {
    try {
      const wallets = await listAll((q) => ctx.client.listWallets(q));
      const rows = wallets.map((w) => [
        w.name || h('span', { class: 'empty' }, '(unnamed)'),
        copyable(w.wallet_address, 'Copy'),
        h('code', { title: w.pkp_id }, short(w.pkp_id)),
      ]);
      replace(listOut, table('Wallets', ['Name', 'Address', 'pkp_id'], rows, 'No wallets yet.'));
    } catch (err) {
      replace(listOut, errorBox('Listing the wallets', err));
    }
  }

  const name = field('Name (optional)', { type: 'text', 'data-testid': 'wallet-name' });
  const description = field('Description (optional)', { type: 'text' });
  const createButton = submit('Create wallet');
  const createForm = form(
    () =>
      busy(createButton, createOut, 'Creating the wallet', async () => {
        const created = await ctx.client.createWallet({
          name: name.input.value.trim(),
          description: description.input.value.trim(),
        });
        replace(
          createOut,
          notice('Wallet created. Its private key never leaves the appliance\'s key service.'),
          h('p', {}, 'Address: ', copyable(created.wallet_address, 'Copy address')),
        );
        name.input.value = '';
        description.input.value = '';
        await loadList();
      }),
    name.wrap,
    description.wrap,
    h('div', { class: 'row' }, createButton),
    createOut,
  );
  replace(body, section('Create a wallet', createForm), section('Your wallets', listOut));
  await loadList();
}

// ---------------------------------------------------------------------------- code editor

/**
 * A textarea that behaves as a small code editor: Tab and Shift+Tab indent and outdent
 * (the lines of a selection too), Enter keeps the indentation, Ctrl/Cmd+Enter calls
 * `onRun`. Escape releases Tab for one press, so keyboard users can always leave.
 */
export function codeEditor(attrs, onRun) {
  const area = h('textarea', { class: 'code', spellcheck: 'false', autocapitalize: 'off', autocomplete: 'off', wrap: 'off', ...attrs });
  let tabReleased = false;
  area.addEventListener('keydown', (e) => {
    if ((e.ctrlKey || e.metaKey) && e.key === 'Enter') {
      e.preventDefault();
      if (onRun) onRun();
      return;
    }
    if (e.key === 'Escape') {
      tabReleased = true;
      return;
    }
    if (e.key === 'Tab') {
      if (tabReleased || e.ctrlKey || e.altKey || e.metaKey) {
        tabReleased = false;
        return;
      }
      e.preventDefault();
      const { selectionStart: start, selectionEnd: end, value } = area;
      const lineStart = value.lastIndexOf('\n', start - 1) + 1;
      if (start === end && !e.shiftKey) {
        area.setRangeText('  ', start, end, 'end');
      } else {
        const block = value.slice(lineStart, end);
        const lines = block.split('\n');
        const changed = lines.map((l) => (e.shiftKey ? l.replace(/^ {1,2}/, '') : `  ${l}`)).join('\n');
        area.setRangeText(changed, lineStart, end, 'select');
        if (start === end) {
          const pos = Math.max(lineStart, start + (changed.length - block.length));
          area.setSelectionRange(pos, pos);
        }
      }
      area.dispatchEvent(new Event('input'));
      return;
    }
    tabReleased = false;
    if (e.key === 'Enter' && !e.shiftKey) {
      const { selectionStart: start, selectionEnd: end, value } = area;
      const lineStart = value.lastIndexOf('\n', start - 1) + 1;
      const indent = /^[ \t]*/.exec(value.slice(lineStart, start))[0];
      const extra = /[{[(]\s*$/.test(value.slice(lineStart, start)) ? '  ' : '';
      e.preventDefault();
      area.setRangeText(`\n${indent}${extra}`, start, end, 'end');
      area.dispatchEvent(new Event('input'));
    }
  });
  return area;
}

// ---------------------------------------------------------------------------- actions

const SAMPLE_CODE = `async function main(params) {
  console.log("hello from the appliance", params.n);
  return { doubled: params.n * 2 };
}
`;

export async function actionsPage(body, ctx) {
  const listOut = h('div', { 'data-testid': 'actions-list' }, h('p', { class: 'empty' }, 'Loading…'));
  const createOut = h('div', { 'aria-live': 'polite' });

  async function loadList() {
    try {
      const actions = await listAll((q) => ctx.client.listActions(q));
      const rows = actions.map((a) => [
        a.name,
        copyable(a.ipfs_cid, 'Copy CID'),
        h('code', { title: a.hashed_cid }, short(a.hashed_cid)),
        h(
          'button',
          {
            type: 'button',
            class: 'ghost small',
            onclick: () => {
              ctx.handoff.run = { ipfs_id: a.ipfs_cid, name: a.name };
              ctx.navigate('run');
            },
          },
          'Run…',
        ),
      ]);
      replace(listOut, table('Actions', ['Name', 'IPFS CID', 'Hashed CID', ''], rows, 'No actions registered yet.'));
    } catch (err) {
      replace(listOut, errorBox('Listing the actions', err));
    }
  }

  const name = field('Name', { type: 'text', required: true, 'data-testid': 'action-name' });
  const description = field('Description (optional)', { type: 'text' });
  const codeId = 'action-code';
  const code = codeEditor({ id: codeId, 'aria-describedby': `${codeId}-hint`, 'data-testid': 'action-code' });
  code.value = SAMPLE_CODE;
  const createButton = submit('Register action');
  const createForm = form(
    () =>
      busy(createButton, createOut, 'Registering the action', async () => {
        const actionName = name.input.value.trim();
        if (!actionName) {
          replace(createOut, notice('Give the action a name.', 'error'));
          name.input.focus();
          return;
        }
        const text = code.value;
        const cid = await computeCidV0(text);
        // The appliance keeps the code under its CID for the account (so it can run
        // by CID) and says which CID it computed: the same, or the upload was altered.
        const served = await ctx.client.getLitActionIpfsId(text);
        if (served !== cid) {
          throw new Error(`the appliance computed CID ${served}, this page ${cid}: the code was altered on the way; nothing was registered`);
        }
        const added = await ctx.client.addAction({ action_ipfs_cid: cid, name: actionName, description: description.input.value.trim() });
        replace(
          createOut,
          notice(`Action "${actionName}" registered.`),
          h('dl', { class: 'kv' }, h('dt', {}, 'IPFS CID'), h('dd', { 'data-testid': 'action-cid' }, copyable(cid, 'Copy CID')), h('dt', {}, 'Hashed CID'), h('dd', {}, h('code', {}, added.hashed_cid))),
        );
        await loadList();
      }),
    name.wrap,
    description.wrap,
    h('div', { class: 'field' }, h('label', { for: codeId }, 'Code'), code, h('small', { class: 'hint', id: `${codeId}-hint` }, 'Defines async function main(params). Tab indents; Escape then Tab leaves the editor.')),
    h('div', { class: 'row' }, createButton),
    createOut,
  );
  replace(body, section('Register an action', createForm), section('Your actions', listOut));
  await loadList();
}

// ---------------------------------------------------------------------------- runner

export async function runnerPage(body, ctx) {
  const from = ctx.handoff.run || null;
  ctx.handoff.run = null;
  const out = h('div', { 'aria-live': 'polite', 'data-testid': 'run-result' });
  const codeId = 'runner-code';
  let runButton;
  const code = codeEditor({ id: codeId, 'aria-describedby': `${codeId}-hint`, 'data-testid': 'runner-code' }, () => runButton.click());
  code.value = SAMPLE_CODE;
  const params = field('js_params (JSON object)', { tag: 'textarea', class: 'code', spellcheck: 'false', rows: '4', 'data-testid': 'runner-params' }, 'The argument of main. Ctrl+Enter in the code runs it.');
  params.input.value = '{\n  "n": 21\n}';
  params.input.style.minHeight = '90px';
  let byCid = from;
  const source = h('div', {});
  function drawSource() {
    if (byCid) {
      replace(
        source,
        notice(`Running the registered action "${byCid.name}" by its CID ${byCid.ipfs_id}.`, 'info'),
        h('button', { type: 'button', class: 'ghost small', onclick: () => { byCid = null; drawSource(); } }, 'Edit code instead'),
      );
      code.closest('.field').hidden = true;
    } else {
      replace(source);
      code.closest('.field').hidden = false;
    }
  }

  runButton = h('button', { type: 'button', 'data-testid': 'run' }, 'Run');
  runButton.addEventListener('click', () =>
    busy(runButton, out, 'Running the action', async () => {
      let js_params;
      try {
        js_params = params.input.value.trim() ? JSON.parse(params.input.value) : {};
      } catch (err) {
        replace(out, errorBox('Reading js_params', { description: `it is not valid JSON (${err.message})`, status: 400 }));
        params.input.focus();
        return;
      }
      if (js_params === null || typeof js_params !== 'object' || Array.isArray(js_params)) {
        replace(out, errorBox('Reading js_params', { description: 'it must be a JSON object, like {"n": 21}', status: 400 }));
        return;
      }
      const billing = ctx.config.billing_enabled;
      const before = billing ? await ctx.client.balance() : null;
      const req = byCid ? { ipfs_id: byCid.ipfs_id, js_params } : { code: code.value, js_params };
      const t0 = performance.now();
      const result = await ctx.client.litAction(req);
      const elapsed = performance.now() - t0;
      let cost;
      if (billing) {
        const after = await ctx.client.balance();
        const charged = Number(before.balance_cents) - Number(after.balance_cents);
        cost = `${dollars(charged)} charged (balance ${before.balance_display} → ${after.balance_display})`;
      } else {
        try {
          const prices = await ctx.publicClient.prices();
          cost = prices.billing_enabled
            ? `${dollars(prices.action_second_cents)} per started second`
            : 'free: billing is off on this appliance';
        } catch {
          cost = 'free: billing is off on this appliance';
        }
      }
      replace(
        out,
        result.has_error
          ? h(
              'div',
              { class: 'notice error', role: 'alert', 'data-testid': 'run-error' },
              h('strong', {}, `The action failed (${result.error ? result.error.kind : 'error'}): `),
              result.error ? result.error.message : 'no message',
              h('p', { class: 'next' }, {
                exception: 'Fix the exception in the code (see the logs) and run again.',
                timeout: 'It ran out of time: make it do less per run, or wait on fewer fetches.',
                memory: 'It ran out of memory: process less data per run.',
                limit: 'It hit a limit (response, log or fetch size): return or log less.',
              }[result.error && result.error.kind] || 'Check the logs and run again.'),
            )
          : notice('The action ran.'),
        h(
          'dl',
          { class: 'kv' },
          h('dt', {}, 'Run time'),
          h('dd', { 'data-testid': 'run-time' }, `${Math.round(elapsed)} ms (round trip)`),
          h('dt', {}, 'Charge'),
          h('dd', { 'data-testid': 'run-charge' }, cost),
          h('dt', {}, 'Error kind'),
          h('dd', {}, result.has_error && result.error ? result.error.kind : 'none'),
        ),
        h('h3', {}, 'Response'),
        h('pre', { class: 'out', 'data-testid': 'run-response' }, JSON.stringify(result.response, null, 2) ?? 'null'),
        h('h3', {}, 'Logs'),
        h('pre', { class: 'out', 'data-testid': 'run-logs' }, result.logs || '(nothing logged)'),
      );
    }),
  );

  replace(
    body,
    section(
      'Run an action',
      source,
      h('div', { class: 'field' }, h('label', { for: codeId }, 'Code'), code, h('small', { class: 'hint', id: `${codeId}-hint` }, 'Tab indents, Shift+Tab outdents, Escape then Tab leaves the editor, Ctrl+Enter runs.')),
      params.wrap,
      h('div', { class: 'row' }, runButton),
    ),
    section('Result', out),
  );
  drawSource();
}
