//! The evidence bundle: everything a deployment publishes, as saved responses.
//!
//! Online, [`Bundle::fetch`] collects it from `https://host` (and remembers the TLS leaf
//! certificate the server presented); offline, [`Bundle::load`] reads the same thing from a
//! directory, so a verification can be repeated later or elsewhere. Layout:
//!
//! ```text
//! DIR/info.json                 GET /info
//! DIR/attestation.json          GET /attestation
//! DIR/evidences/sha256sum.txt   GET /evidences/sha256sum.txt
//! DIR/evidences/quote.json      GET /evidences/quote.json?nonce=<nonce.txt> (online fetches)
//! DIR/evidences/acme-account.json
//! DIR/evidences/cert-*.pem      the certificate file linked from GET /evidences/
//! DIR/evidences/…               any other file listed in sha256sum.txt
//! DIR/tls-leaf.der | .pem       optional: the leaf certificate served over TLS
//! DIR/domain.txt                optional: the domain (for the CAA check)
//! DIR/collateral.json           optional: dcap-qvl QuoteCollateralV3 for the quotes
//! DIR/nonce.txt                 optional: the nonce (64 hex) quote.json was fetched with
//! ```
//!
//! An online fetch asks for a fresh evidence quote: it sends a random 32-byte nonce
//! (`/evidences/quote.json?nonce=<hex>`) and keeps it in [`Bundle::nonce`], so the
//! `freshness` check can tell a quote made for it from a replayed one. `/attestation` is
//! fetched in its cached form (one hardware quote per verification is enough: the
//! evidence quote is the one that binds the certificate).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

/// How much an online fetch may read: a hostile deployment cannot make the verifier hold
/// more than this.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Limits {
    /// Largest response or file read into a bundle.
    file: usize,
    /// Most evidence files fetched.
    files: usize,
    /// Most bytes of evidence files fetched in all (each is also at most `file`).
    total: usize,
}

const LIMITS: Limits = Limits {
    file: 16 << 20,
    files: 64,
    total: 64 << 20,
};

/// Why a bundle could not be collected.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BundleError {
    #[error("{path}: {reason}")]
    Io { path: String, reason: String },
    #[error("{url}: {reason}")]
    Http { url: String, reason: String },
    #[error("bad URL {0}: give https://host[:port]")]
    Url(String),
    #[error("CA file {path}: {reason}")]
    Ca { path: String, reason: String },
    /// `--connect` cannot be used with this URL.
    #[error("--connect {addr} with {url}: {reason}")]
    Connect {
        url: String,
        addr: SocketAddr,
        reason: String,
    },
}

/// Saved responses of one deployment.
#[derive(Debug, Clone, Default)]
pub struct Bundle {
    /// `/info` body.
    pub info: Option<serde_json::Value>,
    /// `/attestation` body.
    pub attestation: Option<serde_json::Value>,
    /// Files under `/evidences/`, by name.
    pub evidence_files: BTreeMap<String, Vec<u8>>,
    /// The DER leaf certificate the server presented over TLS.
    pub tls_leaf_der: Option<Vec<u8>>,
    /// The deployment's domain.
    pub domain: Option<String>,
    /// dcap-qvl collateral JSON saved with the bundle.
    pub collateral_json: Option<Vec<u8>>,
    /// The nonce `quote.json` was fetched with (`?nonce=`), if any.
    pub nonce: Option<[u8; 32]>,
}

/// A random 32-byte nonce for `?nonce=` (the system's CSPRNG).
pub fn fresh_nonce() -> Result<[u8; 32], BundleError> {
    use ring::rand::SecureRandom as _;
    let mut nonce = [0u8; 32];
    ring::rand::SystemRandom::new()
        .fill(&mut nonce)
        .map_err(|_| BundleError::Io {
            path: "system random".to_owned(),
            reason: "no random bytes for the nonce".to_owned(),
        })?;
    Ok(nonce)
}

fn read_opt(path: &Path) -> Result<Option<Vec<u8>>, BundleError> {
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(BundleError::Io {
                path: path.display().to_string(),
                reason: e.to_string(),
            });
        }
        Ok(m) if m.len() > LIMITS.file as u64 => {
            return Err(BundleError::Io {
                path: path.display().to_string(),
                reason: format!("larger than {} bytes", LIMITS.file),
            });
        }
        Ok(_) => {}
    }
    std::fs::read(path).map(Some).map_err(|e| BundleError::Io {
        path: path.display().to_string(),
        reason: e.to_string(),
    })
}

fn json_opt(path: &Path) -> Result<Option<serde_json::Value>, BundleError> {
    read_opt(path)?
        .map(|b| {
            serde_json::from_slice(&b).map_err(|e| BundleError::Io {
                path: path.display().to_string(),
                reason: format!("not JSON: {e}"),
            })
        })
        .transpose()
}

/// The certificate file's name among the evidence files (`cert-*.pem`).
pub fn cert_file_name(files: &BTreeMap<String, Vec<u8>>) -> Option<&str> {
    files
        .keys()
        .find(|n| n.starts_with("cert-") && n.ends_with(".pem"))
        .map(String::as_str)
}

/// The first certificate of a PEM file, as DER.
pub fn first_pem_cert(pem: &[u8]) -> Option<Vec<u8>> {
    CertificateDer::pem_slice_iter(pem)
        .next()
        .and_then(Result::ok)
        .map(|c| c.as_ref().to_vec())
}

/// A file name safe to use inside the bundle directory.
fn safe_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 200
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

impl Bundle {
    /// Reads a bundle directory.
    pub fn load(dir: &Path) -> Result<Self, BundleError> {
        if !dir.is_dir() {
            return Err(BundleError::Io {
                path: dir.display().to_string(),
                reason: "not a directory".to_owned(),
            });
        }
        let mut evidence_files = BTreeMap::new();
        let ev = dir.join("evidences");
        if ev.is_dir() {
            let entries = std::fs::read_dir(&ev).map_err(|e| BundleError::Io {
                path: ev.display().to_string(),
                reason: e.to_string(),
            })?;
            for entry in entries.flatten().take(LIMITS.files) {
                let name = entry.file_name().to_string_lossy().into_owned();
                if !safe_name(&name) || !entry.path().is_file() {
                    continue;
                }
                if let Some(b) = read_opt(&entry.path())? {
                    evidence_files.insert(name, b);
                }
            }
        }
        let tls_leaf_der = match read_opt(&dir.join("tls-leaf.der"))? {
            Some(d) => Some(d),
            None => read_opt(&dir.join("tls-leaf.pem"))?.and_then(|p| first_pem_cert(&p)),
        };
        let domain = read_opt(&dir.join("domain.txt"))?
            .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
            .filter(|d| !d.is_empty());
        let nonce = read_opt(&dir.join("nonce.txt"))?.and_then(|b| {
            let text = String::from_utf8_lossy(&b).trim().to_owned();
            let mut n = [0u8; 32];
            hex::decode_to_slice(text, &mut n).ok().map(|()| n)
        });
        Ok(Self {
            nonce,
            info: json_opt(&dir.join("info.json"))?,
            attestation: json_opt(&dir.join("attestation.json"))?,
            evidence_files,
            tls_leaf_der,
            domain,
            collateral_json: read_opt(&dir.join("collateral.json"))?,
        })
    }

    /// Writes the bundle in the layout [`Bundle::load`] reads.
    pub fn save(&self, dir: &Path) -> Result<(), BundleError> {
        let io = |p: &Path| {
            let path = p.display().to_string();
            move |e: std::io::Error| BundleError::Io {
                path,
                reason: e.to_string(),
            }
        };
        let ev = dir.join("evidences");
        std::fs::create_dir_all(&ev).map_err(io(&ev))?;
        let write = |p: &Path, b: &[u8]| std::fs::write(p, b).map_err(io(p));
        if let Some(v) = &self.info {
            write(&dir.join("info.json"), v.to_string().as_bytes())?;
        }
        if let Some(v) = &self.attestation {
            write(&dir.join("attestation.json"), v.to_string().as_bytes())?;
        }
        for (name, bytes) in &self.evidence_files {
            if safe_name(name) {
                write(&ev.join(name), bytes)?;
            }
        }
        if let Some(d) = &self.tls_leaf_der {
            write(&dir.join("tls-leaf.der"), d)?;
        }
        if let Some(d) = &self.domain {
            write(&dir.join("domain.txt"), d.as_bytes())?;
        }
        if let Some(c) = &self.collateral_json {
            write(&dir.join("collateral.json"), c)?;
        }
        if let Some(n) = &self.nonce {
            write(&dir.join("nonce.txt"), hex::encode(n).as_bytes())?;
        }
        Ok(())
    }

    /// Collects a bundle from a running deployment at `base` (`https://host[:port]`),
    /// trusting the public web PKI plus `ca_pem` if given, with a fresh random nonce for
    /// the evidence quote.
    pub async fn fetch(base: &str, ca_pem: Option<&Path>) -> Result<Self, BundleError> {
        Self::fetch_via(base, ca_pem, None).await
    }

    /// As [`Bundle::fetch`], connecting as `connect` says (see [`ConnectTo`]) when given.
    pub async fn fetch_via(
        base: &str,
        ca_pem: Option<&Path>,
        connect: Option<&ConnectTo>,
    ) -> Result<Self, BundleError> {
        let client = http_client_via(ca_pem, connect)?;
        Self::fetch_within(base, &client, LIMITS, Some(fresh_nonce()?)).await
    }

    /// As [`Bundle::fetch`], over `client`, which must have `tls_info(true)` (the served
    /// leaf is part of the evidence) and should not follow redirects: a caller that
    /// restricts which servers it talks to (a pinned client) passes its own.
    pub async fn fetch_using(base: &str, client: &reqwest::Client) -> Result<Self, BundleError> {
        Self::fetch_within(base, client, LIMITS, Some(fresh_nonce()?)).await
    }

    /// As [`Bundle::fetch_using`] with a nonce the caller chose (`None`: the quote in its
    /// cached, unnonced form).
    pub async fn fetch_with_nonce(
        base: &str,
        client: &reqwest::Client,
        nonce: Option<[u8; 32]>,
    ) -> Result<Self, BundleError> {
        Self::fetch_within(base, client, LIMITS, nonce).await
    }

    async fn fetch_within(
        base: &str,
        client: &reqwest::Client,
        limits: Limits,
        nonce: Option<[u8; 32]>,
    ) -> Result<Self, BundleError> {
        let url = reqwest::Url::parse(base).map_err(|_| BundleError::Url(base.to_owned()))?;
        if url.scheme() != "https" {
            return Err(BundleError::Url(base.to_owned()));
        }
        let domain = url
            .host_str()
            .ok_or_else(|| BundleError::Url(base.to_owned()))?
            .to_owned();
        let base = base.trim_end_matches('/');

        // Transport and TLS failures are errors; a missing or non-JSON document is left out
        // so that the checks that need it fail by name.
        let (attestation, leaf) = get(client, limits.file, &format!("{base}/attestation")).await?;
        let (info, _) = get(client, limits.file, &format!("{base}/info")).await?;
        let mut bundle = Bundle {
            info: info.and_then(|b| serde_json::from_slice(&b).ok()),
            attestation: attestation.and_then(|b| serde_json::from_slice(&b).ok()),
            tls_leaf_der: leaf,
            domain: Some(domain),
            nonce,
            ..Default::default()
        };

        let (listing, _) = get(client, limits.file, &format!("{base}/evidences/")).await?;
        let mut names: Vec<String> =
            cert_links(&String::from_utf8_lossy(&listing.unwrap_or_default()));
        for fixed in ["sha256sum.txt", "quote.json", "acme-account.json"] {
            names.push(fixed.to_owned());
        }
        // Also fetch whatever the checksums cover, so each can be checked.
        if let (Some(sums), _) = get(
            client,
            limits.file,
            &format!("{base}/evidences/sha256sum.txt"),
        )
        .await?
        {
            for line in String::from_utf8_lossy(&sums).lines() {
                if let Some((_, file)) = parse_sum_line(line)
                    && !names.iter().any(|n| n == file)
                {
                    names.push(file.to_owned());
                }
            }
        }
        let mut total = 0usize;
        for name in names {
            if bundle.evidence_files.len() >= limits.files {
                break;
            }
            if !safe_name(&name) || bundle.evidence_files.contains_key(&name) {
                continue;
            }
            let url = match (name.as_str(), nonce) {
                ("quote.json", Some(n)) => {
                    format!("{base}/evidences/quote.json?nonce={}", hex::encode(n))
                }
                _ => format!("{base}/evidences/{name}"),
            };
            if let (Some(body), _) = get(client, limits.file, &url).await? {
                total += body.len();
                if total > limits.total {
                    return Err(BundleError::Http {
                        url: format!("{base}/evidences/"),
                        reason: format!("evidence files larger than {} bytes in all", limits.total),
                    });
                }
                bundle.evidence_files.insert(name, body);
            }
        }
        Ok(bundle)
    }
}

/// The evidence file in which a deployment announces the key its next certificate will
/// use: `{"spki_sha256": <hex>}`, the SHA-256 of that key's SubjectPublicKeyInfo DER.
pub const NEXT_KEY_FILE: &str = "next-tls-key.json";

/// SHA-256 of the SubjectPublicKeyInfo DER of certificate `cert_der` (what
/// [`NEXT_KEY_FILE`] announces); `None` for an unparsable certificate.
pub fn spki_sha256(cert_der: &[u8]) -> Option<[u8; 32]> {
    use sha2::Digest as _;
    let (_, cert) = x509_parser::parse_x509_certificate(cert_der).ok()?;
    Some(sha2::Sha256::digest(cert.public_key().raw).into())
}

impl Bundle {
    /// The next certificate key this deployment announces ([`NEXT_KEY_FILE`]), if the
    /// file is there, `sha256sum.txt` covers it and its checksum matches. It means
    /// something only once the report passed: the report-data check is what binds
    /// `sha256sum.txt` to the quote.
    pub fn announced_next_key(&self) -> Option<[u8; 32]> {
        use sha2::Digest as _;
        let file = self.evidence_files.get(NEXT_KEY_FILE)?;
        let sums = self.evidence_files.get("sha256sum.txt")?;
        let hash = hex::encode(sha2::Sha256::digest(file));
        let covered = String::from_utf8_lossy(sums).lines().any(|line| {
            parse_sum_line(line)
                .is_some_and(|(h, name)| name == NEXT_KEY_FILE && h.eq_ignore_ascii_case(&hash))
        });
        if !covered {
            return None;
        }
        let value: serde_json::Value = serde_json::from_slice(file).ok()?;
        let text = value.get("spki_sha256")?.as_str()?;
        let bytes = hex::decode(text).ok()?;
        bytes.try_into().ok()
    }
}

/// `<hex>  <name>` (or `<hex> *<name>`), as sha256sum prints.
pub fn parse_sum_line(line: &str) -> Option<(&str, &str)> {
    let (hash, rest) = line.trim().split_once(char::is_whitespace)?;
    let name = rest.trim_start().trim_start_matches('*');
    let name = name.rsplit('/').next().unwrap_or(name);
    (hash.len() == 64 && !name.is_empty()).then_some((hash, name))
}

/// Names of `cert-*.pem` links in an HTML listing.
pub fn cert_links(html: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(i) = rest.find("cert-") {
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
            .unwrap_or(tail.len());
        let name = &tail[..end];
        if name.ends_with(".pem") && !out.iter().any(|n| n == name) {
            out.push(name.to_owned());
        }
        rest = &tail[5..];
    }
    out
}

/// Where to connect instead of where the URL's host resolves, as curl's `--connect-to`:
/// the TCP connection goes to `addr`, while the URL's host name stays the TLS server name
/// (SNI), the name the certificate must carry, and the `Host` header. For verifying
/// through a TLS-passthrough proxy (dstack-gateway) before DNS points at it, or through
/// one node of several.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectTo {
    /// The URL's host name.
    pub host: String,
    pub addr: SocketAddr,
}

impl ConnectTo {
    /// For URL `base`, whose host must be a name (an IP address has no name to keep)
    /// and whose port, if it names one other than 443, must be `addr`'s (the connection
    /// goes to `addr`'s port; a URL without a port keeps `Host: name`).
    pub fn new(base: &str, addr: SocketAddr) -> Result<Self, BundleError> {
        let url = reqwest::Url::parse(base).map_err(|_| BundleError::Url(base.to_owned()))?;
        let refuse = |reason: String| BundleError::Connect {
            url: base.to_owned(),
            addr,
            reason,
        };
        let Some(host) = url.domain() else {
            return Err(refuse(
                "the URL names an IP address; give the host name it stands for (it stays the TLS server name)".to_owned(),
            ));
        };
        if let Some(port) = url.port()
            && port != addr.port()
        {
            return Err(refuse(format!(
                "the URL names port {port}; give the URL without a port (https://{host}) or with the port of --connect"
            )));
        }
        Ok(Self {
            host: host.to_ascii_lowercase(),
            addr,
        })
    }

    /// `builder` connecting to [`ConnectTo::addr`] for [`ConnectTo::host`].
    pub fn apply(&self, builder: reqwest::ClientBuilder) -> reqwest::ClientBuilder {
        builder.resolve(&self.host, self.addr)
    }
}

/// The HTTP client of the online verifier: rustls (ring), web PKI roots plus an optional CA.
pub fn http_client(ca_pem: Option<&Path>) -> Result<reqwest::Client, BundleError> {
    http_client_via(ca_pem, None)
}

/// [`http_client`], connecting as `connect` says when given.
pub fn http_client_via(
    ca_pem: Option<&Path>,
    connect: Option<&ConnectTo>,
) -> Result<reqwest::Client, BundleError> {
    let mut builder = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_info(true)
        .timeout(Duration::from_secs(30))
        .redirect(reqwest::redirect::Policy::none());
    if let Some(c) = connect {
        builder = c.apply(builder);
    }
    if let Some(path) = ca_pem {
        let ca_err = |reason: String| BundleError::Ca {
            path: path.display().to_string(),
            reason,
        };
        let pem = std::fs::read(path).map_err(|e| ca_err(e.to_string()))?;
        let certs =
            reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| ca_err(e.to_string()))?;
        if certs.is_empty() {
            return Err(ca_err("no certificate in file".to_owned()));
        }
        for c in certs {
            builder = builder.add_root_certificate(c);
        }
    }
    builder.build().map_err(|e| BundleError::Http {
        url: String::new(),
        reason: e.to_string(),
    })
}

/// GET `url`: `None` for a non-2xx answer; the served leaf certificate beside it.
async fn get(
    client: &reqwest::Client,
    max: usize,
    url: &str,
) -> Result<(Option<Vec<u8>>, Option<Vec<u8>>), BundleError> {
    let err = |reason: String| BundleError::Http {
        url: url.to_owned(),
        reason,
    };
    let resp = client
        .get(url)
        .send()
        .await
        .map_err(|e| err(format!("{e:#}")))?;
    let leaf = resp
        .extensions()
        .get::<reqwest::tls::TlsInfo>()
        .and_then(|t| t.peer_certificate())
        .map(<[u8]>::to_vec);
    if resp.status() == reqwest::StatusCode::TOO_MANY_REQUESTS {
        // Not missing evidence: the deployment asks us to come back later.
        let retry = resp
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("?")
            .to_owned();
        return Err(err(format!(
            "429 Too Many Requests (rate-limited; retry after {retry} s)"
        )));
    }
    if !resp.status().is_success() {
        tracing::warn!(url, status = %resp.status(), "evidence document not served");
        return Ok((None, leaf));
    }
    let body = read_limited(resp, max)
        .await
        .map_err(|e| err(e.to_string()))?;
    Ok((Some(body), leaf))
}

/// Why [`read_limited`] stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    #[error("response larger than {0} bytes")]
    TooLarge(usize),
    #[error("{0}")]
    Transport(String),
}

/// Reads a response body of at most `max` bytes. A larger one is refused as soon as its
/// `content-length`, or the chunks received so far, pass `max`: a hostile server cannot
/// make the reader hold more than `max` bytes plus one chunk.
pub async fn read_limited(mut resp: reqwest::Response, max: usize) -> Result<Vec<u8>, ReadError> {
    if resp.content_length().is_some_and(|n| n > max as u64) {
        return Err(ReadError::TooLarge(max));
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| ReadError::Transport(e.to_string()))?
    {
        if body.len() + chunk.len() > max {
            return Err(ReadError::TooLarge(max));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cert_links_are_found_once_each() {
        let html = r#"<a href="cert-keys.example.com.pem">cert-keys.example.com.pem</a>
            <a href="sha256sum.txt">x</a><a href="/evidences/cert-2.pem">"#;
        assert_eq!(
            cert_links(html),
            vec![
                "cert-keys.example.com.pem".to_owned(),
                "cert-2.pem".to_owned()
            ]
        );
        assert!(cert_links("certificate.pem cert-.txt").is_empty());
    }

    #[test]
    fn sha256sum_lines_in_both_modes() {
        let h = "a".repeat(64);
        assert_eq!(
            parse_sum_line(&format!("{h}  quote.json")),
            Some((h.as_str(), "quote.json"))
        );
        assert_eq!(
            parse_sum_line(&format!("{h} *./evidences/cert-x.pem")),
            Some((h.as_str(), "cert-x.pem"))
        );
        assert_eq!(parse_sum_line("abc  file"), None);
        assert_eq!(parse_sum_line(""), None);
    }

    /// A plain-HTTP server that answers one request with an endless chunked body.
    async fn endless_chunked_server() -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut tcp, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 4096];
            let _ = tcp.read(&mut buf).await;
            let head = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n";
            if tcp.write_all(head).await.is_err() {
                return;
            }
            let chunk = format!("10000\r\n{}\r\n", "x".repeat(0x10000));
            // Stops when the reader hangs up.
            while tcp.write_all(chunk.as_bytes()).await.is_ok() {}
        });
        format!("http://{addr}/")
    }

    #[tokio::test]
    async fn an_endless_chunked_body_is_cut_at_the_bound() {
        let url = endless_chunked_server().await;
        let resp = reqwest::get(&url).await.unwrap();
        assert!(resp.content_length().is_none(), "no length announced");
        match read_limited(resp, 1 << 20).await {
            Err(ReadError::TooLarge(max)) => assert_eq!(max, 1 << 20),
            other => panic!("expected TooLarge, got {other:?}"),
        }
    }

    /// A TLS server for `localhost` that serves `/evidences/sha256sum.txt` naming five
    /// files of `size` bytes each, and those files (one request per connection).
    async fn evidence_server(size: usize, dir: &Path) -> (String, std::path::PathBuf) {
        use tokio::io::AsyncWriteExt;
        let server = test_support::tls::self_signed("localhost");
        let ca = dir.join("ca.pem");
        std::fs::write(&ca, &server.pem).unwrap();
        let acceptor = server.acceptor;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let names = ["a.bin", "b.bin", "c.bin", "d.bin", "e.bin"];
        let sums: String = names
            .iter()
            .map(|n| format!("{}  {n}\n", "0".repeat(64)))
            .collect();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                let sums = sums.clone();
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let Some(head) = test_support::tls::read_request_head(&mut tls).await else {
                        return;
                    };
                    let line = String::from_utf8_lossy(&head);
                    let path = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
                    let body = match path.as_str() {
                        "/evidences/sha256sum.txt" => Some(sums.into_bytes()),
                        p if p.ends_with(".bin") => Some(vec![b'x'; size]),
                        _ => None,
                    };
                    let answer = match body {
                        Some(b) => {
                            let mut a = format!(
                                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                                b.len()
                            )
                            .into_bytes();
                            a.extend_from_slice(&b);
                            a
                        }
                        None => b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_vec(),
                    };
                    let _ = tls.write_all(&answer).await;
                    let _ = tls.shutdown().await;
                });
            }
        });
        (format!("https://localhost:{port}"), ca)
    }

    /// Five files, each within the per-file bound, but more than the total bound in all:
    /// the fetch stops with an error instead of holding them all.
    #[tokio::test]
    async fn evidence_files_are_bounded_in_all() {
        assert_eq!(LIMITS.total, 64 << 20, "the documented bound");
        let dir = tempfile::tempdir().unwrap();
        let (base, ca) = evidence_server(900, dir.path()).await;
        let tight = Limits {
            file: 1000,
            files: 64,
            total: 2500,
        };
        match Bundle::fetch_within(&base, &http_client(Some(&ca)).unwrap(), tight, None).await {
            Err(BundleError::Http { reason, .. }) => {
                assert!(reason.contains("2500 bytes in all"), "{reason}");
            }
            other => panic!("expected the total bound, got {other:?}"),
        }
        // Within the bounds, the same server's files are all collected.
        let roomy = Limits {
            total: 10_000,
            ..tight
        };
        let bundle = Bundle::fetch_within(&base, &http_client(Some(&ca)).unwrap(), roomy, None)
            .await
            .unwrap();
        assert_eq!(
            bundle.evidence_files.len(),
            6,
            "{:?}",
            bundle.evidence_files.keys()
        );
        // And one file over the per-file bound is refused on its own.
        let small_files = Limits { file: 800, ..roomy };
        let err = Bundle::fetch_within(&base, &http_client(Some(&ca)).unwrap(), small_files, None)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("larger than 800 bytes"), "{err}");
    }

    #[test]
    fn a_next_key_counts_only_when_the_checksums_cover_it() {
        use sha2::Digest as _;
        let announced = serde_json::json!({ "spki_sha256": "cd".repeat(32) }).to_string();
        let sum = hex::encode(sha2::Sha256::digest(announced.as_bytes()));
        let with = |sums: String| {
            let mut b = Bundle::default();
            b.evidence_files
                .insert(NEXT_KEY_FILE.into(), announced.clone().into_bytes());
            b.evidence_files
                .insert("sha256sum.txt".into(), sums.into_bytes());
            b
        };
        let good = with(format!("{sum}  {NEXT_KEY_FILE}\n"));
        assert_eq!(good.announced_next_key(), Some([0xcd; 32]));
        // Not covered, or covered with another checksum: no announcement.
        assert_eq!(with(String::new()).announced_next_key(), None);
        let other = "0".repeat(64);
        assert_eq!(
            with(format!("{other}  {NEXT_KEY_FILE}\n")).announced_next_key(),
            None
        );
        assert_eq!(Bundle::default().announced_next_key(), None);
    }

    #[test]
    fn the_spki_hash_is_over_the_certificates_key() {
        use rcgen::PublicKeyData as _;
        use sha2::Digest as _;
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["a.test".to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let expected: [u8; 32] = sha2::Sha256::digest(key.subject_public_key_info()).into();
        assert_eq!(spki_sha256(cert.der()), Some(expected));
        assert_eq!(spki_sha256(b"not a certificate"), None);
    }

    #[test]
    fn only_plain_file_names_enter_a_bundle() {
        assert!(safe_name("cert-a.example.pem"));
        for bad in ["", "../x", ".hidden", "a/b", "a b"] {
            assert!(!safe_name(bad), "{bad:?}");
        }
    }
}
