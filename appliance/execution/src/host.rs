//! Host calls: what a running action asks the appliance to do (key operations, fetch
//! and JSON-RPC). The worker process runs untrusted code, so it is treated as untrusted too:
//! every rule is enforced here, whatever the worker sends: a wallet must be in the
//! execution's scope, an action may obtain only its own action key, and the number of
//! fetches (JSON-RPC requests included) is counted here as well as in the worker.

use action_runtime::protocol::HostRequest;
use keyservice_api::{DerivationPath, KeyError};
use serde_json::Value;

use super::fetch::Fetcher;
use super::imports::{ImportError, JobImports, ModuleImports};
use super::rpc::{RpcBudget, RpcClient};
use appliance_store::wallet::parse_wallet_ref;
use appliance_store::{AccountId, Store, WalletRef, WalletScope};
use keyservice_api::KeyClient;

/// Everything one execution's host calls need.
pub struct HostContext {
    pub store: Store,
    pub keys: KeyClient,
    pub fetcher: Fetcher,
    pub account: AccountId,
    pub scope: WalletScope,
    /// The CID of the running code.
    pub action_cid: String,
    pub max_fetches: u32,
    fetches: u32,
    /// JSON-RPC for `ethers.providers` (`None`: every request fails).
    rpc: Option<RpcClient>,
    rpc_budget: RpcBudget,
    /// The job's module imports (disabled unless [`HostContext::with_imports`]).
    imports: JobImports,
}

/// A wallet the action may not use. A wallet outside the scope and one that does not
/// exist read the same, so an action learns nothing about other wallets.
#[derive(Debug, Clone, thiserror::Error)]
#[error("wallet {wallet} is not available to this action")]
pub struct WalletRefused {
    pub wallet: WalletRef,
}

/// Why a host call failed. Both are a rejected promise for the action; a refusal also
/// ends the execution in a denial once the action has finished.
#[derive(Debug)]
pub enum HostError {
    /// The call failed (bad argument, keyservice, fetch): the action may carry on.
    Failed(String),
    /// Authorization refused a wallet.
    Refused(WalletRefused),
}

impl From<String> for HostError {
    fn from(message: String) -> Self {
        Self::Failed(message)
    }
}

impl From<super::fetch::FetchError> for HostError {
    fn from(err: super::fetch::FetchError) -> Self {
        Self::Failed(err.to_string())
    }
}

impl From<&str> for HostError {
    fn from(message: &str) -> Self {
        Self::Failed(message.to_owned())
    }
}

fn key_error(err: KeyError) -> String {
    if err.is_unavailable() {
        "the key service is unavailable; retry shortly".to_owned()
    } else if matches!(err, KeyError::DecryptFailed) {
        "decryption failed: the ciphertext was modified or belongs to another wallet".to_owned()
    } else {
        tracing::error!(error = %err, "keyservice error during an action");
        "the key operation failed".to_owned()
    }
}

impl HostContext {
    pub fn new(
        store: Store,
        keys: KeyClient,
        fetcher: Fetcher,
        account: AccountId,
        scope: WalletScope,
        action_cid: String,
        max_fetches: u32,
    ) -> Self {
        Self {
            store,
            keys,
            fetcher,
            account,
            scope,
            action_cid,
            max_fetches,
            fetches: 0,
            rpc: None,
            rpc_budget: RpcBudget::default(),
            imports: JobImports::disabled(),
        }
    }

    /// With module imports through `imports` (`None`: every import is refused).
    pub fn with_imports(mut self, imports: Option<&ModuleImports>) -> Self {
        self.imports = imports.map_or_else(JobImports::disabled, ModuleImports::for_job);
        self
    }

    /// With JSON-RPC through `rpc`.
    pub fn with_rpc(mut self, rpc: RpcClient) -> Self {
        self.rpc = Some(rpc);
        self
    }

    /// What this execution has used of its JSON-RPC budget.
    pub fn rpc_budget(&self) -> RpcBudget {
        self.rpc_budget
    }

    /// Counts one fetch (or JSON-RPC request) against the execution's limit.
    fn count_fetch(&mut self) -> Result<(), HostError> {
        self.fetches += 1;
        if self.fetches > self.max_fetches {
            return Err(format!("an action may fetch at most {} times", self.max_fetches).into());
        }
        Ok(())
    }

    /// Answers one host call: `Ok` is the JSON result, `Err` what the action sees as a
    /// rejected promise.
    pub async fn call(&mut self, request: HostRequest) -> Result<Value, HostError> {
        match request {
            HostRequest::GetPrivateKey { pkp_id } => {
                let path = self.wallet_path(&pkp_id).await?;
                let key = self
                    .keys
                    .export_private_key(&path)
                    .await
                    .map_err(key_error)?;
                Ok(Value::String(key.to_hex().to_string()))
            }
            HostRequest::SignEcdsa { pkp_id, to_sign } => {
                let path = self.wallet_path(&pkp_id).await?;
                let digest =
                    hex32(&to_sign).ok_or("`toSign` must be 32 bytes of hex (a digest)")?;
                let sig = self
                    .keys
                    .sign_digest(&path, &digest)
                    .await
                    .map_err(key_error)?;
                Ok(Value::String(sig.to_hex()))
            }
            HostRequest::Encrypt { pkp_id, message } => {
                let path = self.wallet_path(&pkp_id).await?;
                let sealed = self
                    .keys
                    .encrypt(&path, message.as_bytes())
                    .await
                    .map_err(key_error)?;
                Ok(Value::String(hex::encode(sealed)))
            }
            HostRequest::Decrypt { pkp_id, ciphertext } => {
                let path = self.wallet_path(&pkp_id).await?;
                let bytes = hex::decode(ciphertext.trim_start_matches("0x"))
                    .map_err(|_| "`ciphertext` must be hex".to_owned())?;
                let plain = self.keys.decrypt(&path, &bytes).await.map_err(key_error)?;
                String::from_utf8(plain)
                    .map(Value::String)
                    .map_err(|_| "the plaintext is not UTF-8".into())
            }
            HostRequest::GetLitActionPrivateKey { ipfs_id } => {
                // Only the running action's own key: another action's key would let any
                // code impersonate it.
                match ipfs_id {
                    Some(cid) if cid != self.action_cid => {
                        return Err("an action may obtain only its own action key".into());
                    }
                    _ => {}
                }
                let key = self
                    .keys
                    .action_export_private_key(&self.action_cid)
                    .await
                    .map_err(key_error)?;
                Ok(Value::String(key.to_hex().to_string()))
            }
            HostRequest::GetLitActionPublicKey { ipfs_id } => {
                let cid = self.cid_arg(ipfs_id)?;
                let id = self.keys.action_identity(&cid).await.map_err(key_error)?;
                Ok(Value::String(format!(
                    "0x{}",
                    hex::encode(id.public_key.compressed())
                )))
            }
            HostRequest::GetLitActionWalletAddress { ipfs_id } => {
                let cid = self.cid_arg(ipfs_id)?;
                let id = self.keys.action_identity(&cid).await.map_err(key_error)?;
                Ok(Value::String(id.address.to_checksum()))
            }
            HostRequest::Fetch(req) => {
                self.count_fetch()?;
                let resp = self.fetcher.fetch(req).await?;
                serde_json::to_value(resp).map_err(|e| e.to_string().into())
            }
            HostRequest::Rpc(req) => {
                self.count_fetch()?;
                let reply = match &self.rpc {
                    Some(rpc) => rpc.call(&mut self.rpc_budget, req).await,
                    None => action_runtime::protocol::RpcReply::Failed {
                        message: "JSON-RPC is not available to actions here".to_owned(),
                    },
                };
                serde_json::to_value(reply).map_err(|e| e.to_string().into())
            }
            HostRequest::Import(req) => {
                let module = self
                    .imports
                    .import(&self.store, &req)
                    .await
                    .map_err(|e: ImportError| format!("import `{}`: {e}", req.specifier))?;
                Ok(super::imports::reply(module))
            }
        }
    }

    fn cid_arg(&self, ipfs_id: Option<String>) -> Result<String, HostError> {
        match ipfs_id {
            Some(cid) => appliance_domain::cid::parse_cid(&cid)
                .map(|c| c.as_str().to_owned())
                .map_err(|e| HostError::Failed(format!("`ipfsId` is not a valid CID: {e}"))),
            None => Ok(self.action_cid.clone()),
        }
    }

    /// The derivation path of the wallet named by `pkpId`, if this execution may use it.
    async fn wallet_path(&mut self, pkp_id: &str) -> Result<DerivationPath, HostError> {
        let wallet = parse_wallet_ref("pkpId", pkp_id).map_err(|e| e.to_string())?;
        match self
            .store
            .wallet_in_scope(self.account, wallet, &self.scope)
            .await
        {
            Ok(Some(record)) => Ok(record.derivation_path),
            Ok(None) => Err(HostError::Refused(WalletRefused { wallet })),
            Err(err) => {
                tracing::error!(error = %err, "store error during an action");
                Err("the store is unavailable".into())
            }
        }
    }
}

fn hex32(text: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    hex::decode_to_slice(text.trim().trim_start_matches("0x"), &mut out).ok()?;
    Some(out)
}
