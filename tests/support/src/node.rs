//! Runs node scripts that `require` the npm packages of the tools cache, for tests that
//! compare the service with the JavaScript libraries its clients use.

use std::process::Command;

use crate::tools::node_modules;

/// Runs `script` with node (`node -e script args…`), with `require` able to load the npm
/// packages of the tools cache; returns its standard output. Fails clearly when node or
/// the tools are missing, or when the script fails.
pub fn node_eval(script: &str, args: &[&str]) -> String {
    let out = Command::new("node")
        .arg("-e")
        .arg(script)
        .args(args)
        .env("NODE_PATH", node_modules())
        .output()
        .unwrap_or_else(|err| panic!("cannot run node ({err}): install Node.js"));
    assert!(
        out.status.success(),
        "node failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("node printed UTF-8")
}
