//! Turns the committed solc artifacts (`artifacts/*.json`, written by `build.js`) into files
//! the crate embeds: creation and runtime bytecode as raw bytes, the ABI as JSON. A malformed
//! artifact fails the build here instead of at run time.

use std::{env, fs, path::PathBuf};

const CONTRACTS: [&str; 2] = ["AccountConfig", "AppGovernance"];

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").unwrap_or_else(|| fail("OUT_DIR is not set")));
    let mut compiler = None::<String>;
    for name in CONTRACTS {
        let path = format!("artifacts/{name}.json");
        println!("cargo:rerun-if-changed={path}");
        let text = fs::read_to_string(&path).unwrap_or_else(|e| fail(&format!("{path}: {e}")));
        let artifact: serde_json::Value =
            serde_json::from_str(&text).unwrap_or_else(|e| fail(&format!("{path}: {e}")));
        let field = |key: &str| {
            artifact
                .get(key)
                .unwrap_or_else(|| fail(&format!("{path}: no `{key}`")))
        };
        for (key, file) in [
            ("bytecode", "bytecode.bin"),
            ("deployedBytecode", "deployed.bin"),
        ] {
            let hex_text = field(key)
                .as_str()
                .and_then(|s| s.strip_prefix("0x"))
                .unwrap_or_else(|| fail(&format!("{path}: `{key}` is not a 0x hex string")));
            let bytes =
                hex::decode(hex_text).unwrap_or_else(|e| fail(&format!("{path}: `{key}`: {e}")));
            if bytes.is_empty() {
                fail(&format!("{path}: `{key}` is empty"));
            }
            write(&out.join(format!("{name}.{file}")), &bytes);
        }
        write(
            &out.join(format!("{name}.abi.json")),
            field("abi").to_string().as_bytes(),
        );
        let version = field("compiler")
            .get("version")
            .and_then(|v| v.as_str())
            .unwrap_or_else(|| fail(&format!("{path}: no `compiler.version`")))
            .to_owned();
        match &compiler {
            Some(seen) if *seen != version => {
                fail(&format!("{path}: compiled by {version}, not {seen}"))
            }
            _ => compiler = Some(version),
        }
    }
    println!(
        "cargo:rustc-env=CHAIN_CONTRACTS_SOLC_VERSION={}",
        compiler.unwrap_or_default()
    );
}

fn write(path: &PathBuf, bytes: &[u8]) {
    fs::write(path, bytes).unwrap_or_else(|e| fail(&format!("{}: {e}", path.display())));
}

fn fail(message: &str) -> ! {
    eprintln!("chain-contracts build: {message} (rebuild with `node contracts/build.js`)");
    std::process::exit(1)
}
