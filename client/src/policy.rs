//! What a deployment must show before the client sends it anything.

use std::net::SocketAddr;
use std::time::Duration;

use evidence::collateral::CollateralSource;
use evidence::os_image::OsPolicy;

/// The verification policy, set by the caller. The default is the strictest useful one:
/// genuine TDX (`UpToDate` only, no simulated quotes), and every check of
/// `evidence verify` must run and pass, so a missing input (no RPC URL for the governance
/// check, say) fails instead of being skipped, unless the caller names that check in
/// [`Policy::skip`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// TCB statuses that pass (dcap-qvl spelling: `UpToDate`, `SWHardeningNeeded`, …).
    pub accepted_statuses: Vec<String>,
    /// Accept quotes from the `simulated` provider: the development stack only, NOT
    /// confidential.
    pub allow_simulated: bool,
    /// Compose hashes (hex, with or without `0x`) the deployment must run; empty = any
    /// compose hash that passes the other checks (governance included).
    pub compose_hashes: Vec<String>,
    /// Collateral for the quotes: a dcap-qvl collateral file or a PCCS URL. Required for
    /// genuine quotes.
    pub collateral: Option<CollateralSource>,
    /// JSON-RPC URL of the settlement chain, for the governance allow-list check.
    pub rpc_url: Option<String>,
    /// DNS server for the CAA check (default: the system resolver).
    pub dns_server: Option<SocketAddr>,
    /// Domain whose CAA records govern the certificate (default: the URL's host).
    pub caa_domain: Option<String>,
    /// Checks the caller accepts not running (by `evidence verify` name).
    pub skip: Vec<String>,
    /// Accept an evidence quote that does not carry the nonce this client sent with
    /// `quote.json?nonce=` (a stale quote: what a relay replaying old evidence serves,
    /// or a deployment that does not answer `?nonce=`). `false` (default): such a quote
    /// fails the `freshness` check and the client sends nothing. A nonce is sent either
    /// way.
    pub allow_stale: bool,
    /// Accepted OS measurements (MRTD, RTMR0-2 per OS image and VM shape: the policy file
    /// of `evidence verify --os-measurements`, written by `evidence os-measure`). `None`:
    /// the OS is not pinned, and the `os-image` check fails unless
    /// [`Policy::allow_unpinned_os`] (a simulated quote has no OS to pin).
    pub os_measurements: Option<OsPolicy>,
    /// Accept a genuine quote whose OS measurements are not all pinned (`os-image`
    /// reported N/A): the client then does not know which firmware, kernel and command
    /// line produced the quote.
    pub allow_unpinned_os: bool,
    /// How long a successful verification is trusted before the next call re-verifies.
    pub cache_for: Duration,
    /// When a new connection shows a leaf the evidence neither attests nor announced
    /// (its key is not the announced next key): `false` (default): fail closed at once
    /// with `CertificateNotAttested`, and a relay holding another valid certificate for
    /// the name never sees a single HTTP byte from this client; the next scheduled
    /// verification (`cache_for`) starts afresh. `true`: verify once more at once, over a
    /// fresh credential-free connection to whoever answers (the relay would see those
    /// public evidence requests), and go on only if the fresh evidence attests that leaf:
    /// for deployments that do not announce their next key. A renewal to the announced
    /// key is always re-verified at once, over a connection only that key can open.
    pub reverify_on_new_certificate: bool,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            accepted_statuses: vec!["UpToDate".to_owned()],
            allow_simulated: false,
            compose_hashes: Vec::new(),
            collateral: None,
            rpc_url: None,
            dns_server: None,
            caa_domain: None,
            skip: Vec::new(),
            allow_stale: false,
            os_measurements: None,
            allow_unpinned_os: false,
            cache_for: Duration::from_secs(3600),
            reverify_on_new_certificate: false,
        }
    }
}

impl Policy {
    /// Whether `hash` (hex, any case, optional `0x`) is an expected compose hash.
    pub fn expects(&self, hash: &str) -> bool {
        let norm = |h: &str| h.trim().trim_start_matches("0x").to_ascii_lowercase();
        self.compose_hashes.is_empty() || self.compose_hashes.iter().any(|e| norm(e) == norm(hash))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expected_compose_hashes_compare_without_case_or_prefix() {
        let mut p = Policy::default();
        assert!(p.expects("ab"), "no expectation: any hash");
        p.compose_hashes = vec!["0xABcd".to_owned()];
        assert!(p.expects("abcd"));
        assert!(p.expects("0xabcd"));
        assert!(!p.expects("abce"));
    }
}
