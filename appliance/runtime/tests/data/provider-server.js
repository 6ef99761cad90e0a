// The node half of tests/provider_differential.rs: real ethers 5.7.2 with its
// JsonRpcProvider pointed at a local HTTP server that answers from the fixtures
// (FIXTURES), then the cases (CASES_FILE). Prints MARKER and {results, unmatched}.
// The matching rule is the same as the test's own answer() in Rust: the first fixture
// with the method, equal params and no chain or the request's chain (the URL path);
// eth_sendRawTransaction without a fixture answers the transaction's hash.
const http = require("http");
const fs = require("fs");
const ethers = require(process.env.ETHERS_DIR);
const fixtures = JSON.parse(fs.readFileSync(process.env.FIXTURES, "utf8"));
const unmatched = [];

function equal(a, b) {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a), kb = Object.keys(b);
  if (ka.length !== kb.length) return false;
  return ka.every((k) => Object.prototype.hasOwnProperty.call(b, k) && equal(a[k], b[k]));
}

function answer(chain, req) {
  const f = fixtures.find((f) => f.method === req.method && equal(f.params, req.params) &&
    (f.chain === undefined || f.chain === chain));
  if (f) {
    return f.error !== undefined ? { jsonrpc: "2.0", id: req.id, error: f.error }
      : { jsonrpc: "2.0", id: req.id, result: f.result };
  }
  if (req.method === "eth_sendRawTransaction") {
    return { jsonrpc: "2.0", id: req.id, result: ethers.utils.keccak256(req.params[0]) };
  }
  unmatched.push({ chain, method: req.method, params: req.params });
  return { jsonrpc: "2.0", id: req.id, error: { code: -32601, message: "no fixture" } };
}

const server = http.createServer((rq, rs) => {
  let body = "";
  rq.on("data", (c) => { body += c; });
  rq.on("end", () => {
    const out = answer(rq.url.slice(1), JSON.parse(body));
    rs.setHeader("content-type", "application/json");
    rs.end(JSON.stringify(out));
  });
});

server.listen(0, "127.0.0.1", () => {
  const port = server.address().port;
  globalThis.ethers = ethers;
  globalThis.URL_A = "http://127.0.0.1:" + port + "/a";
  globalThis.URL_B = "http://127.0.0.1:" + port + "/b";
  (0, eval)(fs.readFileSync(process.env.CASES_FILE, "utf8"));
  runAll().then((results) => {
    process.stdout.write(process.env.MARKER + JSON.stringify({ results: JSON.parse(results), unmatched }));
    server.close();
    process.exit(0);
  });
});
