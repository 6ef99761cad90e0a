// Differential cases for ethers.providers and the provider methods of Wallet
// (tests/provider_differential.rs). Evaluated once in node with the real ethers 5.7.2,
// whose JsonRpcProvider talks to a local server answering from provider-fixtures.json,
// and once in the real action worker, whose `rpc` host calls the test answers from the
// same fixtures. URL_A (a chain with a base fee, id 31337) and URL_B (a legacy chain, id
// 1337) are defined before this file runs. Each case is an expression; its value
// (awaited) is serialised by `ser`; a rejection as its ethers error code and reason
// (messages name request ids and HTTP headers, which differ by design).

var P = new ethers.providers.JsonRpcProvider(URL_A);
var PB = new ethers.providers.JsonRpcProvider(URL_B);
var PS = new ethers.providers.StaticJsonRpcProvider(URL_A, 31337);
var KEY = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";
var W = new ethers.Wallet(KEY, P);
var WB = new ethers.Wallet(KEY).connect(PB);
var ADDR = "0x8ba1f109551bD432803012645Ac136ddd64DBA72";
var TO = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";
var H = function (b) { return "0x" + b.repeat(32); };
var TX = { to: TO, value: 1000 };

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
  if (t === "number") return "n:" + String(v);
  if (t === "boolean") return String(v);
  if (t === "function") return "function";
  if (v instanceof Uint8Array) return "U8(" + hexOf(v) + ")";
  if (v instanceof Error) return serError(v);
  if (v._isBigNumber) return "BN(" + v._hex + "," + (v instanceof ethers.BigNumber) + ")";
  var parts = [];
  if (Array.isArray(v)) {
    for (var i = 0; i < v.length; i++) parts.push(ser(v[i]));
    return "[" + parts.join(",") + "]";
  }
  Object.keys(v).forEach(function (k) { parts.push(JSON.stringify(k) + ":" + ser(v[k])); });
  return "{" + parts.join(",") + "}";
}

function serError(e) {
  if (e instanceof TypeError) return "TypeError";
  if (!(e instanceof Error)) return "non-error:" + String(e);
  var inner = e.error ? "|inner=" + e.error.code + ":" + e.error.reason : "";
  return "Error(" + e.code + "|" + e.reason + inner + ")";
}

var CASES = [
  // ---- reads
  `P.getNetwork()`, `P.detectNetwork()`, `PB.getNetwork()`, `PS.getNetwork()`, `P._isProvider`,
  `ethers.providers.JsonRpcProvider.isProvider(P)`, `ethers.providers.JsonRpcProvider.isProvider({})`,
  `P.getBlockNumber()`, `P.getBalance(ADDR)`, `P.getBalance(ADDR.toLowerCase())`,
  `P.getBalance(Promise.resolve(ADDR), "latest")`,
  `P.getBalance(new Promise(function (r) { setTimeout(function () { r(ADDR); }, 5); }))`,
  `P.getLogs(new Promise(function (r) { setTimeout(function () { r({address: ADDR, fromBlock: "0x01", topics: [H("ee")]}); }, 5); }))`, `P.getTransactionCount(ADDR)`, `P.getCode(ADDR)`,
  `P.getStorageAt(ADDR, 1)`, `P.getGasPrice()`, `P.getFeeData()`, `PB.getFeeData()`,
  `P.getBlock("latest")`, `P.getBlock(15)`, `P.getBlock(H("11"))`, `P.getBlock(99)`,
  `P.getBlockWithTransactions(16)`,
  `P.getTransaction(H("aa"))`, `P.getTransaction(H("dd"))`, `P.getTransactionReceipt(H("aa"))`,
  `P.getTransactionReceipt(H("cc"))`,
  `P.getLogs({address: ADDR, fromBlock: 1, topics: [H("ee")]})`,
  `P.call({to: ADDR, data: "0x12345678"})`, `P.call({to: ADDR, data: "0xdeadbeef"})`,
  `P.estimateGas({to: ADDR, value: 1})`, `P.send("eth_chainId", [])`, `P.send("eth_blockNumber", [])`,
  `P.waitForTransaction(H("aa"))`, `P.getTransaction(H("aa")).then(function (tx) { return tx.wait(); })`,
  // ---- errors
  `P.getBalance("0x0000000000000000000000000000000000000001")`,
  `P.estimateGas({to: ADDR, value: ethers.utils.parseEther("1000")})`,
  `P.estimateGas({to: ADDR, data: "0xdeadbeef"})`,
  `P.getBalance("not-an-address")`, `P.getBalance(42)`, `P.getTransaction("0x1234")`,
  `P.getTransaction(H("bb")).then(function (tx) { return tx.wait(); })`,
  `P.waitForTransaction(H("cc"), 1, 50)`,
  `new ethers.providers.JsonRpcProvider(URL_A, 1).getBlockNumber()`,
  `W.signTransaction({to: TO, value: 1, nonce: 0, gasLimit: 21000, gasPrice: 1, chainId: 31337}).then(function (raw) { return P.sendTransaction(raw); })`,
  `W.signTransaction({to: TO, value: 2, nonce: 0, gasLimit: 21000, gasPrice: 1, chainId: 31337}).then(function (raw) { return P.sendTransaction(raw); })`,
  `W.signTransaction({to: TO, value: 2, nonce: 0, gasLimit: 21000, gasPrice: 1}).then(ethers.utils.parseTransaction)`,
  `W.signTransaction({to: TO, value: 2, nonce: 0, gasLimit: 21000, gasPrice: 1, type: 1, chainId: 5, accessList: [[ADDR, [H("01")]]]}).then(ethers.utils.parseTransaction)`,
  // ---- the wallet
  `W.provider === P`, `W._isSigner`, `W.getBalance()`, `W.getChainId()`, `W.getGasPrice()`,
  `W.getFeeData()`, `W.getTransactionCount()`,
  `W.populateTransaction(TX)`, `W.populateTransaction({to: TO, value: 1000, gasPrice: 7})`,
  `W.populateTransaction({to: TO, value: 1000, type: 2, maxFeePerGas: 9, maxPriorityFeePerGas: 2, nonce: 1, gasLimit: 30000})`,
  `W.populateTransaction({to: TO, value: 1000, type: 0})`,
  `W.populateTransaction(TX).then(function (tx) { return W.signTransaction(tx); })`,
  `W.populateTransaction(TX).then(function (tx) { return W.signTransaction(tx); }).then(ethers.utils.parseTransaction)`,
  `W.sendTransaction(TX)`, `W.sendTransaction({to: Promise.resolve(TO), value: 1000})`,
  `W.sendTransaction({to: new Promise(function (r) { setTimeout(function () { r(TO); }, 5); }), value: 1000})`,
  `W.sendTransaction(TX).then(function (tx) { return tx.wait(); })`,
  `WB.populateTransaction(TX)`, `WB.sendTransaction(TX)`,
  `WB.populateTransaction(TX).then(function (tx) { return WB.signTransaction(tx); }).then(ethers.utils.parseTransaction)`,
  `W.estimateGas({to: ADDR, value: 1})`, `W.call({to: ADDR, data: "0x12345678"})`,
  `W.populateTransaction({to: TO, foo: 1})`, `W.populateTransaction({to: TO, from: ADDR})`,
  `W.populateTransaction({to: TO, gasPrice: 1, maxFeePerGas: 2})`,
  `W.populateTransaction({to: TO, value: 1000, chainId: 5})`,
  `WB.populateTransaction({to: TO, maxFeePerGas: 2})`,
  `new ethers.Wallet(KEY).getBalance()`, `new ethers.Wallet(KEY).sendTransaction(TX)`,
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
