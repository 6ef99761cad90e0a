//! Checking a signed request: who signed it, for which deployment, when, and only once.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::request::{OperatorRequest, ParseError};
use crate::signature::{Address, SignatureError, recover};

/// How far `issued at` may be from the verifier's clock, either way, in seconds.
pub const WINDOW_SECS: u64 = 300;

/// Most nonces remembered at once: requests arriving while this many fresh ones are
/// remembered are refused ([`VerifyError::Busy`]) until the oldest expire. Only requests
/// that already passed every other check (an operator's signature) take a place.
pub const MAX_REMEMBERED: usize = 1024;

/// The deployment a request must name: what this process runs as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Binding {
    pub app: [u8; 20],
    pub compose_hash: [u8; 32],
}

/// A request that passed: what it asks and which operator asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Authorized {
    pub request: OperatorRequest,
    pub operator: Address,
}

/// Why a request is refused. Messages name no secret (addresses and hashes are public).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyError {
    #[error(
        "operator requests are disabled: the configuration names no operator ([operator] addresses)"
    )]
    NoOperators,
    #[error("malformed operator request: {0}")]
    Parse(#[from] ParseError),
    #[error("operator request signature: {0}")]
    Signature(#[from] SignatureError),
    #[error(
        "the request is for app 0x{}, this is app 0x{}",
        hex::encode(found),
        hex::encode(expected)
    )]
    WrongApp { expected: [u8; 20], found: [u8; 20] },
    #[error(
        "the request is for compose hash 0x{}, this deployment runs 0x{} (verify the deployment again and sign a new request)",
        hex::encode(found),
        hex::encode(expected)
    )]
    WrongComposeHash { expected: [u8; 32], found: [u8; 32] },
    #[error(
        "the request was issued at {issued_at}, more than {WINDOW_SECS} s from this deployment's clock ({now}): sign a new one (and check the clocks)"
    )]
    Stale { issued_at: u64, now: u64 },
    #[error("0x{} is not an operator of this deployment", hex::encode(.0))]
    NotAnOperator(Address),
    #[error("this request (nonce 0x{}) was already used", hex::encode(.0))]
    Replayed([u8; 16]),
    #[error(
        "too many operator requests in the last {WINDOW_SECS} s (at most {MAX_REMEMBERED}); try again later"
    )]
    Busy,
}

/// Checks requests against the configured operators and remembers their nonces.
#[derive(Debug)]
pub struct Verifier {
    operators: Vec<Address>,
    /// nonce → the time after which its request is stale anyway.
    remembered: Mutex<HashMap<[u8; 16], u64>>,
}

impl Verifier {
    /// A verifier for these operators (none: every request is refused, [`VerifyError::NoOperators`]).
    pub fn new(operators: Vec<Address>) -> Self {
        Self {
            operators,
            remembered: Mutex::new(HashMap::new()),
        }
    }

    pub fn operators(&self) -> &[Address] {
        &self.operators
    }

    /// Whether any operator is configured.
    pub fn enabled(&self) -> bool {
        !self.operators.is_empty()
    }

    /// [`Self::verify`] at the system clock's time.
    pub fn verify_now(
        &self,
        text: &str,
        signature: &[u8],
        binding: &Binding,
    ) -> Result<Authorized, VerifyError> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        self.verify(text, signature, binding, now)
    }

    /// Checks `text` signed with `signature` for the deployment `binding` at Unix time
    /// `now`; on success its nonce is used up.
    pub fn verify(
        &self,
        text: &str,
        signature: &[u8],
        binding: &Binding,
        now: u64,
    ) -> Result<Authorized, VerifyError> {
        if self.operators.is_empty() {
            return Err(VerifyError::NoOperators);
        }
        let request = OperatorRequest::parse(text)?;
        if request.app != binding.app {
            return Err(VerifyError::WrongApp {
                expected: binding.app,
                found: request.app,
            });
        }
        if request.compose_hash != binding.compose_hash {
            return Err(VerifyError::WrongComposeHash {
                expected: binding.compose_hash,
                found: request.compose_hash,
            });
        }
        if request.issued_at.abs_diff(now) > WINDOW_SECS {
            return Err(VerifyError::Stale {
                issued_at: request.issued_at,
                now,
            });
        }
        let signer = recover(text.as_bytes(), signature)?;
        if !self.operators.contains(&signer) {
            return Err(VerifyError::NotAnOperator(signer));
        }
        // A poisoned lock only means a panic elsewhere while it was held; the map is
        // consistent either way.
        let mut remembered = self.remembered.lock().unwrap_or_else(|p| p.into_inner());
        remembered.retain(|_, stale_after| *stale_after >= now);
        if remembered.contains_key(&request.nonce) {
            return Err(VerifyError::Replayed(request.nonce));
        }
        if remembered.len() >= MAX_REMEMBERED {
            return Err(VerifyError::Busy);
        }
        remembered.insert(request.nonce, request.issued_at.saturating_add(WINDOW_SECS));
        Ok(Authorized {
            request,
            operator: signer,
        })
    }
}
