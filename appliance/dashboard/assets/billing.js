// Billing: balance, prices and a card top-up through Stripe's own client library.
//
// Stripe.js is loaded only when the user starts a top-up, from the URL the appliance
// configures (`billing.stripe_js_url`; the page's Content-Security-Policy admits that
// origin and no other). The flow: create_payment_intent → stripe.confirmCardPayment
// (the card goes from Stripe's element to Stripe, never through the appliance) →
// confirm_payment (the appliance asks Stripe and credits a succeeded payment once) →
// the new balance. Signed in with a ChainSecured account's admin wallet, every billing
// request carries its own X-Wallet-Auth: the wallet signs once per request (the balance,
// then the payment intent and its crediting).

import { h, replace, field, errorBox, notice, busy, section, dollars } from './dom.js';

let stripeLoading = null;

/** Loads Stripe.js once (a classic script from the configured origin). */
function loadStripeJs(url) {
  if (window.Stripe) return Promise.resolve(window.Stripe);
  if (!stripeLoading) {
    stripeLoading = new Promise((resolve, reject) => {
      const script = document.createElement('script');
      script.src = url;
      script.async = true;
      script.addEventListener('load', () => {
        if (window.Stripe) resolve(window.Stripe);
        else reject(new Error(`${url} loaded but defined no Stripe object`));
      });
      script.addEventListener('error', () => {
        stripeLoading = null;
        reject(Object.assign(new Error(`could not load Stripe.js from ${url}`), { status: 0 }));
      });
      document.head.append(script);
    });
  }
  return stripeLoading;
}

function billingOff() {
  return notice(
    'Billing is off on this appliance: every call is free, so there is nothing to top up. (Its operator turns billing on with the Stripe keys in the [billing] configuration.)',
    'info',
  );
}

export async function billingPage(body, ctx) {
  const balanceOut = h('div', { 'data-testid': 'balance' }, h('p', { class: 'empty' }, 'Loading…'));
  const pricesOut = h('div', {}, h('p', { class: 'empty' }, 'Loading…'));
  const topUpOut = h('div', {});

  function drawBalance(cents, display) {
    replace(
      balanceOut,
      h('p', { class: 'balance' }, h('strong', { 'data-testid': 'balance-value', 'data-cents': String(cents) }, display || dollars(cents))),
      ctx.wallet ? h('p', { class: 'hint' }, `Read with a BillingAuth signature of ${ctx.wallet.address}.`) : null,
    );
  }

  async function showBalance() {
    try {
      const b = await (await ctx.billingClient()).balance();
      drawBalance(b.balance_cents, b.balance_display);
      return b;
    } catch (err) {
      replace(balanceOut, errorBox('Reading the balance', err));
      return null;
    }
  }

  let prices = null;
  async function showPrices() {
    try {
      prices = await ctx.publicClient.prices();
      if (!prices.billing_enabled) {
        replace(pricesOut, billingOff());
        return;
      }
      replace(
        pricesOut,
        h(
          'dl',
          { class: 'kv' },
          h('dt', {}, 'Management write'),
          h('dd', {}, dollars(prices.management_write_cents)),
          h('dt', {}, 'Action run time'),
          h('dd', {}, `${dollars(prices.action_second_cents)} per started second (at least one second)`),
          h('dt', {}, 'Reads'),
          h('dd', {}, dollars(prices.read_cents)),
          h('dt', {}, 'Smallest top-up'),
          h('dd', {}, dollars(prices.minimum_payment_cents)),
          h('dt', {}, 'Currency'),
          h('dd', {}, String(prices.currency).toUpperCase()),
        ),
      );
    } catch (err) {
      replace(pricesOut, errorBox('Reading the prices', err));
    }
  }

  function drawTopUp() {
    if (!ctx.config.billing_enabled || (prices && !prices.billing_enabled)) {
      replace(topUpOut, billingOff());
      return;
    }
    const min = prices ? Number(prices.minimum_payment_cents) : 500;
    const amount = field('Amount (USD)', { type: 'number', min: String(min / 100), step: '0.01', value: String(Math.max(min, 1000) / 100), inputmode: 'decimal', 'data-testid': 'topup-amount' }, `At least ${dollars(min)}.`);
    const out = h('div', { 'aria-live': 'polite', 'data-testid': 'topup-result' });
    const cardHolder = h('div', {});
    const start = h('button', { type: 'button', 'data-testid': 'topup-start' }, 'Top up by card');
    start.addEventListener('click', () =>
      busy(start, out, 'Starting the card payment', async () => {
        const cents = Math.round(Number(amount.input.value) * 100);
        if (!Number.isFinite(cents) || cents < min) {
          replace(out, errorBox('Checking the amount', { status: 400, description: `the amount must be at least ${dollars(min)}` }));
          amount.input.focus();
          return;
        }
        let config;
        try {
          config = await ctx.publicClient.stripeConfig();
        } catch (err) {
          if (err && err.status === 503) {
            replace(topUpOut, billingOff());
            return;
          }
          throw err;
        }
        const Stripe = await loadStripeJs(ctx.config.stripe_js_url);
        const stripe = Stripe(config.publishable_key);
        const elements = stripe.elements();
        const card = elements.create('card');
        const mount = h('div', { id: 'card-element', 'data-testid': 'card-element' });
        const pay = h('button', { type: 'button', 'data-testid': 'topup-pay' }, `Pay ${dollars(cents)}`);
        const cancel = h('button', { type: 'button', class: 'ghost' }, 'Cancel');
        replace(
          cardHolder,
          h('p', {}, 'Card details go straight to Stripe; the appliance never sees them.'),
          mount,
          h('div', { class: 'row' }, pay, cancel),
        );
        card.mount(mount);
        amount.input.disabled = true;
        start.hidden = true;
        cancel.addEventListener('click', () => {
          card.destroy();
          replace(cardHolder);
          amount.input.disabled = false;
          start.hidden = false;
          start.focus();
        });
        pay.addEventListener('click', () =>
          busy(pay, out, 'The card payment', async () => {
            const intent = await (await ctx.billingClient()).createPaymentIntent({ amount_cents: cents });
            const result = await stripe.confirmCardPayment(intent.client_secret, { payment_method: { card } });
            if (result.error) {
              const message = result.error.message || 'the payment was declined or not authenticated';
              replace(out, errorBox('The card payment', { description: message }), h('p', {}, 'Check the card details, or use another card, and pay again. Nothing was charged.'));
              return;
            }
            if (!result.paymentIntent || result.paymentIntent.status !== 'succeeded') {
              replace(out, errorBox('The card payment', { description: `Stripe reports the payment as ${result.paymentIntent ? result.paymentIntent.status : 'unknown'}` }));
              return;
            }
            let confirmed;
            try {
              confirmed = await (await ctx.billingClient()).confirmPayment({ payment_intent_id: intent.payment_intent_id });
            } catch (err) {
              // The card was charged; crediting is idempotent, so asking again is safe.
              const retry = h('button', { type: 'button', 'data-testid': 'topup-retry' }, 'Credit the payment again');
              retry.addEventListener('click', () =>
                busy(retry, out, 'Crediting the payment', async () => {
                  const again = await (await ctx.billingClient()).confirmPayment({ payment_intent_id: intent.payment_intent_id });
                  replace(out, notice(`Paid: your balance is now ${dollars(again.balance_cents)}.`));
                  drawBalance(again.balance_cents);
                }),
              );
              replace(out, errorBox('Crediting the payment (your card was charged)', err), h('p', {}, `Payment ${intent.payment_intent_id} succeeded at Stripe; it is credited exactly once however often you ask.`), retry);
              return;
            }
            card.destroy();
            replace(cardHolder);
            amount.input.disabled = false;
            start.hidden = false;
            replace(out, notice(`Paid: ${dollars(confirmed.credited_cents)} credited. Your balance is now ${dollars(confirmed.balance_cents)}.`));
            // confirm_payment answers the new balance: no further request (nor signature).
            drawBalance(confirmed.balance_cents);
          }),
        );
      }),
    );
    replace(
      topUpOut,
      amount.wrap,
      ctx.wallet ? h('p', { class: 'hint' }, 'Your wallet signs twice: once to start the payment, once to credit it.') : null,
      h('div', { class: 'row' }, start),
      cardHolder,
      out,
    );
  }

  replace(
    body,
    h('div', { class: 'grid2' }, section('Balance', balanceOut), section('Prices', pricesOut)),
    section('Top up', topUpOut),
  );
  await Promise.all([showBalance(), showPrices()]);
  drawTopUp();
}
