//! The client's one error type: every way a call can fail, typed, so that an application
//! can tell "the deployment is not the one you asked for" from "the server said no".

/// The server's error fields, `{"error":{"code","reason","description"}}`: the very type
/// the server serializes (`appliance_api::error::ErrorDetail`).
pub use appliance_api::error::ErrorDetail as ServerError;
use evidence::check::Report;

/// Why a call (or a verification) failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The deployment's evidence did not verify under the policy; nothing was sent with
    /// the API key. The report says which checks failed and why.
    #[error("the deployment did not verify (failed checks: {})", .report.failed().join(", "))]
    NotVerified { report: Box<Report> },
    /// The deployment's compose hash is not one the policy expects.
    #[error("the deployment runs compose hash {actual}, not one of the expected {expected:?}")]
    UnexpectedComposeHash {
        actual: String,
        expected: Vec<String>,
    },
    /// The server presented a certificate that the verified evidence does not attest,
    /// and a fresh verification did not attest it either. The request was not sent.
    #[error(
        "the server presented a certificate (sha256 {leaf_sha256}) that its attested evidence does not name: {reason}"
    )]
    CertificateNotAttested { leaf_sha256: String, reason: String },
    /// An earlier re-verification failed; the client refuses every call until
    /// [`crate::Client::verify`] succeeds again.
    #[error("the last verification failed; call verify() again before any request")]
    VerificationFailedEarlier,
    /// The evidence could not be fetched or read.
    #[error("evidence: {0}")]
    Evidence(#[from] evidence::bundle::BundleError),
    /// The server answered with its error envelope.
    #[error("{} {}: {}", .status, .error.reason, .error.description)]
    Api { status: u16, error: ServerError },
    /// The server answered with an error status but not the envelope (a proxy?).
    #[error("HTTP {status} without the service's error body: {excerpt}")]
    Http { status: u16, excerpt: String },
    /// A redirect, which the client never follows (the key would go elsewhere).
    #[error("HTTP {status} redirect to {location:?}, not followed")]
    Redirect {
        status: u16,
        location: Option<String>,
    },
    /// The connection failed (DNS, TCP, TLS other than an unattested certificate, timeout).
    #[error("transport: {0}")]
    Transport(String),
    /// A 2xx body that is not the expected type.
    #[error("response body: {0}")]
    Decode(String),
    /// The call needs an API key and none was configured.
    #[error("this call needs an API key; none is configured")]
    NoApiKey,
    /// The client's own settings are unusable.
    #[error("configuration: {0}")]
    Config(String),
}

impl ClientError {
    /// The server's status code, for [`ClientError::Api`] and [`ClientError::Http`].
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Api { status, .. }
            | Self::Http { status, .. }
            | Self::Redirect { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The verification report behind a [`ClientError::NotVerified`].
    pub fn report(&self) -> Option<&Report> {
        match self {
            Self::NotVerified { report } => Some(report),
            _ => None,
        }
    }
}
