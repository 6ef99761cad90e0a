// ChainSecured accounts with a browser wallet (EIP-1193, wallet.js):
//
// * signing in as a ChainSecured account's admin wallet (the appliance accepts its
//   BillingAuth signature on GET /billing/balance: then the wallet administers an account
//   here);
// * converting the signed-in API-mode account (account key) to ChainSecured: the wallet
//   signs ConvertAccount, the account key sends it, and from then on the key is refused;
// * minting a wallet (CreateWallet) and a usage key with its wallet (AddUsageApiKey) for
//   the admin wallet, and the AccountConfig calls that make them the account's, which only
//   the admin wallet may send (registerWalletDerivation, setUsageApiKey; both at once
//   through multicall): shown with their arguments and calldata, and sent from the
//   wallet on request.

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
  section,
  dollars,
} from './dom.js';
import { WalletSession, injectedProvider } from './wallet.js';
import { multicallData, parseGroupIds, registerWalletCall, setUsageKeyCall, toUint, hex32 } from './chain.js';

const HASH_KEY = 'appliance-dashboard.api-key-hash.';

/** The apiKeyHash remembered in this tab for `address` (public on chain; not a key). */
function rememberedHash(address) {
  try {
    return sessionStorage.getItem(HASH_KEY + address.toLowerCase());
  } catch {
    return null;
  }
}

function rememberHash(address, hash) {
  try {
    sessionStorage.setItem(HASH_KEY + address.toLowerCase(), hash);
  } catch {
    // Memory only.
  }
}

function noWallet() {
  return notice(
    'No browser wallet found in this browser (window.ethereum). Install or enable a wallet extension that supports EIP-712 signing (eth_signTypedData_v4), then reload this page.',
    'info',
  );
}

function chainLabel(chain) {
  return `${chain.chain_name || 'chain'} (chain id ${chain.chain_id})`;
}

// ---------------------------------------------------------------------------- sign in

/** The sign-in page's section: sign in as a ChainSecured account's admin wallet. */
export function walletSignInSection(ctx) {
  const out = h('div', { 'aria-live': 'polite', 'data-testid': 'wallet-signin-result' });
  const provider = injectedProvider();
  const button = h('button', { type: 'button', 'data-testid': 'wallet-signin' }, 'Sign in with a browser wallet');
  button.addEventListener('click', () =>
    busy(button, out, 'Signing in with the wallet', async () => {
      const chain = await ctx.publicClient.getNodeChainConfig();
      const session = await WalletSession.connect(injectedProvider(), chain);
      // One BillingAuth signature read with the balance: accepted only when this wallet
      // administers a ChainSecured account here.
      let balance;
      try {
        balance = await ctx.publicClient.withWalletAuth(await session.authHeader()).balance();
      } catch (err) {
        if (err && err.status === 401) {
          err.next = `${session.address} administers no ChainSecured account on this appliance. To make one, sign in with the account key of an API-mode account and convert it on its ChainSecured page.`;
        }
        throw err;
      }
      session.balanceAtSignIn = balance;
      session.apiKeyHash = rememberedHash(session.address);
      ctx.signInWallet(session);
      ctx.navigate('chainsecured');
    }),
  );
  return section(
    'Sign in with a browser wallet (ChainSecured)',
    h('p', {}, 'For an account administered on chain by its admin wallet. Your wallet signs a BillingAuth message for each billing request; no key is sent, and the page keeps only your address.'),
    provider ? h('div', { class: 'row' }, button) : noWallet(),
    out,
  );
}

// ---------------------------------------------------------------------------- page

export async function chainSecuredPage(body, ctx) {
  if (ctx.wallet) return walletAccountPage(body, ctx);
  return convertPage(body, ctx);
}

/** Signed in with the account key: convert the account. */
async function convertPage(body, ctx) {
  const out = h('div', { 'aria-live': 'polite', 'data-testid': 'convert-result' });
  const step = h('div', {});
  const provider = injectedProvider();
  const connect = h('button', { type: 'button', 'data-testid': 'convert-connect' }, 'Connect a browser wallet');
  connect.addEventListener('click', () =>
    busy(connect, out, 'Connecting the wallet', async () => {
      const chain = await ctx.publicClient.getNodeChainConfig();
      const session = await WalletSession.connect(injectedProvider(), chain);
      const confirm = checkbox('I understand: the account key stops working, and this cannot be undone.', { 'data-testid': 'convert-confirm' });
      const convert = h('button', { type: 'button', class: 'danger', 'data-testid': 'convert-start' }, 'Convert to ChainSecured');
      convert.addEventListener('click', () =>
        busy(convert, out, 'Converting the account', async () => {
          if (!confirm.input.checked) {
            replace(out, notice('Tick the box first: converting cannot be undone.', 'error'));
            confirm.input.focus();
            return;
          }
          const signed = await session.sign('ConvertAccount');
          const converted = await ctx.client.convertToChainSecuredAccount({
            new_admin_wallet_address: session.address,
            typed_data: signed.typed_data,
            signature: signed.signature,
          });
          session.apiKeyHash = converted.api_key_hash;
          rememberHash(session.address, converted.api_key_hash);
          ctx.handoff.converted = converted;
          ctx.signInWallet(session);
          ctx.navigate('chainsecured');
        }),
      );
      replace(
        step,
        h(
          'dl',
          { class: 'kv', 'data-testid': 'convert-wallet' },
          h('dt', {}, 'New admin wallet'),
          h('dd', {}, h('code', {}, session.address)),
          h('dt', {}, 'Chain'),
          h('dd', {}, chainLabel(chain)),
        ),
        confirm.wrap,
        h('div', { class: 'row' }, convert),
      );
      connect.hidden = true;
      confirm.input.focus();
    }),
  );
  replace(
    body,
    section(
      'Convert this account to ChainSecured',
      h('p', {}, 'A ChainSecured account is administered on chain by a wallet you hold, not by the appliance:'),
      h(
        'ul',
        {},
        h('li', {}, 'Your wallet signs ConvertAccount; the appliance records the conversion and its API payer sends convertToChainSecuredAccount to the AccountConfig contract.'),
        h('li', {}, 'The account key stops working at once. Groups, wallets, actions, usage keys and credit stay; usage keys keep running actions.'),
        h('li', {}, 'From then on the admin wallet changes the account by sending AccountConfig transactions itself, and pays by card with wallet signatures (X-Wallet-Auth).'),
      ),
      provider ? h('div', { class: 'row' }, connect) : noWallet(),
      step,
      out,
    ),
  );
}

/** Signed in with the admin wallet. */
async function walletAccountPage(body, ctx) {
  const session = ctx.wallet;
  const chain = session.chain;

  // The account's identity on chain.
  const hashField = field('apiKeyHash (the account on chain)', { type: 'text', spellcheck: 'false', autocomplete: 'off', 'data-testid': 'cs-api-key-hash', value: session.apiKeyHash || '' }, 'A converted account keeps the apiKeyHash the conversion showed; one created on chain has keccak256 of its admin address. Every call below names it.');
  const onChainOut = h('div', { 'data-testid': 'cs-onchain', 'aria-live': 'polite' });
  const check = h('button', { type: 'button', class: 'ghost', 'data-testid': 'cs-check' }, 'Check on chain');

  function currentHash() {
    const text = hashField.input.value.trim();
    if (!text) return null;
    try {
      return hex32(toUint(text, 'apiKeyHash'));
    } catch {
      return null;
    }
  }

  /** {ok, text}: whether the admin may write the account on chain now. */
  async function chainStatus() {
    const hash = currentHash();
    if (!hash) return { ok: false, text: 'Enter the account\'s apiKeyHash (0x + 64 hex) first.' };
    const account = await session.accountOnChain(hash);
    if (!account) return { ok: false, text: 'This appliance names no AccountConfig contract: there is no chain to write to.' };
    if (!account.exists) return { ok: false, text: `No account ${hash} on chain yet. A conversion is sent by the appliance's API payer: check again in a minute.` };
    if (account.managed) return { ok: false, text: 'On chain the account is still managed by the appliance: the conversion transaction is not mined yet. Check again in a minute.' };
    if (account.admin.toLowerCase() !== session.address.toLowerCase()) {
      return { ok: false, text: `On chain this account is administered by ${account.admin}, not by your wallet ${session.address}.` };
    }
    return { ok: true, text: `ChainSecured on chain, administered by your wallet ${session.address}.` };
  }

  async function showChainStatus(button) {
    await busy(button, onChainOut, 'Reading the account on chain', async () => {
      const status = await chainStatus();
      replace(onChainOut, notice(status.text, status.ok ? 'ok' : 'warn'));
    });
  }

  check.addEventListener('click', () => showChainStatus(check));
  hashField.input.addEventListener('change', () => {
    const hash = currentHash();
    if (hash) {
      session.apiKeyHash = hash;
      rememberHash(session.address, hash);
    }
    drawCalls();
  });

  // Mint a wallet.
  const walletName = field('Name (for the chain registration)', { type: 'text', 'data-testid': 'mint-wallet-name' });
  const walletDescription = field('Description (optional)', { type: 'text' });
  const walletOut = h('div', { 'aria-live': 'polite', 'data-testid': 'minted-wallet' });
  const mintWallet = h('button', { type: 'button', 'data-testid': 'mint-wallet' }, 'Mint a wallet');
  mintWallet.addEventListener('click', () =>
    busy(mintWallet, walletOut, 'Minting the wallet', async () => {
      const name = walletName.input.value.trim();
      const description = walletDescription.input.value.trim();
      const signed = await session.sign('CreateWallet');
      const minted = await ctx.publicClient.createWalletWithSignature(signed);
      session.pending.push({
        purpose: `register wallet ${minted.wallet_address}`,
        build: (apiKeyHash) => registerWalletCall({ apiKeyHash, wallet: minted.wallet_address, derivationPath: minted.derivation_path, name, description }),
      });
      replace(
        walletOut,
        notice('Wallet minted. It joins the account once your wallet registers it on chain (below).'),
        h(
          'dl',
          { class: 'kv' },
          h('dt', {}, 'Address'),
          h('dd', {}, copyable(minted.wallet_address, 'Copy address')),
          h('dt', {}, 'Derivation path'),
          h('dd', {}, h('code', {}, minted.derivation_path)),
          h('dt', {}, 'pkp_id'),
          h('dd', {}, h('code', {}, minted.pkp_id)),
        ),
      );
      drawCalls();
    }),
  );

  // Mint a usage key (and its wallet).
  const keyName = field('Name', { type: 'text', 'data-testid': 'mint-key-name' });
  const keyDescription = field('Description (optional)', { type: 'text' });
  const expires = field('Expires (optional, UTC)', { type: 'datetime-local', 'data-testid': 'mint-key-expires' }, 'From that second on the key authenticates nothing. Empty: never.');
  const flags = {
    canCreateGroups: checkbox('Create groups'),
    canDeleteGroups: checkbox('Delete groups'),
    canCreatePkps: checkbox('Create wallets'),
  };
  const lists = {
    executeInGroups: field('Execute actions in groups', { type: 'text', inputmode: 'numeric', 'data-testid': 'mint-key-execute' }, 'Group ids, comma-separated; 0 means every group (present and future).'),
    manageIpfsIdsInGroups: field('Manage actions in groups', { type: 'text', inputmode: 'numeric' }),
    addPkpToGroups: field('Add wallets to groups', { type: 'text', inputmode: 'numeric' }),
    removePkpFromGroups: field('Remove wallets from groups', { type: 'text', inputmode: 'numeric' }),
  };
  const keyOut = h('div', { 'aria-live': 'polite', 'data-testid': 'minted-key' });
  const mintKey = h('button', { type: 'button', 'data-testid': 'mint-key' }, 'Mint a usage key');
  mintKey.addEventListener('click', () =>
    busy(mintKey, keyOut, 'Minting the usage key', async () => {
      const permissions = {
        canCreateGroups: flags.canCreateGroups.input.checked,
        canDeleteGroups: flags.canDeleteGroups.input.checked,
        canCreatePkps: flags.canCreatePkps.input.checked,
      };
      for (const [prop, f] of Object.entries(lists)) {
        try {
          permissions[prop] = parseGroupIds(f.input.value, 'a group id');
        } catch (err) {
          replace(keyOut, errorBox('Checking the permissions', { status: 400, description: err.message }));
          f.input.focus();
          return;
        }
      }
      let expiration = 0;
      if (expires.input.value) {
        const t = Date.parse(`${expires.input.value}Z`);
        if (Number.isNaN(t)) {
          replace(keyOut, errorBox('Checking the expiry', { status: 400, description: 'not a date and time' }));
          return;
        }
        expiration = Math.floor(t / 1000);
      }
      const name = keyName.input.value.trim();
      const description = keyDescription.input.value.trim();
      const signed = await session.sign('AddUsageApiKey');
      const minted = await ctx.publicClient.addUsageApiKeyWithSignature(signed);
      session.pending.push({
        purpose: `register the usage key's wallet ${minted.wallet_address}`,
        build: (apiKeyHash) => registerWalletCall({ apiKeyHash, wallet: minted.wallet_address, derivationPath: minted.derivation_path, name: name ? `${name} wallet` : '', description: '' }),
      });
      session.pending.push({
        purpose: `set usage key ${name || minted.usage_api_key_hash.slice(0, 10)} and its permissions`,
        build: (apiKeyHash) => setUsageKeyCall({ apiKeyHash, usageKeyHash: minted.usage_api_key_hash, expiration, name, description, permissions }),
      });
      replace(
        keyOut,
        secretOnce('Your new usage key', minted.usage_api_key, 'Copy it now: it is shown only this once. It authenticates nothing until your wallet registers it on chain (below); then it has exactly the permissions you chose.'),
        h(
          'dl',
          { class: 'kv' },
          h('dt', {}, 'Key hash'),
          h('dd', {}, h('code', { 'data-testid': 'minted-key-hash' }, minted.usage_api_key_hash)),
          h('dt', {}, 'Its wallet'),
          h('dd', {}, copyable(minted.wallet_address, 'Copy address')),
        ),
      );
      drawCalls();
    }),
  );

  // The calls the admin wallet must send.
  const callsOut = h('div', { 'data-testid': 'pending-calls' });
  const sendOut = h('div', { 'aria-live': 'polite', 'data-testid': 'send-result' });

  function drawCalls() {
    const open = session.pending.filter((p) => !p.sent);
    if (!open.length) {
      replace(callsOut, h('p', { class: 'empty' }, 'Nothing to send. Mint a wallet or a usage key above: the calls that make them the account\'s appear here.'));
      return;
    }
    const hash = currentHash();
    const items = [];
    const datas = [];
    for (const p of open) {
      let call = null;
      let problem = null;
      if (!hash) problem = 'Enter the account\'s apiKeyHash above to encode this call.';
      else {
        try {
          call = p.build(hash);
        } catch (err) {
          problem = err.message;
        }
      }
      if (call) datas.push(call.data);
      const dismiss = h('button', { type: 'button', class: 'ghost small' }, 'Dismiss');
      dismiss.addEventListener('click', () => {
        session.pending = session.pending.filter((q) => q !== p);
        drawCalls();
      });
      items.push(
        h(
          'li',
          { class: 'call', 'data-call': call ? call.fn : 'unencoded' },
          h('h3', {}, call ? call.fn : 'call', h('span', { class: 'hint' }, ` — ${p.purpose}`)),
          call
            ? [
                h('dl', { class: 'kv' }, call.args.map(([name, value]) => [h('dt', {}, name), h('dd', {}, h('code', {}, value))])),
                h('p', { class: 'hint' }, call.signature),
                h('p', {}, 'Calldata: ', copyable(call.data, 'Copy calldata')),
              ]
            : notice(problem, 'warn'),
          h('div', { class: 'row' }, dismiss),
        ),
      );
    }
    const send = h('button', { type: 'button', 'data-testid': 'send-calls' }, open.length > 1 ? `Send all ${open.length} calls from your wallet (one transaction)` : 'Send from your wallet');
    send.disabled = !session.contract || datas.length !== open.length;
    send.addEventListener('click', () =>
      busy(send, sendOut, 'Sending the calls', async () => {
        const status = await chainStatus();
        if (!status.ok) {
          replace(sendOut, notice(`Not sent: ${status.text}`, 'warn'));
          return;
        }
        const data = datas.length === 1 ? datas[0] : multicallData(datas);
        replace(sendOut, notice('Waiting for your wallet to send the transaction…', 'info'));
        const txHash = await session.send(data);
        replace(sendOut, notice(`Sent: transaction ${txHash}. Waiting for it to be mined…`, 'info'));
        const receipt = await session.receipt(txHash);
        if (!receipt.ok) {
          replace(sendOut, errorBox('The transaction', { description: `${txHash} was mined in block ${receipt.blockNumber} but reverted: nothing changed` }));
          return;
        }
        for (const p of open) p.sent = txHash;
        replace(
          sendOut,
          notice(`Done: transaction ${txHash} was mined in block ${receipt.blockNumber}. The appliance applies it as soon as its indexer reads that block; minted usage keys work from then on.`),
        );
        drawCalls();
      }),
    );
    replace(
      callsOut,
      h('p', {}, `Only your wallet can make these: send them from ${session.address} to AccountConfig ${session.contract || '(none configured)'} on ${chainLabel(chain)}. With more than one, the button sends them together through multicall (all or none).`),
      session.contract ? null : notice('This appliance names no AccountConfig contract (get_node_chain_config): the calls cannot be sent until its operator configures the chain.', 'warn'),
      h('ol', { class: 'calls' }, items),
      h('div', { class: 'row' }, send),
    );
  }

  const converted = ctx.handoff.converted;
  delete ctx.handoff.converted;
  const balance = session.balanceAtSignIn;

  replace(
    body,
    converted
      ? h(
          'div',
          { class: 'notice ok', role: 'status', 'data-testid': 'converted' },
          h('strong', {}, 'Converted: the account is ChainSecured. '),
          `It is administered by ${converted.wallet_address}; the account key no longer works. The appliance's API payer sends convertToChainSecuredAccount on chain. Note the apiKeyHash below: it names the account on chain.`,
        )
      : null,
    section(
      'Your ChainSecured account',
      h(
        'dl',
        { class: 'kv', 'data-testid': 'cs-account' },
        h('dt', {}, 'Admin wallet'),
        h('dd', {}, h('code', { 'data-testid': 'cs-admin' }, session.address)),
        h('dt', {}, 'Chain'),
        h('dd', {}, chainLabel(chain)),
        h('dt', {}, 'AccountConfig'),
        h('dd', {}, session.contract ? h('code', {}, session.contract) : 'none configured'),
        balance ? [h('dt', {}, 'Balance at sign-in'), h('dd', {}, balance.balance_display || dollars(balance.balance_cents))] : null,
      ),
      hashField.wrap,
      session.contract ? h('div', { class: 'row' }, check) : null,
      onChainOut,
    ),
    h(
      'div',
      { class: 'grid2' },
      section(
        'Mint a wallet',
        h('p', { class: 'hint' }, 'Your wallet signs CreateWallet; the appliance makes a wallet whose key stays in its key service.'),
        walletName.wrap,
        walletDescription.wrap,
        h('div', { class: 'row' }, mintWallet),
        walletOut,
      ),
      section(
        'Mint a usage key',
        h('p', { class: 'hint' }, 'Your wallet signs AddUsageApiKey; the appliance makes a usage key and a wallet for it. Choose its permissions now: they go into the setUsageApiKey call.'),
        keyName.wrap,
        keyDescription.wrap,
        expires.wrap,
        h('fieldset', { class: 'plain' }, h('legend', {}, 'May'), Object.values(flags).map((f) => f.wrap)),
        Object.values(lists).map((f) => f.wrap),
        h('div', { class: 'row' }, mintKey),
        keyOut,
      ),
    ),
    section('On-chain calls still to make', callsOut, sendOut),
  );
  drawCalls();

  // Find the apiKeyHash on chain when this tab does not know it.
  if (!session.apiKeyHash && session.contract) {
    const found = await session.findApiKeyHash().catch(() => null);
    if (found && !hashField.input.value.trim()) {
      hashField.input.value = found;
      session.apiKeyHash = found;
      rememberHash(session.address, found);
      drawCalls();
    }
  }
  if (session.contract && currentHash()) await showChainStatus(null);
}
