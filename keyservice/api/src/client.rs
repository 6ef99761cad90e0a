//! The async keyservice client.
//!
//! One `KeyClient` (cheap to clone: an `Arc`) owns at most one Unix-socket connection at a
//! time. Calls encode a frame with a fresh request id, park a oneshot sender in the
//! pending table under that id and hand the frame to a writer task; a reader task matches
//! each response to its id. So any number of tasks can have requests in flight on the same
//! connection (pipelining), and a slow request never blocks a fast one behind it.
//!
//! When the connection dies, every pending call fails with [`KeyError::Unavailable`] and
//! the next call dials again, so the client recovers by itself once the keyservice is back.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{mpsc, oneshot};
use tokio::task::AbortHandle;
use zeroize::{Zeroize, Zeroizing};

use crate::codec::{self, FrameHeader};
use crate::error::KeyError;
use crate::protocol::{
    ACME_PUBLIC_KEY_LEN, ACME_SIGNATURE_LEN, ErrorCode, HEADER_LEN, MAX_ACME_SIGNING_INPUT_LEN,
    MAX_CID_LEN, MAX_EVIDENCE_SUMS_LEN, MAX_FRAME_LEN, MAX_OPERATOR_REQUEST_LEN, MAX_PLAINTEXT_LEN,
    MAX_RANDOM_BYTES, MAX_ROW_MAC_ITEM_LEN, MAX_ROW_MAC_ITEMS, MAX_SERVICE_PLAINTEXT_LEN,
    MAX_TLS_CHAIN_LEN, MAX_TLS_SIGN_MESSAGE_LEN, MAX_UNSIGNED_TX_LEN, NONCE_LEN,
    OPERATOR_SIGNATURE_LEN, Op, PROTOCOL_VERSION, Request, Resealed, Response, SEALED_ROOT_LEN,
    StateFile, TAG_LEN, TLS_SCHEME_ECDSA_P256_SHA256,
};
use crate::types::{
    Address, ComposeHash, DeploymentInfo, DerivationPath, NewSealedRoot, NewWallet, Payer,
    PayerList, QuoteBundle, RootId, RootStatus, SecretBytes, SecretKey32, ServicePurpose,
    ServiceStatus, Signature, WalletInfo,
};

/// Client tuning. The defaults suit an appliance on the same host.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// Time allowed to dial the socket. Default 2 s.
    pub connect_timeout: Duration,
    /// Time allowed for one request, from send to answer. Default 10 s.
    pub request_timeout: Duration,
    /// Time allowed for a quote operation (`AttestationQuote`, `EvidenceQuote`,
    /// `AttestationInfo`): keyservice runs one quote at a time and a hardware quote can take
    /// seconds. Default 90 s.
    pub quote_timeout: Duration,
    /// Frames queued for the writer task before callers wait. Default 1024.
    pub write_queue: usize,
    /// Told about every call (its operation, round trip and outcome), and asked for the
    /// span each call runs in. Default: none.
    pub observer: Option<Observer>,
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(2),
            request_timeout: Duration::from_secs(10),
            quote_timeout: Duration::from_secs(90),
            write_queue: 1024,
            observer: None,
        }
    }
}

/// What a client reports about its calls, for metrics and traces (the appliance's
/// `keyservice_client`). Never given a request's or an answer's content.
pub trait CallObserver: Send + Sync + 'static {
    /// The span a call to `op` runs in (default: none).
    fn span(&self, op: Op) -> tracing::Span {
        let _ = op;
        tracing::Span::none()
    }

    /// A call to `op` ended after `elapsed` (from sending, the dial included, to its
    /// answer or failure) with `outcome`.
    fn finished(&self, op: Op, elapsed: Duration, outcome: CallOutcome);
}

/// `items` cut into `RowMac` requests: at most [`MAX_ROW_MAC_ITEMS`] each, each within
/// a frame; an item over [`MAX_ROW_MAC_ITEM_LEN`] is refused.
pub(crate) fn row_mac_batches(items: &[&[u8]]) -> Result<Vec<Vec<Vec<u8>>>, KeyError> {
    let budget = MAX_FRAME_LEN - HEADER_LEN - 2;
    let mut batches: Vec<Vec<Vec<u8>>> = Vec::new();
    let mut batch: Vec<Vec<u8>> = Vec::new();
    let mut used = 0usize;
    for (i, item) in items.iter().enumerate() {
        if item.len() > MAX_ROW_MAC_ITEM_LEN {
            return Err(KeyError::InvalidArgument(format!(
                "row MAC item {i} is {} bytes; the limit is {MAX_ROW_MAC_ITEM_LEN}",
                item.len()
            )));
        }
        let cost = 2 + item.len();
        if !batch.is_empty() && (batch.len() == MAX_ROW_MAC_ITEMS || used + cost > budget) {
            batches.push(std::mem::take(&mut batch));
            used = 0;
        }
        batch.push(item.to_vec());
        used += cost;
    }
    if !batch.is_empty() {
        batches.push(batch);
    }
    Ok(batches)
}

/// A [`CallObserver`] in a [`ClientConfig`].
#[derive(Clone)]
pub struct Observer(pub Arc<dyn CallObserver>);

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Observer")
    }
}

/// How a call ended, as far as reaching keyservice goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallOutcome {
    /// Answered with success.
    Answered,
    /// Answered with an error, or refused before sending (keyservice is up).
    Refused,
    /// The socket could not be reached or the connection closed.
    Unavailable,
    /// No answer in time.
    TimedOut,
    /// The answer broke the protocol.
    Protocol,
}

impl CallOutcome {
    pub fn of<T>(result: &Result<T, KeyError>) -> Self {
        match result {
            Ok(_) => Self::Answered,
            Err(KeyError::Unavailable { .. }) => Self::Unavailable,
            Err(KeyError::Timeout(_)) => Self::TimedOut,
            Err(KeyError::Protocol(_)) => Self::Protocol,
            Err(_) => Self::Refused,
        }
    }

    /// A short lowercase name (`ok`, `refused`, `unavailable`, `timeout`, `protocol`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Answered => "ok",
            Self::Refused => "refused",
            Self::Unavailable => "unavailable",
            Self::TimedOut => "timeout",
            Self::Protocol => "protocol",
        }
    }
}

type Reply = Result<(FrameHeader, Zeroizing<Vec<u8>>), KeyError>;

/// Requests awaiting an answer; `None` once the connection is dead.
struct Pending {
    path: PathBuf,
    table: Mutex<Option<HashMap<u64, oneshot::Sender<Reply>>>>,
}

impl Pending {
    fn lock(&self) -> MutexGuard<'_, Option<HashMap<u64, oneshot::Sender<Reply>>>> {
        // A poisoned lock only means another thread panicked while holding it; the map
        // itself is still consistent (every operation is a single insert/remove).
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn is_alive(&self) -> bool {
        self.lock().is_some()
    }

    /// Marks the connection dead and fails everything still waiting.
    fn fail_all(&self, reason: &str) {
        let drained = self.lock().take();
        if let Some(map) = drained {
            for (_, tx) in map {
                let _ = tx.send(Err(KeyError::Unavailable {
                    path: self.path.clone(),
                    reason: reason.to_owned(),
                }));
            }
        }
    }

    fn remove(&self, id: u64) {
        if let Some(map) = self.lock().as_mut() {
            map.remove(&id);
        }
    }
}

struct Connection {
    tx: mpsc::Sender<Vec<u8>>,
    pending: Arc<Pending>,
    reader: AbortHandle,
}

impl Drop for Connection {
    fn drop(&mut self) {
        // The writer ends when `tx` drops; the reader would wait for the server forever.
        self.reader.abort();
        self.pending.fail_all("client dropped the connection");
    }
}

struct Shared {
    path: PathBuf,
    config: ClientConfig,
    next_id: AtomicU64,
    conn: Mutex<Option<Arc<Connection>>>,
    dial: tokio::sync::Mutex<()>,
}

/// The keyservice client. Clone it freely; all clones share one connection.
#[derive(Clone)]
pub struct KeyClient {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for KeyClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyClient")
            .field("path", &self.shared.path)
            .finish_non_exhaustive()
    }
}

/// A request handed to the connection's writer, waiting for its answer. Dropping it
/// (timeout, error, a dropped future) removes its pending entry.
struct InFlight {
    op: Op,
    id: u64,
    /// When the answer is due: the request's timeout, counted from its sending.
    deadline: tokio::time::Instant,
    timeout: Duration,
    reply: oneshot::Receiver<Reply>,
    conn: Arc<Connection>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.conn.pending.remove(self.id);
    }
}

impl InFlight {
    /// Waits for the answer (until the deadline) and decodes it.
    async fn answer(mut self) -> Result<Response, KeyError> {
        let (header, body) = match tokio::time::timeout_at(self.deadline, &mut self.reply).await {
            Err(_) => return Err(KeyError::Timeout(self.timeout)),
            Ok(Err(_)) => {
                return Err(KeyError::Unavailable {
                    path: self.conn.pending.path.clone(),
                    reason: "connection closed".to_owned(),
                });
            }
            Ok(Ok(reply)) => reply?,
        };
        let (op, id) = (self.op, self.id);
        if header.op != op as u8 {
            return Err(KeyError::Protocol(format!(
                "answer to request {id} has op {:#04x}, expected {:#04x}",
                header.op, op as u8
            )));
        }
        let payload = &body[HEADER_LEN..];
        if header.status != 0 {
            let message = String::from_utf8_lossy(payload).into_owned();
            return Err(match ErrorCode::from_u8(header.status) {
                ErrorCode::DecryptFailed => KeyError::DecryptFailed,
                ErrorCode::InvalidArgument => KeyError::InvalidArgument(message),
                ErrorCode::NoRoot => KeyError::NoRoot(message),
                code => KeyError::Rejected { code, message },
            });
        }
        Response::decode(op, payload).map_err(|e| KeyError::Protocol(e.to_string()))
    }
}

impl KeyClient {
    /// A client that dials lazily on its first call (no I/O here).
    pub fn new(path: impl AsRef<Path>) -> Self {
        Self::with_config(path, ClientConfig::default())
    }

    /// Like [`Self::new`] with explicit tuning.
    pub fn with_config(path: impl AsRef<Path>, config: ClientConfig) -> Self {
        Self {
            shared: Arc::new(Shared {
                path: path.as_ref().to_path_buf(),
                config,
                next_id: AtomicU64::new(1),
                conn: Mutex::new(None),
                dial: tokio::sync::Mutex::new(()),
            }),
        }
    }

    /// Dials now and fails with [`KeyError::Unavailable`] if the keyservice is not there.
    pub async fn connect(path: impl AsRef<Path>) -> Result<Self, KeyError> {
        let client = Self::new(path);
        client.connection().await?;
        Ok(client)
    }

    /// The socket path this client dials.
    pub fn socket_path(&self) -> &Path {
        &self.shared.path
    }

    /// How long a call may take.
    pub fn request_timeout(&self) -> Duration {
        self.shared.config.request_timeout
    }

    /// Who is told of each call, if anyone.
    pub fn observer(&self) -> Option<&Observer> {
        self.shared.config.observer.as_ref()
    }

    // ---- typed operations -------------------------------------------------------------

    /// Protocol version, platform, sealed compose hash and payer count. A cheap health check.
    pub async fn status(&self) -> Result<ServiceStatus, KeyError> {
        match self.call(Request::Status).await? {
            Response::Status(s) => Ok(s),
            other => Err(unexpected(Op::Status, &other)),
        }
    }

    /// Creates a wallet: a fresh random 256-bit derivation path and its public identity.
    pub async fn create_wallet(&self) -> Result<NewWallet, KeyError> {
        match self.call(Request::CreateWallet).await? {
            Response::NewWallet { path, public_key } => {
                let info = WalletInfo::from_public_key(public_key);
                Ok(NewWallet {
                    derivation_path: path,
                    pkp_id: info.pkp_id,
                    address: info.address,
                    public_key,
                })
            }
            other => Err(unexpected(Op::CreateWallet, &other)),
        }
    }

    /// Public key, `pkp_id` and address of the wallet at `path`.
    pub async fn wallet(&self, path: &DerivationPath) -> Result<WalletInfo, KeyError> {
        match self.call(Request::WalletPublicKey { path: *path }).await? {
            Response::PublicKey(pk) => Ok(WalletInfo::from_public_key(pk)),
            other => Err(unexpected(Op::WalletPublicKey, &other)),
        }
    }

    /// Signs a 32-byte digest with the wallet at `path` (RFC 6979, low-S, v = 27/28).
    pub async fn sign_digest(
        &self,
        path: &DerivationPath,
        digest: &[u8; 32],
    ) -> Result<Signature, KeyError> {
        let req = Request::WalletSign {
            path: *path,
            digest: *digest,
        };
        expect_signature(Op::WalletSign, self.call(req).await?)
    }

    /// The wallet's private key (for the action runtime's `getPrivateKey`).
    pub async fn export_private_key(&self, path: &DerivationPath) -> Result<SecretKey32, KeyError> {
        expect_secret(
            Op::WalletExportKey,
            self.call(Request::WalletExportKey { path: *path }).await?,
        )
    }

    /// Public identity of the action key bound to an IPFS CID.
    pub async fn action_identity(&self, cid: &str) -> Result<WalletInfo, KeyError> {
        check_cid(cid)?;
        match self
            .call(Request::ActionPublicKey {
                cid: cid.to_owned(),
            })
            .await?
        {
            Response::PublicKey(pk) => Ok(WalletInfo::from_public_key(pk)),
            other => Err(unexpected(Op::ActionPublicKey, &other)),
        }
    }

    /// Signs a 32-byte digest with the action key bound to `cid`.
    pub async fn action_sign_digest(
        &self,
        cid: &str,
        digest: &[u8; 32],
    ) -> Result<Signature, KeyError> {
        check_cid(cid)?;
        let req = Request::ActionSign {
            cid: cid.to_owned(),
            digest: *digest,
        };
        expect_signature(Op::ActionSign, self.call(req).await?)
    }

    /// The action key bound to `cid` (for `getLitActionPrivateKey`).
    pub async fn action_export_private_key(&self, cid: &str) -> Result<SecretKey32, KeyError> {
        check_cid(cid)?;
        expect_secret(
            Op::ActionExportKey,
            self.call(Request::ActionExportKey {
                cid: cid.to_owned(),
            })
            .await?,
        )
    }

    /// AES-256-GCM under the wallet's encryption key; returns `nonce(12) ‖ ciphertext ‖ tag(16)`.
    pub async fn encrypt(
        &self,
        path: &DerivationPath,
        plaintext: &[u8],
    ) -> Result<Vec<u8>, KeyError> {
        if plaintext.len() > MAX_PLAINTEXT_LEN {
            return Err(KeyError::InvalidArgument(format!(
                "plaintext is {} bytes; the limit is {MAX_PLAINTEXT_LEN}",
                plaintext.len()
            )));
        }
        let req = Request::Encrypt {
            path: *path,
            plaintext: plaintext.to_vec(),
        };
        match self.call(req).await? {
            Response::Ciphertext(c) => Ok(c),
            other => Err(unexpected(Op::Encrypt, &other)),
        }
    }

    /// Inverse of [`Self::encrypt`]; [`KeyError::DecryptFailed`] if anything was modified.
    pub async fn decrypt(
        &self,
        path: &DerivationPath,
        ciphertext: &[u8],
    ) -> Result<Vec<u8>, KeyError> {
        if ciphertext.len() < NONCE_LEN + TAG_LEN {
            return Err(KeyError::InvalidArgument(format!(
                "ciphertext is {} bytes; at least {} (nonce and tag) are needed",
                ciphertext.len(),
                NONCE_LEN + TAG_LEN
            )));
        }
        if ciphertext.len() > MAX_PLAINTEXT_LEN + NONCE_LEN + TAG_LEN {
            return Err(KeyError::InvalidArgument(format!(
                "ciphertext is {} bytes; the limit is {}",
                ciphertext.len(),
                MAX_PLAINTEXT_LEN + NONCE_LEN + TAG_LEN
            )));
        }
        let req = Request::Decrypt {
            path: *path,
            ciphertext: ciphertext.to_vec(),
        };
        match self.call(req).await? {
            Response::Plaintext(p) => Ok(p),
            other => Err(unexpected(Op::Decrypt, &other)),
        }
    }

    /// Addresses of the API payers (index 0..N) and the admin payer.
    pub async fn payers(&self) -> Result<PayerList, KeyError> {
        match self.call(Request::Payers).await? {
            Response::Payers(p) => Ok(p),
            other => Err(unexpected(Op::Payers, &other)),
        }
    }

    /// Address of one payer (convenience over [`Self::payers`]).
    pub async fn payer_address(&self, payer: Payer) -> Result<Address, KeyError> {
        let list = self.payers().await?;
        match payer {
            Payer::Admin => Ok(list.admin),
            Payer::Api(i) => list.api.get(i as usize).copied().ok_or_else(|| {
                KeyError::InvalidArgument(format!(
                    "API payer {i} does not exist; there are {}",
                    list.api.len()
                ))
            }),
        }
    }

    /// Signs an unsigned transaction with a payer wallet. `unsigned_tx` is its signing
    /// preimage (alloy: `SignableTransaction::encode_for_signing`); the keyservice decodes
    /// it, checks it against its payer policy (chain id, destination contract, no value,
    /// fee cap; see `keyservice/README.md`) and signs its keccak256. A transaction the
    /// policy forbids fails with [`KeyError::Rejected`] and [`ErrorCode::Refused`].
    pub async fn payer_sign_transaction(
        &self,
        payer: Payer,
        unsigned_tx: &[u8],
    ) -> Result<Signature, KeyError> {
        if unsigned_tx.is_empty() || unsigned_tx.len() > MAX_UNSIGNED_TX_LEN {
            return Err(KeyError::InvalidArgument(format!(
                "an unsigned transaction is 1..={MAX_UNSIGNED_TX_LEN} bytes, got {}",
                unsigned_tx.len()
            )));
        }
        let req = Request::PayerSignTransaction {
            payer,
            tx: unsigned_tx.to_vec(),
        };
        expect_signature(Op::PayerSignTransaction, self.call(req).await?)
    }

    /// Seals `plaintext` under the service-owned key of `purpose` (AES-256-GCM); returns
    /// `nonce(12) ‖ ciphertext ‖ tag(16)`. No wallet operation reaches these keys.
    pub async fn service_seal(
        &self,
        purpose: ServicePurpose,
        plaintext: &[u8],
    ) -> Result<Vec<u8>, KeyError> {
        if plaintext.len() > MAX_SERVICE_PLAINTEXT_LEN {
            return Err(KeyError::InvalidArgument(format!(
                "plaintext is {} bytes; the limit is {MAX_SERVICE_PLAINTEXT_LEN}",
                plaintext.len()
            )));
        }
        let req = Request::ServiceSeal {
            purpose,
            plaintext: plaintext.to_vec(),
        };
        match self.call(req).await? {
            Response::Ciphertext(c) => Ok(c),
            other => Err(unexpected(Op::ServiceSeal, &other)),
        }
    }

    /// Inverse of [`Self::service_seal`] for the same purpose;
    /// [`KeyError::DecryptFailed`] if anything was modified or the purpose differs.
    pub async fn service_unseal(
        &self,
        purpose: ServicePurpose,
        sealed: &[u8],
    ) -> Result<Zeroizing<Vec<u8>>, KeyError> {
        if sealed.len() < NONCE_LEN + TAG_LEN
            || sealed.len() > MAX_SERVICE_PLAINTEXT_LEN + NONCE_LEN + TAG_LEN
        {
            return Err(KeyError::InvalidArgument(format!(
                "sealed value is {} bytes; expected {}..={}",
                sealed.len(),
                NONCE_LEN + TAG_LEN,
                MAX_SERVICE_PLAINTEXT_LEN + NONCE_LEN + TAG_LEN
            )));
        }
        let req = Request::ServiceUnseal {
            purpose,
            ciphertext: sealed.to_vec(),
        };
        match self.call(req).await? {
            Response::Plaintext(p) => Ok(Zeroizing::new(p)),
            other => Err(unexpected(Op::ServiceUnseal, &other)),
        }
    }

    /// `n` (1..=64) bytes from the keyservice's OS CSPRNG.
    pub async fn random_bytes(&self, n: usize) -> Result<SecretBytes, KeyError> {
        let n8 = match u8::try_from(n) {
            Ok(v) if (1..=MAX_RANDOM_BYTES).contains(&n) => v,
            _ => {
                return Err(KeyError::InvalidArgument(format!(
                    "random length must be 1..={MAX_RANDOM_BYTES}, got {n}"
                )));
            }
        };
        match self.call(Request::RandomBytes { n: n8 }).await? {
            Response::Random(r) if r.len() == n => Ok(r),
            other => Err(unexpected(Op::RandomBytes, &other)),
        }
    }

    /// A fresh quote over 64 zero bytes of report data, with its event log (what
    /// `/attestation` serves). keyservice chooses the report data; no caller can.
    pub async fn attestation_quote(&self) -> Result<QuoteBundle, KeyError> {
        match self.call_quote(Request::AttestationQuote).await? {
            Response::Quote(q) => Ok(q),
            other => Err(unexpected(Op::AttestationQuote, &other)),
        }
    }

    /// A fresh quote whose report data keyservice computes as SHA-256(`sums`) ‖ 32 zero
    /// bytes, where `sums` is the exact `sha256sum.txt` of the evidence files
    /// (1..=[`MAX_EVIDENCE_SUMS_LEN`] bytes of `<sha256 hex>  <name>` lines).
    pub async fn evidence_quote(&self, sums: &[u8]) -> Result<QuoteBundle, KeyError> {
        if sums.is_empty() || sums.len() > MAX_EVIDENCE_SUMS_LEN {
            return Err(KeyError::InvalidArgument(format!(
                "sha256sum.txt is {} bytes; expected 1..={MAX_EVIDENCE_SUMS_LEN}",
                sums.len()
            )));
        }
        let req = Request::EvidenceQuote {
            sums: sums.to_vec(),
        };
        match self.call_quote(req).await? {
            Response::Quote(q) => Ok(q),
            other => Err(unexpected(Op::EvidenceQuote, &other)),
        }
    }

    /// As [`Self::evidence_quote`], but the report data's second half is `nonce` (a
    /// verifier's challenge) instead of zeros: SHA-256(`sums`) ‖ `nonce`.
    pub async fn fresh_evidence_quote(
        &self,
        sums: &[u8],
        nonce: [u8; 32],
    ) -> Result<QuoteBundle, KeyError> {
        if sums.is_empty() || sums.len() > MAX_EVIDENCE_SUMS_LEN {
            return Err(KeyError::InvalidArgument(format!(
                "sha256sum.txt is {} bytes; expected 1..={MAX_EVIDENCE_SUMS_LEN}",
                sums.len()
            )));
        }
        let req = Request::FreshEvidenceQuote {
            nonce,
            sums: sums.to_vec(),
        };
        match self.call_quote(req).await? {
            Response::Quote(q) => Ok(q),
            other => Err(unexpected(Op::FreshEvidenceQuote, &other)),
        }
    }

    /// The deployment's identity from keyservice's quote provider (what `/info` serves).
    pub async fn attestation_info(&self) -> Result<DeploymentInfo, KeyError> {
        match self.call_quote(Request::AttestationInfo).await? {
            Response::Info(i) => Ok(i),
            other => Err(unexpected(Op::AttestationInfo, &other)),
        }
    }

    /// Whether the keyservice holds its root yet (`root_id` is `None` while a shared-root
    /// keyservice awaits it), and the compose hash it is measured as running. Answered in
    /// every state.
    pub async fn root_status(&self) -> Result<RootStatus, KeyError> {
        match self.call(Request::RootStatus).await? {
            Response::RootStatus(s) => Ok(s),
            other => Err(unexpected(Op::RootStatus, &other)),
        }
    }

    /// Shared-root mode, before a root is adopted: a fresh root sealed to the measured
    /// compose hash, and its future root id. The keyservice keeps nothing: store the blob
    /// (first writer wins), then hand the winning blob to every replica with
    /// [`Self::adopt_root`]. Refused once a root is adopted.
    pub async fn create_sealed_root(&self) -> Result<NewSealedRoot, KeyError> {
        match self.call(Request::CreateSealedRoot).await? {
            Response::SealedRoot(s) => Ok(s),
            other => Err(unexpected(Op::CreateSealedRoot, &other)),
        }
    }

    /// Shared-root mode: hands the shared sealed root to the keyservice, which unseals it
    /// and from then on answers every operation with it; returns its root id. At most once
    /// per keyservice process (later calls are refused). The bytes are sent as they are: the
    /// keyservice alone judges them, and a blob that does not open there (another sealing
    /// key, another compose hash, damaged) is refused and the keyservice then exits rather
    /// than ever create a second root.
    pub async fn adopt_root(&self, sealed: &[u8]) -> Result<RootId, KeyError> {
        let req = Request::AdoptRoot {
            sealed: sealed.to_vec(),
        };
        match self.call(req).await? {
            Response::RootId(id) => Ok(id),
            other => Err(unexpected(Op::AdoptRoot, &other)),
        }
    }

    /// Reseals the running root for `target`, as the operator's signed `request`
    /// (`operator-auth` text, EIP-191 `signature`) asks; keyservice checks the request
    /// itself (its own operators, its governance contract). `source`: the shared sealed
    /// root of the measured compose hash in shared-root mode, `None` for keyservice's own
    /// root file (it then writes `root.sealed.<prefix>` and names it in the answer).
    pub async fn operator_reseal(
        &self,
        target: ComposeHash,
        signature: [u8; OPERATOR_SIGNATURE_LEN],
        request: &str,
        source: Option<[u8; SEALED_ROOT_LEN]>,
    ) -> Result<Resealed, KeyError> {
        if request.is_empty() || request.len() > MAX_OPERATOR_REQUEST_LEN {
            return Err(KeyError::InvalidArgument(format!(
                "an operator request is 1..={MAX_OPERATOR_REQUEST_LEN} bytes, not {}",
                request.len()
            )));
        }
        let req = Request::OperatorReseal {
            target,
            signature,
            request: request.as_bytes().to_vec(),
            source,
        };
        match self.call(req).await? {
            Response::Resealed(r) => Ok(r),
            other => Err(unexpected(Op::OperatorReseal, &other)),
        }
    }

    /// The files of keyservice's state directory an operator backs up (`root.sealed*`,
    /// `payer-contracts.json`).
    pub async fn state_files(&self) -> Result<Vec<StateFile>, KeyError> {
        match self.call(Request::StateFiles).await? {
            Response::StateFiles(files) => Ok(files),
            other => Err(unexpected(Op::StateFiles, &other)),
        }
    }

    /// HMAC-SHA256 tags of `items`, in order, under the keyservice's store-row MAC key
    /// (derived from the root; never exported). Any number of items: they are split into as
    /// many requests as needed (at most [`MAX_ROW_MAC_ITEMS`] items and one frame each),
    /// all sent before the first answer is awaited (pipelined). Each item is at most
    /// [`MAX_ROW_MAC_ITEM_LEN`] bytes. No items, no request: an empty answer.
    pub async fn row_macs(&self, items: &[&[u8]]) -> Result<Vec<[u8; 32]>, KeyError> {
        let batches = row_mac_batches(items)?;
        if batches.is_empty() {
            return Ok(Vec::new());
        }
        let timeout = self.shared.config.request_timeout;
        let total = items.len();
        // Observed as one call, however many requests it takes.
        self.observed(Op::RowMac, async move {
            let mut in_flight = Vec::with_capacity(batches.len());
            for items in batches {
                let n = items.len();
                in_flight.push((n, self.send(Request::RowMac { items }, timeout).await?));
            }
            let mut tags = Vec::with_capacity(total);
            for (n, request) in in_flight {
                match request.answer().await? {
                    Response::RowMacs(t) if t.len() == n => tags.extend(t),
                    other => return Err(unexpected(Op::RowMac, &other)),
                }
            }
            Ok(tags)
        })
        .await
    }

    /// The SubjectPublicKeyInfo DER of TLS key `index` (P-256; the private key stays in
    /// keyservice).
    pub async fn tls_public_key(&self, index: u32) -> Result<Vec<u8>, KeyError> {
        match self.call(Request::TlsPublicKey { index }).await? {
            Response::Spki(spki) => Ok(spki),
            other => Err(unexpected(Op::TlsPublicKey, &other)),
        }
    }

    /// A DER ECDSA signature by TLS key `index` over `message` (SHA-256 inside), for a
    /// handshake or a certificate / CSR to be signed.
    pub async fn tls_sign(&self, index: u32, message: &[u8]) -> Result<Vec<u8>, KeyError> {
        if message.is_empty() || message.len() > MAX_TLS_SIGN_MESSAGE_LEN {
            return Err(KeyError::InvalidArgument(format!(
                "a TLS signing message is {} bytes; expected 1..={MAX_TLS_SIGN_MESSAGE_LEN}",
                message.len()
            )));
        }
        let req = Request::TlsSign {
            index,
            scheme: TLS_SCHEME_ECDSA_P256_SHA256,
            message: message.to_vec(),
        };
        match self.call(req).await? {
            Response::TlsSignature(sig) => Ok(sig),
            other => Err(unexpected(Op::TlsSign, &other)),
        }
    }

    /// Registers the PEM chain (leaf first) of TLS key `index` so that evidence quotes may
    /// cover a listing naming it; refused unless the leaf carries that key. Returns
    /// SHA-256 of the chain bytes (what `sha256sum.txt` lists for it).
    pub async fn tls_register_certificate(
        &self,
        index: u32,
        chain_pem: &[u8],
    ) -> Result<[u8; 32], KeyError> {
        if chain_pem.is_empty() || chain_pem.len() > MAX_TLS_CHAIN_LEN {
            return Err(KeyError::InvalidArgument(format!(
                "a certificate chain is {} bytes; expected 1..={MAX_TLS_CHAIN_LEN}",
                chain_pem.len()
            )));
        }
        let req = Request::TlsRegisterCertificate {
            index,
            chain_pem: chain_pem.to_vec(),
        };
        match self.call(req).await? {
            Response::CertificateRegistered(hash) => Ok(hash),
            other => Err(unexpected(Op::TlsRegisterCertificate, &other)),
        }
    }

    /// The ACME account's public key: the uncompressed P-256 point `0x04 ‖ x ‖ y` (the
    /// private key is derived from the root and never leaves keyservice).
    pub async fn acme_account_public_key(&self) -> Result<[u8; ACME_PUBLIC_KEY_LEN], KeyError> {
        match self.call(Request::AcmeAccountPublicKey).await? {
            Response::AcmeAccountKey(point) => Ok(point),
            other => Err(unexpected(Op::AcmeAccountPublicKey, &other)),
        }
    }

    /// The ES256 signature (`r ‖ s`) of the ACME account key over a JWS signing input,
    /// `BASE64URL(protected) ‖ '.' ‖ BASE64URL(payload)`. keyservice refuses an input of
    /// another shape, or whose protected header does not say `"alg": "ES256"`.
    pub async fn acme_account_sign(
        &self,
        signing_input: &[u8],
    ) -> Result<[u8; ACME_SIGNATURE_LEN], KeyError> {
        if signing_input.is_empty() || signing_input.len() > MAX_ACME_SIGNING_INPUT_LEN {
            return Err(KeyError::InvalidArgument(format!(
                "a JWS signing input is {} bytes; expected 1..={MAX_ACME_SIGNING_INPUT_LEN}",
                signing_input.len()
            )));
        }
        let req = Request::AcmeAccountSign {
            signing_input: signing_input.to_vec(),
        };
        match self.call(req).await? {
            Response::AcmeSignature(sig) => Ok(sig),
            other => Err(unexpected(Op::AcmeAccountSign, &other)),
        }
    }

    // ---- plumbing ----------------------------------------------------------------------

    /// Sends one request and waits for its answer.
    pub async fn call(&self, request: Request) -> Result<Response, KeyError> {
        self.call_within(request, self.shared.config.request_timeout)
            .await
    }

    async fn call_quote(&self, request: Request) -> Result<Response, KeyError> {
        self.call_within(request, self.shared.config.quote_timeout)
            .await
    }

    /// As [`Self::call`], with its own answer timeout.
    async fn call_within(&self, request: Request, timeout: Duration) -> Result<Response, KeyError> {
        let op = request.op();
        self.observed(op, async {
            self.send(request, timeout).await?.answer().await
        })
        .await
    }

    /// Runs one call (`call`) to `op` under the observer, if there is one.
    async fn observed<T>(
        &self,
        op: Op,
        call: impl std::future::Future<Output = Result<T, KeyError>>,
    ) -> Result<T, KeyError> {
        let Some(Observer(observer)) = &self.shared.config.observer else {
            return call.await;
        };
        let started = tokio::time::Instant::now();
        let result = tracing::Instrument::instrument(call, observer.span(op)).await;
        observer.finished(op, started.elapsed(), CallOutcome::of(&result));
        result
    }

    /// Encodes `request` and hands it to the connection's writer; the answer is due within
    /// `timeout` of now (the sending included). Await it with [`InFlight::answer`]; several
    /// requests may be sent before any answer is awaited.
    async fn send(&self, request: Request, timeout: Duration) -> Result<InFlight, KeyError> {
        let op = request.op();
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        let mut frame = Vec::with_capacity(64);
        let body_len = codec::encode_frame(&mut frame, FrameHeader::new(op as u8, 0, id), |b| {
            request.encode_payload(b)
        });
        drop(request);
        if body_len > MAX_FRAME_LEN {
            frame.zeroize();
            return Err(KeyError::InvalidArgument(format!(
                "request of {body_len} bytes exceeds the {MAX_FRAME_LEN}-byte frame limit"
            )));
        }

        let conn = self.connection().await?;
        let deadline = tokio::time::Instant::now() + timeout;
        let (reply_tx, reply_rx) = oneshot::channel();
        {
            let mut table = conn.pending.lock();
            match table.as_mut() {
                Some(map) => {
                    map.insert(id, reply_tx);
                }
                None => return Err(self.unavailable("connection closed")),
            }
        }
        let in_flight = InFlight {
            op,
            id,
            deadline,
            timeout,
            reply: reply_rx,
            conn,
        };
        match tokio::time::timeout_at(deadline, in_flight.conn.tx.send(frame)).await {
            Ok(Ok(())) => Ok(in_flight),
            Ok(Err(_)) => Err(self.unavailable("connection closed")),
            Err(_) => Err(KeyError::Timeout(timeout)),
        }
    }

    fn unavailable(&self, reason: &str) -> KeyError {
        KeyError::Unavailable {
            path: self.shared.path.clone(),
            reason: reason.to_owned(),
        }
    }

    fn current(&self) -> Option<Arc<Connection>> {
        let slot = self.shared.conn.lock().unwrap_or_else(|p| p.into_inner());
        slot.as_ref()
            .filter(|c| c.pending.is_alive())
            .map(Arc::clone)
    }

    /// The live connection, dialing a new one if there is none (one dialer at a time).
    async fn connection(&self) -> Result<Arc<Connection>, KeyError> {
        if let Some(c) = self.current() {
            return Ok(c);
        }
        let _dialing = self.shared.dial.lock().await;
        if let Some(c) = self.current() {
            return Ok(c);
        }
        let timeout = self.shared.config.connect_timeout;
        let stream =
            match tokio::time::timeout(timeout, UnixStream::connect(&self.shared.path)).await {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => return Err(self.unavailable(&e.to_string())),
                Err(_) => return Err(KeyError::Timeout(timeout)),
            };
        let (rd, wr) = stream.into_split();
        let pending = Arc::new(Pending {
            path: self.shared.path.clone(),
            table: Mutex::new(Some(HashMap::new())),
        });
        let (tx, rx) = mpsc::channel(self.shared.config.write_queue.max(1));
        tokio::spawn(write_loop(
            wr,
            rx,
            Arc::clone(&pending),
            self.shared.config.request_timeout,
        ));
        let reader = tokio::spawn(read_loop(rd, Arc::clone(&pending))).abort_handle();
        let conn = Arc::new(Connection {
            tx,
            pending,
            reader,
        });
        let mut slot = self.shared.conn.lock().unwrap_or_else(|p| p.into_inner());
        *slot = Some(Arc::clone(&conn));
        tracing::debug!(path = %self.shared.path.display(), "connected to keyservice");
        Ok(conn)
    }
}

fn check_cid(cid: &str) -> Result<(), KeyError> {
    if cid.is_empty() || cid.len() > MAX_CID_LEN {
        return Err(KeyError::InvalidArgument(format!(
            "CID must be 1..={MAX_CID_LEN} bytes, got {}",
            cid.len()
        )));
    }
    Ok(())
}

fn unexpected(op: Op, got: &Response) -> KeyError {
    KeyError::Protocol(format!("unexpected answer to {op:?}: {got:?}"))
}

fn expect_signature(op: Op, r: Response) -> Result<Signature, KeyError> {
    match r {
        Response::Signature(s) => Ok(s),
        other => Err(unexpected(op, &other)),
    }
}

fn expect_secret(op: Op, r: Response) -> Result<SecretKey32, KeyError> {
    match r {
        Response::SecretKey(k) => Ok(k),
        other => Err(unexpected(op, &other)),
    }
}

/// Sends request frames (batched, wiped after writing); a failed write ends the connection.
async fn write_loop(
    mut wr: OwnedWriteHalf,
    mut rx: mpsc::Receiver<Vec<u8>>,
    pending: Arc<Pending>,
    write_timeout: Duration,
) {
    if let Err(e) = codec::write_frames(&mut wr, &mut rx, write_timeout).await {
        pending.fail_all(&format!("write failed: {e}"));
    }
}

/// Routes each answer to the caller waiting on its id.
async fn read_loop(rd: OwnedReadHalf, pending: Arc<Pending>) {
    let mut rd = codec::FrameReader::new(rd);
    let reason = loop {
        let body = match rd.next_frame().await {
            Ok(Some(b)) => b,
            Ok(None) => break "keyservice closed the connection".to_owned(),
            Err(e) => break format!("read failed: {e}"),
        };
        let Some(header) = FrameHeader::parse(&body) else {
            break "frame without header".to_owned();
        };
        if header.version != PROTOCOL_VERSION {
            break format!("keyservice speaks protocol version {}", header.version);
        }
        if header.id == 0 {
            // A connection-level error; the server closes next.
            let msg = String::from_utf8_lossy(&body[HEADER_LEN..]).into_owned();
            break format!("keyservice reported a connection error: {msg}");
        }
        let waiter = pending.lock().as_mut().and_then(|m| m.remove(&header.id));
        if let Some(tx) = waiter {
            let _ = tx.send(Ok((header, body)));
        }
    };
    tracing::debug!(%reason, "keyservice connection ended");
    pending.fail_all(&reason);
}
