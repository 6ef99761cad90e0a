//! viem (npm `viem@2.57.20`, its own ESM build and that of its dependencies, from the test
//! tools cache) imported by an action and run in boa: an account from a private key, an
//! EIP-191 signature, an ABI encoding and a keccak hash, equal to what viem computes under
//! Node.js for the same inputs. The parent plays a CDN serving the package files as
//! published, resolving bare specifiers the way Node does (nested `node_modules`, the
//! `exports` map with its `import` condition), as a CDN rewrites them. About 450 modules
//! and 1.7 MB of source: the graph an unbundled ESM package brings.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use action_runtime::protocol::{HostRequest, ImportedModule, ReplyOutcome};
use serde_json::{Value, json};
use test_support::action_worker::{Worker, job, ok};

const CDN: &str = "https://cdn.test/";

/// The target of an `exports` entry under the conditions an ESM CDN serves.
fn condition(target: &Value) -> Option<String> {
    match target {
        Value::String(path) => Some(path.clone()),
        Value::Object(map) => ["import", "module", "browser", "default"]
            .iter()
            .find_map(|c| map.get(*c).and_then(condition)),
        _ => None,
    }
}

/// The file a bare specifier names, looked up from `dir` upwards as Node does.
fn bare(specifier: &str, dir: &Path) -> Option<PathBuf> {
    let parts: Vec<&str> = specifier
        .splitn(if specifier.starts_with('@') { 3 } else { 2 }, '/')
        .collect();
    let (package, rest) = if specifier.starts_with('@') {
        (
            format!("{}/{}", parts[0], parts.get(1)?),
            parts.get(2).copied(),
        )
    } else {
        (parts[0].to_owned(), parts.get(1).copied())
    };
    let subpath = rest.map_or(".".to_owned(), |r| format!("./{r}"));
    let home = dir
        .ancestors()
        .map(|d| d.join("node_modules").join(&package))
        .find(|d| d.join("package.json").is_file())?;
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(home.join("package.json")).ok()?).ok()?;
    let Some(exports) = manifest.get("exports") else {
        let entry = manifest
            .get("module")
            .or_else(|| manifest.get("main"))
            .and_then(Value::as_str)
            .unwrap_or("index.js");
        return Some(home.join(if subpath == "." { entry } else { &subpath[2..] }));
    };
    if subpath == "." && exports.is_string() {
        return condition(exports).map(|p| home.join(p));
    }
    if let Some(target) = exports.get(&subpath) {
        return condition(target).map(|p| home.join(p));
    }
    exports.as_object()?.iter().find_map(|(key, target)| {
        let rest = subpath.strip_prefix(key.strip_suffix('*')?)?;
        condition(target).map(|p| home.join(p.replace('*', rest)))
    })
}

/// The URL and source of an import, or why there is none.
fn serve(root: &Path, specifier: &str, referrer: Option<&str>) -> Result<(String, String), String> {
    let dir = match referrer {
        Some(url) => root
            .join(url.strip_prefix(CDN).unwrap())
            .parent()
            .unwrap()
            .to_owned(),
        None => root.to_owned(),
    };
    let file = if specifier.starts_with("./") || specifier.starts_with("../") {
        dir.join(specifier)
    } else {
        bare(specifier, &dir).ok_or_else(|| format!("cannot resolve {specifier}"))?
    };
    let file = std::fs::canonicalize(&file).map_err(|e| format!("{}: {e}", file.display()))?;
    let relative = file
        .strip_prefix(root)
        .map_err(|_| "outside the packages".to_owned())?;
    let source = std::fs::read_to_string(&file).map_err(|e| e.to_string())?;
    Ok((format!("{CDN}{}", relative.display()), source))
}

#[test]
fn viem_runs_through_import() {
    test_support::tools::node_package("viem", "2.57.20");
    let root = std::fs::canonicalize(test_support::tools::node_modules()).unwrap();
    let code = "import { privateKeyToAccount } from 'viem/accounts';
import { keccak256, toHex, parseEther, encodeFunctionData, parseAbi } from 'viem';
async function main() {
  const account = privateKeyToAccount('0x' + '11'.repeat(32));
  const sig = await account.signMessage({ message: 'hello' });
  const data = encodeFunctionData({
    abi: parseAbi(['function transfer(address to, uint256 amount)']),
    functionName: 'transfer',
    args: [account.address, parseEther('1.5')],
  });
  return { address: account.address, sig, h: keccak256(toHex('x')), data };
}";
    let mut sent = BTreeSet::new();
    let mut worker = Worker::spawn();
    let (done, _) = worker.run_job(job(code, Value::Null), |call| {
        let HostRequest::Import(import) = &call.request else {
            panic!("unexpected host call {call:?}");
        };
        match serve(&root, &import.specifier, import.referrer.as_deref()) {
            Ok((url, source)) => {
                let source = sent.insert(url.clone()).then_some(source);
                ReplyOutcome::Ok(
                    serde_json::to_value(ImportedModule {
                        url,
                        integrity: "sha384-test".into(),
                        source,
                    })
                    .unwrap(),
                )
            }
            Err(e) => ReplyOutcome::Err(e),
        }
    });
    // viem 2.57.20 under Node.js, the same code (computed on the development machine).
    assert_eq!(
        ok(&done),
        &json!({
            "address": "0x19E7E376E7C213B7E7e7e46cc70A5dD086DAff2A",
            "sig": "0x9208d5f86a1f5d9c1908dbb42969925675ceb388616fc5b186c248e4967a03e02e9d28a1adcb8cce60ebcef9756dee20522a2987afea3055f4edd8380d425f891b",
            "h": "0x7521d1cadbcfa91eec65aa16715b94ffc1c9654ba57ea2ef1a2127bca1127a83",
            "data": "0xa9059cbb00000000000000000000000019e7e376e7c213b7e7e7e46cc70a5dd086daff2a00000000000000000000000000000000000000000000000014d1120d7b160000",
        })
    );
    assert!(sent.len() > 400, "{} modules", sent.len());
}
