//! The PROXY protocol, version 2 (the binary header an L4 load balancer such as HAProxy
//! with `send-proxy-v2` writes before the client's bytes), and the set of balancer
//! addresses it is accepted from (`http.proxy_protocol_from`).
//!
//! Invariant: a header is read only from a TCP peer inside the configured set, and from
//! such a peer it is required. Any other peer's first bytes go to TLS untouched, so a
//! client cannot claim another address (a forged header is not a TLS record and the
//! handshake fails). With the set empty (the default) nothing here runs.
//!
//! The layout (PROXY protocol specification, haproxy.org, "2.2. Binary header format"):
//!
//! ```text
//! 12 bytes  signature  \r\n\r\n\0\r\nQUIT\n
//!  1 byte   version (high nibble, 2) and command (low nibble: 0 LOCAL, 1 PROXY)
//!  1 byte   address family (high nibble: 0 UNSPEC, 1 INET, 2 INET6, 3 UNIX) and
//!           transport (low nibble: 0 UNSPEC, 1 STREAM, 2 DGRAM)
//!  2 bytes  length of what follows, big-endian
//!  then     addresses (INET: 4+4+2+2 bytes; INET6: 16+16+2+2; UNIX: 108+108), then TLVs
//! ```
//!
//! Exactly the header's bytes are consumed (16 plus its length), so what follows (the
//! TLS ClientHello) is read by TLS as if it had come first. TLVs are skipped; the length
//! is bounded by [`MAX_PAYLOAD`]. The caller reads under the TLS handshake timeout, so a
//! balancer-address peer that sends nothing, or a slow trickle, cannot hold a connection.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::str::FromStr;

use tokio::io::{AsyncRead, AsyncReadExt};

/// The v2 signature, the first 12 bytes of every header.
pub const SIGNATURE: [u8; 12] = *b"\r\n\r\n\0\r\nQUIT\n";

/// The fixed part: signature, version/command, family/transport, length.
const PREFIX_LEN: usize = 16;

/// The most bytes accepted after the fixed part (addresses and TLVs). The largest
/// address block (UNIX, 216 bytes) and the TLVs balancers send (a unique id, an
/// authority, a cloud's endpoint id) fit many times; a longer header is refused rather
/// than buffered.
pub const MAX_PAYLOAD: usize = 2048;

/// What a valid header says about the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Header {
    /// `LOCAL`: the balancer's own connection (a health check). The TCP peer, the
    /// balancer, is the client.
    Local,
    /// `PROXY` for a family without an IP address (UNSPEC, UNIX): the balancer is the
    /// client (such clients share its budgets rather than escape them).
    Unaddressed,
    /// `PROXY` over TCP: the original client and the address it connected to.
    Proxied {
        source: SocketAddr,
        destination: SocketAddr,
    },
}

impl Header {
    /// The client the connection's per-client limits, logs and traces key on, given the
    /// TCP peer (the balancer).
    pub fn client(self, peer: SocketAddr) -> SocketAddr {
        match self {
            Self::Proxied { source, .. } => source,
            Self::Local | Self::Unaddressed => peer,
        }
    }
}

/// Why a header was refused (the connection is then closed).
#[derive(Debug, thiserror::Error)]
pub enum ProxyHeaderError {
    #[error("the first bytes are not a PROXY protocol v2 signature")]
    Signature,
    #[error("PROXY protocol version {0} (only 2 is accepted)")]
    Version(u8),
    #[error("unknown PROXY protocol command {0}")]
    Command(u8),
    #[error("unsupported address family and transport 0x{0:02x}")]
    Family(u8),
    #[error("a PROXY header of {0} bytes after the fixed part (at most {MAX_PAYLOAD})")]
    TooLong(usize),
    #[error("{len} address bytes are too few for family 0x{family:02x}")]
    TooShort { family: u8, len: usize },
    #[error("the header ended early")]
    Truncated,
    #[error("reading the PROXY header: {0}")]
    Io(std::io::Error),
}

/// The fixed part, checked: the command, the family byte and the payload length.
fn parse_prefix(prefix: &[u8; PREFIX_LEN]) -> Result<(u8, u8, usize), ProxyHeaderError> {
    if prefix[..12] != SIGNATURE {
        return Err(ProxyHeaderError::Signature);
    }
    let version = prefix[12] >> 4;
    if version != 2 {
        return Err(ProxyHeaderError::Version(version));
    }
    let command = prefix[12] & 0x0f;
    if command > 1 {
        return Err(ProxyHeaderError::Command(command));
    }
    let len = usize::from(u16::from_be_bytes([prefix[14], prefix[15]]));
    if len > MAX_PAYLOAD {
        return Err(ProxyHeaderError::TooLong(len));
    }
    Ok((command, prefix[13], len))
}

/// The addresses of a `PROXY` (command 1) payload; LOCAL ignores them, as the
/// specification says.
fn parse_payload(command: u8, family: u8, payload: &[u8]) -> Result<Header, ProxyHeaderError> {
    if command == 0 {
        return Ok(Header::Local);
    }
    let need = match family {
        0x00 => return Ok(Header::Unaddressed),
        0x11 => 12,
        0x21 => 36,
        0x31 => 216,
        // DGRAM and unknown values: the specification says to drop the connection.
        other => return Err(ProxyHeaderError::Family(other)),
    };
    if payload.len() < need {
        return Err(ProxyHeaderError::TooShort {
            family,
            len: payload.len(),
        });
    }
    let port = |at: usize| u16::from_be_bytes([payload[at], payload[at + 1]]);
    Ok(match family {
        0x11 => {
            let ip = |at: usize| {
                Ipv4Addr::new(
                    payload[at],
                    payload[at + 1],
                    payload[at + 2],
                    payload[at + 3],
                )
            };
            Header::Proxied {
                source: SocketAddr::new(ip(0).into(), port(8)),
                destination: SocketAddr::new(ip(4).into(), port(10)),
            }
        }
        0x21 => {
            let ip = |at: usize| {
                let mut octets = [0u8; 16];
                octets.copy_from_slice(&payload[at..at + 16]);
                Ipv6Addr::from(octets)
            };
            Header::Proxied {
                source: SocketAddr::new(ip(0).into(), port(32)),
                destination: SocketAddr::new(ip(16).into(), port(34)),
            }
        }
        _ => Header::Unaddressed,
    })
}

/// Parses a header at the start of `bytes`: the header and how many bytes it took.
pub fn parse(bytes: &[u8]) -> Result<(Header, usize), ProxyHeaderError> {
    let Some(prefix) = bytes.first_chunk::<PREFIX_LEN>() else {
        // A short buffer that is not even a prefix of the signature is not a header.
        let n = bytes.len().min(SIGNATURE.len());
        return Err(if bytes[..n] == SIGNATURE[..n] {
            ProxyHeaderError::Truncated
        } else {
            ProxyHeaderError::Signature
        });
    };
    let (command, family, len) = parse_prefix(prefix)?;
    let payload = bytes
        .get(PREFIX_LEN..PREFIX_LEN + len)
        .ok_or(ProxyHeaderError::Truncated)?;
    Ok((parse_payload(command, family, payload)?, PREFIX_LEN + len))
}

/// Reads one header from `stream`, consuming exactly its bytes.
pub async fn read_header<R: AsyncRead + Unpin>(stream: &mut R) -> Result<Header, ProxyHeaderError> {
    let io = |err: std::io::Error| match err.kind() {
        std::io::ErrorKind::UnexpectedEof => ProxyHeaderError::Truncated,
        _ => ProxyHeaderError::Io(err),
    };
    let mut prefix = [0u8; PREFIX_LEN];
    // The signature first, so a peer sending anything else is refused without waiting
    // for more bytes than it takes to tell.
    stream.read_exact(&mut prefix[..12]).await.map_err(io)?;
    if prefix[..12] != SIGNATURE {
        return Err(ProxyHeaderError::Signature);
    }
    stream.read_exact(&mut prefix[12..]).await.map_err(io)?;
    let (command, family, len) = parse_prefix(&prefix)?;
    let mut payload = vec![0u8; len];
    stream.read_exact(&mut payload).await.map_err(io)?;
    parse_payload(command, family, &payload)
}

/// An IP network: an address and a prefix length (`10.0.0.0/8`, `2001:db8::/32`; a bare
/// address is a single host).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpNet {
    addr: IpAddr,
    prefix: u8,
}

impl IpNet {
    /// True when `ip` is inside this network. An IPv4-mapped IPv6 address counts as its
    /// IPv4 address (a dual-stack listener reports IPv4 peers that way).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip.to_canonical()) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

impl FromStr for IpNet {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (addr, prefix) = match s.split_once('/') {
            Some((addr, prefix)) => (addr, Some(prefix)),
            None => (s, None),
        };
        let addr: IpAddr = addr
            .parse()
            .map_err(|_| format!("{s:?} is not an IP address or network (a.b.c.d/n)"))?;
        let addr = addr.to_canonical();
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(|| format!("{s:?}: the prefix length must be 0..={max}"))?,
        };
        Ok(Self { addr, prefix })
    }
}

impl fmt::Display for IpNet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

impl serde::Serialize for IpNet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for IpNet {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// True when `peer` is one of the configured balancers (so its connections must start
/// with a header).
pub fn from_balancer(balancers: &[IpNet], peer: IpAddr) -> bool {
    balancers.iter().any(|net| net.contains(peer))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A header as the specification lays it out: signature, `ver_cmd`, `fam`, length,
    /// then `rest`.
    fn header(ver_cmd: u8, fam: u8, rest: &[u8]) -> Vec<u8> {
        let mut out = SIGNATURE.to_vec();
        out.push(ver_cmd);
        out.push(fam);
        out.extend_from_slice(&u16::try_from(rest.len()).unwrap().to_be_bytes());
        out.extend_from_slice(rest);
        out
    }

    /// TCP over IPv4: 192.0.2.10:51234 → 198.51.100.7:8443, then a TLV
    /// (PP2_TYPE_AUTHORITY, 0x02, "a.example") that must be skipped.
    fn tcp4_with_tlv() -> Vec<u8> {
        let mut rest = vec![192, 0, 2, 10, 198, 51, 100, 7];
        rest.extend_from_slice(&51234u16.to_be_bytes());
        rest.extend_from_slice(&8443u16.to_be_bytes());
        rest.extend_from_slice(&[0x02, 0x00, 0x09]);
        rest.extend_from_slice(b"a.example");
        header(0x21, 0x11, &rest)
    }

    #[test]
    fn a_tcp4_header_gives_the_client_and_skips_its_tlvs() {
        let mut bytes = tcp4_with_tlv();
        assert_eq!(
            &bytes[..16],
            b"\r\n\r\n\0\r\nQUIT\n\x21\x11\x00\x18",
            "the fixed part, byte for byte as in the specification"
        );
        let header_len = bytes.len();
        // The TLS ClientHello that follows is not consumed.
        bytes.extend_from_slice(&[0x16, 0x03, 0x01]);
        let (header, used) = parse(&bytes).unwrap();
        assert_eq!(used, header_len);
        assert_eq!(
            header,
            Header::Proxied {
                source: "192.0.2.10:51234".parse().unwrap(),
                destination: "198.51.100.7:8443".parse().unwrap(),
            }
        );
        let balancer: SocketAddr = "10.0.0.5:40000".parse().unwrap();
        assert_eq!(header.client(balancer), "192.0.2.10:51234".parse().unwrap());
    }

    #[test]
    fn a_tcp6_header_gives_the_client() {
        let src: Ipv6Addr = "2001:db8::1".parse().unwrap();
        let dst: Ipv6Addr = "2001:db8::2".parse().unwrap();
        let mut rest = src.octets().to_vec();
        rest.extend_from_slice(&dst.octets());
        rest.extend_from_slice(&443u16.to_be_bytes());
        rest.extend_from_slice(&8443u16.to_be_bytes());
        let (header, used) = parse(&header(0x21, 0x21, &rest)).unwrap();
        assert_eq!(used, 16 + 36);
        assert_eq!(
            header,
            Header::Proxied {
                source: "[2001:db8::1]:443".parse().unwrap(),
                destination: "[2001:db8::2]:8443".parse().unwrap(),
            }
        );
    }

    #[test]
    fn local_and_unaddressed_headers_leave_the_balancer_as_the_client() {
        // LOCAL (0x20) with UNSPEC and no addresses, as HAProxy sends for health checks;
        // LOCAL ignores whatever family and addresses it carries.
        let (local, used) = parse(&header(0x20, 0x00, &[])).unwrap();
        assert_eq!((local, used), (Header::Local, 16));
        assert_eq!(
            parse(&header(0x20, 0x11, &[1, 2, 3])).unwrap().0,
            Header::Local
        );
        let (unspec, _) = parse(&header(0x21, 0x00, &[])).unwrap();
        assert_eq!(unspec, Header::Unaddressed);
        let (unix, _) = parse(&header(0x21, 0x31, &[0u8; 216])).unwrap();
        assert_eq!(unix, Header::Unaddressed);
        let balancer: SocketAddr = "10.0.0.5:40000".parse().unwrap();
        assert_eq!(local.client(balancer), balancer);
        assert_eq!(unix.client(balancer), balancer);
    }

    #[test]
    fn malformed_headers_are_refused() {
        let good = tcp4_with_tlv();
        // Not a header at all: a TLS ClientHello, and the text v1 form.
        let hello = [
            0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03,
        ];
        assert!(matches!(parse(&hello), Err(ProxyHeaderError::Signature)));
        let mut v1 = b"PROXY TCP4 192.0.2.10 198.51.100.7 51234 8443\r\n".to_vec();
        v1.extend_from_slice(&hello);
        assert!(matches!(parse(&v1), Err(ProxyHeaderError::Signature)));
        // One bit off in the signature.
        let mut bad = good.clone();
        bad[11] ^= 1;
        assert!(matches!(parse(&bad), Err(ProxyHeaderError::Signature)));
        // Version 1 in the binary form, and unknown commands.
        let mut bad = good.clone();
        bad[12] = 0x11;
        assert!(matches!(parse(&bad), Err(ProxyHeaderError::Version(1))));
        let mut bad = good.clone();
        bad[12] = 0x22;
        assert!(matches!(parse(&bad), Err(ProxyHeaderError::Command(2))));
        // UDP and unknown families.
        for fam in [0x12, 0x22, 0x32, 0x41, 0x10] {
            let mut bad = good.clone();
            bad[13] = fam;
            assert!(
                matches!(parse(&bad), Err(ProxyHeaderError::Family(f)) if f == fam),
                "family 0x{fam:02x}"
            );
        }
        // Too few address bytes for the family.
        assert!(matches!(
            parse(&header(0x21, 0x11, &[192, 0, 2, 10, 198, 51])),
            Err(ProxyHeaderError::TooShort { len: 6, .. })
        ));
        assert!(matches!(
            parse(&header(0x21, 0x21, &[0u8; 35])),
            Err(ProxyHeaderError::TooShort { len: 35, .. })
        ));
    }

    #[test]
    fn truncated_and_oversized_headers_are_refused() {
        let good = tcp4_with_tlv();
        for cut in [1, 11, 12, 15, 16, good.len() - 1] {
            assert!(
                matches!(parse(&good[..cut]), Err(ProxyHeaderError::Truncated)),
                "cut at {cut}"
            );
        }
        // A length over the bound is refused from the fixed part alone.
        let mut huge = good[..16].to_vec();
        huge[14..16].copy_from_slice(&u16::MAX.to_be_bytes());
        assert!(matches!(
            parse(&huge),
            Err(ProxyHeaderError::TooLong(65535))
        ));
        let at_bound = header(0x21, 0x11, &[0u8; MAX_PAYLOAD]);
        assert!(parse(&at_bound).is_ok());
        let over = header(0x21, 0x11, &[0u8; MAX_PAYLOAD + 1]);
        assert!(matches!(parse(&over), Err(ProxyHeaderError::TooLong(_))));
    }

    #[tokio::test]
    async fn reading_consumes_exactly_the_header() {
        let mut bytes = tcp4_with_tlv();
        bytes.extend_from_slice(b"\x16\x03\x01rest");
        let mut stream = &bytes[..];
        let header = read_header(&mut stream).await.unwrap();
        assert!(matches!(header, Header::Proxied { .. }));
        assert_eq!(stream, b"\x16\x03\x01rest", "the TLS bytes are left");

        // Garbage is refused after the 12 bytes it takes to tell; an early end is
        // truncation; an oversized length is refused before its payload is read.
        let mut garbage = &b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"[..];
        assert!(matches!(
            read_header(&mut garbage).await,
            Err(ProxyHeaderError::Signature)
        ));
        assert_eq!(garbage, b".1\r\nHost: x\r\n\r\n", "12 bytes read, no more");
        let good = tcp4_with_tlv();
        let mut short = &good[..20];
        assert!(matches!(
            read_header(&mut short).await,
            Err(ProxyHeaderError::Truncated)
        ));
        let mut huge = good[..16].to_vec();
        huge[14..16].copy_from_slice(&4096u16.to_be_bytes());
        let mut huge = &huge[..];
        assert!(matches!(
            read_header(&mut huge).await,
            Err(ProxyHeaderError::TooLong(4096))
        ));
    }

    #[test]
    fn balancer_networks_match_addresses() {
        let nets: Vec<IpNet> = ["10.1.2.3", "192.168.0.0/16", "2001:db8::/32"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        let yes = [
            "10.1.2.3",
            "192.168.200.1",
            "2001:db8:ffff::1",
            "::ffff:10.1.2.3",
        ];
        let no = ["10.1.2.4", "192.169.0.1", "2001:db9::1", "127.0.0.1"];
        for ip in yes {
            assert!(from_balancer(&nets, ip.parse().unwrap()), "{ip}");
        }
        for ip in no {
            assert!(!from_balancer(&nets, ip.parse().unwrap()), "{ip}");
        }
        assert!(
            !from_balancer(&[], "10.1.2.3".parse().unwrap()),
            "off by default"
        );
        let everything: IpNet = "0.0.0.0/0".parse().unwrap();
        assert!(everything.contains("203.0.113.9".parse().unwrap()));
        for bad in ["10.0.0.0/33", "::/129", "10.0.0", "10.0.0.0/x", ""] {
            assert!(bad.parse::<IpNet>().is_err(), "{bad}");
        }
        assert_eq!(
            "192.168.0.0/16".parse::<IpNet>().unwrap().to_string(),
            "192.168.0.0/16"
        );
        assert_eq!(
            "10.1.2.3".parse::<IpNet>().unwrap().to_string(),
            "10.1.2.3/32"
        );
    }
}
