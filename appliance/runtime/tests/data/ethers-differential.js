// Differential cases for the native ethers subset (tests/ethers_differential.rs).
// Evaluated once in node with the real ethers 5.7.2 and once in boa with ours, after a
// global `ethers` exists. Each case is an expression; its value (awaited if a promise) is
// serialised by `ser` below, a throw as its message and code. Results compare entry by entry.

var U = ethers.utils, BN = ethers.BigNumber, coder = ethers.utils.defaultAbiCoder;
var PK1 = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";
var PK2 = "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a";
var w1 = new ethers.Wallet(PK1);
var w2 = new ethers.Wallet(PK2.substring(2));
var D32 = U.keccak256(U.toUtf8Bytes("digest"));
var SIG1 = w1._signingKey().signDigest(D32);
var SIG2 = w2._signingKey().signDigest(U.keccak256("0x01"));
var ADDR = "0x8ba1f109551bD432803012645Ac136ddd64DBA72";
var ADDR_LOWER = ADDR.toLowerCase();
var ADDR_BAD = "0x8Ba1f109551bD432803012645Ac136ddd64DBA72";
var SK = "0x" + "11".repeat(32);
var ENC1 = coder.encode(["uint256", "string", "bytes", "address", "bool"], [42, "hello", "0x0102", ADDR, true]);
var ENC_NESTED = coder.encode(
  ["tuple(uint256 id, string name, tuple(address who, bytes32[] tags) inner)[]", "uint8 small", "int48 neg"],
  [[[1, "a", [ADDR, [D32]]], { id: 2, name: "bb", inner: { who: ADDR, tags: [] } }], 255, -5]);

function hexOf(u8) {
  var s = "";
  for (var i = 0; i < u8.length; i++) s += (u8[i] < 16 ? "0" : "") + u8[i].toString(16);
  return s;
}

function ser(v) {
  if (v === undefined) return "undefined";
  if (v === null) return "null";
  var t = typeof v;
  if (t === "string") return JSON.stringify(v);
  if (t === "number") return "n:" + (Object.is(v, -0) ? "-0" : String(v));
  if (t === "boolean") return String(v);
  if (t === "bigint") return "bigint:" + v.toString();
  if (t === "function") return "function";
  if (v instanceof Uint8Array) return "U8(" + hexOf(v) + ")";
  if (v instanceof Error) return "Error(" + v.message + "|" + v.code + ")";
  if (v._isBigNumber) {
    return "BN(" + v._hex + "," + v.toString() + "," + JSON.stringify(v) + "," + Object.isFrozen(v) +
      "," + (v instanceof BN) + "," + JSON.stringify(Object.keys(v)) + ")";
  }
  var keys = Object.keys(v);
  var parts = [];
  if (Array.isArray(v)) {
    for (var i = 0; i < v.length; i++) parts.push(serKey(v, i));
    keys.forEach(function (k) {
      if (String(Number(k)) !== k) parts.push(JSON.stringify(k) + ":" + serKey(v, k));
    });
    return "[" + parts.join(",") + "]" + (Object.isFrozen(v) ? "F" : "");
  }
  keys.forEach(function (k) { parts.push(JSON.stringify(k) + ":" + serKey(v, k)); });
  return "{" + parts.join(",") + "}";
}

function serKey(o, k) {
  try { return ser(o[k]); } catch (e) { return "get-throws:" + serError(e); }
}

function serError(e) {
  if (e instanceof TypeError) return "TypeError";
  if (!(e instanceof Error)) return "non-error:" + String(e);
  return e.message + "|code=" + e.code + "|reason=" + e.reason;
}

var CASES = [
  // ---- Wallet
  `w1.address`, `w1.publicKey`, `w1.privateKey`, `w2.address`, `w2.privateKey`, `w2.publicKey`,
  `JSON.stringify(w1)`, `Object.keys(w1)`, `Object.keys(w1._signingKey())`,
  `w1._signingKey() === w1._signingKey()`, `w1.mnemonic`, `w1.provider`,
  `w1._signingKey().compressedPublicKey`, `w1._signingKey().curve`,
  `w1.getAddress()`, `new ethers.Wallet(w1).address`,
  `new ethers.Wallet(w1._signingKey()).address`,
  `new ethers.Wallet({privateKey: PK1, address: ADDR})`,
  `new ethers.Wallet("0x1234")`, `new ethers.Wallet("nothex")`, `new ethers.Wallet(U.arrayify(PK2)).address`,
  `new ethers.Wallet(SK).address`, `ethers.Wallet.isSigner(w1)`, `w1 instanceof ethers.Wallet`,
  `new ethers.utils.SigningKey(SK).publicKey`, `ethers.utils.SigningKey.isSigningKey(w1._signingKey())`,
  `new ethers.utils.SigningKey(PK1).computeSharedSecret(new ethers.utils.SigningKey(PK2).publicKey)`,
  `new ethers.utils.SigningKey(PK2).computeSharedSecret(w1._signingKey().compressedPublicKey)`,
  // ---- signMessage / signDigest / signatures
  `w1.signMessage("hello")`, `w1.signMessage("")`, `w1.signMessage(U.toUtf8Bytes("hello"))`,
  `w1.signMessage("0x1234")`, `w1.signMessage(U.arrayify("0x1234"))`, `w1.signMessage([1, 2, 3])`,
  `w2.signMessage("héllo 🌍\\n\\u0000")`, `w1.signMessage(U.arrayify(D32))`,
  `w1.signMessage("x".repeat(1000))`,
  `w1.signMessage("hi").then(function (s) { return U.verifyMessage("hi", s); })`,
  `w1.signMessage(U.toUtf8Bytes("hi")).then(function (s) { return U.verifyMessage(U.toUtf8Bytes("hi"), U.splitSignature(s)); })`,
  `U.verifyMessage("other", SIG1)`,
  `SIG1`, `SIG2`, `Object.keys(SIG1)`, `w1._signingKey().signDigest(U.arrayify(D32))`,
  `w1._signingKey().signDigest("0x1234")`, `w1._signingKey().signDigest("hello")`,
  `U.joinSignature(SIG1)`, `U.joinSignature(SIG2)`, `U.splitSignature(U.joinSignature(SIG1))`,
  `U.splitSignature(SIG1.compact)`, `U.splitSignature(SIG2.compact)`, `U.joinSignature(U.splitSignature(SIG2.compact))`,
  `U.splitSignature({r: SIG1.r, _vs: SIG1._vs})`, `U.splitSignature({r: SIG2.r, yParityAndS: SIG2._vs, _vs: SIG2._vs})`,
  `U.splitSignature({r: SIG1.r, s: SIG1.s, v: 27})`, `U.splitSignature({r: SIG1.r, s: SIG1.s, v: 28})`,
  `U.splitSignature({r: SIG1.r, s: SIG1.s, v: 37})`, `U.splitSignature({r: SIG1.r, s: SIG1.s, recoveryParam: 1})`,
  `U.splitSignature({r: SIG1.r, s: SIG1.s, v: 0})`, `U.splitSignature({r: SIG1.r, s: SIG1.s})`,
  `U.splitSignature({r: SIG1.r, s: SIG1.s, v: 27, recoveryParam: 1})`,
  `U.splitSignature({r: "0x01", s: "0x02", v: 27})`, `U.splitSignature({r: SIG1.r, v: 27})`,
  `U.splitSignature({s: SIG1.s, v: 27})`, `U.splitSignature({r: SIG1.r, s: "0x" + "ff".repeat(32), v: 27})`,
  `U.splitSignature({r: SIG1.r, s: SIG1.s, _vs: SIG2._vs})`, `U.splitSignature({r: SIG1.r, s: SIG1.s, v: 27, _vs: "0x1234"})`,
  `U.splitSignature("0x1234")`, `U.splitSignature(U.joinSignature(SIG1).slice(0, -2) + "01")`,
  `U.splitSignature(U.joinSignature(SIG1).slice(0, -2) + "00")`, `U.splitSignature(U.joinSignature(SIG1).slice(0, -2) + "05")`,
  `U.splitSignature(U.arrayify(U.joinSignature(SIG2)))`, `U.joinSignature(U.joinSignature(SIG2))`,
  `U.recoverAddress(D32, SIG1)`, `U.recoverAddress(D32, U.joinSignature(SIG1))`, `U.recoverAddress(U.arrayify(D32), SIG1.compact)`,
  `U.recoverPublicKey(D32, SIG1)`, `U.recoverAddress(U.keccak256("0x01"), SIG2)`, `U.recoverAddress(D32, "0x12")`,
  `U.computeAddress(w1.publicKey)`, `U.computeAddress(w1._signingKey().compressedPublicKey)`, `U.computeAddress(PK1)`,
  `U.computeAddress(U.arrayify(PK2))`, `U.computeAddress("0x1234")`, `U.computePublicKey(PK1, true)`,
  `U.computePublicKey(w1.publicKey, true)`, `U.computePublicKey(w1._signingKey().compressedPublicKey)`,
  `U.computePublicKey(w1.publicKey)`, `U.computePublicKey("0x12")`,
  // ---- signTransaction: legacy
  `w1.signTransaction({to: ADDR, nonce: 0, gasLimit: 21000, gasPrice: 20000000000, value: BN.from("1000000000000000000"), data: "0x"})`,
  `w1.signTransaction({to: ADDR, nonce: 5, gasLimit: 21000, gasPrice: "0x04a817c800", value: "0x0de0b6b3a7640000", chainId: 1})`,
  `w1.signTransaction({to: ADDR_LOWER, nonce: 9, gasLimit: BN.from(100000), gasPrice: BN.from(1), chainId: 1337, data: "0xdeadbeef"})`,
  `w1.signTransaction({to: ADDR, nonce: 1, gasLimit: 21000, gasPrice: 1, chainId: 137, type: 0})`,
  `w2.signTransaction({nonce: 0, gasLimit: 3000000, gasPrice: 1, data: "0x6080604052", chainId: 5})`,
  `w1.signTransaction({to: ADDR_BAD, nonce: 1, chainId: 1})`,
  `w1.signTransaction({})`, `w1.signTransaction({chainId: 1})`,
  `w1.signTransaction({to: ADDR, value: 1e18})`, `w1.signTransaction({to: ADDR, value: "1000"})`,
  `w1.signTransaction({to: ADDR, nonce: "16"})`, `w1.signTransaction({to: ADDR, nonce: "0x10"})`,
  `w1.signTransaction({to: ADDR, value: BN.from(-1)})`, `w1.signTransaction({to: "0x1234"})`,
  `w1.signTransaction({to: ADDR, gas: 21000})`, `w1.signTransaction({to: ADDR, chainId: "1"})`,
  `w1.signTransaction({to: ADDR, accessList: []})`, `w1.signTransaction({to: ADDR, value: "0x" + "ff".repeat(33)})`,
  `w1.signTransaction({to: ADDR, from: w1.address, nonce: 1})`, `w1.signTransaction({to: ADDR, from: ADDR})`,
  `w1.signTransaction({to: ADDR, from: w1.address.toLowerCase(), nonce: 2, chainId: 10})`,
  `w1.signTransaction({to: Promise.resolve(ADDR), nonce: Promise.resolve(3), gasLimit: 21000, chainId: 1})`,
  `w1.signTransaction({to: ADDR, nonce: 1, type: null, chainId: 1})`,
  `U.serializeTransaction({to: ADDR, nonce: 1, gasPrice: 2, gasLimit: 3, value: 4, chainId: 1})`,
  `U.serializeTransaction({to: ADDR, nonce: 1}, SIG1)`,
  `U.serializeTransaction({to: ADDR, nonce: 1, chainId: 1}, SIG1)`,
  `U.serializeTransaction({to: ADDR, nonce: 1}, {r: SIG1.r, s: SIG1.s, v: 38})`,
  `U.serializeTransaction({to: ADDR, nonce: 1, chainId: 3}, {r: SIG1.r, s: SIG1.s, v: 38})`,
  // ---- signTransaction: EIP-2930
  `w1.signTransaction({type: 1, chainId: 1, nonce: 0, gasPrice: 1000000000, gasLimit: 50000, to: ADDR, value: 1, data: "0x1234", accessList: [{address: ADDR, storageKeys: [D32]}]})`,
  `w1.signTransaction({type: 1, chainId: 5, to: ADDR, accessList: [[ADDR_LOWER, [D32, U.keccak256("0x02")]]]})`,
  `w1.signTransaction({type: 1, chainId: 5, to: ADDR, accessList: {"0xb0b0000000000000000000000000000000000001": [D32, D32], "0xa0a0000000000000000000000000000000000002": ["0x" + "00".repeat(32)]}})`,
  `w1.signTransaction({type: 1, chainId: 5, accessList: [[ADDR, [D32], 3]]})`,
  `w1.signTransaction({type: 1, chainId: 5, accessList: [[ADDR, ["0x1234"]]]})`,
  `w1.signTransaction({type: 1, chainId: "5", nonce: "7", gasPrice: "100", gasLimit: "21000", value: "12345", to: ADDR, gas: 1})`,
  `w1.signTransaction({type: 1})`,
  // ---- signTransaction: EIP-1559
  `w1.signTransaction({type: 2, chainId: 1, nonce: 7, maxPriorityFeePerGas: 1500000000, maxFeePerGas: BN.from("30000000000"), gasLimit: 21000, to: ADDR, value: "1000000000000000000"})`,
  `w2.signTransaction({type: 2, chainId: 137, nonce: "0x1f", maxPriorityFeePerGas: "0x59682f00", maxFeePerGas: "0x6fc23ac00", gasLimit: "0x5208", to: ADDR_LOWER, data: U.arrayify("0xa9059cbb"), accessList: [{address: ADDR, storageKeys: []}]})`,
  `w1.signTransaction({type: 2, chainId: 1, maxFeePerGas: 10, gasPrice: 10, to: ADDR})`,
  `w1.signTransaction({type: 2, chainId: 1, maxFeePerGas: 10, gasPrice: 11, to: ADDR})`,
  `w1.signTransaction({type: 2, chainId: 1, gasPrice: 11})`,
  `w1.signTransaction({type: 2, chainId: 1, to: ADDR_BAD})`, `w1.signTransaction({type: 2, chainId: 1, value: -1})`,
  `w1.signTransaction({type: 2, chainId: 1, data: "0x123"})`, `w1.signTransaction({type: 2, chainId: 1, data: "hello"})`,
  `w1.signTransaction({type: 2, chainId: 1, nonce: 1.5})`, `w1.signTransaction({type: 2, chainId: 1, data: "0x" + "ab".repeat(100)})`,
  `w1.signTransaction({type: 2, chainId: 1, from: ADDR})`,
  `w1.signTransaction({type: 2, chainId: 1, maxFeePerGas: Promise.resolve(BN.from(99)), to: ADDR})`,
  `w1.signTransaction({type: 3, chainId: 1})`, `w1.signTransaction({type: "2", chainId: 1})`,
  `U.serializeTransaction({type: 2, chainId: 1, nonce: 1, to: ADDR})`,
  `U.serializeTransaction({type: 2, chainId: 1, nonce: 1, to: ADDR}, SIG2)`,
  // ---- keccak / strings
  `U.keccak256("0x")`, `U.keccak256([1, 2, 3])`, `U.keccak256("0x1234")`, `U.keccak256("hello")`,
  `U.keccak256(U.toUtf8Bytes("hello"))`, `U.id("Transfer(address,address,uint256)")`, `U.id("")`,
  `U.hashMessage("hello")`, `U.hashMessage(U.toUtf8Bytes("hello"))`, `U.hashMessage("0x1234")`,
  `U.hashMessage(U.arrayify("0x1234"))`, `U.hashMessage([])`, `U.hashMessage("🌍")`,
  `U.toUtf8Bytes("héllo 🌍")`, `U.toUtf8Bytes("\\ud800")`, `U.toUtf8Bytes("\\udc00")`, `U.toUtf8Bytes("")`,
  `U.toUtf8Bytes("a\\u0000b\\u07ff\\u0800\\uffff")`, `U.toUtf8String(U.toUtf8Bytes("héllo 🌍"))`,
  `U.toUtf8String("0x80")`, `U.toUtf8String("0xc0")`, `U.toUtf8String("0xe282")`, `U.toUtf8String("0xc0af")`,
  `U.toUtf8String("0xeda080")`, `U.toUtf8String("0xf4908080")`, `U.toUtf8String("0xf8")`, `U.toUtf8String("0xc328")`,
  `U.toUtf8String([104, 105])`, `U.toUtf8String("0x")`, `U.toUtf8String("0x41e282ac")`, `U.toUtf8String("hello")`,
  // ---- bytes
  `U.arrayify("0x1234")`, `U.arrayify("0x123")`, `U.arrayify("0x123", {hexPad: "left"})`,
  `U.arrayify("0x123", {hexPad: "right"})`, `U.arrayify("1234", {allowMissingPrefix: true})`, `U.arrayify(0)`,
  `U.arrayify(256)`, `U.arrayify(-1)`, `U.arrayify(1.5)`, `U.arrayify("hello")`, `U.arrayify(BN.from(255))`,
  `U.arrayify(BN.from(-1))`, `U.arrayify([1, 256])`, `U.arrayify(null)`, `U.arrayify({})`, `U.arrayify("0xABcd")`,
  `U.arrayify(9007199254740991)`, `U.arrayify(9007199254740990)`, `U.arrayify({length: 2, 0: 1, 1: 2})`,
  `U.hexlify("0xABCD")`, `U.hexlify("0x1")`, `U.hexlify(0)`, `U.hexlify(255)`, `U.hexlify(4096)`,
  `U.hexlify([1, 2, 255])`, `U.hexlify(new Uint8Array([0, 1]))`, `U.hexlify(BN.from(-1))`, `U.hexlify("abc")`,
  `U.hexlify(true)`, `U.hexlify(Number.MAX_SAFE_INTEGER)`, `U.hexlify(NaN)`, `U.hexlify(1.5)`, `U.hexlify(10n)`,
  `U.hexlify("0x1", {hexPad: "left"})`, `U.hexlify("12", {allowMissingPrefix: true})`, `U.hexlify(undefined)`,
  `U.hexZeroPad("0x12", 4)`, `U.hexZeroPad("0x1234", 1)`, `U.hexZeroPad("0xABC", 3)`, `U.hexZeroPad("xyz", 3)`,
  `U.zeroPad("0x12", 4)`, `U.zeroPad("0x123456", 2)`, `U.hexDataSlice("0x123456", 1)`, `U.hexDataSlice("0x123456", 1, 2)`,
  `U.hexDataSlice("0x12345", 1)`, `U.hexDataLength("0x1234")`, `U.hexDataLength("0x123")`, `U.hexDataLength([1, 2])`,
  `U.hexStripZeros("0x000012")`, `U.hexStripZeros("0x0000")`, `U.hexValue(0)`, `U.hexValue("0x0012")`, `U.hexValue(BN.from(4096))`,
  `U.concat(["0x12", [0x34], U.arrayify("0x56")])`, `U.hexConcat(["0x12", "0x34", [255]])`, `U.stripZeros("0x000102")`,
  `U.isBytesLike("0x12")`, `U.isBytesLike("0x123")`, `U.isBytesLike([1, 2])`, `U.isHexString("0x12", 1)`, `U.isHexString("0x12", 2)`,
  `U.isHexString("0xzz")`, `U.isBytes([1, 2])`, `U.isBytes("0x12")`, `U.isBytes([1, -1])`, `U.isBytes(null)`,
  // ---- addresses
  `U.getAddress(ADDR_LOWER)`, `U.getAddress(ADDR)`, `U.getAddress(ADDR_BAD)`, `U.getAddress(ADDR_LOWER.substring(2))`,
  `U.getAddress("0x" + ADDR.substring(2).toUpperCase())`, `U.getAddress("0x1234")`, `U.getAddress(123)`, `U.getAddress(null)`,
  `U.getAddress("XE65GB6LDNXYOFTX0NSV3FUWKOWIXAMJK36")`, `U.getAddress("XE66GB6LDNXYOFTX0NSV3FUWKOWIXAMJK36")`,
  `U.getAddress("0X" + ADDR_LOWER.substring(2))`, `U.getAddress(" " + ADDR)`,
  `U.isAddress(ADDR)`, `U.isAddress(ADDR_BAD)`, `U.isAddress(ADDR_LOWER)`, `U.isAddress("0x1234")`, `U.isAddress(undefined)`,
  `U.isAddress("XE65GB6LDNXYOFTX0NSV3FUWKOWIXAMJK36")`, `U.getIcapAddress(ADDR)`,
  // ---- BigNumber
  `BN.from(42)`, `BN.from(-42)`, `BN.from("42")`, `BN.from("-42")`, `BN.from("0x2a")`, `BN.from("0x2A")`, `BN.from("-0x2a")`,
  `BN.from("0x")`, `BN.from("")`, `BN.from("1.5")`, `BN.from(1.5)`, `BN.from(2 ** 53)`, `BN.from(2 ** 53 - 2)`, `BN.from(-(2 ** 53))`,
  `BN.from(NaN)`, `BN.from(Infinity)`, `BN.from("0x000001")`, `BN.from(BN.from(7))`, `BN.from({_hex: "0x10", _isBigNumber: true})`,
  `BN.from({type: "BigNumber", hex: "0x11"})`, `BN.from({toHexString: function () { return "0x12"; }})`, `BN.from([1, 2])`,
  `BN.from(new Uint8Array([1, 0]))`, `BN.from(10n)`, `BN.from("12345678901234567890123456789012345678901234567890")`,
  `BN.from(null)`, `BN.from(undefined)`, `BN.from(true)`, `BN.from("-0x00")`, `BN.from("-0")`, `BN.from(-0)`, `BN.from(" 1")`,
  `JSON.stringify({a: BN.from(1)})`, `BN.isBigNumber(BN.from(1))`, `BN.isBigNumber({_isBigNumber: true})`, `BN.isBigNumber(1)`,
  `new ethers.BigNumber({}, "0x01")`, `BN.from(5).add(7)`, `BN.from(5).add("0x07")`, `BN.from(5).sub(BN.from(7))`,
  `BN.from(-7).mul(6)`, `BN.from(7).div(2)`, `BN.from(-7).div(2)`, `BN.from(7).div(0)`, `BN.from(7).div("x")`,
  `BN.from(-7).mod(3)`, `BN.from(7).mod(-3)`, `BN.from(7).mod(0)`, `BN.from(2).pow(255)`, `BN.from(2).pow(0)`,
  `BN.from(0).pow(0)`, `BN.from(2).pow(-1)`, `BN.from(-3).pow(3)`, `BN.from(3).eq(3)`, `BN.from(3).eq("3")`,
  `BN.from(3).lt(4)`, `BN.from(3).lte(3)`, `BN.from(3).gt(-4)`, `BN.from(3).gte(4)`, `BN.from(0).isZero()`,
  `BN.from("-0x0").isZero()`, `BN.from(1).isZero()`, `BN.from(-5).isNegative()`, `BN.from(-5).abs()`, `BN.from(5).abs()`,
  `BN.from(255).toString()`, `BN.from(-255).toString()`, `BN.from(255).toHexString()`, `BN.from(-255).toHexString()`,
  `BN.from(255).toNumber()`, `BN.from(2).pow(53).sub(1).toNumber()`, `BN.from(2).pow(53).toNumber()`,
  `BN.from(2).pow(53).mul(-1).toNumber()`, `BN.from(255).toString(16)`, `BN.from(255).toString(2)`,
  `BN.from(255).toBigInt()`, `BN.from(12).and(10)`, `BN.from(12).or(3)`, `BN.from(12).xor(5)`, `BN.from(-12).and(5)`,
  `BN.from(1).shl(100)`, `BN.from(256).shr(4)`, `BN.from(1).shl(-1)`, `BN.from(255).mask(4)`,
  `BN.from(-1).toTwos(8)`, `BN.from(255).fromTwos(8)`, `BN.from(127).fromTwos(8)`, `BN.from(-128).toTwos(256)`,
  `BN.from(2).pow(256).sub(1).toHexString()`, `BN.from("0xFF").add(1)`, `BN.from("0xFF")`, `BN.from(1).add()`,
  `BN.from(1).toJSON()`, `Object.keys(BN.from(1))`, `BN.from(1) instanceof BN`,
  // ---- units
  `U.formatUnits(1234567890, 9)`, `U.formatUnits("1000000000000000000")`, `U.formatEther(0)`, `U.formatEther(-1)`,
  `U.formatUnits(BN.from(12345), 2)`, `U.formatUnits(1, 0)`, `U.formatUnits(10, "gwei")`, `U.formatUnits(1, "foo")`,
  `U.formatUnits(1, 257)`, `U.formatUnits(1, "6")`, `U.formatUnits(1, BN.from(3))`, `U.formatEther("0x10")`,
  `U.formatUnits(1.5)`, `U.formatUnits(100, 2)`, `U.formatUnits(-100, 2)`, `U.formatUnits(1, -1)`, `U.formatUnits(1, 1.5)`,
  `U.formatEther(BN.from(2).pow(256))`, `U.formatUnits(5, null)`, `U.formatUnits(5, "ether")`, `U.formatUnits(5, "wei")`,
  `U.parseUnits("1.5", 18)`, `U.parseUnits("1.0", 0)`, `U.parseUnits("1.5", 0)`, `U.parseUnits("-0.5", 6)`,
  `U.parseUnits(".5", 2)`, `U.parseUnits("5.", 2)`, `U.parseUnits("1.2.3")`, `U.parseUnits(".")`, `U.parseUnits("-")`,
  `U.parseUnits("abc")`, `U.parseUnits(1)`, `U.parseEther("0.000000000000000001")`, `U.parseEther("1e18")`,
  `U.parseUnits("1", "gwei")`, `U.parseUnits("1.000000", 2)`, `U.parseUnits("-0", 3)`, `U.parseUnits("00012.3400", 4)`,
  `U.parseUnits("1", 256)`, `U.parseUnits("1", "kwei")`, `U.parseEther("123456789.123456789")`, `U.parseUnits("", 2)`,
  `U.commify("1234567.8900")`, `U.commify("-1000")`, `U.commify("0.5")`, `U.commify(1234)`, `U.commify("1,2")`,
  // ---- solidity packed
  `U.solidityKeccak256(["address", "uint256", "string", "bool", "bytes", "bytes32"], [ADDR, 1, "hi", true, "0x1234", D32])`,
  `U.solidityPack(["address", "uint256", "string", "bool", "bytes", "bytes32"], [ADDR, 1, "hi", true, "0x1234", D32])`,
  `U.solidityPack(["int8"], [-1])`, `U.solidityPack(["int256"], [-1])`, `U.solidityPack(["uint8"], [256])`,
  `U.solidityPack(["int8"], [-129])`, `U.solidityPack(["uint"], [1])`, `U.solidityPack(["int"], [-2])`,
  `U.solidityPack(["uint24"], [BN.from(65536)])`, `U.solidityPack(["uint7"], [1])`, `U.solidityPack(["uint08"], [1])`,
  `U.solidityPack(["uint264"], [1])`, `U.solidityPack(["bytes4"], ["0x12345678"])`, `U.solidityPack(["bytes4"], ["0x12"])`,
  `U.solidityPack(["bytes33"], ["0x12"])`, `U.solidityPack(["bytes0"], ["0x"])`, `U.solidityPack(["uint16[]"], [[1, 2]])`,
  `U.solidityPack(["address[]"], [[ADDR, ADDR_LOWER]])`, `U.solidityPack(["bool[2]"], [[true, false]])`,
  `U.solidityPack(["bytes2[]"], [["0x1234", "0xabcd"]])`, `U.solidityPack(["string[]"], [["a", "bc"]])`,
  `U.solidityPack(["uint8[3]"], [[1, 2]])`, `U.solidityPack(["uint8[][]"], [[[1], [2, 3]]])`, `U.solidityPack(["foo"], [1])`,
  `U.solidityPack(["uint256"], [1, 2])`, `U.solidityPack(["address"], ["0x1234"])`, `U.solidityPack(["bool"], ["false"])`,
  `U.solidityPack(["bool"], [0])`, `U.solidityPack(["string"], ["héllo"])`, `U.solidityPack(["bytes"], [[1, 2]])`,
  `U.solidityPack(["uint8"], [-1])`, `U.solidityPack(["uint256[]"], [1])`, `U.solidityKeccak256([], [])`,
  `U.solidityKeccak256(["uint8", "int16", "bytes1"], [255, -300, "0xff"])`,
  // ---- ABI encode
  `coder.encode(["uint256", "string"], [42, "hello"])`, `ENC1`, `ENC_NESTED`,
  `coder.encode(["tuple(uint256 a, string b)[]"], [[[1, "x"], {a: 2, b: "y"}]])`,
  `coder.encode(["(address,bytes32)[2]", "bytes"], [[[ADDR, D32], [ADDR_LOWER, D32]], "0x"])`,
  `coder.encode(["uint8"], [256])`, `coder.encode(["uint8"], [255])`, `coder.encode(["int8"], [-129])`,
  `coder.encode(["int8"], [-128])`, `coder.encode(["int8"], [128])`, `coder.encode(["int256"], [-1])`,
  `coder.encode(["uint"], [BN.from(5)])`, `coder.encode(["int"], [-5])`, `coder.encode(["uint256"], ["0x10"])`,
  `coder.encode(["uint256"], ["16"])`, `coder.encode(["uint256"], [-1])`, `coder.encode(["uint256"], [BN.from(2).pow(256)])`,
  `coder.encode(["address"], ["0x123"])`, `coder.encode(["address"], [ADDR_BAD])`, `coder.encode(["address"], [ADDR_LOWER])`,
  `coder.encode(["bytes4"], ["0x12"])`, `coder.encode(["bytes4"], ["0x12345678"])`, `coder.encode(["bytes32"], [D32])`,
  `coder.encode(["bool", "bool", "bool"], [1, 0, "x"])`, `coder.encode(["string[]"], [["a", "bc"]])`,
  `coder.encode(["uint256[][]"], [[[1], [2, 3]]])`, `coder.encode(["bytes"], [[1, 2, 3]])`, `coder.encode(["bytes"], ["0x" + "ab".repeat(33)])`,
  `coder.encode(["string"], ["héllo 🌍"])`, `coder.encode(["string"], [""])`, `coder.encode(["uint256", "string"], [1])`,
  `coder.encode(["uint256[2]"], [[1]])`, `coder.encode(["uint256[2] xs"], [[1, 2, 3]])`, `coder.encode(["uint256[]"], [1])`,
  `coder.encode(["tuple(uint256 a, uint256 b)"], [{a: 1}])`, `coder.encode(["tuple(uint256 a, uint256 b)"], [{a: 1, b: 2}])`,
  `coder.encode(["tuple(uint256,uint256)"], [{a: 1}])`, `coder.encode(["tuple(uint256 a,uint256 a)"], [{a: 1}])`,
  `coder.encode(["tuple(uint256 a, uint256 b)"], [[1]])`, `coder.encode(["tuple(uint256 a, uint256 b)"], [5])`,
  `coder.encode(["uint7"], [1])`, `coder.encode(["int512"], [1])`, `coder.encode(["bytes0"], ["0x"])`, `coder.encode(["bytes33"], ["0x"])`,
  `coder.encode(["foo"], [1])`, `coder.encode(["uint256 memory"], [1])`, `coder.encode(["string memory s", "address payable a"], ["x", ADDR])`,
  `coder.encode(["uint256,uint256"], [1])`, `coder.encode(["tuple(uint256"], [[1]])`, `coder.encode(["uint256)"], [1])`,
  `coder.encode(["uint256 a b"], [1])`, `coder.encode(["uint256[x]"], [[1]])`, `coder.encode([" uint256 "], [1])`,
  `coder.encode(["uint256 indexed"], [1])`, `coder.encode([{type: "uint256"}, {type: "tuple", components: [{type: "string", name: "s"}]}], [1, ["x"]])`,
  `coder.encode(["tuple()"], [[]])`, `coder.encode(["uint256[]", "bytes32[1]"], [[], [D32]])`, `coder.encode([], [])`,
  `coder.encode(["uint256"], [])`, `coder.encode(["tuple(string a, tuple(uint8 b, bytes c)[] d)"], [["x", [[1, "0x01"], [2, "0x0203"]]]])`,
  // ---- ABI decode
  `coder.decode(["uint256", "string", "bytes", "address", "bool"], ENC1)`,
  `coder.decode(["uint256 n", "string s", "bytes b", "address a", "bool f"], ENC1)`,
  `coder.decode(["tuple(uint256 id, string name, tuple(address who, bytes32[] tags) inner)[] items", "uint8 small", "int48 neg"], ENC_NESTED)`,
  `coder.decode(["tuple(uint256,string,tuple(address,bytes32[]))[]", "uint8", "int48"], ENC_NESTED)`,
  `coder.decode(["uint8", "uint48", "uint56", "int8", "int48", "int56"], coder.encode(["uint8", "uint48", "uint56", "int8", "int48", "int56"], [255, 2 ** 40, 2 ** 50, -1, -(2 ** 40), -(2 ** 50)]))`,
  `coder.decode(["uint8"], coder.encode(["uint256"], [257]))`, `coder.decode(["int8"], coder.encode(["uint256"], [255]))`,
  `coder.decode(["address"], coder.encode(["uint256"], [1]))`, `coder.decode(["address"], coder.encode(["uint256"], [BN.from(2).pow(170)]))`,
  `coder.decode(["string"], "0x")`, `coder.decode(["uint256"], "0x1234")`, `coder.decode(["uint256"], "0x123")`,
  `coder.decode(["uint256 length", "uint256 map", "uint256 x", "uint256 x"], coder.encode(["uint256", "uint256", "uint256", "uint256"], [1, 2, 3, 4]))`,
  `coder.decode(["string", "uint256"], coder.encode(["bytes", "uint256"], ["0xff", 7]))`,
  `coder.decode(["string s", "uint256 n"], coder.encode(["bytes", "uint256"], ["0xc0", 7]))`,
  `coder.decode(["bytes"], coder.encode(["bytes"], ["0x010203"]).substring(0, 2 + 64 * 2 + 6))`,
  `coder.decode(["bytes"], coder.encode(["bytes"], ["0x010203"]).substring(0, 2 + 64 * 2 + 6), true)`,
  `coder.decode(["uint256[]"], "0x" + "00".repeat(31) + "20" + "00".repeat(31) + "05")`,
  `coder.decode(["uint256[]"], "0x" + "00".repeat(31) + "20" + "ff".repeat(32))`,
  `coder.decode(["string"], "0x" + "ff".repeat(32))`, `coder.decode(["bytes32", "bytes1"], ENC1)`,
  `coder.decode(["uint256[2]", "bool"], coder.encode(["uint256[2]", "bool"], [[1, 2], true]))`,
  `coder.decode(["string[]"], coder.encode(["string[]"], [["a", "bc", ""]]))`,
  `coder.decode(["tuple(string a, tuple(uint8 b, bytes c)[] d)"], coder.encode(["tuple(string a, tuple(uint8 b, bytes c)[] d)"], [["x", [[1, "0x01"], [2, "0x0203"]]]]))`,
  `coder.decode([], "0x")`, `coder.decode(["uint256"], [0, 0])`, `coder.decode(["uint256"], U.arrayify("0x" + "00".repeat(31) + "09"))`,
  `coder.decode(["tuple()"], "0x")`, `Object.isFrozen(coder.decode(["uint256"], ENC1))`,
  // ---- misc
  `ethers.version`, `Object.keys(ethers.constants)`, `ethers.constants.MaxUint256`, `ethers.constants.AddressZero`,
  `ethers.constants.HashZero`, `ethers.constants.WeiPerEther`, `ethers.constants.MinInt256`, `ethers.constants.EtherSymbol`,
  `U.RLP.encode(["0x", "0x01", "0x7f", "0x80", ["0x1234"], []])`, `U.RLP.encode("0x" + "ab".repeat(60))`,
];

function runAll() {
  var out = [];
  var i = 0;
  function next() {
    if (i >= CASES.length) return Promise.resolve(JSON.stringify(out));
    var c = CASES[i++];
    var v;
    try {
      v = (0, eval)(c);
    } catch (e) {
      out.push("throw:" + serError(e));
      return next();
    }
    return Promise.resolve(v).then(function (r) {
      try { out.push(ser(r)); } catch (e) { out.push("ser-throws:" + serError(e)); }
    }, function (e) {
      out.push("reject:" + serError(e));
    }).then(next);
  }
  return next();
}
