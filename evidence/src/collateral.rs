//! Collateral for DCAP verification: Intel's TCB info, QE identity, CRLs and issuer chains,
//! read from a file (dcap-qvl's `QuoteCollateralV3` JSON) or fetched from a PCCS.
//!
//! The PCCS client is ours rather than dcap-qvl's `report` feature, so the tree keeps one
//! reqwest and rustls on ring. It speaks the PCCS v4 API: `pckcrl`, `tdx/…/tcb`,
//! `tdx/…/qe/identity` and `rootcacrl`. The signed JSON bodies (`tcbInfo`,
//! `enclaveIdentity`) are kept byte for byte, since their signatures cover those bytes.

use std::path::Path;

use dcap_qvl::QuoteCollateralV3;
use serde::Deserialize;
use serde_json::value::RawValue;

/// Why collateral could not be had.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CollateralError {
    #[error("collateral file {path}: {reason}")]
    File { path: String, reason: String },
    #[error("quote: {0}")]
    Quote(String),
    #[error("PCCS {url}: {reason}")]
    Pccs { url: String, reason: String },
}

/// Where collateral comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CollateralSource {
    /// A dcap-qvl `QuoteCollateralV3` JSON file.
    File(std::path::PathBuf),
    /// A PCCS base URL (e.g. `https://pccs.example:8081`).
    Pccs(String),
}

/// Parses dcap-qvl's collateral JSON.
pub fn parse(json: &[u8]) -> Result<QuoteCollateralV3, serde_json::Error> {
    serde_json::from_slice(json)
}

/// Reads a collateral file.
pub fn load_file(path: &Path) -> Result<QuoteCollateralV3, CollateralError> {
    let bytes = std::fs::read(path).map_err(|e| CollateralError::File {
        path: path.display().to_string(),
        reason: e.to_string(),
    })?;
    parse(&bytes).map_err(|e| CollateralError::File {
        path: path.display().to_string(),
        reason: e.to_string(),
    })
}

/// Resolves a source for `quote`.
pub async fn obtain(
    source: &CollateralSource,
    quote: &[u8],
    http: &reqwest::Client,
) -> Result<QuoteCollateralV3, CollateralError> {
    match source {
        CollateralSource::File(p) => load_file(p),
        CollateralSource::Pccs(url) => fetch_from_pccs(url, quote, http).await,
    }
}

#[derive(Deserialize)]
struct TcbInfoResponse<'a> {
    #[serde(rename = "tcbInfo", borrow)]
    tcb_info: &'a RawValue,
    signature: String,
}

#[derive(Deserialize)]
struct QeIdentityResponse<'a> {
    #[serde(rename = "enclaveIdentity", borrow)]
    enclave_identity: &'a RawValue,
    signature: String,
}

/// Fetches the collateral of a TDX quote from a PCCS.
pub async fn fetch_from_pccs(
    base: &str,
    quote: &[u8],
    http: &reqwest::Client,
) -> Result<QuoteCollateralV3, CollateralError> {
    let parsed =
        dcap_qvl::quote::Quote::parse(quote).map_err(|e| CollateralError::Quote(e.to_string()))?;
    let chain = dcap_qvl::intel::extract_cert_chain(&parsed)
        .map_err(|e| CollateralError::Quote(format!("PCK chain: {e}")))?;
    let leaf = chain
        .first()
        .ok_or_else(|| CollateralError::Quote("empty PCK chain".to_owned()))?;
    let fmspc = dcap_qvl::intel::quote_fmspc(&parsed)
        .map_err(|e| CollateralError::Quote(format!("FMSPC: {e}")))?;
    let ca = dcap_qvl::intel::pck_ca(leaf)
        .map(|c| c.as_id_str())
        .unwrap_or("processor");
    let pck_chain_pem = String::from_utf8_lossy(
        parsed
            .raw_cert_chain()
            .map_err(|e| CollateralError::Quote(e.to_string()))?,
    )
    .into_owned();

    let base = base.trim_end_matches('/');
    let fmspc = hex::encode_upper(fmspc);
    let get = |url: String| async move {
        let err = |reason: String| CollateralError::Pccs {
            url: url.clone(),
            reason,
        };
        let resp = http
            .get(&url)
            .send()
            .await
            .map_err(|e| err(e.to_string()))?;
        if !resp.status().is_success() {
            return Err(err(format!("HTTP {}", resp.status())));
        }
        let headers = resp.headers().clone();
        let body = resp.bytes().await.map_err(|e| err(e.to_string()))?;
        Ok::<_, CollateralError>((headers, body, url))
    };
    let header = |h: &reqwest::header::HeaderMap, names: &[&str], url: &str| {
        names
            .iter()
            .find_map(|n| h.get(*n))
            .and_then(|v| v.to_str().ok())
            .map(percent_decode)
            .ok_or_else(|| CollateralError::Pccs {
                url: url.to_owned(),
                reason: format!("missing header {}", names.join(" / ")),
            })
    };

    let (h, pck_crl, url) = get(format!(
        "{base}/sgx/certification/v4/pckcrl?ca={ca}&encoding=der"
    ))
    .await?;
    let pck_crl_issuer_chain = header(&h, &["SGX-PCK-CRL-Issuer-Chain"], &url)?;

    let (h, body, url) = get(format!("{base}/tdx/certification/v4/tcb?fmspc={fmspc}")).await?;
    let tcb_info_issuer_chain = header(
        &h,
        &["TCB-Info-Issuer-Chain", "SGX-TCB-Info-Issuer-Chain"],
        &url,
    )?;
    let tcb: TcbInfoResponse<'_> =
        serde_json::from_slice(&body).map_err(|e| CollateralError::Pccs {
            url: url.clone(),
            reason: e.to_string(),
        })?;
    let tcb_info = tcb.tcb_info.get().to_owned();
    let tcb_info_signature = hex::decode(&tcb.signature).map_err(|e| CollateralError::Pccs {
        url: url.clone(),
        reason: format!("signature: {e}"),
    })?;

    let (h, body, url) = get(format!("{base}/tdx/certification/v4/qe/identity")).await?;
    let qe_identity_issuer_chain = header(&h, &["SGX-Enclave-Identity-Issuer-Chain"], &url)?;
    let qe: QeIdentityResponse<'_> =
        serde_json::from_slice(&body).map_err(|e| CollateralError::Pccs {
            url: url.clone(),
            reason: e.to_string(),
        })?;
    let qe_identity = qe.enclave_identity.get().to_owned();
    let qe_identity_signature = hex::decode(&qe.signature).map_err(|e| CollateralError::Pccs {
        url: url.clone(),
        reason: format!("signature: {e}"),
    })?;

    let (_, body, _) = get(format!("{base}/sgx/certification/v4/rootcacrl")).await?;
    // A PCCS answers with hex; Intel's PCS with DER.
    let root_ca_crl = std::str::from_utf8(&body)
        .ok()
        .and_then(|s| hex::decode(s.trim()).ok())
        .unwrap_or_else(|| body.to_vec());

    Ok(QuoteCollateralV3 {
        pck_crl_issuer_chain,
        root_ca_crl,
        pck_crl: pck_crl.to_vec(),
        tcb_info_issuer_chain,
        tcb_info,
        tcb_info_signature,
        qe_identity_issuer_chain,
        qe_identity,
        qe_identity_signature,
        pck_certificate_chain: Some(pck_chain_pem),
    })
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && let Some(hex) = b.get(i + 1..i + 3)
            && let Ok(v) = u8::from_str_radix(std::str::from_utf8(hex).unwrap_or("zz"), 16)
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::percent_decode;

    #[test]
    fn issuer_chain_headers_are_percent_decoded() {
        assert_eq!(
            percent_decode("-----BEGIN%20CERTIFICATE-----%0AMII%2B"),
            "-----BEGIN CERTIFICATE-----\nMII+"
        );
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
    }
}
