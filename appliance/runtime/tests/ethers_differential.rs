//! Differential test: the cases of `tests/data/ethers-differential.js` run once in node
//! with the real ethers 5.7.2 (installed by `scripts/setup` into the tools cache) and once
//! in boa with our native subset; every serialised result must be identical.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod differential;

const CASES_FILE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/ethers-differential.js"
);

#[test]
fn native_ethers_matches_real_ethers_5_7_2() {
    differential::assert_same_as_node(CASES_FILE, 300);
}
