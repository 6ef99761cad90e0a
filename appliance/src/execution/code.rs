//! The code of an execution: inline code (checked against `ipfs_id` when both are
//! given), code the service keeps by CID, or the configured IPFS gateway, whose answer
//! counts only if it hashes to the CID asked for.

use std::time::Duration;

use super::{ExecContext, ExecError};
use crate::cid;
use crate::store::{AccountId, CodeOwner};

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

/// The CID a job names, from its inline code (checked against `ipfs_id` when both are
/// given) or its `ipfs_id`, without looking anything up: execution rights are decided on
/// it before any code is resolved, so a caller without rights learns nothing about
/// which CIDs the service knows.
pub(super) fn requested_cid(
    limits: &crate::config::ActionsConfig,
    code: Option<&str>,
    ipfs_id: Option<&str>,
) -> Result<String, ExecError> {
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
                return Err(ExecError::CidMismatch {
                    computed,
                    given: given.to_owned(),
                });
            }
            Ok(computed)
        }
        (None, Some(ipfs_id)) => cid::parse_cid(ipfs_id)
            .map(|parsed| parsed.as_str().to_owned())
            .map_err(|e| ExecError::InvalidCid(e.to_string())),
        (None, None) => Err(ExecError::NoCode),
    }
}

/// The code to run for `account`: the inline code, or the code of `cid` from the
/// account's own area of the code cache, the anonymous area, or the gateway. Code the
/// account runs is kept in its own area (within its quota) for later runs by CID.
pub(super) async fn resolve(
    ctx: &ExecContext<'_>,
    account: AccountId,
    code: Option<String>,
    cid_text: String,
) -> Result<String, ExecError> {
    let limits = ctx.limits;
    if let Some(code) = code {
        remember(ctx, account, &cid_text, &code, false).await;
        return Ok(code);
    }
    if let Some((bytes, own)) = ctx.store.code_for(account, cid_text.clone()).await? {
        let code =
            String::from_utf8(bytes).map_err(|_| ExecError::StoredCodeNotUtf8(cid_text.clone()))?;
        if !own {
            // Found in the anonymous area, which strangers may churn: keep a copy of
            // what this account runs in its own area.
            remember(ctx, account, &cid_text, &code, true).await;
        }
        return Ok(code);
    }
    if let Some(gateway) = ctx.executor.gateway()
        && let Some(code) = gateway.fetch(&cid_text, limits.max_code_bytes).await?
    {
        remember(ctx, account, &cid_text, &code, true).await;
        return Ok(code);
    }
    Err(ExecError::UnknownCid(cid_text))
}

/// Keeps code by CID in `account`'s area for later runs by `ipfs_id`, off the request
/// path and best-effort: a run never fails because its code could not be kept (over
/// the quota, it is simply not kept). `known_missing` skips the read when the caller
/// already knows the account's area lacks it.
async fn remember(
    ctx: &ExecContext<'_>,
    account: AccountId,
    cid_text: &str,
    code: &str,
    known_missing: bool,
) {
    if !known_missing
        && let Ok(Some((_, true))) = ctx.store.code_for(account, cid_text.to_owned()).await
    {
        return;
    }
    let store = ctx.store.clone();
    let (cid_text, code, quota) = (
        cid_text.to_owned(),
        code.as_bytes().to_vec(),
        ctx.limits.code_quota_bytes_per_account,
    );
    tokio::spawn(async move {
        if let Err(err) = store
            .put_code(CodeOwner::Account(account), cid_text, code, quota)
            .await
        {
            tracing::warn!(error = %err, "could not keep action code");
        }
    });
}
