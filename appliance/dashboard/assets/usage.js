// Usage: the account's usage history from GET /core/v1/billing/usage (every charge, top-up
// and the initial credit, with the balance after each, newest first), a page at a time,
// optionally between two dates. Signed in with a ChainSecured account's admin wallet, each
// page is read with its own X-Wallet-Auth signature.

import { h, replace, field, errorBox, busy, table, section, dollars } from './dom.js';

export const USAGE_PATH = '/core/v1/billing/usage';
/** The number of the first page. */
export const FIRST_PAGE = 0;
export const PAGE_SIZE = 50;

const KINDS = { charge: 'Charge', top_up: 'Top-up', initial: 'Initial credit' };

/**
 * The wire format in one place: the query of a page (`page_number` from 0 and `page_size`,
 * as every list endpoint; `from` inclusive and `to` exclusive, Unix seconds), and one
 * history entry as the page shows it. Unknown kinds are shown as sent.
 */
export function usageQuery({ page, pageSize, from, to }) {
  const query = { page_number: page, page_size: pageSize };
  if (from !== undefined && from !== null) query.from = from;
  if (to !== undefined && to !== null) query.to = to;
  return query;
}

function optional(value) {
  return value === null || value === undefined || value === '' ? null : String(value);
}

export function usageEntry(item) {
  return {
    time: Number(item.at_unix ?? item.time),
    kind: String(item.kind),
    kindLabel: KINDS[item.kind] || String(item.kind),
    operation: optional(item.operation) || '',
    actionCid: optional(item.action_cid),
    amountCents: Number(item.amount_cents),
    balanceAfterCents: Number(item.balance_after_cents),
    requestId: optional(item.request_id),
  };
}

/** The answer (an array of entries; `{items: [...]}` is read too) → the entries. */
export function usageResponse(json) {
  const items = Array.isArray(json) ? json : json && Array.isArray(json.items) ? json.items : null;
  if (!items) throw new TypeError('the usage history is not a list of entries');
  return items.map(usageEntry);
}

/** Seconds as `YYYY-MM-DD HH:MM:SS UTC`. */
export function utcTime(seconds) {
  const d = new Date(seconds * 1000);
  return Number.isNaN(d.getTime()) ? String(seconds) : `${d.toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

/** Cents with a sign: `+$12.34`, `−$0.01`. */
export function signedDollars(cents) {
  if (!Number.isFinite(cents)) return String(cents);
  if (cents < 0) return `−${dollars(-cents)}`;
  return `+${dollars(cents)}`;
}

/**
 * A `YYYY-MM-DD` date input's value as Unix seconds (UTC): the start of that day, or for
 * the end of a range (exclusive) the start of the next.
 */
function dayBound(value, end) {
  if (!value) return null;
  const t = Date.parse(`${value}T00:00:00Z`);
  if (Number.isNaN(t)) return null;
  return Math.floor(t / 1000) + (end ? 86400 : 0);
}

async function fetchUsage(ctx, query) {
  const client = await ctx.billingClient();
  let result;
  try {
    result = await client.raw.GET(USAGE_PATH, { params: { query } });
  } catch (cause) {
    throw { status: 0, description: `no answer from the appliance (${cause && cause.message ? cause.message : cause})` };
  }
  const { data, error, response } = result;
  if (response.ok) return usageResponse(data);
  const e = error && error.error;
  throw {
    status: response.status,
    reason: (e && e.reason) || response.statusText,
    description: (e && e.description) || `HTTP ${response.status}`,
    requestId: response.headers.get('x-request-id') || undefined,
  };
}

export async function usagePage(body, ctx) {
  const from = field('From (UTC day, optional)', { type: 'date', 'data-testid': 'usage-from' });
  const to = field('To (UTC day, optional)', { type: 'date', 'data-testid': 'usage-to' });
  const apply = h('button', { type: 'button', 'data-testid': 'usage-apply' }, 'Show');
  const listOut = h('div', { 'data-testid': 'usage-list', 'aria-live': 'polite' }, h('p', { class: 'empty' }, 'Loading…'));
  const prev = h('button', { type: 'button', class: 'ghost', 'data-testid': 'usage-prev' }, 'Previous page');
  const next = h('button', { type: 'button', class: 'ghost', 'data-testid': 'usage-next' }, 'Next page');
  const pageLabel = h('span', { 'data-testid': 'usage-page' });
  let page = FIRST_PAGE;

  async function load(button) {
    await busy(button, null, 'Reading the usage history', async () => {
      const query = usageQuery({ page, pageSize: PAGE_SIZE, from: dayBound(from.input.value, false), to: dayBound(to.input.value, true) });
      let got;
      try {
        got = await fetchUsage(ctx, query);
      } catch (err) {
        replace(listOut, errorBox('Reading the usage history', err));
        prev.disabled = page === FIRST_PAGE;
        next.disabled = true;
        return;
      }
      const rows = got.map((e) => [
        h('span', { 'data-time': String(e.time) }, utcTime(e.time)),
        h('span', { 'data-kind': e.kind }, e.kindLabel),
        e.operation ? [h('code', {}, e.operation), e.actionCid ? [' ', h('code', { class: 'hint' }, e.actionCid)] : null] : '—',
        h('span', { 'data-cents': String(e.amountCents), class: e.amountCents < 0 ? 'debit' : 'credit' }, signedDollars(e.amountCents)),
        h('span', { 'data-cents': String(e.balanceAfterCents) }, dollars(e.balanceAfterCents)),
        e.requestId ? h('code', {}, e.requestId) : '—',
      ]);
      replace(
        listOut,
        table('Usage history', ['Time', 'Kind', 'Operation', 'Amount', 'Balance after', 'Request id'], rows, page === FIRST_PAGE ? 'No usage in this period.' : 'No more entries.'),
      );
      pageLabel.textContent = `Page ${page - FIRST_PAGE + 1}`;
      prev.disabled = page === FIRST_PAGE;
      next.disabled = got.length < PAGE_SIZE;
    });
  }

  apply.addEventListener('click', () => {
    page = FIRST_PAGE;
    load(apply);
  });
  prev.addEventListener('click', () => {
    if (page > FIRST_PAGE) page -= 1;
    load(prev);
  });
  next.addEventListener('click', () => {
    page += 1;
    load(next);
  });
  prev.disabled = true;
  next.disabled = true;

  replace(
    body,
    section(
      'Usage history',
      h('p', { class: 'hint' }, 'Every charge (management writes and action run time), every top-up and the initial credit, newest first, with the balance after each.'),
      ctx.wallet ? h('p', { class: 'hint' }, 'Each page is read with a BillingAuth signature of your wallet.') : null,
      h('div', { class: 'grid2' }, from.wrap, to.wrap),
      h('div', { class: 'row' }, apply),
      listOut,
      h('div', { class: 'row' }, prev, pageLabel, next),
    ),
  );
  await load(null);
}
