//! Protocol and client of the keyservice, the isolated process that holds the sealed root
//! secret and every key derived from it.
//!
//! This crate is all the appliance needs: [`KeyClient`] speaks the framed binary protocol
//! of [`protocol`]/[`codec`] over a Unix socket, with many requests in flight on one
//! connection. See `keyservice/README.md` for the protocol, the derivations and the threat
//! model.
//!
//! May depend on: no workspace crate (the codec, the client on tokio, the derivation
//! paths); never on `keyservice`: the front end links this crate, never the process that
//! holds the keys.
//!
//! ```no_run
//! # async fn demo() -> Result<(), keyservice_api::KeyError> {
//! use keyservice_api::KeyClient;
//! let ks = KeyClient::connect("/run/keyservice/keyservice.sock").await?;
//! let wallet = ks.create_wallet().await?;
//! let sig = ks.sign_digest(&wallet.derivation_path, &[0x11; 32]).await?;
//! assert!(matches!(sig.v(), 27 | 28));
//! # Ok(()) }
//! ```

pub mod blocking;
pub mod client;
pub mod codec;
pub mod error;
pub mod protocol;
pub mod types;

pub use blocking::BlockingClient;
pub use client::{CallObserver, CallOutcome, ClientConfig, KeyClient, Observer};
pub use error::KeyError;
pub use protocol::{
    ACME_PUBLIC_KEY_LEN, ACME_SIGNATURE_LEN, ErrorCode, MAX_ACME_SIGNING_INPUT_LEN,
    MAX_EVIDENCE_SUMS_LEN, MAX_FRAME_LEN, MAX_OPERATOR_REQUEST_LEN, MAX_PLAINTEXT_LEN,
    MAX_RANDOM_BYTES, MAX_ROW_MAC_ITEM_LEN, MAX_ROW_MAC_ITEMS, MAX_SERVICE_PLAINTEXT_LEN,
    MAX_STATE_FILE_LEN, MAX_STATE_FILES, MAX_UNSIGNED_TX_LEN, OPERATOR_SIGNATURE_LEN,
    PROTOCOL_VERSION, Resealed, SEALED_ROOT_LEN, StateFile,
};
pub use types::{
    Address, ComposeHash, DeploymentInfo, DerivationPath, NewSealedRoot, NewWallet, ParseError,
    Payer, PayerList, PkpId, PlatformKind, PublicKey, QuoteBundle, QuoteSource,
    RESERVED_WALLET_DOMAINS, RootId, RootStatus, SecretBytes, SecretKey32, ServicePurpose,
    ServiceStatus, Signature, WalletInfo, keccak256,
};
