//! dstack-gateway's routing of a name, as the `gateway-route` check reads it.
//!
//! dstack-gateway (Phala Cloud's ingress) routes TLS by the ClientHello's server name
//! (SNI), without terminating it. A name under the gateway's own base domain says where it
//! goes: `<id>-<port>s.<base>` is passed through to port `<port>` of app (or instance)
//! `<id>` (a name without the `s` is terminated by the gateway itself, with its own
//! certificate). Any other name (a custom domain) is routed by a DNS TXT record, the
//! *app address*: `_dstack-app-address.<name>` holding `<id>:<port>`, where `<id>` is an
//! app id (any instance of the app) or an instance id (that one instance), hex without
//! `0x`, and `<port>` the CVM's port. Where that name has no TXT record the gateway also
//! reads the legacy `_tapp-address.<name>` (its `app_address_ns_compat`, on by default),
//! then `_dstack-app-address-wildcard.<parent>` for every name under `<parent>`. Of each
//! record it takes the first character-string; of several records, whichever its
//! resolver returns first. Read from the gateway's sources:
//! github.com/Dstack-TEE/dstack `dstack/gateway/src/proxy.rs`, `proxy/tls_passthough.rs`.
//!
//! [`lookup`] reads the records in that order; [`AppAddress::parse`] reads a value as the
//! gateway does; [`gateway_name`] recognises the gateway's own names; [`published_ports`]
//! lists the CVM ports an attested docker-compose file publishes.

use std::net::SocketAddr;

use hickory_resolver::ResolveError;
use hickory_resolver::proto::rr::{RData, RecordType};

/// The prefix of the app-address TXT record (`<prefix>.<name>`).
pub const APP_ADDRESS_PREFIX: &str = "_dstack-app-address";
/// The legacy prefix the gateway also reads (`app_address_ns_compat`).
pub const LEGACY_PREFIX: &str = "_tapp-address";

/// An app address: where the gateway sends a name's connections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppAddress {
    /// App id or instance id, as written (the gateway matches it exactly).
    pub id: String,
    /// The CVM's port.
    pub port: u16,
}

/// Why a TXT value is not an app address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AppAddressError {
    #[error("{0:?} is not <id>:<port>")]
    NoColon(String),
    #[error("{0:?}: the port is not a number from 0 to 65535")]
    Port(String),
}

impl AppAddress {
    /// Reads `<id>:<port>` as the gateway does: split at the first `:`, the rest a port.
    pub fn parse(value: &str) -> Result<Self, AppAddressError> {
        let (id, port) = value
            .split_once(':')
            .ok_or_else(|| AppAddressError::NoColon(value.to_owned()))?;
        let port = port
            .parse()
            .map_err(|_| AppAddressError::Port(value.to_owned()))?;
        Ok(Self {
            id: id.to_owned(),
            port,
        })
    }
}

/// The TXT records the gateway would route a name by: where they were found, and the
/// first character-string of each (what the gateway reads).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteRecords {
    /// The record's name (no trailing dot).
    pub name: String,
    pub values: Vec<String>,
}

/// The names [`lookup`] reads for `domain`, in the gateway's order.
pub fn record_names(domain: &str) -> Vec<String> {
    let domain = domain.trim_end_matches('.').to_ascii_lowercase();
    let mut names = vec![
        format!("{APP_ADDRESS_PREFIX}.{domain}"),
        format!("{LEGACY_PREFIX}.{domain}"),
    ];
    if let Some((_, parent)) = domain.split_once('.')
        && !parent.is_empty()
    {
        names.push(format!("{APP_ADDRESS_PREFIX}-wildcard.{parent}"));
    }
    names
}

/// Why the app-address records could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LookupError {
    /// The system's resolver configuration could not be read.
    #[error("system resolver: {0}")]
    SystemResolver(#[source] ResolveError),
    /// A lookup failed otherwise than with "no such record".
    #[error("{name}: {source}")]
    Lookup {
        name: String,
        #[source]
        source: ResolveError,
    },
}

/// The first of [`record_names`] that has TXT records, with them; `None` when none has.
/// Asks `dns` (IP:PORT), or the system's resolver.
pub async fn lookup(
    domain: &str,
    dns: Option<SocketAddr>,
) -> Result<Option<RouteRecords>, LookupError> {
    let resolver = crate::dns::resolver(dns).map_err(LookupError::SystemResolver)?;
    for name in record_names(domain) {
        let fqdn = format!("{name}.");
        match resolver.lookup(fqdn.as_str(), RecordType::TXT).await {
            Ok(found) => {
                let values: Vec<String> = found
                    .record_iter()
                    .filter_map(|r| match r.data() {
                        RData::TXT(txt) => Some(
                            txt.txt_data()
                                .first()
                                .map(|s| String::from_utf8_lossy(s).into_owned())
                                .unwrap_or_default(),
                        ),
                        _ => None,
                    })
                    .collect();
                if !values.is_empty() {
                    return Ok(Some(RouteRecords { name, values }));
                }
            }
            Err(e) if e.is_no_records_found() || e.is_nx_domain() => {}
            Err(source) => return Err(LookupError::Lookup { name, source }),
        }
    }
    Ok(None)
}

/// A name under the gateway's own base domain: `<id>[-<port>[s|g]].<base>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayName {
    pub id: String,
    /// The port (default 443 with `s`, else 80).
    pub port: u16,
    /// `s`: TLS passed through to the app. Otherwise the gateway terminates TLS.
    pub passthrough: bool,
    /// The base domain (after the first label).
    pub base: String,
}

/// `domain` read as one of the gateway's own names, if its first label has that form with
/// a 40-hex-digit id (the length of dstack's app and instance ids); `None` otherwise (a
/// custom domain, routed by its TXT record).
pub fn gateway_name(domain: &str) -> Option<GatewayName> {
    let domain = domain.trim_end_matches('.').to_ascii_lowercase();
    let (label, base) = domain.split_once('.')?;
    let mut parts = label.split('-');
    let id = parts.next()?;
    if id.len() != 40 || !id.bytes().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let suffix = parts.next();
    if parts.next().is_some() {
        return None;
    }
    let (port, passthrough) = match suffix {
        None => (None, false),
        Some(s) => {
            let (digits, passthrough) = if let Some(d) = s.strip_suffix('s') {
                (d, true)
            } else if let Some(d) = s.strip_suffix('g') {
                (d, false)
            } else {
                (s, false)
            };
            let port = if digits.is_empty() {
                None
            } else {
                Some(digits.parse::<u16>().ok()?)
            };
            (port, passthrough)
        }
    };
    Some(GatewayName {
        id: id.to_owned(),
        port: port.unwrap_or(if passthrough { 443 } else { 80 }),
        passthrough,
        base: base.to_owned(),
    })
}

/// The CVM ports a docker-compose file publishes, in order, once each: the host side of
/// every `ports:` entry, short syntax (`"[IP:]HOST:CONTAINER[/tcp]"`, ranges included)
/// and long syntax (`published:`). Entries without a host side (docker picks the port),
/// UDP entries and values this reading cannot resolve (`${VAR}`) are left out. The reading
/// is line-based, for block-style YAML as compose files are written (and flow lists on
/// the `ports:` line).
pub fn published_ports(docker_compose: &str) -> Vec<u16> {
    let mut out = Vec::new();
    // The indentation of the `ports:` key whose list is being read.
    let mut block: Option<usize> = None;
    for line in docker_compose.lines() {
        let content = line.trim_start();
        if content.is_empty() || content.starts_with('#') {
            continue;
        }
        let indent = line.len() - content.len();
        if let Some(at) = block {
            let item = content.strip_prefix("- ");
            if indent > at || (indent == at && item.is_some()) {
                let entry = item.unwrap_or(content).trim();
                if let Some(value) = key_value(entry, "published") {
                    push_host_ports(&mut out, value);
                } else if item.is_some() && !starts_like_a_key(entry) {
                    push_short_syntax(&mut out, entry);
                }
                continue;
            }
            block = None;
        }
        let content = content.strip_prefix("- ").unwrap_or(content).trim_start();
        if let Some(value) = key_value(content, "ports") {
            if value.is_empty() {
                block = Some(indent);
            } else if let Some(list) = value.strip_prefix('[') {
                for entry in list.trim_end_matches(']').split(',') {
                    push_short_syntax(&mut out, entry.trim());
                }
            }
        }
    }
    out
}

/// The value of `key: value` (quotes kept), or `None` for another key.
fn key_value<'a>(content: &'a str, key: &str) -> Option<&'a str> {
    let rest = content
        .strip_prefix(key)
        .or_else(|| content.strip_prefix(&format!("\"{key}\"")))?;
    let rest = rest.strip_prefix(':')?;
    let value = rest.split(" #").next().unwrap_or(rest).trim();
    Some(value)
}

/// A long-syntax item (`target: 8443`) rather than a short-syntax string.
fn starts_like_a_key(entry: &str) -> bool {
    entry.starts_with(|c: char| c.is_ascii_alphabetic())
}

fn unquote(s: &str) -> &str {
    s.trim().trim_matches(|c| c == '"' || c == '\'')
}

/// `[IP:]HOST:CONTAINER[/PROTOCOL]`: the HOST part.
fn push_short_syntax(out: &mut Vec<u16>, entry: &str) {
    let entry = unquote(entry.split(" #").next().unwrap_or(entry));
    let (spec, protocol) = entry.split_once('/').unwrap_or((entry, "tcp"));
    if !protocol.eq_ignore_ascii_case("tcp") {
        return;
    }
    // An IPv6 host address in brackets: `[::1]:443:8443`.
    let spec = match spec.strip_prefix('[') {
        Some(rest) => rest.split_once("]:").map_or(rest, |(_, r)| r),
        None => spec,
    };
    let parts: Vec<&str> = spec.split(':').collect();
    let host = match parts.len() {
        2 => parts[0],
        3 => parts[1],
        _ => return,
    };
    push_host_ports(out, host);
}

/// A port or a range `A-B` (at most 1024 ports).
fn push_host_ports(out: &mut Vec<u16>, value: &str) {
    let value = unquote(value);
    let (first, last) = match value.split_once('-') {
        Some((a, b)) => (a.parse::<u16>(), b.parse::<u16>()),
        None => (value.parse::<u16>(), value.parse::<u16>()),
    };
    let (Ok(first), Ok(last)) = (first, last) else {
        return;
    };
    if last < first || last - first > 1023 {
        return;
    }
    for port in first..=last {
        if !out.contains(&port) {
            out.push(port);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn app_addresses_are_read_as_the_gateway_reads_them() {
        let a = AppAddress::parse("3327603e03f5bd1f830812ca4a789277fc31f577:8090").unwrap();
        assert_eq!(a.id, "3327603e03f5bd1f830812ca4a789277fc31f577");
        assert_eq!(a.port, 8090);
        // Split at the first colon: the id is taken as written.
        assert_eq!(AppAddress::parse("0xAB:443").unwrap().id, "0xAB");
        assert!(matches!(
            AppAddress::parse("abc"),
            Err(AppAddressError::NoColon(_))
        ));
        assert!(matches!(
            AppAddress::parse("abc:443:1"),
            Err(AppAddressError::Port(_))
        ));
        assert!(matches!(
            AppAddress::parse("abc:70000"),
            Err(AppAddressError::Port(_))
        ));
    }

    #[test]
    fn the_record_names_follow_the_gateways_order() {
        assert_eq!(
            record_names("Keys.Example.com."),
            [
                "_dstack-app-address.keys.example.com",
                "_tapp-address.keys.example.com",
                "_dstack-app-address-wildcard.example.com",
            ]
        );
        assert_eq!(record_names("localhost").len(), 2);
    }

    #[test]
    fn the_gateways_own_names_are_recognised() {
        let id = "3327603e03f5bd1f830812ca4a789277fc31f577";
        let n = gateway_name(&format!("{id}-8443s.dstack-prod5.phala.network")).unwrap();
        assert_eq!(
            n,
            GatewayName {
                id: id.to_owned(),
                port: 8443,
                passthrough: true,
                base: "dstack-prod5.phala.network".to_owned()
            }
        );
        let n = gateway_name(&format!("{id}-s.gw.test")).unwrap();
        assert_eq!((n.port, n.passthrough), (443, true));
        let n = gateway_name(&format!("{id}.gw.test")).unwrap();
        assert_eq!((n.port, n.passthrough), (80, false));
        let n = gateway_name(&format!("{id}-3000g.gw.test")).unwrap();
        assert_eq!((n.port, n.passthrough), (3000, false));
        // Custom domains, and malformed labels, are not the gateway's names.
        assert_eq!(gateway_name("keys.example.com"), None);
        assert_eq!(gateway_name(&format!("{id}-1-2.gw.test")), None);
        assert_eq!(gateway_name(&format!("{id}-x1s.gw.test")), None);
        assert_eq!(gateway_name(id), None);
    }

    #[test]
    fn published_ports_are_the_host_side_of_each_entry() {
        let compose = r#"services:
  appliance:
    image: x@sha256:00
    ports:
      - "443:8443"
      - 127.0.0.1:9090:9090   # metrics, loopback
      - "8080"
      - "53:53/udp"
      - "[::1]:8444:8444/tcp"
      - 7000-7002:7000-7002
    volumes:
      - data:/var/lib/x
  other:
    ports:
    - target: 80
      published: "8081"
      protocol: tcp
    - published: 8082
  third:
    ports: ["9443:443", "9444"]
volumes:
  data:
"#;
        assert_eq!(
            published_ports(compose),
            [443, 9090, 8444, 7000, 7001, 7002, 8081, 8082, 9443]
        );
        assert!(published_ports("services:\n  a:\n    image: b\n").is_empty());
    }
}
