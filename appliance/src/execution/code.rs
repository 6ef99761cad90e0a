//! The code of an execution: inline code (checked against `ipfs_id` when both are
//! given), code the service keeps by CID, or the configured IPFS gateway, whose answer
//! counts only if it hashes to the CID asked for.
//!
//! Invariant: code runs only if it hashes to the CID it runs as, computed in this
//! process for every code string, once: inline code's CID *is* the CIDv0 of those bytes
//! ([`requested_cid`]), the store's bytes are hashed before anything else ([`verify`]),
//! and the gateway's in [`Gateway::fetch`]. Nothing the store or the gateway says about a
//! CID is taken on trust (the code cache lives in the database, which an operator can
//! edit). No cache of verified CIDs: it would have to be keyed on a hash of the bytes
//! computed here, which costs what recomputing the CID costs.

use std::sync::Arc;
use std::time::Duration;

use super::{ExecContext, ExecError};
use crate::cid;
use crate::store::{AccountId, CodeOwner, Store};
use crate::telemetry::metrics::Metrics;

/// Where the code of a run came from, for the log and `appliance_action_code_refused`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodeSource {
    /// Sent with the job as `code`.
    Inline,
    /// The store's code cache (the account's area or the anonymous one).
    Store,
    /// The configured IPFS gateway.
    Gateway,
}

impl CodeSource {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Inline => "inline",
            Self::Store => "store",
            Self::Gateway => "gateway",
        }
    }
}

/// Whether `code` hashes to `cid`; if not, it is refused, logged at error and counted.
pub(super) fn verify(
    cid: &str,
    code: &[u8],
    source: CodeSource,
    metrics: &Metrics,
) -> Result<(), ExecError> {
    let computed = cid::cid_v0(code);
    if computed == cid {
        return Ok(());
    }
    tracing::error!(
        cid,
        computed = %computed,
        source = source.as_str(),
        "action code does not hash to the CID it would run as; refused (was the code store changed outside the service?)"
    );
    metrics.action_code_refused(source.as_str());
    Err(ExecError::CodeIntegrity {
        cid: cid.to_owned(),
        origin: source,
    })
}

/// An IPFS gateway to fetch code from by CID.
#[derive(Clone)]
pub struct Gateway {
    base: String,
    client: reqwest::Client,
    metrics: Arc<Metrics>,
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
    /// The gateway's HTTP client could not be built (at start).
    #[error("the IPFS gateway client: {0}")]
    Client(#[source] reqwest::Error),
}

impl Gateway {
    pub fn new(url: &str, metrics: Arc<Metrics>) -> Result<Self, GatewayError> {
        Ok(Self {
            base: url.trim_end_matches('/').to_owned(),
            client: reqwest::Client::builder()
                .use_rustls_tls()
                .timeout(Duration::from_secs(20))
                .build()
                .map_err(GatewayError::Client)?,
            metrics,
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
            tracing::error!(
                cid,
                "the IPFS gateway's content does not hash to the CID asked for"
            );
            self.metrics
                .action_code_refused(CodeSource::Gateway.as_str());
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
        // `cid_text` was computed from these very bytes (`requested_cid`).
        remember(ctx, account, &cid_text, &code, false).await;
        return Ok(code);
    }
    if let Some((code, own)) = stored(ctx.store, account, &cid_text, ctx.executor.metrics()).await?
    {
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
        // `fetch` answers only bytes that hash to `cid_text`.
        remember(ctx, account, &cid_text, &code, true).await;
        return Ok(code);
    }
    Err(ExecError::UnknownCid(cid_text))
}

/// The code the store keeps under `cid` for `account`, checked against `cid` before
/// anything else (tampered bytes need not even be text), so a copy of tampered code
/// never spreads to the account's own area; with whether it came from that area.
async fn stored(
    store: &Store,
    account: AccountId,
    cid_text: &str,
    metrics: &Metrics,
) -> Result<Option<(String, bool)>, ExecError> {
    let Some((bytes, own)) = store.code_for(account, cid_text.to_owned()).await? else {
        return Ok(None);
    };
    verify(cid_text, &bytes, CodeSource::Store, metrics)?;
    let code =
        String::from_utf8(bytes).map_err(|_| ExecError::StoredCodeNotUtf8(cid_text.to_owned()))?;
    Ok(Some((code, own)))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api_keys::KeyHash;
    use crate::store::Engine;
    use crate::store::testing::store_test;
    use crate::store::{InitialCredit, NewAccount, WalletIdentity};
    use keyservice_api::{Address, DerivationPath, PkpId};

    /// `appliance_action_code_refused_total{source="store"}` of this process.
    fn refused_from_store(metrics: &Metrics) -> f64 {
        let text = metrics.encode().unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix("appliance_action_code_refused_total{source=\"store\"} "))
            .map_or(0.0, |v| v.trim().parse().unwrap())
    }

    store_test! {
    async fn code_edited_in_the_store_is_refused_and_counted(db) {
        let store = db.open().await;
        let metrics = Metrics::new();
        let account = store
            .create_account(
                NewAccount {
                    api_key_hash: KeyHash([41; 32]),
                    name: "victim".into(),
                    description: String::new(),
                    email: None,
                    wallet: WalletIdentity {
                        pkp_id: PkpId([41; 32]),
                        address: Address([41; 20]),
                        derivation_path: DerivationPath([41; 32]),
                    },
                },
                InitialCredit::NONE,
            )
            .await
            .unwrap();
        let mine = "async function main() { return 'the victim\'s code'; }";
        let cid = cid::cid_v0(mine.as_bytes());
        // In the account's own area and in the anonymous one.
        for owner in [CodeOwner::Account(account), CodeOwner::Anonymous] {
            store
                .put_code(owner, cid.clone(), mine.as_bytes().to_vec(), 1 << 20)
                .await
                .unwrap();
        }
        assert_eq!(
            stored(&store, account, &cid, &metrics).await.unwrap(),
            Some((mine.to_owned(), true))
        );

        // An operator replaces the code behind the service's back, in every area.
        let evil = "async function main() { return getLitActionPrivateKey(); }";
        let hex = hex::encode(evil.as_bytes());
        let blob = match db.engine() {
            Engine::Sqlite => format!("X'{hex}'"),
            Engine::Postgres => format!("decode('{hex}', 'hex')"),
        };
        db.behind_the_back(&format!(
            "UPDATE code_store SET code = {blob}, size = {} WHERE cid = '{cid}'",
            evil.len()
        ))
        .await;
        let before = refused_from_store(&metrics);
        match stored(&store, account, &cid, &metrics).await {
            Err(ExecError::CodeIntegrity { cid: refused, origin }) => {
                assert_eq!(refused, cid);
                assert_eq!(origin, CodeSource::Store);
            }
            other => panic!("tampered code was handed out: {other:?}"),
        }
        assert!(refused_from_store(&metrics) >= before + 1.0, "the refusal was not counted");

        // Bytes that are not even text are refused as tampering too, not as a bug.
        db.behind_the_back(&format!(
            "UPDATE code_store SET code = {} WHERE cid = '{cid}'",
            match db.engine() {
                Engine::Sqlite => "X'FF00FF'",
                Engine::Postgres => "decode('ff00ff', 'hex')",
            }
        ))
        .await;
        assert!(matches!(
            stored(&store, account, &cid, &metrics).await,
            Err(ExecError::CodeIntegrity { .. })
        ));
    }
    }

    #[test]
    fn code_that_hashes_to_its_cid_passes_and_any_other_is_refused() {
        let code = b"async function main() { return 1; }";
        let cid = cid::cid_v0(code);
        let metrics = Metrics::new();
        assert!(verify(&cid, code, CodeSource::Inline, &metrics).is_ok());
        for source in [CodeSource::Inline, CodeSource::Store, CodeSource::Gateway] {
            assert!(matches!(
                verify(&cid, b"async function main() { return 2; }", source, &metrics),
                Err(ExecError::CodeIntegrity { origin, .. }) if origin == source
            ));
        }
    }
}
