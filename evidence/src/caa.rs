//! Rule 5: the CAA records that govern issuance for a domain (RFC 8659: the closest
//! ancestor, the domain itself first, that has any CAA record) and their `accounturi`
//! parameters (RFC 8657). The nameserver is configurable so tests can use a local DNS server.

use std::net::SocketAddr;

use hickory_resolver::ResolveError;
use hickory_resolver::proto::rr::{RData, RecordType};

/// Why the CAA records could not be looked up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CaaError {
    /// The system's resolver configuration could not be read.
    #[error("system resolver: {0}")]
    SystemResolver(#[source] ResolveError),
    /// A lookup failed otherwise than with "no such records".
    #[error(transparent)]
    Lookup(ResolveError),
}

/// The name whose CAA set applies and the `accounturi` values of its `issue`/`issuewild`
/// records.
pub async fn account_uris(
    domain: &str,
    dns: Option<SocketAddr>,
) -> Result<(String, Vec<String>), CaaError> {
    let resolver = crate::dns::resolver(dns).map_err(CaaError::SystemResolver)?;
    let mut name = domain.trim_end_matches('.').to_ascii_lowercase();
    loop {
        let fqdn = format!("{name}.");
        match resolver.lookup(fqdn.as_str(), RecordType::CAA).await {
            Ok(lookup) => {
                let mut uris = Vec::new();
                let mut any = false;
                for r in lookup.record_iter() {
                    if let RData::CAA(caa) = r.data() {
                        any = true;
                        if (caa.tag().is_issue() || caa.tag().is_issuewild())
                            && let Ok((_, kvs)) = caa.value_as_issue()
                        {
                            uris.extend(
                                kvs.iter()
                                    .filter(|kv| kv.key().eq_ignore_ascii_case("accounturi"))
                                    .map(|kv| kv.value().to_owned()),
                            );
                        }
                    }
                }
                if any {
                    return Ok((name, uris));
                }
            }
            Err(e) if e.is_no_records_found() || e.is_nx_domain() => {}
            Err(e) => return Err(CaaError::Lookup(e)),
        }
        match name.split_once('.') {
            Some((_, parent)) if !parent.is_empty() => name = parent.to_owned(),
            _ => return Ok((name, Vec::new())),
        }
    }
}
