// What the dashboard needs of Ethereum, without a library: keccak256, the ABI encoding of
// the AccountConfig calls a ChainSecured account's admin sends itself
// (registerWalletDerivation, setUsageApiKey, both at once through multicall), the
// getAccount view, the AccountConverted log, and the EIP-712 envelope the appliance's
// wallet-signature endpoints take (docs/compatibility.md, "Typed-data (EIP-712) envelope").
// No DOM: tests/browser/chain.test.mjs checks every function here against viem and the
// contract's committed ABI.

// ------------------------------------------------------------------------------ bytes

export function bytesToHex(bytes) {
  let out = '';
  for (const b of bytes) out += b.toString(16).padStart(2, '0');
  return out;
}

/** `0x`-prefixed (or bare) hex of whole bytes to bytes; throws on anything else. */
export function hexToBytes(hex) {
  const s = String(hex).replace(/^0x/i, '');
  if (s.length % 2 !== 0 || !/^[0-9a-fA-F]*$/.test(s)) throw new TypeError(`not hex bytes: ${hex}`);
  const out = new Uint8Array(s.length / 2);
  for (let i = 0; i < out.length; i += 1) out[i] = parseInt(s.slice(2 * i, 2 * i + 2), 16);
  return out;
}

function utf8(text) {
  return new TextEncoder().encode(text);
}

// ------------------------------------------------------------------------------ keccak256

// Keccak-f[1600] on 25 64-bit lanes held as BigInts (a handful of hashes per page: speed
// does not matter, clarity does). Lane (x, y) is state[x + 5y].
const MASK64 = (1n << 64n) - 1n;

// Round constants from the LFSR x^8 + x^6 + x^5 + x^4 + 1 (FIPS 202, algorithm 5).
const ROUND_CONSTANTS = (() => {
  let r = 1;
  const bit = () => {
    const out = r & 1;
    r = r & 0x80 ? ((r << 1) ^ 0x71) & 0xff : (r << 1) & 0xff;
    return out;
  };
  const constants = [];
  for (let round = 0; round < 24; round += 1) {
    let c = 0n;
    for (let j = 0; j < 7; j += 1) if (bit()) c |= 1n << BigInt((1 << j) - 1);
    constants.push(c);
  }
  return constants;
})();

// Rotation offsets of ρ, by walking (x, y) → (y, 2x + 3y) from (1, 0) (FIPS 202, 3.2.2).
const ROTATIONS = (() => {
  const rot = new Array(25).fill(0);
  let x = 1;
  let y = 0;
  for (let t = 0; t < 24; t += 1) {
    rot[x + 5 * y] = (((t + 1) * (t + 2)) / 2) % 64;
    [x, y] = [y, (2 * x + 3 * y) % 5];
  }
  return rot.map(BigInt);
})();

function rotl(v, n) {
  if (n === 0n) return v;
  return ((v << n) | (v >> (64n - n))) & MASK64;
}

function keccakF(state) {
  const c = new Array(5);
  const b = new Array(25);
  for (let round = 0; round < 24; round += 1) {
    for (let x = 0; x < 5; x += 1) c[x] = state[x] ^ state[x + 5] ^ state[x + 10] ^ state[x + 15] ^ state[x + 20];
    for (let x = 0; x < 5; x += 1) {
      const d = c[(x + 4) % 5] ^ rotl(c[(x + 1) % 5], 1n);
      for (let y = 0; y < 25; y += 5) state[x + y] ^= d;
    }
    for (let x = 0; x < 5; x += 1) {
      for (let y = 0; y < 5; y += 1) b[y + 5 * ((2 * x + 3 * y) % 5)] = rotl(state[x + 5 * y], ROTATIONS[x + 5 * y]);
    }
    for (let y = 0; y < 25; y += 5) {
      for (let x = 0; x < 5; x += 1) state[x + y] = b[x + y] ^ (~b[((x + 1) % 5) + y] & MASK64 & b[((x + 2) % 5) + y]);
    }
    state[0] ^= ROUND_CONSTANTS[round];
  }
}

const RATE = 136; // bytes: 1600 - 2 × 256 bits

/** keccak256 (Ethereum's: the original Keccak padding, not SHA3-256's) of bytes or a string. */
export function keccak256(input) {
  const data = typeof input === 'string' ? utf8(input) : input;
  const blocks = Math.floor(data.length / RATE) + 1;
  const padded = new Uint8Array(blocks * RATE);
  padded.set(data);
  padded[data.length] ^= 0x01;
  padded[padded.length - 1] ^= 0x80;
  const state = new Array(25).fill(0n);
  for (let offset = 0; offset < padded.length; offset += RATE) {
    for (let lane = 0; lane < RATE / 8; lane += 1) {
      let v = 0n;
      for (let i = 7; i >= 0; i -= 1) v = (v << 8n) | BigInt(padded[offset + 8 * lane + i]);
      state[lane] ^= v;
    }
    keccakF(state);
  }
  const out = new Uint8Array(32);
  for (let lane = 0; lane < 4; lane += 1) {
    let v = state[lane];
    for (let i = 0; i < 8; i += 1) {
      out[8 * lane + i] = Number(v & 0xffn);
      v >>= 8n;
    }
  }
  return out;
}

// ------------------------------------------------------------------------------ ABI

/** An address, `0x` + 40 hex (any case); throws otherwise. */
export function checkAddress(text, what = 'address') {
  const s = String(text || '').trim();
  if (!/^0x[0-9a-fA-F]{40}$/.test(s)) throw new TypeError(`${what} must be 0x followed by 40 hex digits, not "${s}"`);
  return s;
}

/**
 * A uint256 from a number, a bigint, a decimal string or a `0x` hex string; throws on
 * anything negative, fractional or over 2^256 - 1.
 */
export function toUint(value, what = 'value') {
  let v;
  if (typeof value === 'bigint') v = value;
  else if (typeof value === 'number' && Number.isSafeInteger(value)) v = BigInt(value);
  else if (typeof value === 'string' && /^(0|[1-9][0-9]*)$/.test(value.trim())) v = BigInt(value.trim());
  else if (typeof value === 'string' && /^0x[0-9a-fA-F]{1,64}$/.test(value.trim())) v = BigInt(value.trim());
  else throw new TypeError(`${what} must be a non-negative integer (decimal, or 0x hex), not "${value}"`);
  if (v < 0n || v >= 1n << 256n) throw new RangeError(`${what} is out of the uint256 range`);
  return v;
}

function word(v) {
  return v.toString(16).padStart(64, '0');
}

function isDynamic(type) {
  if (Array.isArray(type)) return type.some(isDynamic);
  return type === 'string' || type === 'bytes' || type.endsWith('[]');
}

function encodeBytes(bytes) {
  const hex = bytesToHex(bytes);
  const padded = hex.padEnd(Math.ceil(hex.length / 64) * 64, '0');
  return word(BigInt(bytes.length)) + padded;
}

/** One value of `type` ('uint256', 'address', 'bool', 'string', 'bytes', 'T[]', or a tuple as an array of types). */
function encodeValue(type, value) {
  if (Array.isArray(type)) return encodeTuple(type, value);
  if (type.endsWith('[]')) {
    const inner = type.slice(0, -2);
    if (!Array.isArray(value)) throw new TypeError(`${type} needs an array`);
    return word(BigInt(value.length)) + encodeTuple(value.map(() => inner), value);
  }
  switch (type) {
    case 'uint256':
      return word(toUint(value));
    case 'address':
      return word(BigInt(checkAddress(value)));
    case 'bool':
      return word(value ? 1n : 0n);
    case 'string':
      return encodeBytes(utf8(String(value)));
    case 'bytes':
      return encodeBytes(hexToBytes(value));
    default:
      throw new TypeError(`unsupported ABI type ${type}`);
  }
}

/** The head-tail encoding of values of `types` (function arguments, or a tuple's fields). */
function encodeTuple(types, values) {
  if (!Array.isArray(values) || values.length !== types.length) {
    throw new TypeError(`expected ${types.length} values, got ${Array.isArray(values) ? values.length : typeof values}`);
  }
  const heads = [];
  const tails = [];
  const headSize = 32 * types.length; // every type here has a one-word head
  let tailOffset = headSize;
  types.forEach((type, i) => {
    const encoded = encodeValue(type, values[i]);
    if (isDynamic(type)) {
      heads.push(word(BigInt(tailOffset)));
      tails.push(encoded);
      tailOffset += encoded.length / 2;
    } else {
      heads.push(encoded);
    }
  });
  return heads.join('') + tails.join('');
}

function canonical(type) {
  return Array.isArray(type) ? `(${type.map(canonical).join(',')})` : type;
}

/** The 4-byte selector of `name(types…)`, `0x` + 8 hex. */
export function selector(name, types) {
  return `0x${bytesToHex(keccak256(`${name}(${types.map(canonical).join(',')})`).slice(0, 4))}`;
}

/** Calldata: selector ‖ arguments. */
export function encodeCall(name, types, values) {
  return selector(name, types) + encodeTuple(types, values);
}

// ------------------------------------------------------------------------------ AccountConfig

const PERMISSIONS_TUPLE = ['bool', 'bool', 'bool', 'uint256[]', 'uint256[]', 'uint256[]', 'uint256[]'];

/**
 * The AccountConfig functions the dashboard encodes: their parameter names and types, as
 * in contracts/src/IAccountConfig.sol.
 */
export const ACCOUNT_CONFIG = {
  registerWalletDerivation: {
    params: [
      ['apiKeyHash', 'uint256'],
      ['wallet', 'address'],
      ['derivationPath', 'uint256'],
      ['name', 'string'],
      ['description', 'string'],
    ],
  },
  setUsageApiKey: {
    params: [
      ['apiKeyHash', 'uint256'],
      ['usageKeyHash', 'uint256'],
      ['expiration', 'uint256'],
      ['balance', 'uint256'],
      ['name', 'string'],
      ['description', 'string'],
      ['permissions', PERMISSIONS_TUPLE],
    ],
  },
  multicall: { params: [['calls', 'bytes[]']] },
  getAccount: { params: [['apiKeyHash', 'uint256']] },
};

function fn(name) {
  const types = ACCOUNT_CONFIG[name].params.map(([, type]) => type);
  return { name, types, signature: `${name}(${types.map(canonical).join(',')})` };
}

/** `0x` + 64 hex of a uint256. */
export function hex32(value) {
  return `0x${word(toUint(value))}`;
}

/**
 * `registerWalletDerivation(apiKeyHash, wallet, derivationPath, name, description)`: what
 * makes a minted wallet the account's. Returns {fn, signature, args: [[name, shown value]], data}.
 */
export function registerWalletCall({ apiKeyHash, wallet, derivationPath, name = '', description = '' }) {
  const f = fn('registerWalletDerivation');
  const values = [toUint(apiKeyHash, 'apiKeyHash'), checkAddress(wallet, 'wallet'), toUint(derivationPath, 'derivationPath'), String(name), String(description)];
  return {
    fn: f.name,
    signature: f.signature,
    args: [
      ['apiKeyHash', hex32(values[0])],
      ['wallet', values[1]],
      ['derivationPath', hex32(values[2])],
      ['name', JSON.stringify(values[3])],
      ['description', JSON.stringify(values[4])],
    ],
    data: encodeCall(f.name, f.types, values),
  };
}

/** Group ids from text: "0" (every group), "3, 7", or nothing. */
export function parseGroupIds(text, what = 'group ids') {
  const parts = String(text || '')
    .split(/[\s,]+/)
    .filter(Boolean);
  return parts.map((p) => toUint(p, what));
}

/**
 * `setUsageApiKey(apiKeyHash, usageKeyHash, expiration, balance, name, description,
 * permissions)`: what gives a minted usage key its identity and permissions (balance 0:
 * the account's credit pays, as for every key).
 */
export function setUsageKeyCall({ apiKeyHash, usageKeyHash, expiration = 0, name = '', description = '', permissions = {} }) {
  const f = fn('setUsageApiKey');
  const p = {
    canCreateGroups: Boolean(permissions.canCreateGroups),
    canDeleteGroups: Boolean(permissions.canDeleteGroups),
    canCreatePkps: Boolean(permissions.canCreatePkps),
    manageIpfsIdsInGroups: (permissions.manageIpfsIdsInGroups || []).map((v) => toUint(v)),
    addPkpToGroups: (permissions.addPkpToGroups || []).map((v) => toUint(v)),
    removePkpFromGroups: (permissions.removePkpFromGroups || []).map((v) => toUint(v)),
    executeInGroups: (permissions.executeInGroups || []).map((v) => toUint(v)),
  };
  const tuple = [p.canCreateGroups, p.canDeleteGroups, p.canCreatePkps, p.manageIpfsIdsInGroups, p.addPkpToGroups, p.removePkpFromGroups, p.executeInGroups];
  const values = [toUint(apiKeyHash, 'apiKeyHash'), toUint(usageKeyHash, 'usageKeyHash'), toUint(expiration, 'expiration'), 0n, String(name), String(description), tuple];
  const list = (ids) => `[${ids.map(String).join(', ')}]`;
  return {
    fn: f.name,
    signature: f.signature,
    args: [
      ['apiKeyHash', hex32(values[0])],
      ['usageKeyHash', hex32(values[1])],
      ['expiration', values[2] === 0n ? '0 (never)' : `${values[2]} (${new Date(Number(values[2]) * 1000).toISOString()})`],
      ['balance', '0'],
      ['name', JSON.stringify(values[4])],
      ['description', JSON.stringify(values[5])],
      [
        'permissions',
        `{canCreateGroups: ${p.canCreateGroups}, canDeleteGroups: ${p.canDeleteGroups}, canCreatePkps: ${p.canCreatePkps}, manageIpfsIdsInGroups: ${list(p.manageIpfsIdsInGroups)}, addPkpToGroups: ${list(p.addPkpToGroups)}, removePkpFromGroups: ${list(p.removePkpFromGroups)}, executeInGroups: ${list(p.executeInGroups)}}`,
      ],
    ],
    data: encodeCall(f.name, f.types, values),
  };
}

/** `multicall(calls)`: several calls in one transaction (all or none). */
export function multicallData(datas) {
  const f = fn('multicall');
  return encodeCall(f.name, f.types, [datas]);
}

/** The calldata of the `getAccount(apiKeyHash)` view. */
export function getAccountData(apiKeyHash) {
  const f = fn('getAccount');
  return encodeCall(f.name, f.types, [toUint(apiKeyHash, 'apiKeyHash')]);
}

/** The first three fields of getAccount's answer: {exists, managed, admin}. */
export function decodeGetAccount(hex) {
  const s = String(hex).replace(/^0x/i, '');
  if (s.length < 3 * 64 || !/^[0-9a-fA-F]*$/.test(s)) throw new TypeError('getAccount answered something that is not its ABI encoding');
  const w = (i) => BigInt(`0x${s.slice(64 * i, 64 * (i + 1))}`);
  return {
    exists: w(0) !== 0n,
    managed: w(1) !== 0n,
    admin: `0x${s.slice(64 * 2 + 24, 64 * 3)}`,
  };
}

/** topic0 of `AccountConverted(uint256 indexed apiKeyHash, address indexed newAdmin)`. */
export function accountConvertedTopic() {
  return `0x${bytesToHex(keccak256('AccountConverted(uint256,address)'))}`;
}

/** An address as an indexed topic (left-padded to 32 bytes). */
export function addressTopic(address) {
  return `0x${word(BigInt(checkAddress(address)))}`;
}

/**
 * The apiKeyHash of an account created on chain by `admin` (`newChainSecuredAccount`):
 * keccak256 of the address's 20 bytes. A converted account keeps its own apiKeyHash.
 */
export function createdAccountHash(admin) {
  return `0x${bytesToHex(keccak256(hexToBytes(checkAddress(admin))))}`;
}

// ------------------------------------------------------------------------------ EIP-712

/** The four flows the appliance takes wallet signatures for. */
export const PRIMARY_TYPES = ['CreateWallet', 'AddUsageApiKey', 'ConvertAccount', 'BillingAuth'];

/**
 * The typed data the appliance checks, exactly: domain {name: "Service ChainSecured",
 * version: "1", chainId}, `<primaryType>(address address, uint256 issuedAt)`. `chainId`
 * and `issuedAt` are JSON numbers, as wallet libraries send them (the appliance takes
 * numbers or decimal strings).
 */
export function chainSecuredTypedData(primaryType, address, chainId, issuedAt) {
  if (!PRIMARY_TYPES.includes(primaryType)) throw new TypeError(`unknown primaryType ${primaryType}`);
  if (!Number.isSafeInteger(chainId) || chainId < 0) throw new TypeError(`chainId must be a non-negative integer, not ${chainId}`);
  if (!Number.isSafeInteger(issuedAt) || issuedAt < 0) throw new TypeError(`issuedAt must be a non-negative integer, not ${issuedAt}`);
  return {
    types: {
      EIP712Domain: [
        { name: 'name', type: 'string' },
        { name: 'version', type: 'string' },
        { name: 'chainId', type: 'uint256' },
      ],
      [primaryType]: [
        { name: 'address', type: 'address' },
        { name: 'issuedAt', type: 'uint256' },
      ],
    },
    primaryType,
    domain: { name: 'Service ChainSecured', version: '1', chainId },
    message: { address: checkAddress(address), issuedAt },
  };
}
