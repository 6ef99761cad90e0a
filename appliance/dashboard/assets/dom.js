// Small DOM helpers: elements built from data (never from HTML strings, so nothing the
// API returns is ever parsed as markup), copy buttons, and error messages that say what
// failed and what to do next.

/**
 * Builds an element: h('button', {class: 'x', onclick: fn}, 'text', child, ...).
 * Attributes starting with "on" become listeners; `false`/`null` attributes are left out.
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === false || value === null || value === undefined) continue;
    if (key.startsWith('on') && typeof value === 'function') {
      el.addEventListener(key.slice(2), value);
    } else if (key === 'class') {
      el.className = value;
    } else if (key === 'value') {
      el.value = value;
    } else if (key === 'checked') {
      el.checked = Boolean(value);
    } else {
      el.setAttribute(key, value === true ? '' : String(value));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replaces an element's children. */
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

let uniqueCounter = 0;
/** A fresh id for label/input pairs. */
export function uid(prefix = 'f') {
  uniqueCounter += 1;
  return `${prefix}-${uniqueCounter}`;
}

/** A labelled input; returns {wrap, input}. */
export function field(label, attrs = {}, hint) {
  const id = attrs.id || uid();
  const tag = attrs.tag || 'input';
  const inputAttrs = { ...attrs, id };
  delete inputAttrs.tag;
  const input = h(tag, inputAttrs);
  const hintEl = hint ? h('small', { class: 'hint', id: `${id}-hint` }, hint) : null;
  if (hintEl) input.setAttribute('aria-describedby', hintEl.id);
  const wrap = h('div', { class: 'field' }, h('label', { for: id }, label), input, hintEl);
  return { wrap, input };
}

/** A checkbox with its label; returns {wrap, input}. */
export function checkbox(label, attrs = {}) {
  const id = attrs.id || uid('c');
  const input = h('input', { type: 'checkbox', ...attrs, id });
  return { wrap: h('label', { class: 'check', for: id }, input, ' ', label), input };
}

/** Copies text to the clipboard, falling back to selecting it for Ctrl+C. */
export async function copyText(text, target) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    if (target) {
      const range = document.createRange();
      range.selectNodeContents(target);
      const selection = window.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
    }
    return false;
  }
}

/** A value shown in monospace with a Copy button next to it. */
export function copyable(text, label = 'Copy') {
  const code = h('code', { class: 'copy-value' }, text);
  const status = h('span', { class: 'copy-status', role: 'status' });
  const button = h(
    'button',
    {
      type: 'button',
      class: 'small',
      'aria-label': `${label}: ${text.length > 20 ? `${text.slice(0, 10)}…` : text}`,
      onclick: async () => {
        const ok = await copyText(text, code);
        status.textContent = ok ? 'Copied' : 'Selected: press Ctrl+C';
        setTimeout(() => {
          status.textContent = '';
        }, 2500);
      },
    },
    label,
  );
  return h('span', { class: 'copyable' }, code, button, status);
}

/**
 * A secret shown once: the value, a copy button and the warning that it will not be
 * shown again.
 */
export function secretOnce(title, value, note) {
  return h(
    'div',
    { class: 'notice secret', role: 'status', 'data-testid': 'secret-once' },
    h('strong', {}, title),
    h('p', {}, note || 'Copy it now: it is shown only this once, and the appliance keeps only its hash.'),
    copyable(value, 'Copy key'),
  );
}

/** What to do next after an error, by HTTP status. */
export function nextStep(err) {
  if (err && typeof err.next === 'string') return err.next;
  const status = err && typeof err.status === 'number' ? err.status : undefined;
  switch (status) {
    case 0:
      return 'The appliance did not answer: check your network connection and that the appliance is running, then try again.';
    case 400:
    case 422:
      return 'Correct the values named above and submit again.';
    case 401:
      return 'The key or wallet signature was not accepted: sign out and sign in again (with a valid account key, or the wallet that administers the account).';
    case 402:
      return 'Your balance is too low: top up on the Billing page, then try again.';
    case 403:
      return 'This key lacks the permission for that: use the account key, or a usage key allowed to do it.';
    case 404:
      return 'It no longer exists: reload the list and try again.';
    case 409:
      return 'It conflicts with what is already there (a duplicate, or a quota reached): change it and try again.';
    case 413:
      return 'The request is too large: shorten it (code or parameters) and try again.';
    case 429:
      return 'Too many requests right now: wait a few seconds and try again.';
    case 503:
      return 'The appliance cannot do this at the moment (or the feature is switched off): try again later, or ask its operator.';
    default:
      if (status >= 500) {
        return 'The appliance failed: try again; if it persists, give its operator the request id.';
      }
      return 'Try again; if it persists, reload the page.';
  }
}

/** An error box: what failed (with the server's own description), and what to do next. */
export function errorBox(what, err) {
  const description =
    (err && (err.description || err.message)) || String(err || 'unknown error');
  const status = err && typeof err.status === 'number' ? err.status : undefined;
  const meta = [];
  if (status) meta.push(`HTTP ${status}${err.reason ? ` ${err.reason}` : ''}`);
  if (status === 0) meta.push('network error');
  if (err && err.requestId) meta.push(`request id ${err.requestId}`);
  return h(
    'div',
    { class: 'notice error', role: 'alert' },
    h('strong', {}, `${what} failed: `),
    description,
    meta.length ? h('span', { class: 'meta' }, ` (${meta.join(', ')})`) : null,
    h('p', { class: 'next' }, nextStep(err)),
  );
}

/** A success or info line. */
export function notice(text, kind = 'ok') {
  return h('div', { class: `notice ${kind}`, role: 'status' }, text);
}

/**
 * Runs `fn` while `button` shows it is busy; puts an error box (or nothing) into `out`.
 * Returns fn's result, or undefined when it threw.
 */
export async function busy(button, out, what, fn) {
  const label = button ? button.textContent : '';
  if (button) {
    button.disabled = true;
    button.setAttribute('aria-busy', 'true');
  }
  if (out) replace(out);
  try {
    return await fn();
  } catch (err) {
    if (out) replace(out, errorBox(what, err));
    else console.error(what, err);
    return undefined;
  } finally {
    if (button) {
      button.disabled = false;
      button.removeAttribute('aria-busy');
      button.textContent = label;
    }
  }
}

/** A table from column titles and rows of cells (strings or nodes). */
export function table(caption, columns, rows, empty = 'Nothing yet.') {
  if (!rows.length) return h('p', { class: 'empty' }, empty);
  return h(
    'div',
    { class: 'table-wrap', tabindex: '0', role: 'region', 'aria-label': caption },
    h(
      'table',
      {},
      h('caption', { class: 'visually-hidden' }, caption),
      h('thead', {}, h('tr', {}, columns.map((c) => h('th', { scope: 'col' }, c)))),
      h(
        'tbody',
        {},
        rows.map((cells) =>
          h(
            'tr',
            {},
            cells.map((c, i) => h('td', { 'data-label': columns[i] }, c)),
          ),
        ),
      ),
    ),
  );
}

/** A section with a heading. */
export function section(title, ...children) {
  return h('section', { class: 'card' }, h('h2', {}, title), ...children);
}

/** Formats cents as dollars. */
export function dollars(cents) {
  const n = Number(cents);
  if (!Number.isFinite(n)) return String(cents);
  return `$${(n / 100).toFixed(2)}`;
}
