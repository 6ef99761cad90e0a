//! The ACME account key is keyservice's (`AcmeAccountPublicKey`, `AcmeAccountSign`): a
//! P-256 key derived from the root that never enters this process. Every JWS the CA
//! receives is signed by keyservice.
//!
//! instant-acme 0.8 has no external signer (its `Signer` trait is private): it signs each
//! request itself with a key it holds in memory. So the appliance gives it a **throwaway**
//! P-256 key, generated in memory per process and never stored, and a transport
//! (`KeyserviceSignedHttp` in `http.rs` next to this file) that re-signs every JWS POST
//! body on its way out ([`KeyserviceSigner::resign`]):
//!
//! * the body is a flattened JWS JSON serialization (`protected`, `payload`, `signature`;
//!   RFC 7515 §7.2.2) signed with ES256;
//! * its protected header names the signer by `jwk` (newAccount) or by `kid` (every other
//!   request: the account URL). A `jwk` is replaced by the JWK of keyservice's key; a `kid`
//!   is kept;
//! * the header is re-encoded, keyservice signs `protected '.' payload`, and its signature
//!   replaces the throwaway one.
//!
//! So the throwaway key never reaches the CA (neither its public key nor a signature of
//! it), and the account the CA knows is keyed by keyservice's key. Whatever instant-acme
//! derives from its own key is wrong here and is never used: `key_authorization()`,
//! `key_thumbprint()` and `update_key()` are forbidden by `clippy.toml`; challenge answers
//! use [`AccountKey::key_authorization`], over the RFC 7638 thumbprint of keyservice's key.
//! Requests whose payload embeds a JWS by the account key (a key change, external account
//! binding) cannot be re-signed this way: the appliance makes no such request through
//! instant-acme (the one key change, of an account whose key the front end once held onto
//! keyservice's key, is `rollover.rs`'s).

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64URL;
use keyservice_api::{ACME_PUBLIC_KEY_LEN, KeyClient, KeyError};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// Why a JWS could not be re-signed by keyservice.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JwsError {
    #[error("the request body is not a flattened JWS: {0}")]
    NotJws(String),
    #[error("the JWS protected header is not unpadded base64url")]
    HeaderEncoding,
    #[error("the JWS protected header is not a JSON object")]
    HeaderNotObject,
    #[error("the JWS is signed with {0}, not ES256")]
    Algorithm(String),
    #[error("the JWS protected header names no signer (neither jwk nor a kid string)")]
    NoSigner,
    #[error("the JWS protected header names two signers (jwk and kid)")]
    TwoSigners,
    #[error("keyservice's ACME account key is not an uncompressed P-256 point")]
    PublicKey,
    #[error("keyservice: {0}")]
    Keyservice(#[from] KeyError),
}

/// The public half of the account key: its JWK and RFC 7638 thumbprint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct AccountKey {
    x: String,
    y: String,
    thumbprint: String,
}

impl AccountKey {
    /// The key of the uncompressed P-256 point `0x04 ‖ x ‖ y`.
    pub(super) fn from_point(point: &[u8]) -> Result<Self, JwsError> {
        if point.len() != ACME_PUBLIC_KEY_LEN || point[0] != 0x04 {
            return Err(JwsError::PublicKey);
        }
        let x = B64URL.encode(&point[1..33]);
        let y = B64URL.encode(&point[33..]);
        // RFC 7638 §3.2: the required members in lexicographic order, no whitespace.
        let canonical = format!(r#"{{"crv":"P-256","kty":"EC","x":"{x}","y":"{y}"}}"#);
        let thumbprint = B64URL.encode(Sha256::digest(canonical.as_bytes()));
        Ok(Self { x, y, thumbprint })
    }

    /// The JWK (RFC 7517) a `jwk` header carries.
    pub(super) fn jwk(&self) -> Value {
        serde_json::json!({ "crv": "P-256", "kty": "EC", "x": self.x, "y": self.y })
    }

    /// The RFC 7638 thumbprint (SHA-256, base64url).
    pub(super) fn thumbprint(&self) -> &str {
        &self.thumbprint
    }

    /// The key authorization of a challenge `token` (RFC 8555 §8.1): what HTTP-01 serves,
    /// and whose SHA-256 a TLS-ALPN-01 certificate carries.
    pub(super) fn key_authorization(&self, token: &str) -> String {
        format!("{token}.{}", self.thumbprint)
    }
}

/// A flattened JWS JSON serialization, as instant-acme sends it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Flattened {
    protected: String,
    payload: String,
    /// The throwaway key's signature, replaced.
    #[serde(rename = "signature")]
    _signature: String,
}

#[derive(Serialize)]
struct FlattenedOut<'a> {
    protected: &'a str,
    payload: &'a str,
    signature: String,
}

/// A JWS waiting for its signature: the encoded protected header and payload.
#[derive(Debug)]
pub(super) struct Unsigned {
    protected: String,
    payload: String,
}

impl Unsigned {
    /// A JWS of `header` over `payload`.
    pub(super) fn new(header: &Value, payload: &[u8]) -> Result<Self, JwsError> {
        let header =
            serde_json::to_vec(header).map_err(|e| JwsError::NotJws(format!("header: {e}")))?;
        Ok(Self {
            protected: B64URL.encode(header),
            payload: B64URL.encode(payload),
        })
    }

    /// `body` (a flattened ES256 JWS) with its protected header rewritten to name `key`:
    /// a `jwk` is replaced by `key`'s, a `kid` kept. Its signature is dropped.
    pub(super) fn rewrite(body: &[u8], key: &AccountKey) -> Result<Self, JwsError> {
        let jws: Flattened =
            serde_json::from_slice(body).map_err(|e| JwsError::NotJws(e.to_string()))?;
        let header = B64URL
            .decode(jws.protected.as_bytes())
            .map_err(|_| JwsError::HeaderEncoding)?;
        let mut header: Map<String, Value> =
            serde_json::from_slice(&header).map_err(|_| JwsError::HeaderNotObject)?;
        match header.get("alg") {
            Some(Value::String(alg)) if alg == "ES256" => {}
            Some(other) => return Err(JwsError::Algorithm(other.to_string())),
            None => return Err(JwsError::Algorithm("no alg".to_owned())),
        }
        let has_kid = header.get("kid").is_some_and(Value::is_string);
        match (header.contains_key("jwk"), has_kid) {
            (true, true) => return Err(JwsError::TwoSigners),
            (false, false) => return Err(JwsError::NoSigner),
            (true, false) => {
                header.insert("jwk".to_owned(), key.jwk());
            }
            (false, true) => {}
        }
        let header =
            serde_json::to_vec(&header).map_err(|e| JwsError::NotJws(format!("header: {e}")))?;
        Ok(Self {
            protected: B64URL.encode(header),
            payload: jws.payload,
        })
    }

    /// The JWS signing input, `protected '.' payload` (RFC 7515 §5.1).
    pub(super) fn signing_input(&self) -> String {
        format!("{}.{}", self.protected, self.payload)
    }

    /// The flattened JWS JSON with `signature` (ES256 `r ‖ s`).
    pub(super) fn signed(&self, signature: &[u8]) -> Result<Vec<u8>, JwsError> {
        serde_json::to_vec(&FlattenedOut {
            protected: &self.protected,
            payload: &self.payload,
            signature: B64URL.encode(signature),
        })
        .map_err(|e| JwsError::NotJws(e.to_string()))
    }
}

/// Signs JWS with keyservice's ACME account key.
pub(super) struct KeyserviceSigner {
    keys: KeyClient,
    key: AccountKey,
}

impl KeyserviceSigner {
    /// Asks keyservice for the account key's public key.
    pub(super) async fn load(keys: &KeyClient) -> Result<Self, JwsError> {
        let point = keys.acme_account_public_key().await?;
        Ok(Self {
            keys: keys.clone(),
            key: AccountKey::from_point(&point)?,
        })
    }

    pub(super) fn key(&self) -> &AccountKey {
        &self.key
    }

    /// `jws` signed by keyservice.
    pub(super) async fn sign(&self, jws: &Unsigned) -> Result<Vec<u8>, JwsError> {
        let signature = self
            .keys
            .acme_account_sign(jws.signing_input().as_bytes())
            .await?;
        jws.signed(&signature)
    }

    /// The JWS POST body `body` (signed by instant-acme's throwaway key) re-signed by
    /// keyservice, naming keyservice's key where it named the throwaway one.
    pub(super) async fn resign(&self, body: &[u8]) -> Result<Vec<u8>, JwsError> {
        self.sign(&Unsigned::rewrite(body, &self.key)?).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::rand::SystemRandom;
    use ring::signature::{
        ECDSA_P256_SHA256_FIXED, ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair,
        UnparsedPublicKey,
    };

    /// A P-256 key standing in for keyservice's (the socket is tested in keyservice's own
    /// tests and end to end).
    fn key_pair() -> EcdsaKeyPair {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng).unwrap()
    }

    fn b64json(value: &Value) -> String {
        B64URL.encode(serde_json::to_vec(value).unwrap())
    }

    /// A body as instant-acme sends it, signed by `throwaway`.
    fn body(throwaway: &EcdsaKeyPair, header: Value, payload: &str) -> Vec<u8> {
        let protected = b64json(&header);
        let payload = B64URL.encode(payload);
        let sig = throwaway
            .sign(
                &SystemRandom::new(),
                format!("{protected}.{payload}").as_bytes(),
            )
            .unwrap();
        serde_json::to_vec(&serde_json::json!({
            "protected": protected, "payload": payload, "signature": B64URL.encode(sig.as_ref()),
        }))
        .unwrap()
    }

    /// Re-signs `body` as `KeyserviceSigner::resign` does, with `signer` for keyservice.
    fn resign(body: &[u8], signer: &EcdsaKeyPair) -> Result<Value, JwsError> {
        let key = AccountKey::from_point(signer.public_key().as_ref())?;
        let unsigned = Unsigned::rewrite(body, &key)?;
        let sig = signer
            .sign(&SystemRandom::new(), unsigned.signing_input().as_bytes())
            .unwrap();
        Ok(serde_json::from_slice(&unsigned.signed(sig.as_ref())?).unwrap())
    }

    fn decode(part: &Value) -> Vec<u8> {
        B64URL.decode(part.as_str().unwrap()).unwrap()
    }

    /// Verifies `jws` under `key` and returns its protected header.
    fn verified_header(jws: &Value, key: &EcdsaKeyPair) -> Value {
        let input = format!(
            "{}.{}",
            jws["protected"].as_str().unwrap(),
            jws["payload"].as_str().unwrap()
        );
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, key.public_key().as_ref())
            .verify(input.as_bytes(), &decode(&jws["signature"]))
            .expect("signed by the keyservice key");
        serde_json::from_slice(&decode(&jws["protected"])).unwrap()
    }

    #[test]
    fn a_jwk_header_names_the_keyservice_key_afterwards() {
        let (throwaway, keyservice) = (key_pair(), key_pair());
        let throwaway_jwk = serde_json::json!({
            "alg": "ES256", "crv": "P-256", "kty": "EC", "use": "sig", "x": "dGhyb3dhd2F5", "y": "eQ",
        });
        let sent = body(
            &throwaway,
            serde_json::json!({
                "alg": "ES256", "jwk": throwaway_jwk, "nonce": "n1", "url": "https://ca.test/new-acct",
            }),
            r#"{"termsOfServiceAgreed":true}"#,
        );
        let jws = resign(&sent, &keyservice).unwrap();
        let header = verified_header(&jws, &keyservice);
        let ours = AccountKey::from_point(keyservice.public_key().as_ref()).unwrap();
        assert_eq!(header["jwk"], ours.jwk());
        assert_ne!(header["jwk"], throwaway_jwk);
        // Everything else in the header and the payload is as sent.
        assert_eq!(header["nonce"], "n1");
        assert_eq!(header["url"], "https://ca.test/new-acct");
        assert_eq!(header["alg"], "ES256");
        assert_eq!(decode(&jws["payload"]), br#"{"termsOfServiceAgreed":true}"#);
        // The throwaway key's signature is gone: it does not verify the new JWS.
        let input = format!(
            "{}.{}",
            jws["protected"].as_str().unwrap(),
            jws["payload"].as_str().unwrap()
        );
        assert!(
            UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, throwaway.public_key().as_ref())
                .verify(input.as_bytes(), &decode(&jws["signature"]))
                .is_err()
        );
    }

    #[test]
    fn a_kid_header_is_kept_and_an_empty_payload_stays_empty() {
        let (throwaway, keyservice) = (key_pair(), key_pair());
        let header = serde_json::json!({
            "alg": "ES256", "kid": "https://ca.test/acct/7", "nonce": "n2", "url": "https://ca.test/order/1",
        });
        let sent = body(&throwaway, header.clone(), "");
        let jws = resign(&sent, &keyservice).unwrap();
        assert_eq!(verified_header(&jws, &keyservice), header);
        assert_eq!(jws["payload"], "");
    }

    #[test]
    fn malformed_bodies_are_refused_with_their_reason() {
        let (throwaway, keyservice) = (key_pair(), key_pair());
        let kid =
            |alg: Value| serde_json::json!({"alg": alg, "kid": "k", "nonce": "n", "url": "u"});
        type Case = (Vec<u8>, fn(&JwsError) -> bool);
        let cases: Vec<Case> = vec![
            (b"not json".to_vec(), |e| matches!(e, JwsError::NotJws(_))),
            (br#"{"protected":"e30","payload":""}"#.to_vec(), |e| {
                matches!(e, JwsError::NotJws(_))
            }),
            (
                br#"{"protected":"e30","payload":"","signature":"","header":{}}"#.to_vec(),
                |e| matches!(e, JwsError::NotJws(_)),
            ),
            (
                br#"{"protected":"e30=","payload":"","signature":""}"#.to_vec(),
                |e| matches!(e, JwsError::HeaderEncoding),
            ),
            (
                serde_json::to_vec(&serde_json::json!({
                    "protected": B64URL.encode("[1]"), "payload": "", "signature": "",
                }))
                .unwrap(),
                |e| matches!(e, JwsError::HeaderNotObject),
            ),
            (
                body(&throwaway, kid("RS256".into()), "{}"),
                |e| matches!(e, JwsError::Algorithm(a) if a.contains("RS256")),
            ),
            (
                body(
                    &throwaway,
                    serde_json::json!({"kid": "k", "url": "u"}),
                    "{}",
                ),
                |e| matches!(e, JwsError::Algorithm(_)),
            ),
            (
                body(
                    &throwaway,
                    serde_json::json!({"alg": "ES256", "url": "u"}),
                    "{}",
                ),
                |e| matches!(e, JwsError::NoSigner),
            ),
            (
                body(
                    &throwaway,
                    serde_json::json!({"alg": "ES256", "kid": 7, "url": "u"}),
                    "{}",
                ),
                |e| matches!(e, JwsError::NoSigner),
            ),
            (
                body(
                    &throwaway,
                    serde_json::json!({"alg": "ES256", "kid": "k", "jwk": {}, "url": "u"}),
                    "{}",
                ),
                |e| matches!(e, JwsError::TwoSigners),
            ),
        ];
        for (sent, expected) in cases {
            let err = resign(&sent, &keyservice).expect_err(&String::from_utf8_lossy(&sent));
            assert!(expected(&err), "{}: {err}", String::from_utf8_lossy(&sent));
        }
    }

    /// RFC 7638 §3.1's example is RSA; this checks the P-256 form against a thumbprint
    /// computed independently (Python: sha256 of the canonical JSON, base64url).
    #[test]
    fn thumbprint_and_key_authorization_follow_rfc_7638_and_8555() {
        let mut point = [0u8; 65];
        point[0] = 0x04;
        for (i, b) in point[1..].iter_mut().enumerate() {
            *b = i as u8;
        }
        let key = AccountKey::from_point(&point).unwrap();
        assert_eq!(
            key.jwk(),
            serde_json::json!({
                "crv": "P-256", "kty": "EC",
                "x": "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8",
                "y": "ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8",
            })
        );
        assert_eq!(key.thumbprint(), THUMBPRINT_OF_0_TO_63);
        assert_eq!(
            key.key_authorization("tok"),
            format!("tok.{THUMBPRINT_OF_0_TO_63}")
        );
        assert!(matches!(
            AccountKey::from_point(&point[..64]),
            Err(JwsError::PublicKey)
        ));
        point[0] = 0x02;
        assert!(matches!(
            AccountKey::from_point(&point),
            Err(JwsError::PublicKey)
        ));
    }

    /// `base64url(sha256('{"crv":"P-256","kty":"EC","x":"AAEC…Hh8","y":"ICEi…Pj8"}'))`.
    const THUMBPRINT_OF_0_TO_63: &str = "0r62zgBj277RicA3LnaBKQ5_9RCDIomrlbpWjO0QTG0";
}
