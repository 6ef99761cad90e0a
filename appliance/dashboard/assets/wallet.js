// A browser wallet (EIP-1193 `window.ethereum`) as the dashboard uses it: connect
// (eth_requestAccounts), make sure it is on the appliance's chain (eth_chainId,
// wallet_switchEthereumChain: wallets refuse to sign typed data for another chain), sign
// the appliance's EIP-712 envelopes (eth_signTypedData_v4), build `X-Wallet-Auth`, and
// reach the AccountConfig contract through the wallet's own node (eth_call, eth_getLogs,
// eth_sendTransaction). The wallet's key never reaches the page; the page keeps only the
// address.

import { walletAuthHeader } from './appliance-sdk.js';
import {
  accountConvertedTopic,
  addressTopic,
  chainSecuredTypedData,
  checkAddress,
  createdAccountHash,
  decodeGetAccount,
  getAccountData,
} from './chain.js';

/** The injected provider, if the browser has a wallet. */
export function injectedProvider() {
  const p = typeof window !== 'undefined' ? window.ethereum : undefined;
  return p && typeof p.request === 'function' ? p : null;
}

/**
 * An error from the wallet, said for a person: what happened, and (in `next`) what to do
 * (dom.js's errorBox shows both).
 */
export function walletError(what, err) {
  const code = err && typeof err.code === 'number' ? err.code : undefined;
  const message = (err && (err.message || err.description)) || String(err);
  let next;
  if (code === 4001) next = 'You declined the request in your wallet. Start again and approve it there to go on.';
  else if (code === 4100) next = 'The wallet has not given this page access to the account: connect it again and allow this site.';
  else if (code === 4200) next = 'Your wallet does not support this request: use a wallet with EIP-712 signing (eth_signTypedData_v4).';
  else if (code === 4900 || code === 4901) next = 'The wallet is disconnected from its network: reconnect it, then try again.';
  else next = 'Check your wallet (it may be waiting for you, locked, or on another network), then try again.';
  return Object.assign(new Error(`${what}: ${message}`), { description: message, next, walletCode: code });
}

async function ask(provider, what, method, params) {
  try {
    return await provider.request(params === undefined ? { method } : { method, params });
  } catch (err) {
    throw walletError(what, err);
  }
}

function hexChain(id) {
  return `0x${Number(id).toString(16)}`;
}

const ISSUED_KEY = 'appliance-dashboard.issued-at.';
const lastIssued = new Map();

/**
 * A fresh `issuedAt` for (signer, flow, chain): now, or one second past the last one this
 * tab used. A wallet signs deterministically, so the same message twice is the same
 * signature, which the appliance accepts once; the last value is kept for the tab
 * (sessionStorage: a number, no secret), so a new sign-in or a reload within the same
 * seconds does not repeat one.
 */
export function freshIssuedAt(address, primaryType, chainId, now = Math.floor(Date.now() / 1000)) {
  const key = `${ISSUED_KEY}${String(address).toLowerCase()}|${primaryType}|${chainId}`;
  let last = lastIssued.get(key);
  if (last === undefined) {
    try {
      const stored = Number(sessionStorage.getItem(key));
      if (Number.isSafeInteger(stored) && stored > 0) last = stored;
    } catch {
      // No storage (a test, or refused): memory only.
    }
  }
  const issued = last !== undefined && last >= now ? last + 1 : now;
  lastIssued.set(key, issued);
  try {
    sessionStorage.setItem(key, String(issued));
  } catch {
    // Memory only.
  }
  return issued;
}

/**
 * A connected wallet: the address it signs with and the appliance's chain
 * (`get_node_chain_config`). Each signature gets its own `issuedAt` (freshIssuedAt).
 */
export class WalletSession {
  constructor(provider, address, chain) {
    this.provider = provider;
    this.address = checkAddress(address, 'the wallet address');
    this.chain = chain;
    this.apiKeyHash = null;
    this.pending = [];
  }

  /** Asks the wallet for its account (eth_requestAccounts) and checks its network. */
  static async connect(provider, chain) {
    if (!provider) throw walletError('Connecting the wallet', { message: 'no browser wallet in this browser (window.ethereum is missing)' });
    const accounts = await ask(provider, 'Connecting the wallet', 'eth_requestAccounts');
    if (!Array.isArray(accounts) || !accounts.length) {
      throw walletError('Connecting the wallet', { code: 4100, message: 'the wallet shared no account' });
    }
    const session = new WalletSession(provider, accounts[0], chain);
    await session.ensureChain();
    return session;
  }

  get chainId() {
    return Number(this.chain.chain_id);
  }

  /** The contract the account lives in, or null when the appliance names none. */
  get contract() {
    return this.chain.contract_address || null;
  }

  /** Switches the wallet to the appliance's chain if it is on another one. */
  async ensureChain() {
    const current = await ask(this.provider, 'Reading the wallet network', 'eth_chainId');
    if (Number(current) === this.chainId) return;
    try {
      await this.provider.request({ method: 'wallet_switchEthereumChain', params: [{ chainId: hexChain(this.chainId) }] });
    } catch (err) {
      const e = walletError(`Switching the wallet to ${this.chain.chain_name || 'the appliance chain'} (chain id ${this.chainId})`, err);
      if (err && err.code === 4902) {
        e.next = `Your wallet does not know chain ${this.chainId}: add ${this.chain.chain_name || 'it'} to the wallet (its network settings), switch to it, and try again.`;
      }
      throw e;
    }
    const after = await ask(this.provider, 'Reading the wallet network', 'eth_chainId');
    if (Number(after) !== this.chainId) {
      throw walletError('Switching the wallet network', { message: `the wallet is on chain ${Number(after)}, the appliance on ${this.chainId}` });
    }
  }

  /** The body a wallet-signature endpoint takes: {typed_data, signature}. */
  async sign(primaryType) {
    await this.ensureChain();
    const typed = chainSecuredTypedData(primaryType, this.address, this.chainId, freshIssuedAt(this.address, primaryType, this.chainId));
    const signature = await ask(this.provider, `Signing ${primaryType} in the wallet`, 'eth_signTypedData_v4', [this.address, JSON.stringify(typed)]);
    if (typeof signature !== 'string' || !/^0x[0-9a-fA-F]{130}$/.test(signature)) {
      throw walletError(`Signing ${primaryType}`, { message: 'the wallet returned something that is not a 65-byte signature' });
    }
    return { typed_data: typed, signature };
  }

  /** A fresh `X-Wallet-Auth` value (BillingAuth): good for exactly one request. */
  async authHeader() {
    return walletAuthHeader(await this.sign('BillingAuth'));
  }

  /**
   * The account on chain: {exists, managed, admin}, read through the wallet's node
   * (getAccount). Null when the appliance names no contract.
   */
  async accountOnChain(apiKeyHash) {
    if (!this.contract) return null;
    await this.ensureChain();
    const out = await ask(this.provider, 'Reading the account on chain', 'eth_call', [{ to: this.contract, data: getAccountData(apiKeyHash) }, 'latest']);
    return decodeGetAccount(out);
  }

  /**
   * The apiKeyHash of the account this wallet administers, as the chain tells it: the
   * AccountConverted log naming this wallet (a converted account keeps its own hash), else
   * keccak256 of the address (an account created on chain). Best effort: a node that
   * refuses a log query from block 0 leaves it to the user. Null when nothing matches.
   */
  async findApiKeyHash() {
    if (!this.contract) return null;
    try {
      const logs = await this.provider.request({
        method: 'eth_getLogs',
        params: [{ address: this.contract, fromBlock: '0x0', toBlock: 'latest', topics: [accountConvertedTopic(), null, addressTopic(this.address)] }],
      });
      if (Array.isArray(logs) && logs.length) {
        const last = logs[logs.length - 1];
        if (last && Array.isArray(last.topics) && last.topics[1]) return last.topics[1];
      }
    } catch {
      // The node limits log ranges: try the created-on-chain hash below.
    }
    const created = createdAccountHash(this.address);
    const onChain = await this.accountOnChain(created).catch(() => null);
    return onChain && onChain.exists && onChain.admin.toLowerCase() === this.address.toLowerCase() ? created : null;
  }

  /** Sends a transaction to the contract from this wallet; resolves with its hash. */
  async send(data) {
    if (!this.contract) throw walletError('Sending the transaction', { message: 'the appliance names no AccountConfig contract' });
    await this.ensureChain();
    return ask(this.provider, 'Sending the transaction from the wallet', 'eth_sendTransaction', [{ from: this.address, to: this.contract, data }]);
  }

  /** Waits for a transaction's receipt (polling the wallet's node); {status, blockNumber}. */
  async receipt(hash, { timeoutMs = 180000, intervalMs = 1000 } = {}) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const r = await ask(this.provider, 'Reading the transaction receipt', 'eth_getTransactionReceipt', [hash]);
      if (r) return { ok: r.status === '0x1' || r.status === 1, blockNumber: Number(r.blockNumber) };
      if (Date.now() > deadline) throw walletError('Waiting for the transaction', { message: `${hash} is not mined after ${Math.round(timeoutMs / 1000)} s` });
      await new Promise((resolve) => setTimeout(resolve, intervalMs));
    }
  }

  /** Calls `fn` when the wallet switches account or disconnects (EIP-1193 events). */
  onChange(fn) {
    if (typeof this.provider.on !== 'function') return () => {};
    const accounts = (list) => {
      if (!Array.isArray(list) || !list.length || String(list[0]).toLowerCase() !== this.address.toLowerCase()) fn('accountsChanged');
    };
    const disconnect = () => fn('disconnect');
    this.provider.on('accountsChanged', accounts);
    this.provider.on('disconnect', disconnect);
    return () => {
      if (typeof this.provider.removeListener === 'function') {
        this.provider.removeListener('accountsChanged', accounts);
        this.provider.removeListener('disconnect', disconnect);
      }
    };
  }
}
