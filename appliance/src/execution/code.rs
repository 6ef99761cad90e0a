//! The code of an execution: inline code (checked against `ipfs_id` when both are
//! given), code the service keeps by CID, or the configured IPFS gateway, whose answer
//! counts only if it hashes to the CID asked for.

use std::time::Duration;

use super::{ExecContext, ExecError};
use crate::cid;

/// An IPFS gateway to fetch code from by CID.
#[derive(Clone)]
pub struct Gateway {
    base: String,
    client: reqwest::Client,
}

/// Why the gateway gave no usable code.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error("the IPFS gateway failed: {0}")]
    Failed(String),
    #[error("the code for {cid} is over {max_bytes} bytes")]
    TooLarge { cid: String, max_bytes: usize },
    #[error("the gateway's content for {0} does not hash to that CID")]
    WrongContent(String),
    #[error("the code for {0} is not UTF-8")]
    NotUtf8(String),
}

impl Gateway {
    pub fn new(url: &str) -> Result<Self, String> {
        Ok(Self {
            base: url.trim_end_matches('/').to_owned(),
            client: reqwest::Client::builder()
                .use_rustls_tls()
                .timeout(Duration::from_secs(20))
                .build()
                .map_err(|e| e.to_string())?,
        })
    }

    /// The content of `cid`, if the gateway has it and it hashes to that CID.
    pub async fn fetch(&self, cid: &str, max_bytes: usize) -> Result<Option<String>, GatewayError> {
        let failed = |e: reqwest::Error| GatewayError::Failed(e.without_url().to_string());
        let mut resp = self
            .client
            .get(format!("{}/ipfs/{cid}", self.base))
            .send()
            .await
            .map_err(failed)?;
        if resp.status() == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !resp.status().is_success() {
            return Err(GatewayError::Failed(format!("status {}", resp.status())));
        }
        let mut body = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(failed)? {
            if body.len() + chunk.len() > max_bytes {
                return Err(GatewayError::TooLarge {
                    cid: cid.to_owned(),
                    max_bytes,
                });
            }
            body.extend_from_slice(&chunk);
        }
        if cid::cid_v0(&body) != cid {
            return Err(GatewayError::WrongContent(cid.to_owned()));
        }
        String::from_utf8(body)
            .map(Some)
            .map_err(|_| GatewayError::NotUtf8(cid.to_owned()))
    }
}

/// The code to run and its CID, from inline code and/or a CID.
pub(super) async fn resolve(
    ctx: &ExecContext<'_>,
    code: Option<String>,
    ipfs_id: Option<String>,
) -> Result<(String, String), ExecError> {
    let limits = ctx.limits;
    match (code, ipfs_id) {
        (Some(code), ipfs_id) => {
            if code.len() > limits.max_code_bytes {
                return Err(ExecError::CodeTooLarge {
                    limit: limits.max_code_bytes,
                });
            }
            let computed = cid::cid_v0(code.as_bytes());
            if let Some(given) = ipfs_id
                && given != computed
            {
                return Err(ExecError::CidMismatch { computed, given });
            }
            remember(ctx, &computed, &code).await;
            Ok((code, computed))
        }
        (None, Some(ipfs_id)) => {
            let parsed =
                cid::parse_cid(&ipfs_id).map_err(|e| ExecError::InvalidCid(e.to_string()))?;
            let cid_text = parsed.as_str().to_owned();
            if let Some(bytes) = ctx.store.code(cid_text.clone()).await? {
                let code = String::from_utf8(bytes)
                    .map_err(|_| ExecError::StoredCodeNotUtf8(cid_text.clone()))?;
                return Ok((code, cid_text));
            }
            if let Some(gateway) = ctx.executor.gateway()
                && let Some(code) = gateway.fetch(&cid_text, limits.max_code_bytes).await?
            {
                remember(ctx, &cid_text, &code).await;
                return Ok((code, cid_text));
            }
            Err(ExecError::UnknownCid(cid_text))
        }
        (None, None) => Err(ExecError::NoCode),
    }
}

/// Keeps code by CID for later runs by `ipfs_id`, without a write when it is known.
async fn remember(ctx: &ExecContext<'_>, cid_text: &str, code: &str) {
    match ctx.store.code(cid_text.to_owned()).await {
        Ok(Some(_)) => {}
        _ => {
            let store = ctx.store.clone();
            let (cid_text, code, cap) = (
                cid_text.to_owned(),
                code.as_bytes().to_vec(),
                ctx.limits.code_cache_bytes,
            );
            // Off the request path: losing a cache entry to a crash is harmless.
            tokio::spawn(async move {
                if let Err(err) = store.put_code(cid_text, code, cap).await {
                    tracing::warn!(error = %err, "could not keep action code");
                }
            });
        }
    }
}
