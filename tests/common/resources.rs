//! Groups, wallets and actions: requests that create them, and the checks of their
//! response shapes, shared by the permission, group, wallet and action tests.

use serde_json::Value;

use crate::appliance::Appliance;
use crate::ids::{eip55, is_lower_hex, keccak_hex};

/// A wallet as `create_wallet` returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewWallet {
    /// EIP-55.
    pub address: String,
    pub pkp_id: String,
    pub derivation_path: String,
}

impl Appliance {
    /// `POST /create_wallet` with an empty JSON object; panics unless 200.
    pub async fn create_wallet(&self, key: &str) -> NewWallet {
        let reply = self
            .post("/create_wallet", Some(key), serde_json::json!({}))
            .await;
        wallet_from(reply.assert_ok())
    }

    /// `POST /add_group` with `body` (a `group_name` is filled in when absent); returns
    /// the new group's id after checking it is a decimal string.
    pub async fn add_group(&self, key: &str, body: Value) -> u64 {
        let mut body = body;
        if body.get("group_name").is_none() {
            body["group_name"] = Value::from("group");
        }
        let reply = self.post("/add_group", Some(key), body).await;
        group_id_from(reply.assert_ok())
    }

    /// `POST /add_action` with a name; returns the `hashed_cid` after checking it is
    /// keccak256 of the CID text.
    pub async fn add_action(&self, key: &str, cid: &str, name: &str) -> String {
        let reply = self
            .post(
                "/add_action",
                Some(key),
                serde_json::json!({"action_ipfs_cid": cid, "name": name}),
            )
            .await;
        let hashed = reply.assert_ok()["hashed_cid"].as_str().unwrap().to_owned();
        assert_eq!(hashed, keccak_hex(cid.as_bytes()), "hashed_cid of {cid}");
        hashed
    }

    /// `POST /get_lit_action_ipfs_id` without a key: the CID of `code`.
    pub async fn cid_of(&self, code: &str) -> String {
        self.post("/get_lit_action_ipfs_id", None, serde_json::json!(code))
            .await
            .assert_ok()
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// `POST /add_action_to_group`, which must succeed.
    pub async fn add_action_to_group(&self, key: &str, group: u64, cid: &str) {
        self.post(
            "/add_action_to_group",
            Some(key),
            serde_json::json!({"group_id": group, "action_ipfs_cid": cid}),
        )
        .await
        .assert_ok();
    }

    /// GETs a list endpoint and returns its items; panics unless 200 with an array.
    pub async fn list(&self, path: &str, key: &str) -> Vec<Value> {
        let reply = self.get(path, Some(key)).await;
        reply
            .assert_ok()
            .as_array()
            .unwrap_or_else(|| panic!("{path}: not an array: {}", reply.text))
            .clone()
    }

    /// The account's groups (first page of 1000).
    pub async fn groups(&self, key: &str) -> Vec<Value> {
        self.list("/list_groups?page_size=1000", key).await
    }

    /// One group of the account as `list_groups` shows it, if listed.
    pub async fn group(&self, key: &str, id: u64) -> Option<Value> {
        let id = id.to_string();
        self.groups(key)
            .await
            .into_iter()
            .find(|g| g["id"].as_str() == Some(id.as_str()))
    }
}

/// The wallet of a `create_wallet` response, after checking the response's shape.
#[track_caller]
pub fn wallet_from(body: &Value) -> NewWallet {
    let obj = body.as_object().expect("an object");
    let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        ["derivation_path", "pkp_id", "wallet_address"],
        "{body}"
    );
    let address = body["wallet_address"].as_str().unwrap().to_owned();
    assert_eq!(address.len(), 42, "{address}");
    assert_eq!(address, eip55(&address), "wallet_address must be EIP-55");
    let pkp_id = body["pkp_id"].as_str().unwrap().to_owned();
    assert!(is_lower_hex(&pkp_id, 64), "pkp_id {pkp_id}");
    let derivation_path = body["derivation_path"].as_str().unwrap().to_owned();
    assert!(
        derivation_path.len() == 66
            && derivation_path.starts_with("0x")
            && hex::decode(&derivation_path[2..]).is_ok(),
        "derivation_path {derivation_path}"
    );
    NewWallet {
        address,
        pkp_id,
        derivation_path,
    }
}

/// The id of an `add_group` response, after checking it is `{"success":true,
/// "group_id":"<decimal>"}`.
#[track_caller]
pub fn group_id_from(body: &Value) -> u64 {
    assert_eq!(body["success"], Value::Bool(true), "{body}");
    assert_eq!(body.as_object().unwrap().len(), 2, "{body}");
    let id = body["group_id"]
        .as_str()
        .unwrap_or_else(|| panic!("group_id is not a string: {body}"));
    assert!(
        !id.is_empty()
            && id.bytes().all(|b| b.is_ascii_digit())
            && (id == "0" || !id.starts_with('0')),
        "group_id is not a decimal string: {body}"
    );
    id.parse().unwrap()
}
