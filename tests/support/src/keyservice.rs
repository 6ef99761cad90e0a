//! The real `keyservice` binary in tests (feature `keyservice`): started on a socket in a
//! temporary directory ([`Env`], [`KeyService`]), raw protocol frames for the tests of
//! malformed input ([`raw_frame`], [`read_raw_frame`]), signatures checked with
//! libsecp256k1 ([`recover_address`]), and rcgen certificates signed by keyservice's TLS
//! keys ([`keyservice_certificate`]). It speaks the protocol through `keyservice-api` only,
//! so keyservice's own tests use it without a dependency cycle.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream as StdUnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use keyservice_api::{Address, ComposeHash, PublicKey, Signature, keccak256};
use secp256k1::ecdsa::{RecoverableSignature, RecoveryId};
use secp256k1::{Message, Secp256k1};
use sha2::{Digest, Sha256};

use crate::dstack_agent::AgentConfig;

/// The `keyservice` binary of this target directory, refused when older than its sources
/// ([`crate::binaries::workspace_binary`]).
pub fn binary() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| crate::binaries::workspace_binary("keyservice"))
}

/// The compose hash a stand-in agent's [`AgentConfig`] reports, as keyservice's
/// [`ComposeHash`].
pub trait ComposeHashOf {
    fn compose_hash(&self) -> ComposeHash;
}

impl ComposeHashOf for AgentConfig {
    fn compose_hash(&self) -> ComposeHash {
        ComposeHash(self.compose_hash_bytes())
    }
}

static LOG_SEQ: AtomicUsize = AtomicUsize::new(0);

/// A temp directory with a compose file, a dev secret path, a state dir and a socket path.
pub struct Env {
    pub dir: tempfile::TempDir,
    pub socket: PathBuf,
    pub state_dir: PathBuf,
    pub compose_file: PathBuf,
    pub dev_secret: PathBuf,
    /// Extra `run` arguments (platform selection); dev by default.
    pub platform_args: Vec<OsString>,
    /// More `run` arguments (payer policy); by default the tests' chain, 31337.
    pub run_extra: Vec<OsString>,
}

impl Default for Env {
    fn default() -> Self {
        Self::new()
    }
}

impl Env {
    /// A fresh temporary directory on the dev platform, for the tests' chain (31337).
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let compose_file = dir.path().join("app-compose.json");
        std::fs::write(
            &compose_file,
            b"{\"name\":\"keyservice-test\",\"version\":1}\n",
        )
        .unwrap();
        let dev_secret = dir.path().join("dev-secret");
        let platform_args = vec![
            "--platform".into(),
            "dev".into(),
            "--compose-file".into(),
            compose_file.clone().into(),
            "--dev-secret".into(),
            dev_secret.clone().into(),
        ];
        Self {
            socket: dir.path().join("ks.sock"),
            state_dir: dir.path().join("state"),
            compose_file,
            dev_secret,
            platform_args,
            run_extra: vec!["--chain-id".into(), "31337".into()],
            dir,
        }
    }

    /// Uses the dstack platform with the given agent socket instead of dev.
    pub fn use_dstack(&mut self, agent_socket: &Path) {
        self.platform_args = vec![
            "--platform".into(),
            "dstack".into(),
            "--agent-socket".into(),
            agent_socket.into(),
        ];
    }

    /// Uses another dev secret file and compose file (a replica of another `Env`'s app).
    pub fn use_dev_files(&mut self, dev_secret: &Path, compose_file: &Path) {
        self.dev_secret = dev_secret.to_path_buf();
        self.compose_file = compose_file.to_path_buf();
        self.platform_args = vec![
            "--platform".into(),
            "dev".into(),
            "--compose-file".into(),
            compose_file.into(),
            "--dev-secret".into(),
            dev_secret.into(),
        ];
    }

    /// Runs in shared-root mode (`--shared-root`).
    pub fn shared_root(&mut self) {
        self.run_extra.push("--shared-root".into());
    }

    pub fn set_compose(&self, content: &str) -> ComposeHash {
        std::fs::write(&self.compose_file, content).unwrap();
        self.compose_hash()
    }

    pub fn compose_hash(&self) -> ComposeHash {
        ComposeHash(Sha256::digest(std::fs::read(&self.compose_file).unwrap()).into())
    }

    pub fn sealed_file(&self) -> PathBuf {
        self.state_dir.join("root.sealed")
    }

    fn run_args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec![
            "run".into(),
            "--socket".into(),
            self.socket.clone().into(),
            "--state-dir".into(),
            self.state_dir.clone().into(),
            "--payers".into(),
            "4".into(),
        ];
        args.extend(self.platform_args.iter().cloned());
        args.extend(self.run_extra.iter().cloned());
        args
    }

    /// Spawns `keyservice run` with its log (stderr) in a fresh file of the temp dir.
    pub fn spawn_run(&self) -> (Child, PathBuf) {
        let log = self.dir.path().join(format!(
            "keyservice-{}.log",
            LOG_SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let child = Command::new(binary())
            .args(self.run_args())
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        (child, log)
    }

    /// Starts `keyservice run` and waits until it accepts connections; `Err(stderr)` if it
    /// exits first.
    pub fn try_start(&self) -> Result<KeyService, String> {
        let (child, log) = self.spawn_run();
        let mut ks = KeyService {
            child: Some(child),
            socket: self.socket.clone(),
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = ks.child.as_mut().unwrap().try_wait().unwrap() {
                ks.child = None;
                return Err(format!("exited with {status}: {}", ks.log_text()));
            }
            if StdUnixStream::connect(&self.socket).is_ok() {
                return Ok(ks);
            }
            if Instant::now() > deadline {
                return Err(format!("did not start in time: {}", ks.log_text()));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Runs `keyservice run` expecting it to refuse to start: waits for it to exit with
    /// a failure and returns its log. Panics if it keeps running or exits successfully.
    pub fn start_expecting_failure(&self) -> String {
        let (mut child, log) = self.spawn_run();
        let deadline = Instant::now() + Duration::from_secs(10);
        let text = || std::fs::read_to_string(&log).unwrap_or_default();
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                assert!(!status.success(), "exited successfully: {}", text());
                return text();
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "keyservice started although it should have refused: {}",
                    text()
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    pub fn start(&self) -> KeyService {
        self.try_start()
            .unwrap_or_else(|e| panic!("keyservice failed to start: {e}"))
    }

    /// Runs another subcommand to completion (with this env's platform arguments).
    pub fn command(&self, sub: &str, extra: &[&std::ffi::OsStr]) -> Output {
        let mut cmd = Command::new(binary());
        cmd.arg(sub);
        cmd.args(extra);
        cmd.arg("--state-dir").arg(&self.state_dir);
        cmd.args(&self.platform_args);
        cmd.stdin(Stdio::null());
        cmd.output().unwrap()
    }

    /// All file names in the state directory, sorted.
    pub fn state_files(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&self.state_dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }
}

/// The signing preimage of an EIP-1559 transaction from the tests' chain (31337): a call
/// to `to` (or a creation) with `value` wei and `input`, at `nonce`, modest fees.
pub fn eip1559(
    to: Option<[u8; 20]>,
    value: u64,
    input: Vec<u8>,
    nonce: u64,
) -> alloy::consensus::TxEip1559 {
    use alloy::primitives::{Address as A, TxKind, U256};
    alloy::consensus::TxEip1559 {
        chain_id: 31337,
        nonce,
        gas_limit: 200_000,
        max_fee_per_gas: 2_000_000_000,
        max_priority_fee_per_gas: 1_000_000_000,
        to: to.map_or(TxKind::Create, |a| TxKind::Call(A::from(a))),
        value: U256::from(value),
        access_list: Default::default(),
        input: input.into(),
    }
}

/// `encode_for_signing` of any alloy transaction.
pub fn preimage(
    tx: &impl alloy::consensus::SignableTransaction<alloy::primitives::Signature>,
) -> Vec<u8> {
    let mut buf = Vec::new();
    tx.encode_for_signing(&mut buf);
    buf
}

/// A running keyservice; killed on drop.
pub struct KeyService {
    child: Option<Child>,
    pub socket: PathBuf,
    pub log: PathBuf,
}

impl KeyService {
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// Waits for the process to exit by itself; `None` if it is still running after
    /// `within` (it is then left running, and killed on drop).
    pub fn wait_exit(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                self.child = None;
                return Some(status);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// SIGTERM and wait; returns whether it exited successfully.
    pub fn terminate(mut self) -> bool {
        let mut child = self.child.take().unwrap();
        let status = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status()
            .unwrap();
        assert!(status.success());
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(s) = child.try_wait().unwrap() {
                return s.success();
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for KeyService {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Address of the key that produced `sig` over `digest`, recovered with libsecp256k1.
pub fn recover_address(digest: &[u8; 32], sig: &Signature) -> Address {
    let pk = recover_public_key(digest, sig);
    pk.address()
}

pub fn recover_public_key(digest: &[u8; 32], sig: &Signature) -> PublicKey {
    let secp = Secp256k1::verification_only();
    assert!(matches!(sig.v(), 27 | 28), "v = {}", sig.v());
    let recid = RecoveryId::try_from(i32::from(sig.v() - 27)).unwrap();
    let rs = RecoverableSignature::from_compact(&sig.as_bytes()[..64], recid).unwrap();
    let pk = secp
        .recover_ecdsa(Message::from_digest(*digest), &rs)
        .unwrap();
    // Also a plain verification, and the signature must already be low-S.
    let mut std_sig = rs.to_standard();
    let before = std_sig.serialize_compact();
    std_sig.normalize_s();
    assert_eq!(
        before,
        std_sig.serialize_compact(),
        "signature is not low-S"
    );
    secp.verify_ecdsa(Message::from_digest(*digest), &std_sig, &pk)
        .unwrap();
    PublicKey::from_uncompressed(pk.serialize_uncompressed()).unwrap()
}

/// Address of a raw private key, by libsecp256k1.
pub fn address_of_secret(sk: &[u8; 32]) -> Address {
    let secp = Secp256k1::signing_only();
    let sk = secp256k1::SecretKey::from_byte_array(*sk).unwrap();
    let pk = secp256k1::PublicKey::from_secret_key(&secp, &sk);
    let h = keccak256(&pk.serialize_uncompressed()[1..]);
    Address(h[12..].try_into().unwrap())
}

/// libsecp256k1's own RFC 6979 recoverable signature, in the r ‖ s ‖ (27 + recid) form.
pub fn libsecp_sign(sk: &[u8; 32], digest: &[u8; 32]) -> [u8; 65] {
    let secp = Secp256k1::signing_only();
    let sk = secp256k1::SecretKey::from_byte_array(*sk).unwrap();
    let sig = secp.sign_ecdsa_recoverable(Message::from_digest(*digest), &sk);
    let (recid, rs) = sig.serialize_compact();
    let mut out = [0u8; 65];
    out[..64].copy_from_slice(&rs);
    out[64] = 27 + i32::from(recid) as u8;
    out
}

/// A deterministic digest for test number `i`.
pub fn digest(i: u64) -> [u8; 32] {
    Sha256::digest(i.to_be_bytes()).into()
}

// ---- raw frames -------------------------------------------------------------------------

/// A raw frame: `len ‖ version ‖ op ‖ status ‖ id ‖ payload`.
pub fn raw_frame(version: u8, op: u8, status: u8, id: u64, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&((11 + payload.len()) as u32).to_be_bytes());
    v.push(version);
    v.push(op);
    v.push(status);
    v.extend_from_slice(&id.to_be_bytes());
    v.extend_from_slice(payload);
    v
}

/// Reads one response frame: (op, status, id, payload); `None` on EOF.
pub fn read_raw_frame(s: &mut StdUnixStream) -> Option<(u8, u8, u64, Vec<u8>)> {
    let mut len = [0u8; 4];
    if s.read_exact(&mut len).is_err() {
        return None;
    }
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).ok()?;
    assert_eq!(body[0], 1, "response version");
    Some((
        body[1],
        body[2],
        u64::from_be_bytes(body[3..11].try_into().unwrap()),
        body[11..].to_vec(),
    ))
}

pub fn raw_connect(socket: &Path) -> StdUnixStream {
    let s = StdUnixStream::connect(socket).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// Asserts that the peer closed the connection (EOF or reset) without more frames.
pub fn assert_closed(s: &mut StdUnixStream) {
    let mut buf = [0u8; 64];
    match s.read(&mut buf) {
        Ok(0) => {}
        Ok(n) => panic!("expected EOF, got {n} more bytes"),
        Err(e) => assert!(
            matches!(
                e.kind(),
                std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
            ),
            "expected close, got {e}"
        ),
    }
}

pub fn write_all(s: &mut StdUnixStream, bytes: &[u8]) {
    s.write_all(bytes).unwrap();
}

/// rcgen's signing key for keyservice TLS key `index`: every signature is `TlsSign`.
pub struct KeyserviceTlsKey {
    pub index: u32,
    pub spki: Vec<u8>,
    client: keyservice_api::BlockingClient,
}

impl KeyserviceTlsKey {
    pub fn new(socket: &Path, index: u32) -> Self {
        let client = keyservice_api::BlockingClient::new(socket, Duration::from_secs(10));
        let spki = client.tls_public_key(index).unwrap();
        Self {
            index,
            spki,
            client,
        }
    }
}

impl rcgen::PublicKeyData for KeyserviceTlsKey {
    fn der_bytes(&self) -> &[u8] {
        // The uncompressed point after the 26-byte P-256 SPKI prefix.
        &self.spki[26..]
    }

    fn algorithm(&self) -> &'static rcgen::SignatureAlgorithm {
        &rcgen::PKCS_ECDSA_P256_SHA256
    }
}

impl rcgen::SigningKey for KeyserviceTlsKey {
    fn sign(&self, msg: &[u8]) -> Result<Vec<u8>, rcgen::Error> {
        self.client
            .tls_sign(self.index, msg)
            .map_err(|_| rcgen::Error::RemoteKeyError)
    }
}

/// A self-signed certificate for `name` carrying keyservice TLS key `index` (signed by
/// keyservice), as PEM. Blocking: call it off the async runtime's thread.
pub fn keyservice_certificate(socket: &Path, index: u32, name: &str) -> String {
    let key = KeyserviceTlsKey::new(socket, index);
    rcgen::CertificateParams::new(vec![name.to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap()
        .pem()
}

/// A `sha256sum.txt` as the appliance writes it, naming a certificate for keyservice's
/// TLS key 1, registered with keyservice (so it may be quoted).
pub async fn registered_sums(socket: &Path) -> Vec<u8> {
    let path = socket.to_owned();
    let pem = tokio::task::spawn_blocking(move || keyservice_certificate(&path, 1, "a.test"))
        .await
        .unwrap();
    let client = keyservice_api::KeyClient::connect(socket).await.unwrap();
    client
        .tls_register_certificate(1, pem.as_bytes())
        .await
        .unwrap();
    format!(
        "{}  acme-account.json\n{}  cert-a.test.pem\n",
        hex::encode(Sha256::digest(b"account")),
        hex::encode(Sha256::digest(pem.as_bytes()))
    )
    .into_bytes()
}
