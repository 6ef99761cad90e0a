//! The operations behind each protocol request, and the boundary they enforce: wallet
//! operations stay in the wallet namespace, service keys are reached only by their
//! purpose-named operations, payers sign only what the payer policy allows. Functions of
//! the root (plus the CSPRNG); the only I/O is the payer policy's small state file and the
//! quote provider behind the three quote operations ([`crate::attest`]).

use keyservice_api::protocol::{
    MAX_RANDOM_BYTES, MAX_ROW_MAC_ITEMS, NONCE_LEN, ROW_MAC_LEN, Request, Response, TAG_LEN,
};
use keyservice_api::{
    ComposeHash, DerivationPath, PROTOCOL_VERSION, Payer, PayerList, PlatformKind, RootId,
    RootStatus, SecretBytes, SecretKey32, ServiceStatus,
};
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, Nonce, UnboundKey};
use ring::hmac;
use ring::rand::SystemRandom;
use zeroize::Zeroizing;

use crate::acme_key::AcmeAccountKey;
use crate::derive::{self, KeyDeriver, SecretScalar};
pub use crate::op_error::OpError;
use crate::payer_policy::{PayerPolicy, PayerPolicyConfig, PolicyError, STATE_FILE};
use crate::secret::{RootSecret, fill_random};
use crate::tls_keys::TlsKeys;

/// Largest number of API payers a keyservice will hold.
pub const MAX_API_PAYERS: u32 = 1024;

impl From<PolicyError> for OpError {
    fn from(e: PolicyError) -> Self {
        match e {
            PolicyError::Refused(r) => Self::Refused(r.0),
            PolicyError::State(err) => {
                tracing::error!(error = %err, "payer policy state");
                Self::Internal("cannot record the payer policy state")
            }
        }
    }
}

/// Everything a running keyservice needs to answer requests.
pub struct KeyOps {
    deriver: KeyDeriver,
    rng: SystemRandom,
    status: ServiceStatus,
    payers: PayerList,
    payer_policy: PayerPolicy,
    quotes: Option<crate::attest::Quoter>,
    /// `RowMac`'s HMAC-SHA256 key (`derive::LABEL_STORE_ROW_MAC`).
    row_mac_key: hmac::Key,
    root_id: RootId,
    /// TLS certificate keys and registered chains (`TlsPublicKey`, `TlsSign`,
    /// `TlsRegisterCertificate`).
    tls: TlsKeys,
    /// The ACME account key (`AcmeAccountPublicKey`, `AcmeAccountSign`).
    acme: AcmeAccountKey,
}

impl KeyOps {
    /// Takes the unsealed root (consumed: only the HKDF PRK stays in memory) and derives the
    /// payer addresses once.
    pub fn new(
        root: RootSecret,
        platform: PlatformKind,
        compose_hash: ComposeHash,
        api_payers: u32,
    ) -> Result<Self, OpError> {
        if api_payers > MAX_API_PAYERS {
            return Err(OpError::InvalidArgument(
                "too many API payers (at most 1024)",
            ));
        }
        let deriver = KeyDeriver::new(&root);
        drop(root);
        let root_id = deriver.root_id()?;
        let row_mac_key = hmac::Key::new(hmac::HMAC_SHA256, &deriver.store_row_mac_key()?[..]);
        let mut api = Vec::with_capacity(api_payers as usize);
        for i in 0..api_payers {
            api.push(derive::public_key(&deriver.api_payer_key(i)?)?.address());
        }
        let admin = derive::public_key(&deriver.admin_payer_key()?)?.address();
        let rng = SystemRandom::new();
        let acme = AcmeAccountKey::derive(&deriver, &rng)?;
        // Until configured, payers sign nothing (no chain id).
        let payer_policy = PayerPolicy::new(
            PayerPolicyConfig::default(),
            &deriver.state_mac_key(STATE_FILE)?,
            api_payers,
        );
        Ok(Self {
            deriver,
            rng,
            status: ServiceStatus {
                protocol_version: PROTOCOL_VERSION,
                platform,
                compose_hash,
                api_payers,
            },
            payers: PayerList { api, admin },
            payer_policy,
            quotes: None,
            row_mac_key,
            root_id,
            tls: TlsKeys::new(),
            acme,
        })
    }

    /// Replaces the payer policy (chain id, configured contracts, fee cap, state file).
    pub fn with_payer_policy(mut self, config: PayerPolicyConfig) -> Result<Self, OpError> {
        let key = self.deriver.state_mac_key(STATE_FILE)?;
        self.payer_policy = PayerPolicy::new(config, &key, self.status.api_payers);
        Ok(self)
    }

    /// Serves the quote operations with `quoter` (without one they answer
    /// `QuoteUnavailable`).
    pub fn with_quotes(mut self, quoter: crate::attest::Quoter) -> Self {
        self.quotes = Some(quoter);
        self
    }

    /// Answers one request: the quote operations through the quote provider (they wait
    /// for it), everything else at once through [`Self::execute`].
    pub async fn handle(&self, request: Request) -> Result<Response, OpError> {
        self.check_evidence_certificate(&request)?;
        match request {
            Request::AttestationQuote
            | Request::EvidenceQuote { .. }
            | Request::FreshEvidenceQuote { .. }
            | Request::AttestationInfo => match &self.quotes {
                Some(quoter) => quoter.answer(&request).await,
                None => Err(OpError::QuoteUnavailable(
                    "this keyservice has no quote provider".to_owned(),
                )),
            },
            other => self.execute(other),
        }
    }

    /// The certificate binding of every quote over an evidence listing: it must name
    /// only certificates registered for a key keyservice holds ([`TlsKeys::check_listing`]).
    fn check_evidence_certificate(&self, request: &Request) -> Result<(), OpError> {
        match request {
            Request::EvidenceQuote { sums } | Request::FreshEvidenceQuote { sums, .. } => {
                self.tls.check_listing(sums)
            }
            _ => Ok(()),
        }
    }

    pub fn payer_policy(&self) -> &PayerPolicy {
        &self.payer_policy
    }

    pub fn status(&self) -> &ServiceStatus {
        &self.status
    }

    pub fn payers(&self) -> &PayerList {
        &self.payers
    }

    /// The public fingerprint of the root these operations use.
    pub fn root_id(&self) -> RootId {
        self.root_id
    }

    fn payer_key(&self, payer: Payer) -> Result<SecretScalar, OpError> {
        match payer {
            Payer::Admin => Ok(self.deriver.admin_payer_key()?),
            Payer::Api(i) if i < self.status.api_payers => Ok(self.deriver.api_payer_key(i)?),
            Payer::Api(_) => Err(OpError::InvalidArgument("API payer index out of range")),
        }
    }

    fn payer_address(&self, payer: Payer) -> Result<&keyservice_api::Address, OpError> {
        match payer {
            Payer::Admin => Ok(&self.payers.admin),
            Payer::Api(i) => self
                .payers
                .api
                .get(i as usize)
                .ok_or(OpError::InvalidArgument("API payer index out of range")),
        }
    }

    /// The wallet key at `path`, refused outside the wallet namespace.
    fn wallet_key(&self, path: &DerivationPath) -> Result<SecretScalar, OpError> {
        if !path.is_wallet_path() {
            return Err(OpError::Refused(
                "this derivation path belongs to the service, not to a wallet",
            ));
        }
        Ok(self.deriver.wallet_key(path)?)
    }

    fn aead(&self, path: &DerivationPath) -> Result<LessSafeKey, OpError> {
        let sk = self.wallet_key(path)?;
        let key = derive::wallet_aes_key(&sk)?;
        aes_key(&key)
    }

    fn encrypt(&self, path: &DerivationPath, plaintext: &[u8]) -> Result<Vec<u8>, OpError> {
        let key = self.aead(path)?;
        self.seal_with(&key, plaintext)
    }

    fn seal_with(&self, key: &LessSafeKey, plaintext: &[u8]) -> Result<Vec<u8>, OpError> {
        let mut nonce = [0u8; NONCE_LEN];
        fill_random(&self.rng, &mut nonce).map_err(|_| OpError::Internal("RNG failed"))?;
        let mut out = Vec::with_capacity(NONCE_LEN + plaintext.len() + TAG_LEN);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(plaintext);
        let tag = key
            .seal_in_place_separate_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::empty(),
                &mut out[NONCE_LEN..],
            )
            .map_err(|_| OpError::Internal("encryption failed"))?;
        out.extend_from_slice(tag.as_ref());
        Ok(out)
    }

    fn decrypt(&self, path: &DerivationPath, data: &[u8]) -> Result<Vec<u8>, OpError> {
        let key = self.aead(path)?;
        open_with(&key, data)
    }
}

fn aes_key(key: &Zeroizing<[u8; 32]>) -> Result<LessSafeKey, OpError> {
    UnboundKey::new(&AES_256_GCM, key.as_ref())
        .map(LessSafeKey::new)
        .map_err(|_| OpError::Internal("AES key setup failed"))
}

fn open_with(key: &LessSafeKey, data: &[u8]) -> Result<Vec<u8>, OpError> {
    {
        if data.len() < NONCE_LEN + TAG_LEN {
            return Err(OpError::InvalidArgument(
                "ciphertext shorter than nonce and tag",
            ));
        }
        let mut nonce = [0u8; NONCE_LEN];
        nonce.copy_from_slice(&data[..NONCE_LEN]);
        let mut buf = data[NONCE_LEN..].to_vec();
        let len = key
            .open_in_place(Nonce::assume_unique_for_key(nonce), Aad::empty(), &mut buf)
            .map_err(|_| OpError::DecryptFailed)?
            .len();
        buf.truncate(len);
        Ok(buf)
    }
}

impl KeyOps {
    /// Answers one request.
    pub fn execute(&self, request: Request) -> Result<Response, OpError> {
        Ok(match request {
            Request::Status => Response::Status(self.status.clone()),
            Request::CreateWallet => {
                let mut path = [0u8; 32];
                fill_random(&self.rng, &mut path).map_err(|_| OpError::Internal("RNG failed"))?;
                let path = DerivationPath(path);
                let public_key = derive::public_key(&self.deriver.wallet_key(&path)?)?;
                Response::NewWallet { path, public_key }
            }
            Request::WalletPublicKey { path } => {
                Response::PublicKey(derive::public_key(&self.wallet_key(&path)?)?)
            }
            Request::WalletSign { path, digest } => {
                Response::Signature(derive::sign_digest(&self.wallet_key(&path)?, &digest)?)
            }
            Request::WalletExportKey { path } => {
                let sk = self.wallet_key(&path)?;
                Response::SecretKey(SecretKey32::from_zeroizing(derive::secret_bytes(&sk)))
            }
            Request::ActionPublicKey { cid } => {
                Response::PublicKey(derive::public_key(&self.deriver.action_key(&cid)?)?)
            }
            Request::ActionSign { cid, digest } => Response::Signature(derive::sign_digest(
                &self.deriver.action_key(&cid)?,
                &digest,
            )?),
            Request::ActionExportKey { cid } => {
                let sk = self.deriver.action_key(&cid)?;
                Response::SecretKey(SecretKey32::from_zeroizing(derive::secret_bytes(&sk)))
            }
            Request::Encrypt { path, plaintext } => {
                Response::Ciphertext(self.encrypt(&path, &plaintext)?)
            }
            Request::Decrypt { path, ciphertext } => {
                Response::Plaintext(self.decrypt(&path, &ciphertext)?)
            }
            Request::Payers => Response::Payers(self.payers.clone()),
            Request::PayerSignTransaction { payer, tx } => {
                let key = self.payer_key(payer)?;
                let sender = self.payer_address(payer)?;
                let digest = self.payer_policy.check(payer, sender, &tx)?;
                Response::Signature(derive::sign_digest(&key, &digest)?)
            }
            Request::ServiceSeal { purpose, plaintext } => {
                let key = aes_key(&self.deriver.service_seal_key(purpose)?)?;
                Response::Ciphertext(self.seal_with(&key, &plaintext)?)
            }
            Request::ServiceUnseal {
                purpose,
                ciphertext,
            } => {
                let key = aes_key(&self.deriver.service_seal_key(purpose)?)?;
                Response::Plaintext(open_with(&key, &ciphertext)?)
            }
            Request::RandomBytes { n } => {
                let n = usize::from(n);
                if n == 0 || n > MAX_RANDOM_BYTES {
                    return Err(OpError::InvalidArgument("random length must be 1..=64"));
                }
                let mut bytes = Zeroizing::new(vec![0u8; n]);
                fill_random(&self.rng, &mut bytes).map_err(|_| OpError::Internal("RNG failed"))?;
                Response::Random(SecretBytes::new(bytes))
            }
            Request::RootStatus => Response::RootStatus(RootStatus {
                compose_hash: self.status.compose_hash,
                root_id: Some(self.root_id),
            }),
            Request::CreateSealedRoot | Request::AdoptRoot { .. } => {
                return Err(OpError::Refused(
                    "this keyservice already holds its root: a root is adopted at most once \
                     per process, and no other root is ever created beside it",
                ));
            }
            Request::RowMac { items } => {
                if items.is_empty() || items.len() > MAX_ROW_MAC_ITEMS {
                    return Err(OpError::InvalidArgument(
                        "a row MAC request carries 1..=1024 items",
                    ));
                }
                Response::RowMacs(
                    items
                        .iter()
                        .map(|item| {
                            let mut tag = [0u8; ROW_MAC_LEN];
                            tag.copy_from_slice(hmac::sign(&self.row_mac_key, item).as_ref());
                            tag
                        })
                        .collect(),
                )
            }
            Request::TlsPublicKey { index } => {
                Response::Spki(self.tls.public_key(&self.deriver, index)?)
            }
            Request::TlsSign {
                index,
                scheme,
                message,
            } => Response::TlsSignature(self.tls.sign(&self.deriver, index, scheme, &message)?),
            Request::TlsRegisterCertificate { index, chain_pem } => {
                let hash = self.tls.register(&self.deriver, index, &chain_pem)?;
                Response::CertificateRegistered(hash)
            }
            Request::AcmeAccountPublicKey => Response::AcmeAccountKey(self.acme.public_key()),
            Request::AcmeAccountSign { signing_input } => {
                Response::AcmeSignature(self.acme.sign(&self.rng, &signing_input)?)
            }
            _ => return Err(OpError::InvalidArgument("unsupported request")),
        })
    }
}
