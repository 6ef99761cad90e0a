//! What the socket serves: the key operations of the root the process holds ([`KeyOps`]),
//! and, in shared-root mode, the small state before it holds one.
//!
//! Shared-root mode (`run --shared-root`) is for replicas of one app that must all derive
//! the same keys: the front end keeps one sealed root in its shared database and hands it
//! to every replica's keyservice. Until then the keyservice is *awaiting its root* and
//! answers only:
//!
//! * `Status` and `RootStatus` (state, measured compose hash);
//! * `CreateSealedRoot`: a fresh root sealed to the measured compose hash, handed out and
//!   not kept (the front end stores one, first writer wins);
//! * `AdoptRoot`: unseal the shared blob. Once, ever: the pending state is taken out of its
//!   slot before the blob is even looked at. On success every operation works with that
//!   root; on any failure the answer says why and the process stops (the caller of
//!   [`Service::failed`] ends it with an error), so a replica that cannot open the shared
//!   root never serves, and never makes a second root.
//!
//! Everything else answers `NoRoot`. Outside shared-root mode the service holds its root
//! from the start and `CreateSealedRoot` / `AdoptRoot` are refused.

use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use keyservice_api::protocol::{Request, Response, SEALED_ROOT_LEN};
use keyservice_api::{NewSealedRoot, RootStatus, ServiceStatus};
use tokio::sync::watch;

use crate::derive::KeyDeriver;
use crate::operator::OperatorDesk;
use crate::ops::{KeyOps, OpError};
use crate::root;
use crate::sealing::{FORMAT_VERSION, SealError};
use crate::secret::{RootSecret, SealingKey};

/// The `NoRoot` answer of every key operation while the root is awaited.
pub const NO_ROOT_MESSAGE: &str = "keyservice has no root yet: the appliance has not handed \
                                   it the shared sealed root (AdoptRoot)";

const ALREADY_ADOPTING: &str = "this keyservice has already been handed its root: a root is \
                                adopted at most once per process";

/// Builds the operations of an adopted root (payer policy, quotes) exactly as a
/// non-shared start builds them from its unsealed file.
pub type BuildOps = Box<dyn FnOnce(RootSecret) -> Result<KeyOps, OpError> + Send>;

/// What a shared-root keyservice holds until it adopts its root.
struct Awaiting {
    /// The platform's sealing key for the measured compose hash (fetched at start, so a
    /// platform that cannot give one stops the start-up; dropped at adoption).
    sealing_key: SealingKey,
    build: BuildOps,
}

/// The socket's handler: the root's operations once there is a root.
pub struct Service {
    /// `Status` before the root is adopted (the same payload [`KeyOps`] answers after).
    status: ServiceStatus,
    ready: OnceLock<KeyOps>,
    /// `Some` only in shared-root mode before `AdoptRoot`.
    awaiting: Mutex<Option<Awaiting>>,
    /// Set once, when an `AdoptRoot` fails: why the process must stop.
    failure: watch::Sender<Option<String>>,
    /// The operator tasks (`OperatorReseal`, `StateFiles`); without it they are refused.
    operator: Option<Arc<OperatorDesk>>,
}

const NO_OPERATOR_DESK: &str =
    "this keyservice serves no operator tasks (started without a state directory for them)";

impl Service {
    /// A service holding its root from the start (the root file was unsealed at start).
    pub fn ready(ops: KeyOps) -> Self {
        let status = ops.status().clone();
        let ready = OnceLock::new();
        let _ = ready.set(ops);
        Self {
            status,
            ready,
            awaiting: Mutex::new(None),
            failure: watch::Sender::new(None),
            operator: None,
        }
    }

    /// Serves the operator tasks with `desk`.
    pub fn with_operator_desk(mut self, desk: OperatorDesk) -> Self {
        self.operator = Some(Arc::new(desk));
        self
    }

    /// Shared-root mode: a service awaiting its root. `status` is what `Status` answers
    /// (the measured compose hash); `sealing_key` is the platform's key for that hash;
    /// `build` turns the adopted root into its operations.
    pub fn awaiting_root(status: ServiceStatus, sealing_key: SealingKey, build: BuildOps) -> Self {
        Self {
            status,
            ready: OnceLock::new(),
            awaiting: Mutex::new(Some(Awaiting { sealing_key, build })),
            failure: watch::Sender::new(None),
            operator: None,
        }
    }

    /// The operations of the root, once there is one.
    pub fn ops(&self) -> Option<&KeyOps> {
        self.ready.get()
    }

    /// Answers one request (see the module docs for what is answered in which state).
    pub async fn handle(&self, request: Request) -> Result<Response, OpError> {
        if let Request::StateFiles = request {
            let desk = self
                .operator
                .as_ref()
                .ok_or(OpError::Refused(NO_OPERATOR_DESK))?;
            return desk.state_files().map(Response::StateFiles);
        }
        if let Some(ops) = self.ready.get() {
            if let Request::OperatorReseal {
                target,
                signature,
                request,
                source,
            } = request
            {
                let desk = self
                    .operator
                    .as_ref()
                    .ok_or(OpError::Refused(NO_OPERATOR_DESK))?;
                return desk
                    .reseal(ops, target, signature, &request, source)
                    .await
                    .map(Response::Resealed);
            }
            return ops.handle(request).await;
        }
        match request {
            Request::Status => Ok(Response::Status(self.status.clone())),
            Request::RootStatus => Ok(Response::RootStatus(RootStatus {
                compose_hash: self.status.compose_hash,
                root_id: None,
            })),
            Request::CreateSealedRoot => self.create_sealed_root(),
            Request::AdoptRoot { sealed } => self.adopt(&sealed),
            _ => Err(OpError::NoRoot(NO_ROOT_MESSAGE)),
        }
    }

    /// Resolves, with the reason, once an `AdoptRoot` has failed: the process must stop
    /// (after the answer saying why has gone out).
    pub async fn failed(&self) -> String {
        let mut rx = self.failure.subscribe();
        loop {
            if let Some(reason) = rx.borrow_and_update().clone() {
                return reason;
            }
            if rx.changed().await.is_err() {
                return std::future::pending().await;
            }
        }
    }

    /// Why an `AdoptRoot` failed, if one did.
    pub fn failure(&self) -> Option<String> {
        self.failure.borrow().clone()
    }

    fn lock_awaiting(&self) -> MutexGuard<'_, Option<Awaiting>> {
        // A poisoned lock only means a panic elsewhere while it was held; the slot is a
        // plain Option, consistent either way.
        self.awaiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A fresh root sealed to the measured compose hash, handed out and not kept.
    fn create_sealed_root(&self) -> Result<Response, OpError> {
        let slot = self.lock_awaiting();
        let Some(awaiting) = slot.as_ref() else {
            return Err(OpError::Refused(ALREADY_ADOPTING));
        };
        let (root, sealed) = root::create_sealed(&awaiting.sealing_key, self.status.compose_hash)
            .map_err(|e| {
            tracing::error!(error = %e, "cannot create a sealed root");
            OpError::Internal("cannot create a sealed root")
        })?;
        drop(slot);
        let root_id = KeyDeriver::new(&root).root_id()?;
        drop(root);
        tracing::info!(
            %root_id,
            compose_hash = %self.status.compose_hash,
            "created a sealed root for the appliance to share (not adopted here)"
        );
        Ok(Response::SealedRoot(NewSealedRoot {
            sealed: sealed.to_bytes(),
            root_id,
        }))
    }

    /// Adopts the shared root, or refuses it and marks the process for exit.
    fn adopt(&self, sealed: &[u8]) -> Result<Response, OpError> {
        // Taken before the blob is looked at: whatever happens, no second adoption.
        let Some(Awaiting { sealing_key, build }) = self.lock_awaiting().take() else {
            return Err(OpError::Refused(ALREADY_ADOPTING));
        };
        let opened = root::open_shared(sealed, &sealing_key, &self.status.compose_hash);
        drop(sealing_key);
        let result = match opened {
            Ok(root) => build(root).map_err(|e| format!("cannot use the adopted root: {e}")),
            Err(e) => Err(format!(
                "the shared sealed root does not open here: {}",
                refusal(&e)
            )),
        };
        match result {
            Ok(ops) => {
                let root_id = ops.root_id();
                let admin_payer = ops.payers().admin;
                if self.ready.set(ops).is_err() {
                    // Unreachable: the awaiting slot was taken exactly once, above.
                    return Err(OpError::Internal("a root was already adopted"));
                }
                tracing::info!(
                    %root_id,
                    compose_hash = %self.status.compose_hash,
                    %admin_payer,
                    "adopted the shared root; keyservice ready"
                );
                Ok(Response::RootId(root_id))
            }
            Err(reason) => {
                let message = format!(
                    "{reason}; this keyservice refuses to start rather than create a second root"
                );
                tracing::error!("{message}");
                self.failure.send_replace(Some(message.clone()));
                Err(OpError::RootRefused(message))
            }
        }
    }
}

/// Why a shared blob does not open, in the words of a blob rather than of a file.
fn refusal(e: &SealError) -> String {
    match e {
        SealError::BadLength { len, .. } => {
            format!("it is {len} bytes, expected {SEALED_ROOT_LEN}: truncated or corrupted")
        }
        SealError::BadMagic { .. } => "it is not a keyservice sealed root (bad magic)".to_owned(),
        SealError::UnsupportedVersion { version, .. } => format!(
            "it has format version {version}; this keyservice reads version {FORMAT_VERSION}"
        ),
        SealError::ComposeHashMismatch {
            expected, found, ..
        } => format!(
            "it is bound to compose hash {found}, but this instance's measured compose hash \
             is {expected} (reseal it for this version with `keyservice reseal --to {expected}` \
             and hand over the result)"
        ),
        SealError::AuthenticationFailed { compose_hash, .. } => format!(
            "it failed authentication: it was modified, or it was sealed with another sealing \
             key than this platform gives for compose hash {compose_hash} (another app, or \
             another dev secret)"
        ),
        other => other.to_string(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use keyservice_api::{ComposeHash, PROTOCOL_VERSION, PlatformKind};
    use zeroize::Zeroizing;

    use super::*;

    fn status() -> ServiceStatus {
        ServiceStatus {
            protocol_version: PROTOCOL_VERSION,
            platform: PlatformKind::Dev,
            compose_hash: ComposeHash([9; 32]),
            api_payers: 1,
        }
    }

    fn awaiting(key: u8) -> Service {
        let build: BuildOps =
            Box::new(|root| KeyOps::new(root, PlatformKind::Dev, ComposeHash([9; 32]), 1));
        Service::awaiting_root(
            status(),
            SealingKey::from_bytes(Zeroizing::new([key; 32])),
            build,
        )
    }

    async fn sealed_root(s: &Service) -> NewSealedRoot {
        match s.handle(Request::CreateSealedRoot).await.unwrap() {
            Response::SealedRoot(r) => r,
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn adopts_once_and_answers_nothing_else_before() {
        let a = awaiting(1);
        assert!(matches!(
            a.handle(Request::Payers).await,
            Err(OpError::NoRoot(_))
        ));
        assert!(matches!(
            a.handle(Request::Status).await,
            Ok(Response::Status(s)) if s == status()
        ));
        let made = sealed_root(&a).await;
        // Nothing kept: still awaiting, and a second creation is another root.
        assert!(a.ops().is_none());
        assert_ne!(sealed_root(&a).await.root_id, made.root_id);
        match a
            .handle(Request::AdoptRoot {
                sealed: made.sealed.to_vec(),
            })
            .await
            .unwrap()
        {
            Response::RootId(id) => assert_eq!(id, made.root_id),
            other => panic!("{other:?}"),
        }
        assert_eq!(a.ops().unwrap().root_id(), made.root_id);
        for again in [
            Request::AdoptRoot {
                sealed: made.sealed.to_vec(),
            },
            Request::CreateSealedRoot,
        ] {
            assert!(matches!(a.handle(again).await, Err(OpError::Refused(_))));
        }
        assert!(a.failure().is_none());
    }

    #[tokio::test]
    async fn a_blob_that_does_not_open_is_refused_and_stops_the_process() {
        let maker = awaiting(1);
        let made = sealed_root(&maker).await;
        let mut flipped = made.sealed;
        flipped[70] ^= 1;
        let cases: [(u8, Vec<u8>, &str); 3] = [
            (2, made.sealed.to_vec(), "failed authentication"),
            (1, flipped.to_vec(), "failed authentication"),
            (1, made.sealed[..100].to_vec(), "truncated"),
        ];
        for (key, blob, why) in cases {
            let s = awaiting(key);
            let err = s
                .handle(Request::AdoptRoot { sealed: blob })
                .await
                .unwrap_err();
            let message = err.to_string();
            assert!(message.contains(why), "{message}");
            assert!(message.contains("refuses to start"), "{message}");
            assert_eq!(s.failure(), Some(message.clone()));
            assert_eq!(s.failed().await, message);
            // Still no root, and no second chance.
            assert!(s.ops().is_none());
            assert!(matches!(
                s.handle(Request::AdoptRoot {
                    sealed: made.sealed.to_vec()
                })
                .await,
                Err(OpError::Refused(_))
            ));
        }
    }
}
