// The dashboard's Ethereum code (appliance/dashboard/assets/chain.js: keccak256, the ABI
// encoding of the AccountConfig calls, the EIP-712 envelope) against viem 2.57.20 and the
// contract's committed ABI (contracts/artifacts/AccountConfig.json), plus the usage
// page's wire mapping (usage.js).
//
//   NODE_PATH=~/.cache/appliance-tools/node/node_modules node --test tests/browser/chain.test.mjs
//
// Run by tests/e2e/dashboard.rs (cargo test -p e2e dashboard::), which sets NODE_PATH to
// the tools cache scripts/setup fills.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import {
  accountConvertedTopic,
  addressTopic,
  bytesToHex,
  chainSecuredTypedData,
  createdAccountHash,
  decodeGetAccount,
  getAccountData,
  keccak256,
  multicallData,
  parseGroupIds,
  registerWalletCall,
  selector,
  setUsageKeyCall,
  toUint,
  ACCOUNT_CONFIG,
} from '../../appliance/dashboard/assets/chain.js';
import { usageEntry, usageQuery, usageResponse, signedDollars, utcTime } from '../../appliance/dashboard/assets/usage.js';

const nodeModules = process.env.NODE_PATH || join(homedir(), '.cache', 'appliance-tools', 'node', 'node_modules');
const require = createRequire(join(nodeModules, 'noop.js'));
const viem = require('viem');
const { privateKeyToAccount } = require('viem/accounts');

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const { abi } = JSON.parse(readFileSync(join(root, 'contracts/artifacts/AccountConfig.json'), 'utf8'));
const vectors = JSON.parse(readFileSync(join(root, 'tests/vectors/eip712.json'), 'utf8')).vectors;

const API_KEY_HASH = '0x8f3a6d2b1c0e9f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a';
const WALLET = '0x70997970C51812dc3A010C7d01b50e0d17dc79C8';
const PATH = '0x70997970c51812dc3a010c7d01b50e0d17dc79c8a1b2c3d4e5f60718293a4b5c';

test('keccak256 equals viem on every length around the rate (136 bytes)', () => {
  for (const n of [0, 1, 31, 32, 33, 135, 136, 137, 271, 272, 273, 1000]) {
    const bytes = Uint8Array.from({ length: n }, (_, i) => (i * 131 + n) & 0xff);
    assert.equal(`0x${bytesToHex(keccak256(bytes))}`, viem.keccak256(bytes), `length ${n}`);
  }
  assert.equal(`0x${bytesToHex(keccak256(''))}`, '0xc5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470');
  assert.equal(`0x${bytesToHex(keccak256('wallet ✓'))}`, viem.keccak256(viem.toBytes('wallet ✓')));
});

test('the selectors are the contract ABI’s', () => {
  for (const [name, { params }] of Object.entries(ACCOUNT_CONFIG)) {
    const item = abi.find((i) => i.type === 'function' && i.name === name);
    assert.ok(item, `${name} is in the ABI`);
    assert.equal(selector(name, params.map(([, t]) => t)), viem.toFunctionSelector(item), name);
    assert.deepEqual(params.map(([n]) => n), item.inputs.map((i) => i.name), `${name}'s parameter names`);
  }
  const event = abi.find((i) => i.type === 'event' && i.name === 'AccountConverted');
  assert.equal(accountConvertedTopic(), viem.toEventSelector(event));
  assert.equal(addressTopic(WALLET), viem.pad(WALLET.toLowerCase()));
});

test('registerWalletDerivation calldata equals viem’s, and decodes to the arguments', () => {
  const call = registerWalletCall({ apiKeyHash: API_KEY_HASH, wallet: WALLET, derivationPath: PATH, name: 'hot wallet ✓', description: '' });
  const expected = viem.encodeFunctionData({
    abi,
    functionName: 'registerWalletDerivation',
    args: [BigInt(API_KEY_HASH), WALLET, BigInt(PATH), 'hot wallet ✓', ''],
  });
  assert.equal(call.data, expected);
  const decoded = viem.decodeFunctionData({ abi, data: call.data });
  assert.equal(decoded.functionName, 'registerWalletDerivation');
  assert.equal(decoded.args[1], WALLET);
  assert.deepEqual(call.args.find(([n]) => n === 'derivationPath'), ['derivationPath', PATH]);
});

test('setUsageApiKey calldata equals viem’s, permissions tuple and all', () => {
  const permissions = {
    canCreateGroups: true,
    canDeleteGroups: false,
    canCreatePkps: true,
    manageIpfsIdsInGroups: [],
    addPkpToGroups: [3n, 7n],
    removePkpFromGroups: [2n ** 62n + 1n],
    executeInGroups: [0n],
  };
  const call = setUsageKeyCall({
    apiKeyHash: API_KEY_HASH,
    usageKeyHash: '0x00000000000000000000000000000000000000000000000000000000000000ff',
    expiration: 1893456000,
    name: 'ci',
    description: 'a description longer than one thirty-two byte word, with ünïcode',
    permissions,
  });
  const expected = viem.encodeFunctionData({
    abi,
    functionName: 'setUsageApiKey',
    args: [
      BigInt(API_KEY_HASH),
      255n,
      1893456000n,
      0n,
      'ci',
      'a description longer than one thirty-two byte word, with ünïcode',
      permissions,
    ],
  });
  assert.equal(call.data, expected);
  assert.match(call.args.find(([n]) => n === 'expiration')[1], /^1893456000 \(2030-01-01T00:00:00\.000Z\)$/);
  assert.match(call.args.find(([n]) => n === 'permissions')[1], /executeInGroups: \[0\]/);
});

test('multicall of both calls equals viem’s; getAccount round-trips', () => {
  const a = registerWalletCall({ apiKeyHash: API_KEY_HASH, wallet: WALLET, derivationPath: PATH });
  const b = setUsageKeyCall({ apiKeyHash: API_KEY_HASH, usageKeyHash: '0x01', permissions: { executeInGroups: [0n] } });
  assert.equal(multicallData([a.data, b.data]), viem.encodeFunctionData({ abi, functionName: 'multicall', args: [[a.data, b.data]] }));
  assert.equal(getAccountData(API_KEY_HASH), viem.encodeFunctionData({ abi, functionName: 'getAccount', args: [BigInt(API_KEY_HASH)] }));
  const answer = viem.encodeFunctionResult({ abi, functionName: 'getAccount', result: [true, false, WALLET, 'name', 'description'] });
  assert.deepEqual(decodeGetAccount(answer), { exists: true, managed: false, admin: WALLET.toLowerCase() });
  const none = viem.encodeFunctionResult({ abi, functionName: 'getAccount', result: [false, false, viem.zeroAddress, '', ''] });
  assert.equal(decodeGetAccount(none).exists, false);
});

test('an account created on chain is keccak256 of its admin’s 20 bytes', () => {
  assert.equal(createdAccountHash(WALLET), viem.keccak256(viem.encodePacked(['address'], [WALLET])));
});

test('bad input is refused with a sentence', () => {
  assert.throws(() => toUint('-1'), /non-negative integer/);
  assert.throws(() => toUint('1.5'), /non-negative integer/);
  assert.throws(() => toUint(`0x1${'0'.repeat(64)}`), /non-negative integer/);
  assert.deepEqual(parseGroupIds(' 0, 3 7 '), [0n, 3n, 7n]);
  assert.deepEqual(parseGroupIds(''), []);
  assert.throws(() => parseGroupIds('3, x'), /group ids must be a non-negative integer/);
  assert.throws(() => registerWalletCall({ apiKeyHash: API_KEY_HASH, wallet: '0x1234', derivationPath: PATH }), /wallet must be 0x followed by 40 hex/);
});

test('the typed data is the repository’s envelope: same digest as every vector, and a signature recovers', async () => {
  for (const v of vectors) {
    const td = v.typed_data;
    const ours = chainSecuredTypedData(td.primaryType, td.message.address, Number(td.domain.chainId), Number(td.message.issuedAt));
    assert.equal(viem.hashTypedData(ours), v.digest, `${td.primaryType} on ${td.domain.chainId}`);
    assert.deepEqual(Object.keys(ours).sort(), ['domain', 'message', 'primaryType', 'types']);
  }
  const account = privateKeyToAccount(vectors[0].private_key);
  const typed = JSON.parse(JSON.stringify(chainSecuredTypedData('BillingAuth', account.address, 31337, 1700000000)));
  const { EIP712Domain: _domain, ...types } = typed.types;
  const signature = await account.signTypedData({ domain: typed.domain, types, primaryType: typed.primaryType, message: typed.message });
  assert.equal(await viem.recoverTypedDataAddress({ ...typed, types, signature }), account.address);
  assert.throws(() => chainSecuredTypedData('Other', account.address, 1, 1), /unknown primaryType/);
});

test('the usage history’s wire fields map in one place', () => {
  assert.deepEqual(usageQuery({ page: 0, pageSize: 50, from: null, to: 1700000000 }), { page_number: 0, page_size: 50, to: 1700000000 });
  const got = usageResponse([
    {
      id: '7',
      at_unix: 1700000000,
      at: '2023-11-14T22:13:20Z',
      kind: 'charge',
      operation: 'lit_action',
      action_cid: 'QmWzEQYxa5VHJ1r4iJSyY5KyXs4yTFzJR9SNDTGvZTnyaS',
      amount_cents: -1,
      balance_after_cents: 999,
      request_id: 'req-1',
      payment_intent_id: null,
    },
    { id: '6', at_unix: 1699999900, kind: 'top_up', operation: 'card payment', action_cid: null, amount_cents: 1234, balance_after_cents: 1000, request_id: null, payment_intent_id: 'pi_1' },
  ]);
  assert.equal(got.length, 2);
  assert.deepEqual(got[0], {
    time: 1700000000,
    kind: 'charge',
    kindLabel: 'Charge',
    operation: 'lit_action',
    actionCid: 'QmWzEQYxa5VHJ1r4iJSyY5KyXs4yTFzJR9SNDTGvZTnyaS',
    amountCents: -1,
    balanceAfterCents: 999,
    requestId: 'req-1',
  });
  assert.equal(got[1].kindLabel, 'Top-up');
  assert.equal(got[1].requestId, null);
  assert.equal(got[1].actionCid, null);
  assert.equal(usageResponse({ items: [{ time: 1, kind: 'initial', amount_cents: 500, balance_after_cents: 500 }] })[0].kindLabel, 'Initial credit');
  assert.equal(signedDollars(-1), '−$0.01');
  assert.equal(signedDollars(1234), '+$12.34');
  assert.equal(utcTime(1700000000), '2023-11-14 22:13:20 UTC');
  assert.throws(() => usageResponse({}), /not a list of entries/);
});

test('every signature the page asks for gets its own issuedAt, across wallet sessions', async () => {
  const { freshIssuedAt } = await import('../../appliance/dashboard/assets/wallet.js');
  const now = 1700000000;
  const a = freshIssuedAt(WALLET, 'BillingAuth', 31337, now);
  const b = freshIssuedAt(WALLET.toLowerCase(), 'BillingAuth', 31337, now);
  const c = freshIssuedAt(WALLET, 'BillingAuth', 31337, now);
  assert.deepEqual([a, b, c], [now, now + 1, now + 2], 'the same signer and flow never repeat, whatever the address case');
  assert.equal(freshIssuedAt(WALLET, 'CreateWallet', 31337, now), now, 'another flow is another message');
  assert.equal(freshIssuedAt(WALLET, 'BillingAuth', 8453, now), now, 'another chain is another message');
  assert.equal(freshIssuedAt(WALLET, 'BillingAuth', 31337, now + 10), now + 10, 'time moving on is used as is');
});
