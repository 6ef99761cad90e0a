#!/usr/bin/env node
// Compiles the contracts with the pinned solc-js (installed by scripts/setup) and writes
// artifacts/<Contract>.json (the test-only contracts of test/ into artifacts/test/). With
// --check, compiles in memory and exits 1 if a committed artifact differs from what the
// sources compile to (a stale artifact).
//
//   node contracts/build.js          # rewrite the artifacts
//   node contracts/build.js --check  # verify them
'use strict';

const crypto = require('crypto');
const fs = require('fs');
const os = require('os');
const path = require('path');

const SOLC_VERSION = '0.8.35';
// [contract, its source file, the artifact file]
const CONTRACTS = [
  ['AccountConfig', 'src/AccountConfig.sol', 'AccountConfig.json'],
  ['AppGovernance', 'src/AppGovernance.sol', 'AppGovernance.json'],
  // test-only: a stand-in for dstack's KMS contract and a Safe-style multisig owner
  ['TestKms', 'test/TestKms.sol', 'test/TestKms.json'],
  ['TestMultisig', 'test/TestMultisig.sol', 'test/TestMultisig.json'],
];
const SOURCES = [
  'src/AccountConfig.sol',
  'src/AppGovernance.sol',
  'src/IAccountConfig.sol',
  'src/IAppGovernance.sol',
  'src/dstack/IAppAuth.sol',
  'src/dstack/IAppAuthBasicManagement.sol',
  'src/dstack/IERC165.sol',
  'test/TestKms.sol',
  'test/TestMultisig.sol',
];
const SETTINGS = {
  optimizer: { enabled: true, runs: 200 },
  evmVersion: 'cancun',
};

const root = __dirname;

function fail(message) {
  process.stderr.write(`build.js: ${message}\n`);
  process.exit(1);
}

function loadSolc() {
  const tools = process.env.APPLIANCE_TOOLS_DIR || path.join(os.homedir(), '.cache', 'appliance-tools');
  const dir = path.join(tools, 'node', 'node_modules', 'solc');
  let solc;
  try {
    solc = require(dir);
  } catch (error) {
    fail(`solc-js not found in ${dir} (${error.code || error.message}); run scripts/setup`);
  }
  const version = solc.version();
  if (!version.startsWith(`${SOLC_VERSION}+`)) {
    fail(`solc-js in ${dir} is ${version}, want ${SOLC_VERSION}; run scripts/setup`);
  }
  return solc;
}

function sha256(text) {
  return crypto.createHash('sha256').update(text).digest('hex');
}

// sourceHash = sha256 over "<path>\n<sha256 of file>\n" for each source the contract was
// compiled from (its file and its imports), in path order.
function sourceHash(files) {
  return sha256(Object.entries(files).map(([name, hash]) => `${name}\n${hash}\n`).join(''));
}

function compile() {
  const solc = loadSolc();
  const sources = {};
  const fileHashes = {};
  for (const name of SOURCES) {
    const content = fs.readFileSync(path.join(root, name), 'utf8');
    sources[name] = { content };
    fileHashes[name] = sha256(content);
  }
  const input = {
    language: 'Solidity',
    sources,
    settings: {
      ...SETTINGS,
      outputSelection: { '*': { '*': ['abi', 'metadata', 'evm.bytecode.object', 'evm.deployedBytecode.object'] } },
    },
  };
  const output = JSON.parse(solc.compile(JSON.stringify(input)));
  const diagnostics = output.errors || [];
  for (const diagnostic of diagnostics) {
    process.stderr.write(diagnostic.formattedMessage || `${diagnostic.severity}: ${diagnostic.message}\n`);
  }
  // Warnings fail the build too: the committed contracts compile cleanly.
  if (diagnostics.length > 0) fail('compilation reported errors or warnings');

  const artifacts = {};
  for (const [contractName, sourceName, file] of CONTRACTS) {
    const contract = output.contracts[sourceName][contractName];
    const used = Object.keys(JSON.parse(contract.metadata).sources).sort();
    const files = Object.fromEntries(used.map((name) => [name, fileHashes[name]]));
    const artifact = {
      contractName,
      sourceName,
      compiler: { name: 'solc', version: solc.version(), settings: SETTINGS },
      sourceHash: sourceHash(files),
      sources: files,
      abi: contract.abi,
      bytecode: `0x${contract.evm.bytecode.object}`,
      deployedBytecode: `0x${contract.evm.deployedBytecode.object}`,
    };
    artifacts[file] = `${JSON.stringify(artifact, null, 2)}\n`;
  }
  return artifacts;
}

function main() {
  const args = process.argv.slice(2);
  const check = args.includes('--check');
  if (args.some((arg) => arg !== '--check')) fail('usage: node contracts/build.js [--check]');

  const artifacts = compile();
  const dir = path.join(root, 'artifacts');
  if (check) {
    const stale = [];
    for (const [name, text] of Object.entries(artifacts)) {
      const file = path.join(dir, name);
      const committed = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : null;
      if (committed !== text) stale.push(path.relative(process.cwd(), file) || file);
    }
    if (stale.length > 0) {
      fail(`stale or missing artifacts: ${stale.join(', ')}; run \`node contracts/build.js\` and commit them`);
    }
    process.stderr.write('build.js: artifacts are up to date\n');
    return;
  }
  for (const [name, text] of Object.entries(artifacts)) {
    const file = path.join(dir, name);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, text);
    process.stderr.write(`build.js: wrote artifacts/${name}\n`);
  }
}

main();
