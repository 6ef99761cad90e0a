//! Cross-checks `appliance::cid::cid_v0` against the real npm `ipfs-only-hash@4.0.0`, run by
//! node from the tools cache that `scripts/setup` fills (see the `test-support` crate).
//!
//! The sizes cover the empty input, one chunk, the chunk boundary, a full first level
//! (174 chunks), a two-level DAG whose last batch holds a single node, and three top-level
//! children. All inputs are slices of one buffer, built and written once.

use std::io::Write as _;
use std::process::Command;

use appliance::cid::cid_v0;

const CHUNK: usize = 262_144;
const LINKS: usize = 174;
const PACKAGE: &str = "ipfs-only-hash";
const VERSION: &str = "4.0.0";

/// Reads the file named by argv[2] once and prints the CID of each `[offset, length]` slice of
/// argv[3] (JSON), in order, as a JSON array.
const SCRIPT: &str = r#"
const path = require("path");
const { of } = require(path.join(process.argv[1], "ipfs-only-hash"));
const data = require("fs").readFileSync(process.argv[2]);
const slices = JSON.parse(process.argv[3]);
(async () => {
  const cids = [];
  for (const [offset, length] of slices) {
    cids.push(await of(data.subarray(offset, offset + length)));
  }
  process.stdout.write(JSON.stringify(cids));
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
"#;

/// splitmix64 bytes from a fixed seed: varied, reproducible content.
fn pseudo_random(len: usize, mut seed: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        seed = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = seed;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        out.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    out.truncate(len);
    out
}

#[test]
fn cid_v0_matches_ipfs_only_hash() {
    // Fails (never skips) when the package is not installed at the pinned version.
    test_support::tools::node_package(PACKAGE, VERSION);
    let modules = test_support::tools::node_modules();

    let random_len = 2 * LINKS * CHUNK + 3;
    let repeated_len = 2 * CHUNK + 1;
    let mut data = pseudo_random(random_len, 0x00c1_d5ee_d000_0001);
    data.extend(std::iter::repeat_n(b'a', repeated_len));
    let text = "async function main() { return \"héllo\"; }\n";
    let text_at = data.len();
    data.extend_from_slice(text.as_bytes());

    let slices: Vec<(usize, usize)> = vec![
        (0, 0),
        (0, 1),
        (0, 11),
        (0, CHUNK - 1),
        (0, CHUNK),
        (0, CHUNK + 1),
        (7, 3 * CHUNK + 17),
        (0, LINKS * CHUNK),
        (0, LINKS * CHUNK + 1),
        (0, (LINKS + 1) * CHUNK + 5),
        (0, 2 * LINKS * CHUNK + 3),
        (random_len, CHUNK),
        (random_len, repeated_len),
        (text_at, text.len()),
    ];

    let mut file = tempfile::NamedTempFile::new().unwrap();
    file.write_all(&data).unwrap();
    file.flush().unwrap();

    let output = Command::new("node")
        .arg("-e")
        .arg(SCRIPT)
        .arg(&modules)
        .arg(file.path())
        .arg(serde_json::to_string(&slices).unwrap())
        .output()
        .unwrap_or_else(|err| {
            panic!("cannot run node ({err}); install node and run scripts/setup")
        });
    assert!(
        output.status.success(),
        "{PACKAGE} failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let expected: Vec<String> = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(expected.len(), slices.len());

    for (&(offset, len), expected) in slices.iter().zip(&expected) {
        assert_eq!(
            cid_v0(&data[offset..offset + len]),
            *expected,
            "{len} bytes at offset {offset}"
        );
    }
}
