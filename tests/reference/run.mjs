// Runs every action of examples/actions/reference (the reference service's published
// examples, kept verbatim) against a development appliance with anvil as its chain.
//
//   node tests/reference/run.mjs [--appliance target/debug/appliance] [--anvil PATH]
//                                [--cdn-cert PEM --cdn-key PEM]
//
// This process plays the outside world the examples reach, each on 127.0.0.1 at a port
// chosen now: an HTTPS stand-in for the ESM CDN (jsDelivr's `/npm/<name>@<version>/+esm`,
// each package bundled into one ES module by esbuild from the npm package the test tools
// installed, as jsDelivr bundles it), and an HTTP stand-in for the price, weather, auth
// and RPC-provider services the examples call. It starts `appliance dev` (its own anvil)
// configured for both, then runs cases.mjs in a child process that trusts the appliance's
// self-signed certificate, and stops everything it started. Exit status: the child's.
//
// Needs: scripts/setup (the npm test tools: ethers 5.7.2, solc, zod, date-fns-tz, cbor-x,
// ajv), the SDK built (sdk/js: npm ci && npm run build, which scripts/test does), and
// openssl unless --cdn-cert/--cdn-key name a certificate for 127.0.0.1 and its key.

import { spawn, execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import fs from "node:fs";
import http from "node:http";
import https from "node:https";
import os from "node:os";
import path from "node:path";
import readline from "node:readline";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../..");

function arg(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  if (i >= 0 && process.argv[i + 1]) return process.argv[i + 1];
  return fallback;
}

const tools =
  process.env.APPLIANCE_TOOLS_DIR || path.join(os.homedir(), ".cache", "appliance-tools");
const nodeModules = path.join(tools, "node", "node_modules");
const applianceBin = path.resolve(arg("appliance", path.join(root, "target/debug/appliance")));
const anvilBin = path.resolve(
  arg("anvil", path.join(nodeModules, "@foundry-rs/anvil-linux-amd64/bin/anvil")),
);
for (const [what, file] of [
  ["the appliance binary (cargo build --bins)", applianceBin],
  ["anvil (scripts/setup)", anvilBin],
  ["the npm test tools (scripts/setup)", path.join(nodeModules, "ethers/package.json")],
  ["esbuild (cd sdk/js && npm ci)", path.join(root, "sdk/js/node_modules/esbuild/package.json")],
  ["the SDK's build (cd sdk/js && npm run build)", path.join(root, "sdk/js/dist/index.js")],
]) {
  if (!fs.existsSync(file)) {
    console.error(`missing ${what}: ${file}`);
    process.exit(2);
  }
}

const work = fs.mkdtempSync(path.join(os.tmpdir(), "reference-examples-"));
const children = [];
function cleanUp() {
  for (const child of children) {
    if (child.exitCode === null) child.kill("SIGTERM");
  }
}
process.on("exit", cleanUp);
for (const signal of ["SIGINT", "SIGTERM"]) {
  process.on(signal, () => {
    cleanUp();
    process.exit(130);
  });
}

// --- the ESM CDN: one bundled module per package, as `/npm/<name>@<version>/+esm` --------

/** The packages the import examples name, and what their `+esm` module exports. */
const PACKAGES = [
  ["zod", "3.22.4", "export * from 'zod';"],
  ["date-fns-tz", "2.0.1", "export * from 'date-fns-tz';"],
  ["cbor-x", "1.5.9", "export * from 'cbor-x';"],
  // ajv ships CommonJS only; jsDelivr's `+esm` turns it into a module whose default export
  // is `module.exports` (the Ajv class), as this does.
  ["ajv", "8.12.0", "export { default } from 'ajv';"],
];

const esbuild = await import(
  pathToFileURL(path.join(root, "sdk/js/node_modules/esbuild/lib/main.js")).href
);
const modules = new Map();
for (const [name, version, entry] of PACKAGES) {
  const installed = JSON.parse(
    fs.readFileSync(path.join(nodeModules, name, "package.json"), "utf8"),
  ).version;
  if (installed !== version) {
    console.error(`${name}@${version} is needed, ${installed} is installed: run scripts/setup`);
    process.exit(2);
  }
  const out = await esbuild.build({
    stdin: { contents: entry, resolveDir: path.dirname(nodeModules), loader: "js" },
    bundle: true,
    format: "esm",
    platform: "browser",
    write: false,
    logLevel: "error",
  });
  modules.set(`/npm/${name}@${version}/+esm`, Buffer.from(out.outputFiles[0].contents));
}

// The CDN's certificate: given (the Rust test makes one), or made here with openssl.
let cdnCert = arg("cdn-cert");
let cdnKey = arg("cdn-key");
if (!cdnCert || !cdnKey) {
  cdnCert = path.join(work, "cdn-cert.pem");
  cdnKey = path.join(work, "cdn-key.pem");
  execFileSync(
    "openssl",
    [
      "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
      "-keyout", cdnKey, "-out", cdnCert, "-days", "1", "-subj", "/CN=127.0.0.1",
      "-addext", "subjectAltName=IP:127.0.0.1",
      "-addext", "basicConstraints=critical,CA:FALSE",
      "-addext", "extendedKeyUsage=serverAuth",
    ],
    { stdio: ["ignore", "ignore", "pipe"] },
  );
}
const cdnHits = new Map();
const cdn = https.createServer(
  {
    key: fs.readFileSync(cdnKey),
    cert: fs.readFileSync(cdnCert),
  },
  (req, res) => {
    const body = modules.get(req.url);
    cdnHits.set(req.url, (cdnHits.get(req.url) ?? 0) + 1);
    if (req.method !== "GET" || !body) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { "content-type": "text/javascript", "content-length": body.length });
    res.end(body);
  },
);
await new Promise((resolve) => cdn.listen(0, "127.0.0.1", resolve));
const cdnBase = `https://127.0.0.1:${cdn.address().port}/npm/`;

// --- the services the examples call ----------------------------------------------------

/** What the stand-ins accept; cases.mjs gets the same values. */
const WORLD = {
  ethUsd: 3120.5,
  weatherApiKey: "weather-key-2f9c",
  weatherCelsius: { London: 24.5, Oslo: 3.25 },
  validToken: "token-of-alice",
  rpcApiKey: "rpc-key-77d1",
};
let rpcUrl = null; // anvil, once the dev stack has said where

function json(res, status, value) {
  const body = Buffer.from(JSON.stringify(value));
  res.writeHead(status, { "content-type": "application/json", "content-length": body.length });
  res.end(body);
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks)));
    req.on("error", reject);
  });
}

const web = http.createServer(async (req, res) => {
  const url = new URL(req.url, "http://stand-in");
  try {
    // api.coingecko.com
    if (req.method === "GET" && url.pathname === "/api/v3/simple/price") {
      if (url.searchParams.get("ids") !== "ethereum" || url.searchParams.get("vs_currencies") !== "usd") {
        return json(res, 400, { error: "unexpected query" });
      }
      return json(res, 200, { ethereum: { usd: WORLD.ethUsd } });
    }
    // api.openweathermap.org
    if (req.method === "GET" && url.pathname === "/data/2.5/weather") {
      if (url.searchParams.get("appid") !== WORLD.weatherApiKey) {
        return json(res, 401, { cod: 401, message: "Invalid API key" });
      }
      const city = url.searchParams.get("q");
      const temp = WORLD.weatherCelsius[city];
      if (temp === undefined || url.searchParams.get("units") !== "metric") {
        return json(res, 404, { cod: "404", message: "city not found" });
      }
      return json(res, 200, { name: city, main: { temp } });
    }
    // auth.your-app.com
    if (req.method === "POST" && url.pathname === "/verify") {
      const { token } = JSON.parse((await readBody(req)).toString("utf8"));
      return json(res, 200, { valid: token === WORLD.validToken });
    }
    // an RPC provider with the key in the path (sepolia.infura.io/v3/<key>), backed by anvil
    if (req.method === "POST" && url.pathname.startsWith("/v3/")) {
      if (url.pathname !== `/v3/${WORLD.rpcApiKey}`) {
        return json(res, 401, { jsonrpc: "2.0", id: null, error: { code: -32001, message: "invalid project id" } });
      }
      const answer = await fetch(rpcUrl, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: await readBody(req),
      });
      const body = Buffer.from(await answer.arrayBuffer());
      res.writeHead(answer.status, { "content-type": "application/json", "content-length": body.length });
      return res.end(body);
    }
    json(res, 404, { error: "no such stand-in" });
  } catch (err) {
    json(res, 500, { error: String(err) });
  }
});
await new Promise((resolve) => web.listen(0, "127.0.0.1", resolve));
const webBase = `http://127.0.0.1:${web.address().port}`;

// --- the development appliance ---------------------------------------------------------

const log = fs.openSync(path.join(work, "appliance.log"), "w");
const dev = spawn(
  applianceBin,
  ["dev", "--listen", "127.0.0.1:0", "--data-dir", path.join(work, "dev")],
  {
    env: {
      // the appliance refuses APPLIANCE_* variables it does not know (the caller's tools
      // settings, say): it gets only these
      ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("APPLIANCE_"))),
      RUST_LOG: process.env.RUST_LOG || "info",
      APPLIANCE_CHAIN__DEV_ANVIL: anvilBin,
      APPLIANCE_RATE_LIMITS__ENABLED: "false",
      APPLIANCE_ACTIONS__IMPORTS__CDN: cdnBase,
      APPLIANCE_ACTIONS__IMPORTS__ENTRY_SUFFIX: "/+esm",
      APPLIANCE_ACTIONS__IMPORTS__CA_BUNDLE: path.resolve(cdnCert),
      // the stand-ins are on loopback, which actions may not reach unless allowed
      APPLIANCE_ACTIONS__FETCH_ALLOW_PRIVATE: "true",
    },
    stdio: ["ignore", "pipe", log],
  },
);
children.push(dev);
const started = await new Promise((resolve, reject) => {
  const found = {};
  const timer = setTimeout(() => reject(new Error("appliance dev printed no URL in 120 s")), 120_000);
  dev.on("exit", (code) => reject(new Error(`appliance dev exited with ${code}`)));
  readline.createInterface({ input: dev.stdout }).on("line", (line) => {
    const listening = line.match(/^appliance listening on (\S+)/);
    if (listening) found.baseUrl = listening[1];
    const chain = line.match(/^dev chain for actions \(chain 31337\): .*JsonRpcProvider\("([^"]+)"\)/);
    if (chain) found.rpcUrl = chain[1];
    if (found.baseUrl && found.rpcUrl) {
      clearTimeout(timer);
      resolve(found);
    }
  });
}).catch((err) => {
  console.error(String(err));
  console.error(fs.readFileSync(path.join(work, "appliance.log"), "utf8").slice(-8000));
  process.exit(1);
});
rpcUrl = started.rpcUrl;

// --- the cases, in a child that trusts the dev certificate -----------------------------

const integrity = Object.fromEntries(
  [...modules].map(([p, body]) => [
    new URL(p.slice(1), cdnBase.replace(/npm\/$/, "")).href,
    `sha384-${createHash("sha384").update(body).digest("base64")}`,
  ]),
);
const cases = spawn(process.execPath, [path.join(here, "cases.mjs"), ...process.argv.slice(2)], {
  env: {
    ...process.env,
    NODE_EXTRA_CA_CERTS: path.join(work, "dev/tls/self-signed.pem"),
    REF_CONTEXT: JSON.stringify({
      root,
      nodeModules,
      baseUrl: started.baseUrl,
      rpcUrl: started.rpcUrl,
      webBase,
      cdnBase,
      integrity,
      world: WORLD,
    }),
  },
  stdio: "inherit",
});
children.push(cases);
const status = await new Promise((resolve) => cases.on("exit", (code, signal) => resolve(code ?? (signal ? 1 : 0))));
if (status !== 0) {
  console.error(`--- appliance log (last 8 kB), ${path.join(work, "appliance.log")}:`);
  console.error(fs.readFileSync(path.join(work, "appliance.log"), "utf8").slice(-8000));
}
cleanUp();
cdn.close();
web.close();
await new Promise((resolve) => (dev.exitCode === null ? dev.on("exit", resolve) : resolve()));
if (status === 0) fs.rmSync(work, { recursive: true, force: true });
process.exit(status);
