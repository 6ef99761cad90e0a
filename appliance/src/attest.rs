//! Attestation: quotes for `/attestation` and `/info`, and the evidence files under
//! `/evidences/` that bind the served TLS certificate to a hardware quote.
//!
//! The appliance never talks to the quote provider (dstack guest agent, configfs-tsm):
//! keyservice does, and offers only quotes over report data it builds itself
//! (`AttestationQuote`: zeros; `EvidenceQuote`: from the bytes of `sha256sum.txt`), so
//! nothing in this process can obtain a quote over data it chose.
//!
//! Whenever the served certificate changes (ACME issuance or renewal; once at start for a
//! self-signed or file certificate) the files are rebuilt:
//!
//! * `cert-<domain>.pem`: the served chain (leaf first);
//! * `acme-account.json`: `{"uri": <ACME account URI>}` (ACME only);
//! * `next-tls-key.json`: `{"spki_sha256": <hex>}`, the SHA-256 of the SubjectPublicKeyInfo
//!   DER of the key the *next* certificate will use (ACME only): a client that verified
//!   this set recognises the renewed certificate by its key before it sends it anything;
//! * `sbom.json`: the software bill of materials of the image's binaries, read at start
//!   from [`SBOM_IMAGE_PATH`] (the image carries it; a process not started from the image
//!   has none and lists no such file). The image digest pinned in the measured compose
//!   covers that file, and the quote covers this listing: `evidence verify` prints the
//!   SBOM's digest;
//! * `sha256sum.txt`: `<sha256 hex>  <name>` for each file above, as `sha256sum` prints;
//! * `quote.json`: a quote whose report_data = SHA-256(sha256sum.txt) ‖ 32 zero bytes;
//!   with `?nonce=<64 hex>` (and on `/attestation?nonce=`), a quote made for that request
//!   over SHA-256(sha256sum.txt) ‖ nonce (`FreshEvidenceQuote`: keyservice checks the
//!   listing and builds the report data; the nonce is a typed 32-byte field), never
//!   cached, so a verifier that chose the nonce knows the quote is not a replay;
//! * `index.html`: the listing, linking every file.
//!
//! Until the first set is built the listing is empty; a set is replaced as a whole.

use appliance_domain::backoff::Backoff;
use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use keyservice_api::{DeploymentInfo, KeyError, QuoteBundle};
use sha2::{Digest, Sha256};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::acme::IssuedCert;
use crate::keyservice_client::Keys;

/// Why a quote could not be had.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AttestError {
    /// keyservice, or its quote provider, did not deliver.
    #[error("keyservice quote: {0}")]
    Keyservice(#[from] KeyError),
    /// keyservice answered a quote that does not carry the expected report data.
    #[error("the evidence quote's report data is {found}, expected {expected}")]
    WrongReportData { expected: String, found: String },
    /// A fresh quote was asked for before the first evidence set was built.
    #[error("no evidence files yet: the served certificate's evidence is still being built")]
    NoEvidenceYet,
}

/// Parses a `?nonce=` value: exactly 64 hex digits (32 bytes), either case.
pub fn parse_nonce(text: &str) -> Option<[u8; 32]> {
    if text.len() != 64 {
        return None;
    }
    let mut nonce = [0u8; 32];
    hex::decode_to_slice(text, &mut nonce).ok()?;
    Some(nonce)
}

/// Checks that keyservice's quote carries `expected` as its report data.
fn check_report_data(quote: &evidence::Quote, expected: [u8; 64]) -> Result<(), AttestError> {
    let found = evidence::quote::TdxQuote::parse(&quote.bytes)
        .map(|q| q.report.report_data)
        .ok();
    if found != Some(expected) {
        return Err(AttestError::WrongReportData {
            expected: hex::encode(expected),
            found: found.map_or_else(|| "unreadable".to_owned(), hex::encode),
        });
    }
    Ok(())
}

/// The `/attestation` and `quote.json` shapes, as the evidence crate writes them.
fn quote_of(bundle: QuoteBundle) -> evidence::Quote {
    evidence::Quote {
        bytes: bundle.quote,
        event_log_json: bundle.event_log,
        vm_config: bundle.vm_config,
    }
}

/// The `/info` shape, as the evidence crate writes it.
pub fn info_of(info: DeploymentInfo) -> evidence::Info {
    evidence::Info {
        app_id: info.app_id,
        instance_id: info.instance_id,
        compose_hash: info.compose_hash,
        app_compose: info.app_compose,
        key_provider: info.key_provider,
        mrs: evidence::Measurements {
            mrtd: info.mrtd,
            rtmr0: info.rtmr0,
            rtmr1: info.rtmr1,
            rtmr2: info.rtmr2,
            rtmr3: info.rtmr3,
        },
        event_log: info.event_log,
    }
}

/// Where the image carries the SBOM of its binaries (`image-build` writes it there:
/// `oci_image::sbom::IMAGE_PATH`).
pub const SBOM_IMAGE_PATH: &str = "/usr/share/appliance/sbom.json";
/// Its name among the evidence files.
pub const SBOM_FILE: &str = "sbom.json";

/// The image's SBOM ([`SBOM_IMAGE_PATH`]), if this process runs from the image.
pub fn read_sbom(path: &std::path::Path) -> Option<Arc<Vec<u8>>> {
    match std::fs::read(path) {
        Ok(bytes) => {
            tracing::info!(path = %path.display(), sha256 = %hex::encode(Sha256::digest(&bytes)), "SBOM listed in the evidence files");
            Some(Arc::new(bytes))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            tracing::info!(path = %path.display(), "no SBOM (not started from the image): none in the evidence files");
            None
        }
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot read the SBOM: none in the evidence files");
            None
        }
    }
}

/// One evidence file.
#[derive(Debug, Clone)]
pub struct EvidenceFile {
    pub bytes: Vec<u8>,
    pub content_type: &'static str,
}

/// A consistent set of evidence files, by name.
#[derive(Debug, Clone, Default)]
pub struct EvidenceSet {
    pub files: BTreeMap<String, EvidenceFile>,
    /// The keyservice TLS key index and the chain it was registered with, so that a
    /// fresh quote can register it again (keyservice keeps registrations in memory only:
    /// a restarted keyservice would otherwise refuse every fresh quote until the next
    /// certificate).
    pub registration: Option<(u32, String)>,
}

impl EvidenceSet {
    /// The `/evidences/` listing.
    pub fn index_html(&self) -> String {
        let mut html = String::from(
            "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Evidences</title></head>\n<body>\n<h1>Evidences</h1>\n<ul>\n",
        );
        for name in self.files.keys() {
            let name = html_escape(name);
            html.push_str(&format!("<li><a href=\"{name}\">{name}</a></li>\n"));
        }
        html.push_str("</ul>\n</body></html>\n");
        html
    }
}

fn html_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// `sha256sum` output for `files` (two spaces: text mode), in name order.
pub fn sha256sum(files: &BTreeMap<String, EvidenceFile>) -> String {
    files
        .iter()
        .map(|(name, file)| format!("{}  {name}\n", hex::encode(Sha256::digest(&file.bytes))))
        .collect()
}

/// Builds the evidence set for `cert`, with keyservice's quote over its `sha256sum.txt`.
pub async fn build(cert: &IssuedCert, keys: &Keys) -> Result<EvidenceSet, AttestError> {
    build_with_sbom(cert, keys, None).await
}

/// [`build`], listing `sbom` (the image's SBOM) as [`SBOM_FILE`].
pub async fn build_with_sbom(
    cert: &IssuedCert,
    keys: &Keys,
    sbom: Option<&[u8]>,
) -> Result<EvidenceSet, AttestError> {
    let domain = cert
        .domains
        .first()
        .map(String::as_str)
        .unwrap_or("localhost");
    let mut files = BTreeMap::new();
    files.insert(
        format!("cert-{domain}.pem"),
        EvidenceFile {
            bytes: cert.chain_pem.as_bytes().to_vec(),
            content_type: "application/x-pem-file",
        },
    );
    if !cert.account_uri.is_empty() {
        let account = serde_json::json!({ "uri": cert.account_uri });
        files.insert(
            "acme-account.json".into(),
            EvidenceFile {
                bytes: account.to_string().into_bytes(),
                content_type: "application/json",
            },
        );
    }
    if let Some(next) = &cert.next_key_sha256 {
        let announced = serde_json::json!({ "spki_sha256": next });
        files.insert(
            "next-tls-key.json".into(),
            EvidenceFile {
                bytes: announced.to_string().into_bytes(),
                content_type: "application/json",
            },
        );
    }
    if let Some(sbom) = sbom {
        files.insert(
            SBOM_FILE.into(),
            EvidenceFile {
                bytes: sbom.to_vec(),
                content_type: "application/json",
            },
        );
    }
    let sums = sha256sum(&files);
    // keyservice quotes a listing only if the certificate it names carries a key keyservice
    // holds: register the chain (refused for any other key) before asking.
    if let Some(index) = cert.key_index {
        keys.client()
            .tls_register_certificate(index, cert.chain_pem.as_bytes())
            .await?;
    }
    let quote = quote_of(keys.client().evidence_quote(sums.as_bytes()).await?);
    // keyservice computes the report data; check it did so over these very bytes.
    check_report_data(&quote, evidence::report_data_for(sums.as_bytes()))?;
    files.insert(
        "sha256sum.txt".into(),
        EvidenceFile {
            bytes: sums.into_bytes(),
            content_type: "text/plain; charset=utf-8",
        },
    );
    files.insert(
        "quote.json".into(),
        EvidenceFile {
            bytes: quote.evidence_quote_json().to_string().into_bytes(),
            content_type: "application/json",
        },
    );
    Ok(EvidenceSet {
        files,
        registration: cert.key_index.map(|index| (index, cert.chain_pem.clone())),
    })
}

/// The keyservice handle, the current evidence set and the cached `/attestation` and
/// `/info` bodies; cheap to clone.
#[derive(Clone)]
pub struct Attestation {
    keys: Keys,
    current: Arc<RwLock<Arc<EvidenceSet>>>,
    quote: Arc<Cached>,
    info: Arc<Cached>,
    /// The image's SBOM, listed in every evidence set ([`SBOM_FILE`]).
    sbom: Option<Arc<Vec<u8>>>,
}

/// A body fetched from keyservice at most once per `ttl`. The lock is held while
/// fetching, so concurrent requests for an expired body share one keyservice call.
struct Cached {
    ttl: Duration,
    slot: tokio::sync::Mutex<Option<(Instant, serde_json::Value)>>,
}

impl Cached {
    fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            slot: tokio::sync::Mutex::new(None),
        }
    }

    async fn get<F, Fut>(&self, fetch: F) -> Result<serde_json::Value, AttestError>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<serde_json::Value, AttestError>>,
    {
        let mut slot = self.slot.lock().await;
        if let Some((at, body)) = slot.as_ref()
            && at.elapsed() < self.ttl
        {
            return Ok(body.clone());
        }
        // A failure is not cached: the next request asks again.
        let body = fetch().await?;
        if !self.ttl.is_zero() {
            *slot = Some((Instant::now(), body.clone()));
        }
        Ok(body)
    }
}

impl Attestation {
    /// Quotes come from keyservice through `keys`; the `/attestation` quote and the
    /// `/info` body are asked for at most once per `refresh` (0: on every request).
    pub fn new(keys: Keys, refresh: Duration) -> Self {
        Self {
            keys,
            current: Arc::new(RwLock::new(Arc::new(EvidenceSet::default()))),
            quote: Arc::new(Cached::new(refresh)),
            info: Arc::new(Cached::new(refresh)),
            sbom: None,
        }
    }

    /// Lists `sbom` (the image's SBOM, [`read_sbom`]) in every evidence set built from now.
    pub fn with_sbom(mut self, sbom: Option<Arc<Vec<u8>>>) -> Self {
        self.sbom = sbom;
        self
    }

    /// The `/attestation` body: keyservice's quote over 64 zero bytes, at most
    /// `refresh` old (an unauthenticated GET must not cost a hardware quote each time).
    pub async fn attestation_json(&self) -> Result<serde_json::Value, AttestError> {
        self.quote
            .get(|| async {
                let bundle = self.keys.client().attestation_quote().await?;
                Ok(quote_of(bundle).attestation_json())
            })
            .await
    }

    /// The `/info` body: the deployment's identity from keyservice's quote provider,
    /// cached as the quote is.
    pub async fn info_json(&self) -> Result<serde_json::Value, AttestError> {
        self.info
            .get(|| async {
                let info = self.keys.client().attestation_info().await?;
                Ok(info_of(info).info_json())
            })
            .await
    }

    /// A quote made now for `nonce`, over the current evidence set's `sha256sum.txt`:
    /// report data = SHA-256(sha256sum.txt) ‖ nonce. Never cached (each nonce is its
    /// own quote); the HTTP layer rate-limits these per client.
    pub async fn fresh_quote(&self, nonce: [u8; 32]) -> Result<evidence::Quote, AttestError> {
        let set = self.evidence();
        let sums = set
            .files
            .get("sha256sum.txt")
            .ok_or(AttestError::NoEvidenceYet)?;
        // Registering is idempotent and cheap next to a quote; doing it every time keeps
        // fresh quotes working after keyservice restarted and forgot its registrations.
        if let Some((index, chain)) = &set.registration {
            self.keys
                .client()
                .tls_register_certificate(*index, chain.as_bytes())
                .await?;
        }
        let bundle = self
            .keys
            .client()
            .fresh_evidence_quote(&sums.bytes, nonce)
            .await?;
        let quote = quote_of(bundle);
        check_report_data(&quote, evidence::fresh_report_data_for(&sums.bytes, &nonce))?;
        Ok(quote)
    }

    /// The current evidence set.
    pub fn evidence(&self) -> Arc<EvidenceSet> {
        match self.current.read() {
            Ok(set) => Arc::clone(&set),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }

    fn replace(&self, set: EvidenceSet) {
        match self.current.write() {
            Ok(mut current) => *current = Arc::new(set),
            Err(poisoned) => *poisoned.into_inner() = Arc::new(set),
        }
    }

    /// Rebuilds the evidence whenever `certs` publishes a certificate (retrying a
    /// failing provider with backoff); stopped by aborting the task.
    pub fn follow(&self, mut certs: watch::Receiver<Option<Arc<IssuedCert>>>) -> JoinHandle<()> {
        let this = self.clone();
        tokio::spawn(async move {
            // The value present at start counts as a change.
            let mut pending = true;
            loop {
                if !pending && certs.changed().await.is_err() {
                    return;
                }
                pending = false;
                let Some(cert) = certs.borrow_and_update().clone() else {
                    continue;
                };
                let mut backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(60));
                loop {
                    match build_with_sbom(
                        &cert,
                        &this.keys,
                        this.sbom.as_deref().map(Vec::as_slice),
                    )
                    .await
                    {
                        Ok(set) => {
                            this.replace(set);
                            tracing::info!("evidence files rebuilt for the served certificate");
                            break;
                        }
                        Err(err) => {
                            tracing::warn!(error = %err, "cannot build the evidence files; retrying");
                            tokio::select! {
                                () = tokio::time::sleep(backoff.next_delay()) => {}
                                changed = certs.changed() => {
                                    if changed.is_err() {
                                        return;
                                    }
                                    pending = true;
                                    break;
                                }
                            }
                        }
                    }
                }
            }
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    use evidence::SimulatedProvider;
    use keyservice_api::QuoteSource;
    use keyservice_api::codec::{self, FrameHeader};
    use keyservice_api::protocol::{HEADER_LEN, Op, Request, Response};
    use tokio::io::AsyncWriteExt;

    /// A stand-in keyservice answering every request with a simulated quote over the
    /// report data `report` picks for the request (its op and payload); it counts the
    /// requests.
    fn quote_keyservice(
        socket: std::path::PathBuf,
        report: impl Fn(Op, &[u8]) -> [u8; 64] + Send + Sync + 'static,
    ) -> (Keys, Arc<std::sync::atomic::AtomicUsize>) {
        let listener = tokio::net::UnixListener::bind(&socket).unwrap();
        let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let seen = Arc::clone(&count);
        let report = Arc::new(report);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (seen, report) = (Arc::clone(&seen), Arc::clone(&report));
                tokio::spawn(async move {
                    let (rd, mut wr) = stream.into_split();
                    let mut frames = codec::FrameReader::new(rd);
                    while let Ok(Some(body)) = frames.next_frame().await {
                        let header = FrameHeader::parse(&body).unwrap();
                        let op = Op::from_u8(header.op).unwrap();
                        seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        let report_data = report(op, &body[HEADER_LEN..]);
                        let q =
                            SimulatedProvider::new(b"{\"name\":\"t\"}".to_vec()).quote(report_data);
                        let answer = Response::Quote(QuoteBundle {
                            source: QuoteSource::Simulated,
                            quote: q.bytes,
                            event_log: q.event_log_json,
                            vm_config: q.vm_config,
                        });
                        let mut frame = Vec::new();
                        codec::encode_frame(
                            &mut frame,
                            FrameHeader::new(header.op, 0, header.id),
                            |b| answer.encode_payload(b),
                        );
                        wr.write_all(&frame).await.unwrap();
                    }
                });
            }
        });
        (
            Keys::new(&socket, Duration::from_secs(10), Default::default()),
            count,
        )
    }

    /// A stand-in keyservice answering `EvidenceQuote` with a simulated quote over the
    /// report data keyservice would build (`honest`) or over other bytes.
    fn fake_keyservice(dir: &std::path::Path, honest: bool) -> Keys {
        let (keys, _) = quote_keyservice(dir.join("ks.sock"), move |op, payload| {
            let Ok(Request::EvidenceQuote { sums }) = Request::decode(op, payload) else {
                panic!("unexpected request {op:?}");
            };
            if honest {
                evidence::report_data_for(&sums)
            } else {
                [7u8; 64]
            }
        });
        keys
    }

    /// A stand-in keyservice answering `FreshEvidenceQuote` over the report data
    /// keyservice would build (`honest`) or over the unnonced form (a replayed quote).
    fn fresh_keyservice(dir: &std::path::Path, honest: bool) -> Keys {
        let (keys, _) =
            quote_keyservice(
                dir.join("ks-fresh.sock"),
                move |op, payload| match Request::decode(op, payload) {
                    Ok(Request::EvidenceQuote { sums }) => evidence::report_data_for(&sums),
                    Ok(Request::FreshEvidenceQuote { nonce, sums }) if honest => {
                        evidence::fresh_report_data_for(&sums, &nonce)
                    }
                    Ok(Request::FreshEvidenceQuote { sums, .. }) => {
                        evidence::report_data_for(&sums)
                    }
                    _ => panic!("unexpected request {op:?}"),
                },
            );
        keys
    }

    #[tokio::test]
    async fn a_fresh_quote_is_over_the_current_listing_and_the_nonce() {
        let dir = tempfile::tempdir().unwrap();
        let keys = fresh_keyservice(dir.path(), true);
        let attestation = Attestation::new(keys.clone(), Duration::from_secs(60));
        let nonce = [0x5c; 32];
        // Before the first evidence set there is nothing to quote.
        assert!(matches!(
            attestation.fresh_quote(nonce).await,
            Err(AttestError::NoEvidenceYet)
        ));
        let set = build(&cert(), &keys).await.unwrap();
        let sums = set.files["sha256sum.txt"].bytes.clone();
        attestation.replace(set);
        let quote = attestation.fresh_quote(nonce).await.unwrap();
        let body = quote.evidence_quote_json();
        let expected = format!(
            "{}{}",
            hex::encode(Sha256::digest(&sums)),
            hex::encode(nonce)
        );
        assert_eq!(body["report_data"], expected);
        // A keyservice that answers without the nonce (a replay) is refused.
        let sub = dir.path().join("stale");
        std::fs::create_dir(&sub).unwrap();
        let stale = Attestation::new(fresh_keyservice(&sub, false), Duration::ZERO);
        stale.replace(attestation.evidence().as_ref().clone());
        assert!(matches!(
            stale.fresh_quote(nonce).await,
            Err(AttestError::WrongReportData { .. })
        ));
    }

    #[test]
    fn nonces_are_exactly_64_hex_digits() {
        assert_eq!(parse_nonce(&"ab".repeat(32)), Some([0xab; 32]));
        assert_eq!(parse_nonce(&"AB".repeat(32)), Some([0xab; 32]));
        for bad in [
            String::new(),
            "ab".repeat(31),
            "ab".repeat(33),
            format!("0x{}", "ab".repeat(31)),
            format!("{}zz", "ab".repeat(31)),
            "é".repeat(32),
        ] {
            assert_eq!(parse_nonce(&bad), None, "{bad:?}");
        }
    }

    /// A stand-in keyservice answering `AttestationQuote` and counting the requests.
    fn counting_keyservice(dir: &std::path::Path) -> (Keys, Arc<std::sync::atomic::AtomicUsize>) {
        quote_keyservice(dir.join("ks-count.sock"), |op, _| {
            assert!(matches!(op, Op::AttestationQuote), "unexpected {op:?}");
            [0u8; 64]
        })
    }

    #[tokio::test]
    async fn repeated_attestation_requests_within_the_window_ask_keyservice_once() {
        use std::sync::atomic::Ordering;
        let dir = tempfile::tempdir().unwrap();
        let (keys, count) = counting_keyservice(dir.path());
        let cached = Attestation::new(keys.clone(), Duration::from_secs(60));
        let first = cached.attestation_json().await.unwrap();
        for _ in 0..20 {
            assert_eq!(cached.attestation_json().await.unwrap(), first);
        }
        // Concurrent requests on an empty cache share one call too.
        let fresh = Attestation::new(keys.clone(), Duration::from_secs(60));
        let bodies =
            futures_util::future::join_all((0..10).map(|_| fresh.attestation_json())).await;
        assert!(bodies.iter().all(|b| b.is_ok()));
        assert_eq!(count.load(Ordering::SeqCst), 2, "one quote per cache");
        // After the window a new quote is asked for; with 0, every request asks.
        let short = Attestation::new(keys.clone(), Duration::from_millis(50));
        short.attestation_json().await.unwrap();
        tokio::time::sleep(Duration::from_millis(80)).await;
        short.attestation_json().await.unwrap();
        assert_eq!(count.load(Ordering::SeqCst), 4);
        let uncached = Attestation::new(keys, Duration::ZERO);
        uncached.attestation_json().await.unwrap();
        uncached.attestation_json().await.unwrap();
        assert_eq!(count.load(Ordering::SeqCst), 6);
    }

    fn cert() -> IssuedCert {
        IssuedCert {
            domains: vec!["a.test".into()],
            chain_pem: "-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n".into(),
            account_uri: "https://ca.test/acct/1".into(),
            next_key_sha256: Some("ab".repeat(32)),
            key_index: None,
        }
    }

    #[tokio::test]
    async fn evidence_binds_the_checksums_into_the_quote() {
        let dir = tempfile::tempdir().unwrap();
        let keys = fake_keyservice(dir.path(), true);
        let set = build(&cert(), &keys).await.unwrap();
        let names: Vec<&str> = set.files.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            [
                "acme-account.json",
                "cert-a.test.pem",
                "next-tls-key.json",
                "quote.json",
                "sha256sum.txt"
            ]
        );
        let sums = String::from_utf8(set.files["sha256sum.txt"].bytes.clone()).unwrap();
        let expected_cert = hex::encode(Sha256::digest(cert().chain_pem.as_bytes()));
        assert!(
            sums.contains(&format!("{expected_cert}  cert-a.test.pem\n")),
            "{sums}"
        );
        assert_eq!(sums.lines().count(), 3);
        let next: serde_json::Value =
            serde_json::from_slice(&set.files["next-tls-key.json"].bytes).unwrap();
        assert_eq!(next["spki_sha256"], "ab".repeat(32));
        assert!(sums.contains("  next-tls-key.json\n"), "{sums}");
        let account: serde_json::Value =
            serde_json::from_slice(&set.files["acme-account.json"].bytes).unwrap();
        assert_eq!(account["uri"], "https://ca.test/acct/1");
        let quote: serde_json::Value =
            serde_json::from_slice(&set.files["quote.json"].bytes).unwrap();
        let report_data = quote["report_data"].as_str().unwrap();
        let expected = format!(
            "{}{}",
            hex::encode(Sha256::digest(sums.as_bytes())),
            "0".repeat(64)
        );
        assert_eq!(report_data.trim_start_matches("0x"), expected);
        let html = set.index_html();
        for name in names {
            assert!(html.contains(&format!("href=\"{name}\"")), "{html}");
        }
    }

    /// The image's SBOM is one of the files the quoted checksums cover, byte for byte.
    #[tokio::test]
    async fn the_sbom_is_listed_and_covered_by_the_quote() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sbom.json");
        let doc = br#"{"format":"appliance-sbom/1","binaries":[]}"#;
        std::fs::write(&path, doc).unwrap();
        let sbom = read_sbom(&path).unwrap();
        assert!(read_sbom(&dir.path().join("absent.json")).is_none());
        let keys = fake_keyservice(dir.path(), true);
        let set = build_with_sbom(&cert(), &keys, Some(&sbom)).await.unwrap();
        assert_eq!(set.files[SBOM_FILE].bytes, doc);
        assert_eq!(set.files[SBOM_FILE].content_type, "application/json");
        let sums = String::from_utf8(set.files["sha256sum.txt"].bytes.clone()).unwrap();
        let line = format!("{}  {SBOM_FILE}\n", hex::encode(Sha256::digest(doc)));
        assert!(sums.contains(&line), "{sums}");
        let quote: serde_json::Value =
            serde_json::from_slice(&set.files["quote.json"].bytes).unwrap();
        let report_data = quote["report_data"].as_str().unwrap();
        assert!(
            report_data
                .trim_start_matches("0x")
                .starts_with(&hex::encode(Sha256::digest(sums.as_bytes())))
        );
        assert!(set.index_html().contains("href=\"sbom.json\""));
        // Without one, no such file.
        let plain = build(&cert(), &keys).await.unwrap();
        assert!(!plain.files.contains_key(SBOM_FILE));
    }

    #[tokio::test]
    async fn a_quote_over_other_report_data_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let keys = fake_keyservice(dir.path(), false);
        match build(&cert(), &keys).await {
            Err(AttestError::WrongReportData { found, .. }) => {
                assert_eq!(found, "07".repeat(64));
            }
            other => panic!(
                "expected WrongReportData, got {:?}",
                other.map(|s| s.files.len())
            ),
        }
    }
}
