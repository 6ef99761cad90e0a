// Differential cases for ethers.utils.Interface (and the ABI fragments) and ethers.Contract
// (tests/ethers_contract_differential.rs). Evaluated once in node with the real ethers 5.7.2
// and once in boa with ours, after a global `ethers` exists. Each case is an expression; its
// value (awaited if a promise) is serialised by `ser`, a throw or rejection as its error.
// Contract cases run against a provider/signer stub written here: it records what it is
// asked (serialised when asked) and answers with canned results, so no chain is needed.

var U = ethers.utils, BN = ethers.BigNumber;
var LOGS = [];
// ethers' logger.warn and parseModifiers print with the global console of the moment.
globalThis.console = { log: function () { LOGS.push(Array.prototype.join.call(arguments, " ")); } };

var A1 = "0x8ba1f109551bD432803012645Ac136ddd64DBA72";
var A2 = "0x0000000000000000000000000000000000001234";
var TOKEN = "0x5FbDB2315678afecb367f032d93F642f64180aa3";
var HASH = "0x" + "ab".repeat(32);
var BLOCK = "0x" + "cd".repeat(32);

// The ERC-20 ABI as solc emits it (OpenZeppelin ERC20; the standard's functions and events).
var ERC20_JSON = [
  { "inputs": [{ "internalType": "string", "name": "name_", "type": "string" }, { "internalType": "string", "name": "symbol_", "type": "string" }], "stateMutability": "nonpayable", "type": "constructor" },
  { "anonymous": false, "inputs": [{ "indexed": true, "internalType": "address", "name": "owner", "type": "address" }, { "indexed": true, "internalType": "address", "name": "spender", "type": "address" }, { "indexed": false, "internalType": "uint256", "name": "value", "type": "uint256" }], "name": "Approval", "type": "event" },
  { "anonymous": false, "inputs": [{ "indexed": true, "internalType": "address", "name": "from", "type": "address" }, { "indexed": true, "internalType": "address", "name": "to", "type": "address" }, { "indexed": false, "internalType": "uint256", "name": "value", "type": "uint256" }], "name": "Transfer", "type": "event" },
  { "inputs": [{ "internalType": "address", "name": "owner", "type": "address" }, { "internalType": "address", "name": "spender", "type": "address" }], "name": "allowance", "outputs": [{ "internalType": "uint256", "name": "", "type": "uint256" }], "stateMutability": "view", "type": "function" },
  { "inputs": [{ "internalType": "address", "name": "spender", "type": "address" }, { "internalType": "uint256", "name": "amount", "type": "uint256" }], "name": "approve", "outputs": [{ "internalType": "bool", "name": "", "type": "bool" }], "stateMutability": "nonpayable", "type": "function" },
  { "inputs": [{ "internalType": "address", "name": "account", "type": "address" }], "name": "balanceOf", "outputs": [{ "internalType": "uint256", "name": "", "type": "uint256" }], "stateMutability": "view", "type": "function" },
  { "inputs": [], "name": "decimals", "outputs": [{ "internalType": "uint8", "name": "", "type": "uint8" }], "stateMutability": "view", "type": "function" },
  { "inputs": [], "name": "name", "outputs": [{ "internalType": "string", "name": "", "type": "string" }], "stateMutability": "view", "type": "function" },
  { "inputs": [], "name": "symbol", "outputs": [{ "internalType": "string", "name": "", "type": "string" }], "stateMutability": "view", "type": "function" },
  { "inputs": [], "name": "totalSupply", "outputs": [{ "internalType": "uint256", "name": "", "type": "uint256" }], "stateMutability": "view", "type": "function" },
  { "inputs": [{ "internalType": "address", "name": "to", "type": "address" }, { "internalType": "uint256", "name": "amount", "type": "uint256" }], "name": "transfer", "outputs": [{ "internalType": "bool", "name": "", "type": "bool" }], "stateMutability": "nonpayable", "type": "function" },
  { "inputs": [{ "internalType": "address", "name": "from", "type": "address" }, { "internalType": "address", "name": "to", "type": "address" }, { "internalType": "uint256", "name": "amount", "type": "uint256" }], "name": "transferFrom", "outputs": [{ "internalType": "bool", "name": "", "type": "bool" }], "stateMutability": "nonpayable", "type": "function" },
  { "stateMutability": "payable", "type": "receive" },
];

// A struct parameter as solc emits it.
var STRUCT_JSON = { "inputs": [{ "components": [{ "internalType": "uint256", "name": "a", "type": "uint256" }, { "internalType": "address[]", "name": "b", "type": "address[]" }], "internalType": "struct S", "name": "p", "type": "tuple" }, { "internalType": "uint8", "name": "k", "type": "uint8" }], "name": "s", "outputs": [], "stateMutability": "nonpayable", "type": "function" };

// The reference service's examples use the human-readable form.
var ERC20_HR = [
  "function balanceOf(address owner) view returns (uint256)",
  "function decimals() view returns (uint8)",
  "function symbol() view returns (string)",
  "function transfer(address to, uint amount) returns (bool)",
  "function transferFrom(address,address,uint256) returns (bool)",
  "event Transfer(address indexed from, address indexed to, uint256 value)",
];

var EDGE_HR = [
  "constructor(address owner, uint256 cap) payable",
  "function f(uint256 x) pure returns (uint256)",
  "function f(string s) view returns (string)",
  "function f(uint256 a, uint256 b) returns (uint256 sum, bool ok)",
  "function g(tuple(uint256 a, string b)[] items, bytes32[2] h) view returns (tuple(address x, uint8[] y) r)",
  "function pay(address to) payable",
  "function gassy(uint256 n) @50000",
  "function owner() view returns (address)",
  "event Named(string indexed label, bytes indexed blob, uint256[] indexed list, bool indexed flag, int8 small)",
  "event Data(address indexed who, tuple(uint256 a, string b) item, string note)",
  "event Anon(uint256 indexed a, uint256 b) anonymous",
  "event Over(uint256 a)",
  "event Over(address a)",
  "error Insufficient(uint256 available, uint256 required)",
  "error Denied()",
];

var erc20 = new U.Interface(ERC20_JSON);
var erc20hr = new U.Interface(ERC20_HR);
var edge = new U.Interface(EDGE_HR);

var TRANSFER_LOG = erc20.encodeEventLog("Transfer", [A1, A2, 1000]);
var DATA_LOG = edge.encodeEventLog("Data", [A1, [7, "seven"], "note"]);
// encodeEventLog cannot hash an indexed array ("not implemented"): built by hand.
var NAMED_LOG = {
  topics: [edge.getEventTopic("Named"), U.id("label"), U.keccak256("0x0102"), HASH, U.hexZeroPad("0x01", 32)],
  data: U.defaultAbiCoder.encode(["int8"], [-3]),
};
var ANON_LOG = edge.encodeEventLog("Anon", [5, 6]);
var REVERT = "0x08c379a0" + U.defaultAbiCoder.encode(["string"], ["Insufficient balance"]).substring(2);
var PANIC = "0x4e487b71" + U.defaultAbiCoder.encode(["uint256"], [0x11]).substring(2);
var CUSTOM = edge.encodeErrorResult("Insufficient", [3, 10]);

function hexOf(u8) {
  var s = "";
  for (var i = 0; i < u8.length; i++) s += (u8[i] < 16 ? "0" : "") + u8[i].toString(16);
  return s;
}

var ERROR_KEYS = ["argument", "value", "count", "expectedCount", "operation", "method", "data",
  "errorArgs", "errorName", "errorSignature", "address", "args", "transaction", "overrides",
  "expected", "name", "fault", "baseType", "type", "error"];

function serError(e) {
  if (e instanceof TypeError) return "TypeError";
  if (!(e instanceof Error)) return "non-error:" + String(e);
  var out = e.message + "|code=" + e.code + "|reason=" + ser(e.reason);
  ERROR_KEYS.forEach(function (k) {
    if (e[k] !== undefined) out += "|" + k + "=" + (k === "error" ? serError(e[k]) : ser(e[k]));
  });
  return out;
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
  if (v instanceof Error) return "Error(" + serError(v) + ")";
  if (v instanceof Promise) return "Promise";
  if (v._isBigNumber) return "BN(" + v._hex + "," + Object.isFrozen(v) + "," + (v instanceof BN) + ")";
  var keys = Object.keys(v);
  var parts = [];
  var proto = Object.getPrototypeOf(v);
  var kind = proto === null ? "null" : (proto.constructor && proto.constructor.name) || "?";
  if (Array.isArray(v)) {
    for (var i = 0; i < v.length; i++) parts.push(serKey(v, i));
    keys.forEach(function (k) {
      if (String(Number(k)) !== k) parts.push(JSON.stringify(k) + ":" + serKey(v, k));
    });
    return "[" + parts.join(",") + "]" + (Object.isFrozen(v) ? "F" : "");
  }
  keys.forEach(function (k) { parts.push(JSON.stringify(k) + ":" + serKey(v, k)); });
  return kind + "{" + parts.join(",") + "}" + (Object.isFrozen(v) ? "F" : "");
}

function serKey(o, k) {
  try { return ser(o[k]); } catch (e) { return "get-throws:" + serError(e); }
}

// ---- the provider/signer stub
function encodeResult(iface, data) {
  var fn = iface.getFunction(data.substring(0, 10));
  switch (fn.name) {
    case "balanceOf": return iface.encodeFunctionResult(fn, [BN.from("1000000000000000000000")]);
    case "decimals": return iface.encodeFunctionResult(fn, [18]);
    case "symbol": return iface.encodeFunctionResult(fn, ["TKN"]);
    case "name": return iface.encodeFunctionResult(fn, ["Token"]);
    case "totalSupply": return iface.encodeFunctionResult(fn, [BN.from(2).pow(200)]);
    case "allowance": return REVERT;
    case "transfer": return iface.encodeFunctionResult(fn, [true]);
    case "f": return fn.outputs.length === 2 ? iface.encodeFunctionResult(fn, [3, true]) : PANIC;
    case "g": return iface.encodeFunctionResult(fn, [[A1, [1, 2, 3]]]);
    case "owner": return CUSTOM;
    default: return "0x";
  }
}

function stub(iface) {
  var calls = [];
  var provider = {
    _isProvider: true,
    call: function (tx, blockTag) {
      calls.push("provider.call " + ser(tx) + " " + ser(blockTag));
      return Promise.resolve(encodeResult(iface, tx.data));
    },
    estimateGas: function (tx) {
      calls.push("provider.estimateGas " + ser(tx));
      return Promise.resolve(BN.from(51234));
    },
    getLogs: function (filter) {
      calls.push("provider.getLogs " + ser(filter));
      var logs = [TRANSFER_LOG, DATA_LOG, { data: "0x", topics: [TRANSFER_LOG.topics[0]] }];
      return Promise.resolve(logs.map(function (l, i) {
        return { blockNumber: 7 + i, blockHash: BLOCK, transactionIndex: i, removed: false, address: TOKEN,
          data: l.data, topics: l.topics, transactionHash: HASH, logIndex: i };
      }));
    },
    getCode: function (address, blockTag) {
      calls.push("provider.getCode " + ser(address) + " " + ser(blockTag));
      return Promise.resolve(address === TOKEN ? "0x6080" : "0x");
    },
    getBlock: function (tag) { return Promise.resolve({ hash: tag }); },
    // A JSON-RPC provider rejects a malformed hex address with getAddress's error.
    resolveName: function (name) { return Promise.resolve().then(function () { return U.getAddress(name); }); },
  };
  var signer = {
    _isSigner: true,
    provider: provider,
    getAddress: function () { calls.push("signer.getAddress"); return Promise.resolve(A1); },
    resolveName: function (name) { return provider.resolveName(name); },
    call: function (tx, blockTag) {
      calls.push("signer.call " + ser(tx) + " " + ser(blockTag));
      return provider.call(tx, blockTag);
    },
    estimateGas: function (tx) {
      calls.push("signer.estimateGas " + ser(tx));
      return Promise.resolve(BN.from(60000));
    },
    sendTransaction: function (tx) {
      calls.push("signer.sendTransaction " + ser(tx));
      return Promise.resolve({
        hash: HASH, to: tx.to, from: A1, nonce: 4, data: tx.data,
        wait: function (confirmations) {
          calls.push("tx.wait " + ser(confirmations));
          return Promise.resolve({ transactionHash: HASH, blockHash: BLOCK, status: 1,
            logs: [Object.assign({ logIndex: 0, address: TOKEN }, TRANSFER_LOG), { logIndex: 1, address: A2, data: "0x", topics: [] }] });
        },
      });
    },
  };
  return { calls: calls, provider: provider, signer: signer };
}

// Runs `f(contract, stub)` on a fresh contract; the value is the result and the calls made.
function run(abi, who, f) {
  var s = stub(new U.Interface(abi));
  var c = new ethers.Contract(TOKEN, abi, who === "signer" ? s.signer : who === "provider" ? s.provider : null);
  var p;
  try { p = Promise.resolve(f(c, s)); } catch (e) { p = Promise.reject(e); }
  return p.then(function (r) { return { ok: ser(r), calls: s.calls }; },
    function (e) { return { error: serError(e), calls: s.calls }; });
}

function receipt(tx) {
  return tx.wait(2).then(function (r) {
    return r.events.map(function (e) {
      return { keys: Object.keys(e), event: e.event, sig: e.eventSignature, args: ser(e.args),
        decoded: e.decode ? ser(e.decode(e.data, e.topics)) : "none" };
    });
  });
}

var CASES = [
  // ---- ParamType
  `U.ParamType.from("uint")`, `U.ParamType.from("tuple(uint a, string b)[2] foo")`,
  `U.ParamType.from("(address payable who, bytes32[] calldata tags) indexed t", true)`,
  `U.ParamType.from("uint256 indexed")`, `U.ParamType.fromString("string indexed indexed name", true)`,
  `U.ParamType.from({ type: "tuple[]", name: "xs", components: [{ type: "uint", name: "a" }, { type: "bool" }] })`,
  `U.ParamType.from("tuple(uint a, string b)[2] foo").format()`, `U.ParamType.from("tuple(uint a, string b)[2] foo").format("minimal")`,
  `U.ParamType.from("tuple(uint a, string b)[2] foo").format("full")`, `U.ParamType.from("tuple(uint a, string b)[2] foo").format("json")`,
  `U.ParamType.from("uint256 indexed x", true).format("full")`, `U.ParamType.from("uint256 indexed x", true).format("json")`,
  `U.ParamType.from("uint").format("bogus")`, `U.ParamType.from("uint8 memory x")`, `U.ParamType.from("uint a b")`,
  `U.ParamType.from("tuple(uint a")`, `new U.ParamType()`, `U.ParamType.isParamType(U.ParamType.from("bool"))`,
  `Object.isFrozen(U.ParamType.from("bool"))`, `U.FormatTypes`,
  // ---- Fragments
  `U.Fragment.from("function transfer(address to, uint amount) external returns (bool)")`,
  `U.Fragment.from("  function   balanceOf( address )\\n view  returns(uint256 ) ")`,
  `U.Fragment.from("function f() payable").format("full")`, `U.Fragment.from("function f() pure").format("json")`,
  `U.Fragment.from("function f() constant")`, `U.Fragment.from("function f() view returns (uint a, bool b)").format("minimal")`,
  `U.Fragment.from("function f() returns (uint) returns (bool)")`, `U.Fragment.from("function 1f()")`,
  `U.Fragment.from("function f(uint256 indexed a)")`, `U.Fragment.from("function f(uint256)) x")`,
  `U.Fragment.from("function f() nonsense")`, `LOGS.slice()`,
  `U.Fragment.from("function gassy(uint256 n) @50000")`, `U.Fragment.from("function gassy(uint256 n) @50000").format("full")`,
  `U.Fragment.from("function gassy(uint256 n) @5x")`, `U.Fragment.from("function gassy() @1@2")`,
  `U.Fragment.from("constructor(address owner) payable")`, `U.Fragment.from("constructor(address owner) payable").format("full")`,
  `U.Fragment.from("constructor(address owner)").format()`, `U.Fragment.from("constructor(uint a) view")`,
  `U.Fragment.from("event Transfer(address indexed from, address indexed to, uint256 value)")`,
  `U.Fragment.from("event E(uint a, (uint x, string y) indexed t, bytes z) anonymous").format("full")`,
  `U.Fragment.from("event E(uint a, (uint x, string y) indexed t, bytes z) anonymous").format("json")`,
  `U.Fragment.from("event E(uint a) weird")`, `U.Fragment.from("error Insufficient(uint256 available, uint256 required)")`,
  `U.Fragment.from("error Error(string)")`, `U.Fragment.from("error Panic(uint256 code)")`, `U.Fragment.from("error E(uint a)").format("full")`,
  `U.Fragment.from("struct S { uint a; }")`, `U.Fragment.from({ type: "fallback" })`, `U.Fragment.from({ type: "nope" })`,
  `U.Fragment.from(ERC20_JSON[3])`, `U.Fragment.from(ERC20_JSON[0])`, `U.Fragment.from(ERC20_JSON[2]).format("json")`,
  `U.FunctionFragment.from({ type: "function", name: "f", constant: true })`,
  `U.FunctionFragment.from({ type: "function", name: "f", payable: true })`,
  `U.FunctionFragment.from({ type: "function", name: "f", payable: false })`,
  `U.FunctionFragment.from({ type: "function", name: "f", payable: true, constant: true })`,
  `U.FunctionFragment.from({ type: "function", name: "f", stateMutability: "view", constant: false })`,
  `U.FunctionFragment.from({ type: "function", name: "f", stateMutability: "view", payable: true })`,
  `U.FunctionFragment.from({ type: "function", name: "f" })`, `U.FunctionFragment.from({ type: "event", name: "f" })`,
  `U.FunctionFragment.from({ type: "function", name: "", stateMutability: "view" })`,
  `U.FunctionFragment.from({ type: "function", name: "f", stateMutability: "view", gas: "0x10" })`,
  `U.FunctionFragment.from("transfer(address,uint256)").format()`, `U.EventFragment.from("event E()")`,
  `U.EventFragment.from("E(uint indexed a)").format("minimal")`, `U.ConstructorFragment.from("function f()")`,
  `U.ErrorFragment.from("E(string)").format("json")`, `new U.Fragment()`, `new U.FunctionFragment()`,
  `U.Fragment.isFragment(U.Fragment.from("function f()"))`, `U.FunctionFragment.isFunctionFragment(U.Fragment.from("event E()"))`,
  `U.Fragment.from("function f()") instanceof U.FunctionFragment`, `U.Fragment.from("function f()") instanceof U.ConstructorFragment`,
  `U.Fragment.from("function f()") instanceof U.Fragment`, `Object.keys(U.FunctionFragment.prototype)`,
  `(function () { var k = []; for (var x in U.Fragment.from("function f(uint a)").inputs[0]) k.push(x); return k; })()`,
  // ---- Interface: construction and lookup
  `Object.keys(erc20)`, `erc20.fragments.length`, `Object.keys(erc20.functions)`, `Object.keys(erc20.events)`,
  `erc20.deploy`, `erc20hr.deploy`, `erc20.structs`, `Object.isFrozen(erc20.fragments)`, `Object.isFrozen(erc20.functions)`,
  `new U.Interface(JSON.stringify(ERC20_JSON)).format("minimal")`, `erc20.format()`, `erc20.format("json")`,
  `erc20.format("sighash")`, `edge.format()`, `edge.format("json")`, `U.Interface.isInterface(erc20)`, `U.Interface.isInterface({})`,
  `erc20.getFunction("balanceOf")`, `erc20.getFunction("balanceOf(address)").name`, `erc20.getFunction(" transfer ").name`,
  `erc20.getFunction("0xa9059cbb").name`, `erc20.getFunction("0xA9059CBB")`, `erc20.getFunction("0x12345678")`,
  `erc20.getFunction("nope")`, `erc20.getFunction("balanceOf(uint256)")`, `erc20.getFunction(5)`,
  `edge.getFunction("f")`, `edge.getFunction("f(string)").format("full")`, `edge.getFunction("f(uint256,uint256)").outputs`,
  `edge.getEvent("Over")`, `edge.getEvent("Over(address)").format()`, `erc20.getEvent("Transfer").name`,
  `erc20.getEvent(erc20.getEventTopic("Approval").toUpperCase().replace("0X", "0x")).name`, `erc20.getEvent("0x1234")`,
  `edge.getError("Insufficient").format("full")`, `edge.getError(edge.getSighash("Denied")).name`, `edge.getError("Nope")`,
  `erc20.getSighash("transfer")`, `erc20.getSighash(erc20.getFunction("approve"))`, `edge.getSighash("Denied")`,
  `edge.getSighash("missing")`, `erc20.getEventTopic("Transfer")`, `U.Interface.getSighash(U.Fragment.from("function f()"))`,
  `U.Interface.getEventTopic(erc20.getEvent("Transfer"))`, `U.Interface.getAddress(A1.toLowerCase())`,
  `U.Interface.getAbiCoder() === U.defaultAbiCoder`, `erc20._abiCoder === U.defaultAbiCoder`,
  `new U.Interface([ "function a()", "function a()", "constructor()", "constructor(uint)", "event E()", "event E()" ]).fragments.length`,
  `new U.Interface(erc20.fragments).format()`, `U.Fragment.from(erc20.fragments[1]) === erc20.fragments[1]`,
  `new U.Interface([STRUCT_JSON]).format("full")`, `new U.Interface([STRUCT_JSON]).format("json")`,
  `new U.Interface([STRUCT_JSON]).encodeFunctionData("s", [{ a: 5, b: [A1, A2] }, 9])`,
  `new U.Interface([STRUCT_JSON]).decodeFunctionData("s", new U.Interface([STRUCT_JSON]).encodeFunctionData("s", [[5, [A1]], 9]))`,
  `LOGS.slice()`, `new U.Interface({})`, `new U.Interface(["function x("])`, `new U.Interface(["function f()"]) instanceof U.Interface`,
  // ---- encode / decode function data and results
  `erc20.encodeFunctionData("transfer", [A2, BN.from(10).pow(18)])`, `erc20hr.encodeFunctionData("transfer", [A2.toLowerCase(), "5"])`,
  `erc20.encodeFunctionData("totalSupply")`, `erc20.encodeFunctionData("transfer", [A2])`, `erc20.encodeFunctionData("transfer", [A2, -1])`,
  `erc20.encodeFunctionData("transfer", { to: A2, amount: 1 })`, `erc20.encodeFunctionData(erc20.getFunction("approve"), [A1, 0])`,
  `erc20.decodeFunctionData("transfer", erc20.encodeFunctionData("transfer", [A2, 77]))`,
  `erc20.decodeFunctionData("approve", erc20.encodeFunctionData("transfer", [A2, 77]))`,
  `edge.encodeFunctionData("g", [[[1, "x"], { a: 2, b: "y" }], [HASH, HASH]])`,
  `edge.decodeFunctionData("g", edge.encodeFunctionData("g", [[[1, "x"], { a: 2, b: "y" }], [HASH, HASH]]))`,
  `edge.encodeFunctionData("f(uint256,uint256)", [1, 2])`, `edge.encodeFunctionData("f", [1])`,
  `erc20.encodeFunctionResult("balanceOf", [12345])`, `erc20.decodeFunctionResult("balanceOf", erc20.encodeFunctionResult("balanceOf", [12345]))`,
  `erc20.decodeFunctionResult("decimals", erc20.encodeFunctionResult("decimals", [6]))`,
  `erc20.decodeFunctionResult("symbol", erc20.encodeFunctionResult("symbol", ["USDC"]))`,
  `edge.decodeFunctionResult("f(uint256,uint256)", edge.encodeFunctionResult("f(uint256,uint256)", [9, true]))`,
  `edge.decodeFunctionResult("g", edge.encodeFunctionResult("g", [{ x: A1, y: [1, 2] }]))`,
  `erc20.decodeFunctionResult("balanceOf", REVERT)`, `erc20.decodeFunctionResult("balanceOf", PANIC)`,
  `edge.decodeFunctionResult("owner", CUSTOM)`, `edge.decodeFunctionResult("owner", edge.encodeErrorResult("Denied"))`,
  `erc20.decodeFunctionResult("balanceOf", "0x")`, `erc20.decodeFunctionResult("balanceOf", "0x1234")`,
  `erc20.decodeFunctionResult("symbol", "0x" + "00".repeat(32))`, `erc20.decodeFunctionResult("balanceOf", "0x08c379a0")`,
  `erc20.decodeFunctionResult("balanceOf", "0xdeadbeef")`, `erc20.decodeFunctionResult("balanceOf", U.arrayify(PANIC))`,
  `edge.encodeErrorResult("Insufficient", [1, 2])`, `edge.decodeErrorResult("Insufficient", CUSTOM)`,
  `edge.decodeErrorResult("Denied", CUSTOM)`, `edge.parseError(CUSTOM)`, `edge.parseError(REVERT)`,
  `edge.encodeDeploy([A1, 100])`, `edge.encodeDeploy([A1])`, `erc20hr.encodeDeploy()`,
  // ---- transactions
  `erc20.parseTransaction({ data: erc20.encodeFunctionData("transfer", [A2, 77]) })`,
  `erc20.parseTransaction({ data: erc20.encodeFunctionData("transfer", [A2, 77]), value: "0x10" })`,
  `erc20.parseTransaction({ data: "0xdeadbeef" })`, `erc20.parseTransaction({ data: "0x" })`, `erc20.parseTransaction({})`,
  `edge.parseTransaction({ data: edge.encodeFunctionData("pay", [A1]), value: 5 })`,
  // ---- events
  `TRANSFER_LOG`, `DATA_LOG`, `NAMED_LOG`, `ANON_LOG`,
  `erc20.encodeEventLog("Transfer", [A1, A2])`, `edge.encodeEventLog("Named", ["x", "0x", [1], true, 1])`,
  `erc20.parseLog(TRANSFER_LOG)`, `erc20hr.parseLog(TRANSFER_LOG)`, `edge.parseLog(DATA_LOG)`,
  `erc20.parseLog({ topics: [HASH], data: "0x" })`, `erc20.parseLog({ data: "0x" })`, `edge.parseLog(ANON_LOG)`,
  `Object.keys(erc20.parseLog(TRANSFER_LOG).eventFragment)`, `erc20.parseLog(TRANSFER_LOG).eventFragment.format("full")`,
  `Object.isFrozen(erc20.parseLog(TRANSFER_LOG))`, `erc20.parseLog(TRANSFER_LOG) instanceof U.LogDescription`,
  `erc20.decodeEventLog("Transfer", TRANSFER_LOG.data, TRANSFER_LOG.topics)`,
  `erc20.decodeEventLog("Transfer", TRANSFER_LOG.data)`, `erc20.decodeEventLog("Approval", TRANSFER_LOG.data, TRANSFER_LOG.topics)`,
  `erc20.decodeEventLog("Transfer", "0x", TRANSFER_LOG.topics)`, `erc20.decodeEventLog("Transfer", TRANSFER_LOG.data, TRANSFER_LOG.topics.slice(0, 2))`,
  `edge.decodeEventLog("Named", "0x" + "ff".repeat(32), NAMED_LOG.topics)`, `edge.decodeEventLog("Named", "0x", NAMED_LOG.topics)`,
  `edge.decodeEventLog("Data", DATA_LOG.data.substring(0, 200), DATA_LOG.topics)`,
  `edge.decodeEventLog("Data", "0x" + "00".repeat(31) + "20" + "ff".repeat(32) + "00".repeat(32), DATA_LOG.topics)`,
  `edge.decodeEventLog("Anon", ANON_LOG.data, ANON_LOG.topics)`, `U.Indexed.isIndexed(edge.decodeEventLog("Named", "0x" + "00".repeat(31) + "05", NAMED_LOG.topics)[0])`,
  `erc20.encodeFilterTopics("Transfer", [])`, `erc20.encodeFilterTopics("Transfer", [null, A2])`,
  `erc20.encodeFilterTopics("Transfer", [[A1, A2], null])`, `erc20.encodeFilterTopics("Transfer", [A1, A2, 5])`,
  `erc20.encodeFilterTopics("Transfer", [A1, A2, null, 1])`, `erc20.encodeFilterTopics("Transfer", ["0x1234"])`,
  `edge.encodeFilterTopics("Named", ["label", "0x0102"])`, `edge.encodeFilterTopics("Named", [null, null, [1]])`,
  `edge.encodeFilterTopics("Named", [null, null, null, true])`, `edge.encodeFilterTopics("Named", [null, null, null, false])`,
  `edge.encodeFilterTopics("Anon", [7])`, `edge.encodeFilterTopics("Over(uint256)", [null])`,
  `edge.encodeFilterTopics(U.EventFragment.from("E(int8 indexed a)"), [-1])`,
  `edge.encodeFilterTopics(U.EventFragment.from("E(int8 indexed a)"), [5])`,
  `edge.encodeFilterTopics(U.EventFragment.from("E(bytes4 indexed a)"), ["0x12345678"])`,
  // ---- Contract: construction
  `Object.keys(new ethers.Contract(TOKEN, ERC20_HR))`, `Object.keys(new ethers.Contract(TOKEN, ERC20_JSON).functions)`,
  `Object.keys(new ethers.Contract(TOKEN, EDGE_HR).callStatic)`, `Object.keys(new ethers.Contract(TOKEN, EDGE_HR).filters)`,
  `new ethers.Contract(TOKEN, EDGE_HR).f`, `typeof new ethers.Contract(TOKEN, EDGE_HR)["f(string)"]`, `LOGS.slice()`,
  `new ethers.Contract(TOKEN.toLowerCase(), ERC20_HR).address`, `new ethers.Contract(TOKEN.toLowerCase(), ERC20_HR).resolvedAddress`,
  `new ethers.Contract(TOKEN, erc20).interface === erc20`, `new ethers.Contract(TOKEN, ERC20_HR).provider`,
  `new ethers.Contract("token.eth", ERC20_HR)`, `new ethers.Contract(null, ERC20_HR)`, `new ethers.Contract(TOKEN, ERC20_HR, {})`,
  `new ethers.Contract(TOKEN, ERC20_HR) instanceof ethers.BaseContract`,
  `(function () { var s = stub(erc20); var c = new ethers.Contract(TOKEN, ERC20_JSON, s.signer); return [c.signer === s.signer, c.provider === s.provider]; })()`,
  `(function () { var s = stub(erc20); var c = new ethers.Contract(TOKEN, ERC20_JSON, s.provider).connect(s.signer); return [c.signer === s.signer, c.interface.format()]; })()`,
  `(function () { var s = stub(erc20); var c = new ethers.Contract(TOKEN, ERC20_JSON, s.signer).attach(A2); return [c.address, c.signer === s.signer]; })()`,
  `new ethers.Contract(TOKEN, ERC20_HR).filters.Transfer(null, A2)`, `new ethers.Contract(TOKEN, EDGE_HR).filters.Named("a")`,
  `new ethers.Contract(TOKEN, EDGE_HR).filters.Over`, `new ethers.Contract(TOKEN, EDGE_HR).filters["Over(address)"](null)`,
  // ---- Contract: read calls
  `run(ERC20_HR, "provider", function (c) { return c.balanceOf(A2); })`,
  `run(ERC20_JSON, "provider", function (c) { return c.balanceOf(A2.toLowerCase(), { blockTag: 12 }); })`,
  `run(ERC20_JSON, "provider", function (c) { return c.functions.balanceOf(A2); })`,
  `run(ERC20_JSON, "provider", function (c) { return Promise.all([c.decimals(), c.symbol(), c.name(), c.totalSupply()]); })`,
  `run(ERC20_JSON, "signer", function (c) { return c.balanceOf(A2); })`,
  `run(ERC20_JSON, "provider", function (c) { return Promise.all([c.balanceOf(A2), c.decimals(), c.symbol()]); })`,
  `edge.parseLog(NAMED_LOG)`,
  `run(ERC20_JSON, "provider", function (c) { return c.allowance(A1, A2); })`,
  `run(ERC20_JSON, "provider", function (c) { return c.balanceOf(A2, { from: A1 }); })`,
  `run(ERC20_JSON, "signer", function (c) { return c.balanceOf(A2, { from: A2 }); })`,
  `run(ERC20_JSON, "signer", function (c) { return c.balanceOf(A2, { from: A1.toLowerCase() }); })`,
  `run(ERC20_JSON, "provider", function (c) { return c.balanceOf(A2, { gasLimit: 100000, nonce: 3, gasPrice: "0x10" }); })`,
  `run(ERC20_JSON, "provider", function (c) { return c.balanceOf(A2, { value: 1 }); })`,
  `run(ERC20_JSON, "provider", function (c) { return c.balanceOf(A2, { bogus: 1, other: null }); })`,
  `run(ERC20_JSON, "provider", function (c) { return c.balanceOf(); })`,
  `run(ERC20_JSON, "provider", function (c) { return c.balanceOf(A2, A1, A1); })`,
  `run(ERC20_JSON, "provider", function (c) { return c.balanceOf(12); })`,
  `run(ERC20_JSON, "provider", function (c) { return c.balanceOf("0x1234"); })`,
  `run(ERC20_JSON, "signer", function (c) { return c.balanceOf(A1.toLowerCase().replace("a", "A")); })`,
  `run(ERC20_JSON, "signer", function (c) { return c.transfer(A2, 5, { from: "0x1234" }); })`,
  `run(ERC20_JSON, "provider", function (c) { return c.balanceOf(Promise.resolve(A2)); })`,
  `run(EDGE_HR, "provider", function (c) { return c["f(uint256,uint256)"](1, 2); })`,
  `run(EDGE_HR, "provider", function (c) { return c.callStatic["f(uint256,uint256)"](1, 2); })`,
  `run(EDGE_HR, "provider", function (c) { return c["f(uint256)"](1); })`,
  `run(EDGE_HR, "provider", function (c) { return c.g([[1, "x"], { a: 2, b: "y" }], [HASH, HASH]); })`,
  `run(EDGE_HR, "provider", function (c) { return c.g({ 0: 1 }, [HASH, HASH]); })`,
  `run(EDGE_HR, "provider", function (c) { return c.owner(); })`,
  `run(EDGE_HR, "provider", function (c) { return c.gassy(5); })`,
  `run(ERC20_JSON, null, function (c) { return c.balanceOf(A2); })`,
  // ---- Contract: transactions
  `run(ERC20_HR, "signer", function (c) { return c.transfer(A2, 5); })`,
  `run(ERC20_HR, "signer", function (c) { return c.transfer(A2, 5).then(receipt); })`,
  `run(ERC20_JSON, "signer", function (c) { return c.transfer(A2, U.parseUnits("1.5", 18), { gasLimit: 90000, maxFeePerGas: 100, maxPriorityFeePerGas: 2, nonce: 9, type: 2 }); })`,
  `run(ERC20_JSON, "signer", function (c) { return c.transfer(A2, 5, { accessList: [[A1, [HASH]]] }); })`,
  `run(ERC20_JSON, "signer", function (c) { return c.transfer(A2, 5, { accessList: { [A2]: [HASH, HASH], [A1]: [] } }); })`,
  `run(ERC20_JSON, "signer", function (c) { return c.transfer(A2, 5, { accessList: [[A1, ["0x12"]]] }); })`,
  `run(ERC20_JSON, "signer", function (c) { return c.transfer(A2, 5, { value: 1 }); })`,
  `run(ERC20_JSON, "signer", function (c) { return c.transfer(A2, 5, { value: 0 }); })`,
  `run(EDGE_HR, "signer", function (c) { return c.pay(A2, { value: U.parseEther("0.1") }); })`,
  `run(EDGE_HR, "signer", function (c) { return c.gassy(5); })`,
  `run(ERC20_JSON, "provider", function (c) { return c.transfer(A2, 5); })`,
  `run(ERC20_JSON, "signer", function (c) { return c.callStatic.transfer(A2, 5); })`,
  `run(ERC20_JSON, "provider", function (c) { return c.populateTransaction.transfer(A2, 5, { from: A1, value: 0, customData: { a: 1 }, ccipReadEnabled: 1 }); })`,
  `run(ERC20_JSON, "signer", function (c) { return c.populateTransaction.transfer(A2, 5); })`,
  `run(ERC20_JSON, "provider", function (c) { return c.populateTransaction.balanceOf(A2, { blockTag: 5 }); })`,
  `run(ERC20_JSON, "signer", function (c) { return c.estimateGas.transfer(A2, 5); })`,
  `run(ERC20_JSON, "provider", function (c) { return c.estimateGas.transfer(A2, 5); })`,
  `run(ERC20_JSON, null, function (c) { return c.estimateGas.transfer(A2, 5); })`,
  `run(ERC20_JSON, "signer", function (c) { return c.functions.transfer(A2, 5); })`,
  `run(ERC20_JSON, "signer", function (c) { return c["transfer(address,uint256)"](A2, 5); })`,
  `run(ERC20_JSON, "signer", function (c) { return c.fallback({ data: "0x1234" }); })`,
  `run(ERC20_JSON, "signer", function (c) { return c.fallback({ to: A1 }); })`,
  `run(ERC20_JSON, "signer", function (c) { return c.deployed().then(function (d) { return d === c; }); })`,
  `run(ERC20_JSON, "signer", function (c) { return c.attach(A2).deployed(); })`,
  // ---- Contract: logs
  `run(ERC20_JSON, "provider", function (c) { return c.queryFilter("Transfer", 5, 10); })`,
  `run(ERC20_JSON, "provider", function (c) { return c.queryFilter(c.filters.Transfer(A1)); })`,
  `run(ERC20_JSON, "provider", function (c) { return c.queryFilter(c.filters.Transfer(null, A2), BLOCK); })`,
  `run(ERC20_JSON, "provider", function (c) { return c.queryFilter(c.filters.Transfer(), BLOCK, 5); })`,
  `run(ERC20_JSON, "provider", function (c) { return c.queryFilter("*"); })`,
  `run(ERC20_JSON, "provider", function (c) { return c.queryFilter({ topics: [HASH] }, "latest"); })`,
  `run(ERC20_JSON, "provider", function (c) { return c.queryFilter({}); })`,
  `run(ERC20_JSON, "provider", function (c) { return c.queryFilter("Nope"); })`,
  `run(EDGE_HR, "provider", function (c) { return c.queryFilter("Data"); })`,
  `run(ERC20_JSON, "provider", function (c) { return c.queryFilter("Transfer").then(function (es) { return es.map(function (e) { return [Object.keys(e), e.decode(e.data, e.topics)]; }); }); })`,
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
