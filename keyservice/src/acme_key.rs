//! The ACME (RFC 8555) account key. The invariant: its private half lives here and nowhere
//! else; the front end learns the public key and asks for JWS signatures.
//!
//! * One ECDSA P-256 key derived from the root (`derive`, label
//!   "keyservice/v1/acme-account-key", no data, the same scalar rule as the TLS keys):
//!   replicas sharing a root share the key, hence the ACME account, and nothing is
//!   persisted. No wallet, action, payer, seal or TLS operation reaches its label, and no
//!   operation exports it.
//! * `AcmeAccountPublicKey` answers the uncompressed point (the JWK's `x` and `y`);
//!   `AcmeAccountSign` answers an ES256 signature (RFC 7518 §3.4: fixed-size `r ‖ s`)
//!   over a JWS signing input.
//! * Only a JWS signing input is signed ([`check_signing_input`]): two unpadded
//!   base64url segments joined by one `.`, the first a JSON object with `"alg": "ES256"`.
//!   So the account key signs ACME requests and nothing else: no TLS handshake content,
//!   certificate or CSR has that shape.

use keyservice_api::protocol::{ACME_PUBLIC_KEY_LEN, ACME_SIGNATURE_LEN};
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};

use crate::derive::{KeyDeriver, LABEL_ACME_ACCOUNT_KEY};
use crate::op_error::OpError;
use crate::tls_keys::derive_p256;

/// The derived ACME account key pair (signing with fixed-size `r ‖ s` signatures).
pub struct AcmeAccountKey {
    pair: EcdsaKeyPair,
    public: [u8; ACME_PUBLIC_KEY_LEN],
}

impl std::fmt::Debug for AcmeAccountKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AcmeAccountKey(<redacted>)")
    }
}

impl AcmeAccountKey {
    /// The account key of the root behind `deriver`.
    pub fn derive(deriver: &KeyDeriver, rng: &SystemRandom) -> Result<Self, OpError> {
        let pair = derive_p256(
            deriver,
            LABEL_ACME_ACCOUNT_KEY,
            &[],
            &ECDSA_P256_SHA256_FIXED_SIGNING,
            rng,
        )?;
        let public = <[u8; ACME_PUBLIC_KEY_LEN]>::try_from(pair.public_key().as_ref())
            .map_err(|_| OpError::Internal("ACME account key encoding failed"))?;
        Ok(Self { pair, public })
    }

    /// `AcmeAccountPublicKey`: the uncompressed point `0x04 ‖ x ‖ y`.
    pub fn public_key(&self) -> [u8; ACME_PUBLIC_KEY_LEN] {
        self.public
    }

    /// `AcmeAccountSign`: ES256 over `signing_input`, which must be a JWS signing input.
    pub fn sign(
        &self,
        rng: &SystemRandom,
        signing_input: &[u8],
    ) -> Result<[u8; ACME_SIGNATURE_LEN], OpError> {
        check_signing_input(signing_input)?;
        let sig = self
            .pair
            .sign(rng, signing_input)
            .map_err(|_| OpError::Internal("ACME account signing failed"))?;
        <[u8; ACME_SIGNATURE_LEN]>::try_from(sig.as_ref())
            .map_err(|_| OpError::Internal("ACME account signature has an unexpected length"))
    }
}

/// Whether `input` is a JWS signing input the account key may sign (RFC 7515 §5.1):
/// `BASE64URL(protected) ‖ '.' ‖ BASE64URL(payload)`, both unpadded base64url, the
/// protected header a JSON object whose `alg` is `ES256`. The payload may be empty (an
/// ACME POST-as-GET).
pub fn check_signing_input(input: &[u8]) -> Result<(), OpError> {
    use base64::Engine as _;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;

    let not_jws = OpError::InvalidArgument(
        "not a JWS signing input (BASE64URL(protected) '.' BASE64URL(payload))",
    );
    let mut parts = input.split(|b| *b == b'.');
    let (Some(protected), Some(payload), None) = (parts.next(), parts.next(), parts.next()) else {
        return Err(not_jws);
    };
    let base64url = |part: &[u8]| {
        part.iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_')
    };
    if protected.is_empty() || !base64url(protected) || !base64url(payload) {
        return Err(not_jws);
    }
    let header = URL_SAFE_NO_PAD
        .decode(protected)
        .map_err(|_| OpError::InvalidArgument("the JWS protected header is not base64url"))?;
    let header: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(&header)
        .map_err(|_| OpError::InvalidArgument("the JWS protected header is not a JSON object"))?;
    if header.get("alg").and_then(serde_json::Value::as_str) != Some("ES256") {
        return Err(OpError::InvalidArgument(
            "the ACME account key signs only JWS whose protected header says \"alg\": \"ES256\"",
        ));
    }
    // A payload that is itself a JWS is an RFC 8555 §7.3.5 key change (the outer JWS, by
    // the current account key, carries the inner one by the new key). Signing it would let
    // a front end compromised for an hour move the account onto a key of its own and keep
    // it afterwards; the account stays on this key. (External account binding nests its
    // JWS one level down, under `externalAccountBinding`, and is not refused.)
    if !payload.is_empty() {
        let payload = URL_SAFE_NO_PAD
            .decode(payload)
            .map_err(|_| OpError::InvalidArgument("the JWS payload is not base64url"))?;
        if let Ok(serde_json::Value::Object(body)) =
            serde_json::from_slice::<serde_json::Value>(&payload)
            && body.contains_key("protected")
            && body.contains_key("signature")
        {
            return Err(OpError::Refused(
                "the ACME account key does not sign a key change: the account stays on \
                 keyservice's key",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::secret::RootSecret;
    use base64::Engine as _;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use ring::signature::{ECDSA_P256_SHA256_FIXED, UnparsedPublicKey};

    fn deriver(byte: u8) -> KeyDeriver {
        KeyDeriver::new(&RootSecret::from_bytes(zeroize::Zeroizing::new([byte; 32])))
    }

    fn input(header: &str, payload: &str) -> Vec<u8> {
        format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header),
            URL_SAFE_NO_PAD.encode(payload)
        )
        .into_bytes()
    }

    #[test]
    fn the_key_is_a_function_of_the_root_apart_from_the_tls_keys() {
        let rng = SystemRandom::new();
        let a = AcmeAccountKey::derive(&deriver(1), &rng).unwrap();
        assert_eq!(a.public_key()[0], 0x04);
        assert_eq!(
            a.public_key(),
            AcmeAccountKey::derive(&deriver(1), &rng)
                .unwrap()
                .public_key()
        );
        assert_ne!(
            a.public_key(),
            AcmeAccountKey::derive(&deriver(2), &rng)
                .unwrap()
                .public_key()
        );
        // Not any TLS key of the same root.
        let tls = crate::tls_keys::TlsKeys::new();
        for index in 0..4 {
            let spki = tls.public_key(&deriver(1), index).unwrap();
            assert_ne!(&spki[26..], a.public_key().as_slice());
        }
    }

    #[test]
    fn signs_jws_signing_inputs_only() {
        let rng = SystemRandom::new();
        let key = AcmeAccountKey::derive(&deriver(3), &rng).unwrap();
        let public = UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, key.public_key());
        let good = input(r#"{"alg":"ES256","kid":"https://ca.test/acct/1"}"#, "{}");
        let sig = key.sign(&rng, &good).unwrap();
        public.verify(&good, &sig).unwrap();
        // POST-as-GET: an empty payload.
        let get = input(r#"{"alg":"ES256","kid":"k","url":"u"}"#, "");
        assert!(get.ends_with(b"."));
        public.verify(&get, &key.sign(&rng, &get).unwrap()).unwrap();

        for bad in [
            b"hello".to_vec(),
            b".e30".to_vec(),
            [input(r#"{"alg":"ES256"}"#, "{}"), b".x".to_vec()].concat(),
            input(r#"{"alg":"RS256"}"#, "{}"),
            input(r#"{"kid":"k"}"#, "{}"),
            input(r#"["alg","ES256"]"#, "{}"),
            input("not json", "{}"),
            // Padded or standard base64 is not base64url.
            format!("{}=.e30", URL_SAFE_NO_PAD.encode(r#"{"alg":"ES256"}"#)).into_bytes(),
            b"eyJhbGciOiJFUzI1NiJ9+.e30".to_vec(),
            // TLS 1.3 CertificateVerify content starts with 64 spaces.
            [
                vec![b' '; 64],
                b"TLS 1.3, server CertificateVerify".to_vec(),
            ]
            .concat(),
        ] {
            assert!(
                matches!(key.sign(&rng, &bad), Err(OpError::InvalidArgument(_))),
                "{}",
                String::from_utf8_lossy(&bad)
            );
        }
    }

    /// A compromised front end cannot have the account moved onto its own key: the outer
    /// JWS of a key change (its payload a JWS by the new key) is refused; a newAccount with
    /// an external account binding (a JWS one level down) still signs.
    #[test]
    fn a_key_change_is_never_signed() {
        let rng = SystemRandom::new();
        let key = AcmeAccountKey::derive(&deriver(4), &rng).unwrap();
        let inner = format!(
            r#"{{"protected":"{}","payload":"{}","signature":"AAAA"}}"#,
            URL_SAFE_NO_PAD
                .encode(r#"{"alg":"ES256","jwk":{"kty":"EC"},"url":"https://ca.test/key-change"}"#),
            URL_SAFE_NO_PAD.encode(r#"{"account":"https://ca.test/acct/1","oldKey":{"kty":"EC"}}"#),
        );
        let key_change = input(
            r#"{"alg":"ES256","kid":"https://ca.test/acct/1","url":"https://ca.test/key-change"}"#,
            &inner,
        );
        assert!(matches!(
            key.sign(&rng, &key_change),
            Err(OpError::Refused(_))
        ));
        let with_binding = input(
            r#"{"alg":"ES256","jwk":{"kty":"EC"},"url":"https://ca.test/new-account"}"#,
            &format!(r#"{{"termsOfServiceAgreed":true,"externalAccountBinding":{inner}}}"#),
        );
        key.sign(&rng, &with_binding).unwrap();
    }
}
