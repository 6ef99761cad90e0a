//! The dstack platform: the guest agent on its Unix socket (default `/var/run/dstack.sock`)
//! speaks HTTP/1.1 + JSON (documented in github.com/Dstack-TEE/dstack, `sdk/curl/api.md`):
//!
//! * `POST /Info` `{}` → `{"app_id", "instance_id", "compose_hash", "tcb_info", …}` where
//!   `tcb_info` is a string holding JSON with `compose_hash`, `app_compose`, the MRs and the
//!   event log. We take the compose hash from there, require every place it appears to
//!   agree and, when `app_compose` is present, require `sha256(app_compose)` to equal it.
//! * `POST /GetKey` `{"path", "purpose"}` → `{"key": hex, "signature_chain": [hex, …]}`.
//!   We ask for path `keyservice/seal/v1/<compose-hash-hex>`, purpose
//!   `keyservice-root-sealing`, and never use the returned key directly:
//!   sealing key = HKDF-SHA256(salt = "keyservice/v1/dstack-seal", IKM = key bytes,
//!   info = "keyservice/v1/seal-key" ‖ 0x00 ‖ compose hash).
//!
//! The agent's keys come from the dstack KMS, which releases an app's key only to
//! instances whose compose hash the app's governance contract allows; the compose hash in
//! the path makes each version's sealing key distinct.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use keyservice_api::{ComposeHash, PlatformKind};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use zeroize::Zeroizing;

use super::{Platform, PlatformError, derive_sealing_key};
use crate::secret::SealingKey;

/// Where the guest agent listens unless told otherwise.
pub const DEFAULT_AGENT_SOCKET: &str = "/var/run/dstack.sock";
/// HKDF salt of the dstack sealing key.
pub const DSTACK_SEAL_SALT: &[u8] = b"keyservice/v1/dstack-seal";
/// `purpose` sent with `GetKey`.
pub const GETKEY_PURPOSE: &str = "keyservice-root-sealing";
/// Largest agent response we read.
const MAX_RESPONSE: usize = 4 * 1024 * 1024;

/// The `GetKey` path for a compose hash.
pub fn seal_key_path(compose_hash: &ComposeHash) -> String {
    format!(
        "keyservice/seal/v1/{}",
        hex::encode(compose_hash.as_bytes())
    )
}

pub struct DstackPlatform {
    socket: PathBuf,
    timeout: Duration,
}

impl DstackPlatform {
    pub fn new(socket: impl Into<PathBuf>) -> Self {
        Self {
            socket: socket.into(),
            timeout: Duration::from_secs(10),
        }
    }

    fn err(&self, reason: impl Into<String>) -> PlatformError {
        PlatformError::Agent {
            socket: self.socket.clone(),
            reason: reason.into(),
        }
    }

    /// One `POST <path>` with a JSON body; returns the response body of a 200.
    fn post(&self, path: &'static str, json: &str) -> Result<Zeroizing<Vec<u8>>, PlatformError> {
        let mut stream = UnixStream::connect(&self.socket)
            .map_err(|e| self.err(format!("cannot connect: {e}")))?;
        stream
            .set_read_timeout(Some(self.timeout))
            .and_then(|()| stream.set_write_timeout(Some(self.timeout)))
            .map_err(|e| self.err(e.to_string()))?;
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: dstack\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{json}",
            json.len()
        );
        stream
            .write_all(request.as_bytes())
            .map_err(|e| self.err(format!("write {path}: {e}")))?;
        let mut raw = Zeroizing::new(Vec::new());
        stream
            .take(MAX_RESPONSE as u64 + 1)
            .read_to_end(&mut raw)
            .map_err(|e| self.err(format!("read {path}: {e}")))?;
        if raw.len() > MAX_RESPONSE {
            return Err(self.err(format!("{path}: response larger than {MAX_RESPONSE} bytes")));
        }
        let (status, body) =
            parse_http_response(&raw).map_err(|source| PlatformError::AgentHttp {
                socket: self.socket.clone(),
                path,
                source,
            })?;
        if status != 200 {
            // Error bodies are `{"error": "..."}`; they carry no key material.
            let text = String::from_utf8_lossy(&body);
            let snippet: String = text.chars().take(200).collect();
            return Err(self.err(format!("{path}: HTTP {status}: {snippet}")));
        }
        Ok(body)
    }
}

#[derive(Deserialize)]
struct InfoResponse {
    #[serde(default)]
    compose_hash: Option<String>,
    #[serde(default)]
    tcb_info: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct TcbInfo {
    #[serde(default)]
    compose_hash: Option<String>,
    #[serde(default)]
    app_compose: Option<String>,
}

#[derive(Deserialize)]
struct GetKeyResponse {
    key: String,
}

/// Why an `Info` answer gives no single compose hash.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InfoError {
    #[error("Info is not the expected JSON: {0}")]
    Json(#[source] serde_json::Error),
    /// `tcb_info` is a string that does not hold JSON.
    #[error("Info.tcb_info is not JSON: {0}")]
    TcbInfoText(#[source] serde_json::Error),
    /// `tcb_info` is an object of the wrong shape.
    #[error("Info.tcb_info: {0}")]
    TcbInfo(#[source] serde_json::Error),
    /// A compose hash field that is not 32 bytes of hex.
    #[error("{field}: {source}")]
    BadHash {
        field: &'static str,
        #[source]
        source: keyservice_api::ParseError,
    },
    #[error("Info carries no compose hash")]
    NoHash,
    #[error("Info disagrees with itself: {first_field} says {first}, {other_field} says {other}")]
    Disagrees {
        first_field: &'static str,
        first: ComposeHash,
        other_field: &'static str,
        other: ComposeHash,
    },
}

/// Why the guest agent's answer is not a usable HTTP/1.x response.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HttpError {
    #[error("no end of HTTP headers")]
    NoHeaderEnd,
    #[error("HTTP headers are not UTF-8")]
    HeadersNotUtf8,
    #[error("empty HTTP response")]
    Empty,
    /// `status_line`: the first 40 characters of the response's first line.
    #[error("not an HTTP/1.x response: {status_line}")]
    NotHttp1 { status_line: String },
    #[error("bad HTTP status line")]
    BadStatusLine,
    #[error("bad Content-Length")]
    BadContentLength,
    #[error("HTTP body shorter than Content-Length")]
    ShortBody,
    #[error("truncated chunk size")]
    TruncatedChunkSize,
    #[error("bad chunk size")]
    BadChunkSize,
    #[error("truncated chunk")]
    TruncatedChunk,
}

/// Extracts and cross-checks the compose hash of an `Info` response body.
pub fn compose_hash_from_info(body: &[u8]) -> Result<ComposeHash, InfoError> {
    let info: InfoResponse = serde_json::from_slice(body).map_err(InfoError::Json)?;
    let tcb: Option<TcbInfo> = match info.tcb_info {
        Some(serde_json::Value::String(s)) if !s.is_empty() => {
            Some(serde_json::from_str(&s).map_err(InfoError::TcbInfoText)?)
        }
        Some(v @ serde_json::Value::Object(_)) => {
            Some(serde_json::from_value(v).map_err(InfoError::TcbInfo)?)
        }
        _ => None,
    };
    let hash = |field: &'static str, text: &str| {
        text.parse::<ComposeHash>()
            .map_err(|source| InfoError::BadHash { field, source })
    };
    let mut found: Vec<(&'static str, ComposeHash)> = Vec::new();
    if let Some(h) = info.compose_hash.as_deref().filter(|s| !s.is_empty()) {
        found.push(("Info.compose_hash", hash("Info.compose_hash", h)?));
    }
    if let Some(t) = &tcb {
        if let Some(h) = t.compose_hash.as_deref().filter(|s| !s.is_empty()) {
            found.push(("tcb_info.compose_hash", hash("tcb_info.compose_hash", h)?));
        }
        if let Some(app_compose) = &t.app_compose {
            found.push((
                "sha256(tcb_info.app_compose)",
                ComposeHash(Sha256::digest(app_compose.as_bytes()).into()),
            ));
        }
    }
    let Some(&(first_field, first)) = found.first() else {
        return Err(InfoError::NoHash);
    };
    if let Some(&(other_field, other)) = found.iter().find(|(_, h)| *h != first) {
        return Err(InfoError::Disagrees {
            first_field,
            first,
            other_field,
            other,
        });
    }
    Ok(first)
}

impl Platform for DstackPlatform {
    fn kind(&self) -> PlatformKind {
        PlatformKind::Dstack
    }

    fn measured_compose_hash(&self) -> Result<ComposeHash, PlatformError> {
        let body = self.post("/Info", "{}")?;
        compose_hash_from_info(&body).map_err(|source| PlatformError::AgentInfo {
            socket: self.socket.clone(),
            source: Box::new(source),
        })
    }

    fn sealing_key(&self, compose_hash: &ComposeHash) -> Result<SealingKey, PlatformError> {
        let request = serde_json::json!({
            "path": seal_key_path(compose_hash),
            "purpose": GETKEY_PURPOSE,
        })
        .to_string();
        let body = self.post("/GetKey", &request)?;
        let parsed: GetKeyResponse = serde_json::from_slice(&body)
            .map_err(|_| self.err("GetKey answer is not the expected JSON"))?;
        let key_hex = Zeroizing::new(parsed.key);
        let raw = key_hex.trim();
        let raw = raw.strip_prefix("0x").unwrap_or(raw);
        let key = Zeroizing::new(
            hex::decode(raw).map_err(|_| self.err("GetKey returned a key that is not hex"))?,
        );
        if key.len() < 16 {
            return Err(self.err(format!(
                "GetKey returned a {}-byte key; at least 16 are required",
                key.len()
            )));
        }
        derive_sealing_key(DSTACK_SEAL_SALT, &key, compose_hash)
    }
}

/// Splits a complete HTTP/1.1 response into status and body (content-length, chunked, or
/// read-to-close framing).
fn parse_http_response(raw: &[u8]) -> Result<(u16, Zeroizing<Vec<u8>>), HttpError> {
    let head_end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or(HttpError::NoHeaderEnd)?;
    let head = std::str::from_utf8(&raw[..head_end]).map_err(|_| HttpError::HeadersNotUtf8)?;
    let rest = &raw[head_end + 4..];
    let mut lines = head.split("\r\n");
    let status_line = lines.next().ok_or(HttpError::Empty)?;
    let mut parts = status_line.split_whitespace();
    let version = parts.next().unwrap_or_default();
    if !version.starts_with("HTTP/1.") {
        return Err(HttpError::NotHttp1 {
            status_line: status_line.chars().take(40).collect(),
        });
    }
    let status: u16 = parts
        .next()
        .and_then(|s| s.parse().ok())
        .ok_or(HttpError::BadStatusLine)?;
    let mut content_length = None;
    let mut chunked = false;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            content_length = Some(
                value
                    .parse::<usize>()
                    .map_err(|_| HttpError::BadContentLength)?,
            );
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value.to_ascii_lowercase().contains("chunked");
        }
    }
    let body = if chunked {
        decode_chunked(rest)?
    } else if let Some(n) = content_length {
        if rest.len() < n {
            return Err(HttpError::ShortBody);
        }
        Zeroizing::new(rest[..n].to_vec())
    } else {
        Zeroizing::new(rest.to_vec())
    };
    Ok((status, body))
}

fn decode_chunked(mut data: &[u8]) -> Result<Zeroizing<Vec<u8>>, HttpError> {
    let mut out = Zeroizing::new(Vec::new());
    loop {
        let line_end = data
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or(HttpError::TruncatedChunkSize)?;
        let size_text =
            std::str::from_utf8(&data[..line_end]).map_err(|_| HttpError::BadChunkSize)?;
        let size_hex = size_text.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_hex, 16).map_err(|_| HttpError::BadChunkSize)?;
        data = &data[line_end + 2..];
        if size == 0 {
            return Ok(out);
        }
        if data.len() < size + 2 {
            return Err(HttpError::TruncatedChunk);
        }
        out.extend_from_slice(&data[..size]);
        data = &data[size + 2..];
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn http_framings() {
        let (s, b) =
            parse_http_response(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}extra").unwrap();
        assert_eq!((s, &b[..]), (200, &b"{}"[..]));
        let (s, b) = parse_http_response(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{\"a\r\n4;x=y\r\n\":1}\r\n0\r\n\r\n",
        )
        .unwrap();
        assert_eq!((s, &b[..]), (200, &b"{\"a\":1}"[..]));
        let (s, _) = parse_http_response(b"HTTP/1.0 500 Oops\r\n\r\nboom").unwrap();
        assert_eq!(s, 500);
        assert_eq!(
            parse_http_response(b"garbage").err(),
            Some(HttpError::NoHeaderEnd)
        );
        assert_eq!(
            parse_http_response(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n{}").err(),
            Some(HttpError::ShortBody)
        );
        assert_eq!(
            parse_http_response(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{}")
                .err(),
            Some(HttpError::TruncatedChunk)
        );
        // The status line is shown cut to 40 characters.
        let long = format!("SPDY/3 {}\r\n\r\n", "x".repeat(100));
        let err = parse_http_response(long.as_bytes()).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("not an HTTP/1.x response: SPDY/3 {}", "x".repeat(33))
        );
    }

    #[test]
    fn info_from_the_real_vector() {
        // tcb_info of a real dstack deployment (github.com/near/mpc, `crates/test-utils/assets/`
        // at commit b0b6b716, MIT); its compose hash is sha256(app_compose).
        let tcb = include_str!("../../tests/data/dstack-tcb-info.json");
        let body = serde_json::json!({ "app_id": "ab", "tcb_info": tcb }).to_string();
        let h = compose_hash_from_info(body.as_bytes()).unwrap();
        assert_eq!(
            hex::encode(h.as_bytes()),
            "2911e1f733466216dedb862d6d669e11256ee7a34ce4dbc66c4b807ba7a9c895"
        );
        let wrong = serde_json::json!({ "compose_hash": "00".repeat(32), "tcb_info": tcb });
        let err = compose_hash_from_info(wrong.to_string().as_bytes()).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "Info disagrees with itself: Info.compose_hash says 0x{}, tcb_info.compose_hash says 0x{}",
                "00".repeat(32),
                hex::encode(h.as_bytes())
            )
        );
        assert!(matches!(
            compose_hash_from_info(b"{}"),
            Err(InfoError::NoHash)
        ));
        assert!(matches!(
            compose_hash_from_info(br#"{"compose_hash": "12"}"#),
            Err(InfoError::BadHash {
                field: "Info.compose_hash",
                ..
            })
        ));
    }
}
