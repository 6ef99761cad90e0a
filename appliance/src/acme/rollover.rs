//! Moving an ACME account whose key the front end held onto keyservice's ACME account key
//! (an RFC 8555 §7.3.5 key change).
//!
//! `account.json` version 2 kept the account key sealed by keyservice, and the front end
//! unsealed it for every order. After the upgrade the appliance moves that account onto
//! keyservice's key: the account URL stays, so the CAA `accounturi` records and the
//! `acme-account.json` evidence naming it stay true, and the old key, which front ends
//! have held, no longer controls the account. The old key is unsealed into the front end
//! this one last time (for the outer signature the CA requires of it), and version 3, which
//! holds no key, replaces the sealed document. If the CA refuses (it offers no key change,
//! forgot the account, or the account already has keyservice's key), the caller registers
//! keyservice's key through newAccount instead, which also finds an account already moved.
//!
//! The request: an outer JWS by the old key (`kid`: the account URL, a fresh nonce) whose
//! payload is an inner JWS by keyservice's key (`jwk`: its JWK, no nonce) over
//! `{"account": <account URL>, "oldKey": <the old key's JWK>}`, both with `url` = the
//! directory's `keyChange`.

use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use serde::Deserialize;
use serde_json::json;

use super::AcmeError;
use super::http::AcmeHttp;
use super::jws::{AccountKey, JwsError, KeyserviceSigner, Unsigned};

const BAD_NONCE: &str = "urn:ietf:params:acme:error:badNonce";
/// Key change attempts (a CA may reject any nonce: Pebble rejects 5 % by default).
const ATTEMPTS: usize = 8;

/// Why an account was not moved.
#[derive(Debug)]
pub(super) enum RolloverError {
    /// The CA answered and refused (or the old key is unusable): register keyservice's key
    /// as the account instead.
    Refused(String),
    /// No verdict (the CA or keyservice unreachable, a server error): try again later.
    Failed(AcmeError),
}

impl From<JwsError> for RolloverError {
    fn from(e: JwsError) -> Self {
        Self::Failed(AcmeError::Jws(e))
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Directory {
    new_nonce: String,
    key_change: Option<String>,
}

#[derive(Deserialize, Default)]
struct Problem {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    detail: String,
}

fn failed(what: &str, e: impl std::fmt::Display) -> RolloverError {
    RolloverError::Failed(AcmeError::KeyChange(format!("{what}: {e}")))
}

fn replay_nonce(rsp: &reqwest::Response) -> Option<String> {
    rsp.headers()
        .get("replay-nonce")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// Moves the account at `account_uri`, whose key is the PKCS#8 `old_key_pkcs8`, onto
/// `signer`'s key.
pub(super) async fn roll_over(
    http: &AcmeHttp,
    directory_url: &str,
    account_uri: &str,
    old_key_pkcs8: &[u8],
    signer: &KeyserviceSigner,
) -> Result<(), RolloverError> {
    let rng = SystemRandom::new();
    let old = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, old_key_pkcs8, &rng)
        .map_err(|_| {
            RolloverError::Refused("the sealed account key is not a P-256 PKCS#8 key".into())
        })?;
    let old_jwk = AccountKey::from_point(old.public_key().as_ref())?.jwk();
    let client = http.client();

    let directory: Directory = client
        .get(directory_url)
        .send()
        .await
        .map_err(|e| failed("directory", e))?
        .error_for_status()
        .map_err(|e| failed("directory", e))?
        .json()
        .await
        .map_err(|e| failed("directory", e))?;
    let Some(key_change) = directory.key_change else {
        return Err(RolloverError::Refused(
            "the CA's directory offers no keyChange".into(),
        ));
    };

    let payload = json!({ "account": account_uri, "oldKey": old_jwk });
    let inner = Unsigned::new(
        &json!({ "alg": "ES256", "jwk": signer.key().jwk(), "url": key_change }),
        payload.to_string().as_bytes(),
    )?;
    let inner = signer.sign(&inner).await?;

    let rsp = client
        .head(&directory.new_nonce)
        .send()
        .await
        .map_err(|e| failed("newNonce", e))?;
    let mut nonce = replay_nonce(&rsp).ok_or_else(|| failed("newNonce", "no Replay-Nonce"))?;
    for _ in 0..ATTEMPTS {
        let outer = Unsigned::new(
            &json!({ "alg": "ES256", "kid": account_uri, "nonce": nonce, "url": key_change }),
            &inner,
        )?;
        let signature = old
            .sign(&rng, outer.signing_input().as_bytes())
            .map_err(|_| failed("key change", "signing with the old key failed"))?;
        let rsp = client
            .post(&key_change)
            .header(http::header::CONTENT_TYPE, "application/jose+json")
            .body(outer.signed(signature.as_ref())?)
            .send()
            .await
            .map_err(|e| failed("key change", e))?;
        let status = rsp.status();
        if status.is_success() {
            return Ok(());
        }
        let fresh = replay_nonce(&rsp);
        let problem: Problem = rsp.json().await.unwrap_or_default();
        if problem.kind == BAD_NONCE
            && let Some(fresh) = fresh
        {
            nonce = fresh;
            continue;
        }
        let why = format!("{status} {} {}", problem.kind, problem.detail);
        if status.is_server_error() || status == http::StatusCode::TOO_MANY_REQUESTS {
            return Err(failed("key change", why));
        }
        return Err(RolloverError::Refused(why));
    }
    Err(failed("key change", "the CA kept rejecting nonces"))
}
