//! Checked-in vectors (provenance in `tests/data/README.md`):
//! * `derivation-vectors.json` — every derivation, sealing KDF and the sealed-file format,
//!   the root id and store-row MACs, computed by an independent Python implementation; every public key and address is
//!   re-derived here with libsecp256k1 as well.
//! * `ethers-v5.json` — ethers 5.7.2 `signMessage` outputs: signing the same digest here
//!   must give the same 65 bytes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use keyservice::derive::{self, KeyDeriver};
use keyservice::ops::KeyOps;
use keyservice::platform::derive_sealing_key;
use keyservice::platform::dev::{DEV_SEAL_SALT, DevPlatform};
use keyservice::platform::dstack::{DSTACK_SEAL_SALT, seal_key_path};
use keyservice::root;
use keyservice::secret::RootSecret;
use keyservice_api::protocol::{Request, Response};
use keyservice_api::{Address, ComposeHash, DerivationPath, PlatformKind, PublicKey};
use serde_json::Value;
use test_support::keyservice::address_of_secret;
use zeroize::Zeroizing;

fn load(name: &str) -> Value {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn bytes(v: &Value) -> Vec<u8> {
    hex::decode(v.as_str().unwrap().trim_start_matches("0x")).unwrap()
}

fn b32(v: &Value) -> [u8; 32] {
    bytes(v).try_into().unwrap()
}

fn root_of(v: &Value) -> RootSecret {
    RootSecret::from_bytes(Zeroizing::new(b32(&v["root"])))
}

/// Checks one derived key against its vector entry, and the entry against libsecp256k1.
fn check_key(sk: &derive::SecretScalar, entry: &Value) {
    let what = entry.to_string();
    assert_eq!(
        *derive::secret_bytes(sk),
        b32(&entry["private_key"]),
        "{what}"
    );
    let pk = derive::public_key(sk).unwrap();
    assert_eq!(pk.to_hex(), entry["public_key"].as_str().unwrap(), "{what}");
    assert_eq!(
        pk.pkp_id().to_hex(),
        entry["pkp_id"].as_str().unwrap(),
        "{what}"
    );
    assert_eq!(
        pk.address().to_checksum(),
        entry["address"].as_str().unwrap(),
        "{what}"
    );
    // Independent cross-check of the vector itself.
    assert_eq!(
        address_of_secret(&b32(&entry["private_key"])),
        pk.address(),
        "{what}"
    );
}

#[test]
fn derivations_match_the_independent_vectors() {
    let v = load("derivation-vectors.json");
    let d = KeyDeriver::new(&root_of(&v));
    for w in v["wallets"].as_array().unwrap() {
        let sk = d
            .wallet_key(&DerivationPath(b32(&w["derivation_path"])))
            .unwrap();
        check_key(&sk, w);
        assert_eq!(*derive::wallet_aes_key(&sk).unwrap(), b32(&w["aes_key"]));
    }
    for a in v["actions"].as_array().unwrap() {
        check_key(&d.action_key(a["cid"].as_str().unwrap()).unwrap(), a);
    }
    for p in v["api_payers"].as_array().unwrap() {
        check_key(
            &d.api_payer_key(p["index"].as_u64().unwrap() as u32)
                .unwrap(),
            p,
        );
    }
    check_key(&d.admin_payer_key().unwrap(), &v["admin_payer"]);
}

#[test]
fn vector_ciphertexts_decrypt() {
    let v = load("derivation-vectors.json");
    let ops = KeyOps::new(root_of(&v), PlatformKind::Dev, ComposeHash([0; 32]), 4).unwrap();
    for e in v["encryption"].as_array().unwrap() {
        let path = DerivationPath(b32(&e["derivation_path"]));
        let out = ops
            .execute(Request::Decrypt {
                path,
                ciphertext: bytes(&e["ciphertext"]),
            })
            .unwrap();
        match out {
            Response::Plaintext(p) => assert_eq!(p, bytes(&e["plaintext"])),
            other => panic!("{other:?}"),
        }
    }
    // Payer addresses computed at start-up match the vectors.
    let payers = ops.payers();
    for (i, p) in v["api_payers"].as_array().unwrap().iter().enumerate() {
        let a: Address = p["address"].as_str().unwrap().parse().unwrap();
        assert_eq!(payers.api[i], a);
    }
}

#[test]
fn vector_root_id_and_row_macs() {
    let v = load("derivation-vectors.json");
    let d = KeyDeriver::new(&root_of(&v));
    assert_eq!(d.root_id().unwrap().0, b32(&v["root_id"]));
    let m = &v["store_row_mac"];
    assert_eq!(*d.store_row_mac_key().unwrap(), b32(&m["key"]));
    let ops = KeyOps::new(root_of(&v), PlatformKind::Dev, ComposeHash([0; 32]), 1).unwrap();
    assert_eq!(ops.root_id().0, b32(&v["root_id"]));
    let rows = m["rows"].as_array().unwrap();
    let items: Vec<Vec<u8>> = rows.iter().map(|r| bytes(&r["row"])).collect();
    match ops.execute(Request::RowMac { items }).unwrap() {
        Response::RowMacs(tags) => {
            let expected: Vec<[u8; 32]> = rows.iter().map(|r| b32(&r["tag"])).collect();
            assert_eq!(tags, expected);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn vector_sealed_file_opens_with_the_dev_platform() {
    let v = load("derivation-vectors.json");
    let s = &v["dev_sealing"];
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("dev-secret");
    let compose = dir.path().join("app-compose.json");
    let state = dir.path().join("state");
    std::fs::write(&secret, bytes(&s["dev_secret"])).unwrap();
    std::fs::write(&compose, s["compose_file"].as_str().unwrap()).unwrap();
    std::fs::create_dir(&state).unwrap();
    std::fs::write(state.join("root.sealed"), bytes(&s["sealed_file"])).unwrap();

    let hash = ComposeHash(b32(&s["compose_hash"]));
    let key = derive_sealing_key(DEV_SEAL_SALT, &bytes(&s["dev_secret"]), &hash).unwrap();
    assert_eq!(key.expose_secret(), &b32(&s["sealing_key"]));

    let platform = DevPlatform::new(&secret, &compose);
    let unsealed = root::open_or_create(&platform, &state, None).unwrap();
    assert!(!unsealed.created);
    assert_eq!(unsealed.compose_hash, hash);
    assert_eq!(unsealed.root.expose_secret(), &b32(&v["root"]));
}

#[test]
fn dstack_sealing_kdf_vector() {
    let v = load("derivation-vectors.json");
    let s = &v["dstack_sealing"];
    let hash = ComposeHash(b32(&s["compose_hash"]));
    assert_eq!(seal_key_path(&hash), s["getkey_path"].as_str().unwrap());
    let key = derive_sealing_key(DSTACK_SEAL_SALT, &bytes(&s["agent_key"]), &hash).unwrap();
    assert_eq!(key.expose_secret(), &b32(&s["sealing_key"]));
}

#[test]
fn signatures_match_ethers_v5_byte_for_byte() {
    let v = load("ethers-v5.json");
    for e in v["vectors"].as_array().unwrap() {
        let sk = derive::SecretScalar::from_bytes(&b32(&e["private_key"])).unwrap();
        let pk = derive::public_key(&sk).unwrap();
        assert_eq!(pk.to_hex(), e["public_key"].as_str().unwrap());
        let addr: Address = e["address"].as_str().unwrap().parse().unwrap();
        assert_eq!(pk.address(), addr);
        assert_eq!(pk.address().to_checksum(), e["address"].as_str().unwrap());
        // signMessage(m) = joinSignature(signDigest(hashMessage(m))).
        let sig = derive::sign_digest(&sk, &b32(&e["hash_message"])).unwrap();
        assert_eq!(
            sig.to_hex(),
            e["signature"].as_str().unwrap(),
            "message {:?}",
            e["message"]
        );
        let _ = PublicKey::from_uncompressed(*pk.uncompressed()).unwrap();
    }
}
