//! The image's supply chain, from cargo's own resolution of the release build
//! (`oci_image::sbom`, offline):
//!
//! * one crypto provider: no aws-lc-rs / aws-lc-sys (reqwest 0.13's default rustls
//!   provider, which alloy's `reqwest-rustls-tls` turns on) and no OpenSSL in any shipped
//!   binary, and exactly one version of ring and of rustls;
//! * the SBOM covers every binary of the image, is deterministic and names no path of the
//!   machine that made it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use oci_image::DEFAULT_BINARIES;
use oci_image::sbom::{self, Sbom};

/// Crates that must never be built into a shipped binary: a second crypto provider
/// (aws-lc) or a system TLS library (OpenSSL, native-tls).
const BANNED: &[&str] = &[
    "aws-lc-rs",
    "aws-lc-sys",
    "aws-lc-fips-sys",
    "openssl",
    "openssl-sys",
    "native-tls",
    "boring-sys",
];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

fn binaries() -> Vec<String> {
    DEFAULT_BINARIES.iter().map(|s| (*s).to_owned()).collect()
}

fn generate() -> (Sbom, Vec<u8>) {
    let sbom = sbom::generate(&workspace(), &binaries()).unwrap();
    let bytes = sbom.to_bytes().unwrap();
    (sbom, bytes)
}

fn name_of(label: &str) -> &str {
    label.split_once(' ').map_or(label, |(n, _)| n)
}

#[test]
fn no_shipped_binary_builds_a_second_crypto_provider_or_openssl() {
    let (sbom, _) = generate();
    assert_eq!(sbom.binaries.len(), DEFAULT_BINARIES.len());
    for b in &sbom.binaries {
        for label in b.linked.iter().chain(&b.build) {
            assert!(
                !BANNED.contains(&name_of(label)),
                "{} builds {label}: ring must be the only crypto provider (see the \
                 alloy / alloy-reqwest features in the workspace Cargo.toml)",
                b.name
            );
        }
    }
    // Not even a test or a tool of the workspace pulls them in.
    let lock = std::fs::read_to_string(workspace().join("Cargo.lock")).unwrap();
    for banned in BANNED {
        assert!(
            !lock.contains(&format!("name = \"{banned}\"\n")),
            "Cargo.lock has {banned}"
        );
    }
}

#[test]
fn ring_and_rustls_are_each_built_in_exactly_one_version() {
    let (sbom, _) = generate();
    let mut versions: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for p in &sbom.packages {
        versions.entry(&p.name).or_default().insert(&p.version);
    }
    for one in ["ring", "rustls"] {
        let found = versions.get(one).cloned().unwrap_or_default();
        assert_eq!(found.len(), 1, "{one}: {found:?}");
    }
    // The TLS-speaking binaries link them (and so does nothing else by another name).
    for b in sbom
        .binaries
        .iter()
        .filter(|b| ["appliance", "keyservice", "evidence"].contains(&b.name.as_str()))
    {
        for crate_ in ["ring", "rustls"] {
            assert!(
                b.linked.iter().any(|l| name_of(l) == crate_),
                "{} does not link {crate_}",
                b.name
            );
        }
    }
}

#[test]
fn the_sbom_is_deterministic_complete_and_free_of_build_paths() {
    let (sbom, bytes) = generate();
    let (_, again) = generate();
    assert_eq!(bytes, again, "two SBOMs of the same source differ");
    let text = String::from_utf8(bytes).unwrap();
    let root = workspace();
    assert!(
        !text.contains(root.to_str().unwrap()),
        "the SBOM names the checkout's path"
    );
    assert!(!text.contains("/root/") && !text.contains("/home/"));
    let listed: Vec<&str> = sbom.binaries.iter().map(|b| b.name.as_str()).collect();
    let mut want: Vec<&str> = DEFAULT_BINARIES.to_vec();
    want.sort();
    assert_eq!(listed, want);
    // Every registry crate carries Cargo.lock's checksum; every label is a package.
    let packages: BTreeSet<String> = sbom
        .packages
        .iter()
        .map(|p| format!("{} {}", p.name, p.version))
        .collect();
    for p in &sbom.packages {
        if p.source.starts_with("registry+") {
            assert_eq!(p.checksum.as_ref().map(String::len), Some(64), "{p:?}");
        } else {
            assert_eq!(p.source, sbom::WORKSPACE_SOURCE, "{p:?}");
        }
    }
    for b in &sbom.binaries {
        assert!(b.linked.contains(&format!("{} 0.1.0", b.package)));
        for label in b.linked.iter().chain(&b.build) {
            assert!(packages.contains(label), "{label}");
        }
    }
    // The worker has no TLS, no HTTP and no chain client: of alloy it links only the RLP
    // encoding (the actions' transaction serialisation), nothing that talks to a network.
    let worker = sbom
        .binaries
        .iter()
        .find(|b| b.name == "action-worker")
        .unwrap();
    let network = [
        "rustls",
        "hyper",
        "reqwest",
        "tokio-rustls",
        "alloy-provider",
    ];
    for label in &worker.linked {
        let name = name_of(label);
        assert!(
            !(name.starts_with("alloy") && name != "alloy-rlp"),
            "the action worker links {label}"
        );
        assert!(!network.contains(&name), "the action worker links {label}");
    }
    // A test-only feature (alloy's node bindings, enabled by dev-dependencies) is not in
    // the appliance's SBOM: the resolution is the release build's, not the workspace's.
    let appliance = sbom
        .binaries
        .iter()
        .find(|b| b.name == "appliance")
        .unwrap();
    assert!(
        !appliance
            .linked
            .iter()
            .any(|l| name_of(l) == "alloy-node-bindings")
    );
    assert_eq!(sbom::digest_string(text.as_bytes()).len(), 7 + 64);
}

#[test]
fn the_image_carries_the_sbom_and_its_digest_depends_on_it() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("appliance");
    std::fs::write(&bin, b"not an executable").unwrap();
    let spec = oci_image::ImageSpec {
        binaries: vec![oci_image::Binary {
            name: "appliance".into(),
            path: bin,
        }],
        source_date_epoch: 1_700_000_000,
        libraries: oci_image::Libraries::Unchecked,
        tag: "appliance:test".into(),
    };
    let doc = br#"{"format":"appliance-sbom/1"}"#;
    let with = oci_image::build_with_files(&spec, &[(sbom::IMAGE_PATH, doc)]).unwrap();
    let other = oci_image::build_with_files(&spec, &[(sbom::IMAGE_PATH, b"{}")]).unwrap();
    let without = oci_image::build(&spec).unwrap();
    assert_ne!(with.digest_string(), without.digest_string());
    assert_ne!(with.digest_string(), other.digest_string());
    let app_layer = &with.layers.last().unwrap().bytes;
    let at = find(app_layer, b"usr/share/appliance/sbom.json").expect("no SBOM entry");
    // ustar: the entry's data follows its 512-byte header.
    let data = &app_layer[at - at % 512 + 512..][..doc.len()];
    assert_eq!(data, doc);
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// `image-build --sbom-workspace`: the SBOM of the binaries it packs is in the image and
/// beside it, byte for byte the document `sbom::generate` makes for them.
#[test]
fn image_build_writes_the_sbom_into_the_image_and_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    let bin_dir = dir.path().join("bin");
    std::fs::create_dir(&bin_dir).unwrap();
    for name in ["appliance", "keyservice"] {
        std::fs::write(bin_dir.join(name), name.as_bytes()).unwrap();
    }
    let out = dir.path().join("out");
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_image-build"))
        .arg("--bin-dir")
        .arg(&bin_dir)
        .args(["--binaries", "appliance,keyservice", "--unchecked"])
        .args(["--source-date-epoch", "1700000000"])
        .arg("--out")
        .arg(&out)
        .arg("--sbom-workspace")
        .arg(workspace())
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let beside = std::fs::read(out.join(sbom::FILE_NAME)).unwrap();
    let want = sbom::generate(
        &workspace(),
        &["appliance".to_owned(), "keyservice".to_owned()],
    )
    .unwrap()
    .to_bytes()
    .unwrap();
    assert_eq!(beside, want);
    let archive = std::fs::read(out.join("appliance-image.tar")).unwrap();
    assert!(
        find(&archive, &want).is_some(),
        "the image does not carry the SBOM"
    );
}
