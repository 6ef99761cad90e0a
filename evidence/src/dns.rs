//! The resolver of the DNS checks (`acme-caa`, `gateway-route`): the system's, or a given
//! nameserver (`--dns IP:PORT`, e.g. a local test DNS server), without a cache, so a
//! record changed between two lookups is seen at once.

use std::net::SocketAddr;

use hickory_resolver::config::{NameServerConfigGroup, ResolverConfig, ResolverOpts};
use hickory_resolver::name_server::TokioConnectionProvider;
use hickory_resolver::{ResolveError, Resolver, TokioResolver};

/// A resolver asking `dns` (UDP and TCP, no cache), or the system's resolver when `None`.
pub(crate) fn resolver(dns: Option<SocketAddr>) -> Result<TokioResolver, ResolveError> {
    Ok(match dns {
        Some(addr) => {
            let group = NameServerConfigGroup::from_ips_clear(&[addr.ip()], addr.port(), true);
            let mut opts = ResolverOpts::default();
            opts.cache_size = 0;
            Resolver::builder_with_config(
                ResolverConfig::from_parts(None, vec![], group),
                TokioConnectionProvider::default(),
            )
            .with_options(opts)
            .build()
        }
        None => Resolver::builder_tokio()?.build(),
    })
}
