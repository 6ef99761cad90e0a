//! Which IP addresses an action's `fetch` may reach: the globally reachable ones.
//!
//! The tables below are transcribed (2026-11-23) from the IANA special-purpose address
//! registries:
//!
//! * IPv4 Special-Purpose Address Registry,
//!   <https://www.iana.org/assignments/iana-ipv4-special-registry/>
//! * IPv6 Special-Purpose Address Registry,
//!   <https://www.iana.org/assignments/iana-ipv6-special-registry/>
//!
//! Every entry is kept with its "Globally Reachable" column. An address is judged by the
//! most specific entry containing it (so `192.0.0.9/32`, reachable, wins over
//! `192.0.0.0/24`, not reachable); an entry whose column is False or N/A blocks it. On top
//! of the registries:
//!
//! * IPv4 multicast (`224.0.0.0/4`, the IPv4 Multicast Address Space Registry) is
//!   blocked: an HTTP fetch has no business there.
//! * IPv6 outside `2000::/3` is blocked (the IANA IPv6 Address Space registry allocates
//!   only `2000::/3` as global unicast; the rest is reserved, unique-local, link-local
//!   or multicast), except the IPv4-embedding prefixes below.
//! * Addresses embedding an IPv4 address are judged by that address too: IPv4-mapped
//!   (`::ffff:0:0/96`) and NAT64 (`64:ff9b::/96`) are reachable exactly when the
//!   embedded IPv4 address is; IPv4-compatible (`::/96`, deprecated), 6to4 (`2002::/16`)
//!   and Teredo (`2001::/32`) are blocked whatever they embed (their registry entries
//!   are N/A or False, and a relay may deliver to the embedded address).
//!
//! When the registries change, update the table, its date above and the test per entry.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// One registry entry: its prefix, length, name and "Globally Reachable" (`true` only
/// for True; False and N/A are `false`).
struct Entry<A> {
    prefix: A,
    len: u8,
    name: &'static str,
    global: bool,
}

const fn v4(a: u8, b: u8, c: u8, d: u8, len: u8, name: &'static str, global: bool) -> Entry<u32> {
    Entry {
        prefix: u32::from_be_bytes([a, b, c, d]),
        len,
        name,
        global,
    }
}

const fn v6(segments: [u16; 8], len: u8, name: &'static str, global: bool) -> Entry<u128> {
    let mut value: u128 = 0;
    let mut i = 0;
    while i < 8 {
        value = (value << 16) | segments[i] as u128;
        i += 1;
    }
    Entry {
        prefix: value,
        len,
        name,
        global,
    }
}

/// The IPv4 Special-Purpose Address Registry, in its order, plus multicast.
const IPV4: &[Entry<u32>] = &[
    v4(0, 0, 0, 0, 8, "\"This network\" (RFC 791)", false),
    v4(
        0,
        0,
        0,
        0,
        32,
        "\"This host on this network\" (RFC 1122)",
        false,
    ),
    v4(10, 0, 0, 0, 8, "Private-Use (RFC 1918)", false),
    v4(100, 64, 0, 0, 10, "Shared Address Space (RFC 6598)", false),
    v4(127, 0, 0, 0, 8, "Loopback (RFC 1122)", false),
    v4(169, 254, 0, 0, 16, "Link Local (RFC 3927)", false),
    v4(172, 16, 0, 0, 12, "Private-Use (RFC 1918)", false),
    v4(
        192,
        0,
        0,
        0,
        24,
        "IETF Protocol Assignments (RFC 6890)",
        false,
    ),
    v4(
        192,
        0,
        0,
        0,
        29,
        "IPv4 Service Continuity Prefix (RFC 7335)",
        false,
    ),
    v4(192, 0, 0, 8, 32, "IPv4 dummy address (RFC 7600)", false),
    v4(
        192,
        0,
        0,
        9,
        32,
        "Port Control Protocol Anycast (RFC 7723)",
        true,
    ),
    v4(
        192,
        0,
        0,
        10,
        32,
        "Traversal Using Relays around NAT Anycast (RFC 8155)",
        true,
    ),
    v4(
        192,
        0,
        0,
        170,
        32,
        "NAT64/DNS64 Discovery (RFC 7050)",
        false,
    ),
    v4(
        192,
        0,
        0,
        171,
        32,
        "NAT64/DNS64 Discovery (RFC 7050)",
        false,
    ),
    v4(
        192,
        0,
        2,
        0,
        24,
        "Documentation (TEST-NET-1) (RFC 5737)",
        false,
    ),
    v4(192, 31, 196, 0, 24, "AS112-v4 (RFC 7535)", true),
    v4(192, 52, 193, 0, 24, "AMT (RFC 7450)", true),
    v4(
        192,
        88,
        99,
        0,
        24,
        "Deprecated (6to4 Relay Anycast) (RFC 7526)",
        false,
    ),
    v4(192, 168, 0, 0, 16, "Private-Use (RFC 1918)", false),
    v4(
        192,
        175,
        48,
        0,
        24,
        "Direct Delegation AS112 Service (RFC 7534)",
        true,
    ),
    v4(198, 18, 0, 0, 15, "Benchmarking (RFC 2544)", false),
    v4(
        198,
        51,
        100,
        0,
        24,
        "Documentation (TEST-NET-2) (RFC 5737)",
        false,
    ),
    v4(
        203,
        0,
        113,
        0,
        24,
        "Documentation (TEST-NET-3) (RFC 5737)",
        false,
    ),
    v4(240, 0, 0, 0, 4, "Reserved (RFC 1112)", false),
    v4(
        255,
        255,
        255,
        255,
        32,
        "Limited Broadcast (RFC 8190, RFC 919)",
        false,
    ),
    // Not in the special-purpose registry: the IPv4 Multicast Address Space.
    v4(224, 0, 0, 0, 4, "Multicast (RFC 5771)", false),
];

/// The IPv6 Special-Purpose Address Registry, in its order.
const IPV6: &[Entry<u128>] = &[
    v6(
        [0, 0, 0, 0, 0, 0, 0, 1],
        128,
        "Loopback Address (RFC 4291)",
        false,
    ),
    v6([0; 8], 128, "Unspecified Address (RFC 4291)", false),
    v6(
        [0, 0, 0, 0, 0, 0xffff, 0, 0],
        96,
        "IPv4-mapped Address (RFC 4291)",
        false,
    ),
    v6(
        [0x64, 0xff9b, 0, 0, 0, 0, 0, 0],
        96,
        "IPv4-IPv6 Translat. (RFC 6052)",
        true,
    ),
    v6(
        [0x64, 0xff9b, 1, 0, 0, 0, 0, 0],
        48,
        "IPv4-IPv6 Translat. (RFC 8215)",
        false,
    ),
    v6(
        [0x100, 0, 0, 0, 0, 0, 0, 0],
        64,
        "Discard-Only Address Block (RFC 6666)",
        false,
    ),
    v6([0x100, 0, 0, 1, 0, 0, 0, 0], 64, "Dummy IPv6 Prefix", false),
    v6(
        [0x2001, 0, 0, 0, 0, 0, 0, 0],
        23,
        "IETF Protocol Assignments (RFC 2928)",
        false,
    ),
    v6(
        [0x2001, 0, 0, 0, 0, 0, 0, 0],
        32,
        "TEREDO (RFC 4380, RFC 8190)",
        false,
    ),
    v6(
        [0x2001, 1, 0, 0, 0, 0, 0, 1],
        128,
        "Port Control Protocol Anycast (RFC 7723)",
        true,
    ),
    v6(
        [0x2001, 1, 0, 0, 0, 0, 0, 2],
        128,
        "Traversal Using Relays around NAT Anycast (RFC 8155)",
        true,
    ),
    v6(
        [0x2001, 1, 0, 0, 0, 0, 0, 3],
        128,
        "DNS-SD Service Registration Protocol Anycast (RFC 9665)",
        true,
    ),
    v6(
        [0x2001, 2, 0, 0, 0, 0, 0, 0],
        48,
        "Benchmarking (RFC 5180, RFC Errata 1752)",
        false,
    ),
    v6([0x2001, 3, 0, 0, 0, 0, 0, 0], 32, "AMT (RFC 7450)", true),
    v6(
        [0x2001, 4, 0x112, 0, 0, 0, 0, 0],
        48,
        "AS112-v6 (RFC 7535)",
        true,
    ),
    v6(
        [0x2001, 0x10, 0, 0, 0, 0, 0, 0],
        28,
        "Deprecated (previously ORCHID) (RFC 4843)",
        false,
    ),
    v6(
        [0x2001, 0x20, 0, 0, 0, 0, 0, 0],
        28,
        "ORCHIDv2 (RFC 7343)",
        true,
    ),
    v6(
        [0x2001, 0x30, 0, 0, 0, 0, 0, 0],
        28,
        "Drone Remote ID Protocol Entity Tags (DETs) Prefix (RFC 9374)",
        true,
    ),
    v6(
        [0x2001, 0xdb8, 0, 0, 0, 0, 0, 0],
        32,
        "Documentation (RFC 3849)",
        false,
    ),
    v6([0x2002, 0, 0, 0, 0, 0, 0, 0], 16, "6to4 (RFC 3056)", false),
    v6(
        [0x2620, 0x4f, 0x8000, 0, 0, 0, 0, 0],
        48,
        "Direct Delegation AS112 Service (RFC 7534)",
        true,
    ),
    v6(
        [0x3fff, 0, 0, 0, 0, 0, 0, 0],
        20,
        "Documentation (RFC 9637)",
        false,
    ),
    v6(
        [0x5f00, 0, 0, 0, 0, 0, 0, 0],
        16,
        "Segment Routing (SRv6) SIDs (RFC 9602)",
        false,
    ),
    v6(
        [0xfc00, 0, 0, 0, 0, 0, 0, 0],
        7,
        "Unique-Local (RFC 4193, RFC 8190)",
        false,
    ),
    v6(
        [0xfe80, 0, 0, 0, 0, 0, 0, 0],
        10,
        "Link-Local Unicast (RFC 4291)",
        false,
    ),
];

fn mask<const BITS: u32>(len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        (u128::MAX << (128 - u32::from(len))) >> (128 - BITS)
    }
}

/// The most specific entry of `table` containing `addr`.
fn most_specific<T: Copy + Into<u128>, const BITS: u32>(
    table: &'static [Entry<T>],
    addr: u128,
) -> Option<&'static Entry<T>> {
    table
        .iter()
        .filter(|e| addr & mask::<BITS>(e.len) == e.prefix.into())
        .max_by_key(|e| e.len)
}

/// The registry entry that blocks `ip`, if any (its name, for the refusal message).
fn blocking_v4(ip: Ipv4Addr) -> Option<&'static str> {
    most_specific::<_, 32>(IPV4, u128::from(u32::from(ip)))
        .filter(|e| !e.global)
        .map(|e| e.name)
}

/// Why `ip` is not globally reachable, or `None` when an action may fetch it.
pub fn not_global_reason(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => blocking_v4(v4),
        IpAddr::V6(v6) => not_global_v6(v6),
    }
}

fn not_global_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let bits = u128::from(ip);
    let embedded = Ipv4Addr::from(bits as u32);
    // IPv4-mapped and NAT64 (well-known prefix) reach the embedded IPv4 address.
    if bits >> 32 == 0xffff || bits >> 32 == 0x0064_ff9b_0000_0000_0000_0000 {
        return blocking_v4(embedded);
    }
    // IPv4-compatible (deprecated; `::` and `::1` are in the registry).
    if bits >> 32 == 0 {
        return most_specific::<_, 128>(IPV6, bits)
            .map(|e| e.name)
            .or(Some("IPv4-compatible Address (deprecated, RFC 4291)"));
    }
    if let Some(entry) = most_specific::<_, 128>(IPV6, bits) {
        return (!entry.global).then_some(entry.name);
    }
    if bits >> 125 != 0b001 {
        return Some("outside 2000::/3, the only global unicast space (IANA IPv6 Address Space)");
    }
    None
}

/// True when an action may not fetch `ip`.
pub fn is_blocked(ip: IpAddr) -> bool {
    not_global_reason(ip).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocked(text: &str) -> bool {
        is_blocked(text.parse().unwrap())
    }

    /// One address inside every registry entry, judged as its "Globally Reachable"
    /// column says, and the addresses either side of the blocks the issue named.
    #[test]
    fn every_ipv4_entry() {
        let cases = [
            ("0.1.2.3", true),
            ("0.0.0.0", true),
            ("10.255.0.1", true),
            ("100.64.0.1", true),
            ("100.127.255.254", true),
            ("100.128.0.1", false),
            ("127.0.0.1", true),
            ("169.254.169.254", true),
            ("172.16.0.1", true),
            ("172.31.255.255", true),
            ("172.32.0.1", false),
            ("192.0.0.1", true),
            ("192.0.0.8", true),
            ("192.0.0.9", false),
            ("192.0.0.10", false),
            ("192.0.0.170", true),
            ("192.0.0.171", true),
            ("192.0.0.200", true),
            ("192.0.2.5", true),
            ("192.31.196.1", false),
            ("192.52.193.1", false),
            ("192.88.99.1", true),
            ("192.168.1.1", true),
            ("192.175.48.1", false),
            ("198.17.255.255", false),
            ("198.18.0.1", true),
            ("198.19.255.255", true),
            ("198.20.0.0", false),
            ("198.51.100.7", true),
            ("203.0.113.9", true),
            ("224.0.0.1", true),
            ("239.255.255.250", true),
            ("240.0.0.1", true),
            ("255.255.255.254", true),
            ("255.255.255.255", true),
            ("1.1.1.1", false),
            ("8.8.8.8", false),
            ("223.255.255.255", false),
        ];
        for (ip, want) in cases {
            assert_eq!(blocked(ip), want, "{ip}");
        }
        // Every entry of the table is exercised by a case above.
        for entry in IPV4 {
            let hit = cases.iter().any(|(ip, _)| {
                let a: Ipv4Addr = ip.parse().unwrap();
                u128::from(u32::from(a)) & mask::<32>(entry.len) == u128::from(entry.prefix)
                    && most_specific::<_, 32>(IPV4, u128::from(u32::from(a))).map(|e| e.name)
                        == Some(entry.name)
            });
            assert!(hit, "no case for {}", entry.name);
        }
    }

    #[test]
    fn every_ipv6_entry() {
        let cases = [
            ("::1", true),
            ("::", true),
            ("::ffff:127.0.0.1", true),
            ("::ffff:10.0.0.1", true),
            ("::ffff:8.8.8.8", false),
            ("64:ff9b::8.8.8.8", false),
            ("64:ff9b::10.0.0.1", true),
            ("64:ff9b::198.18.0.1", true),
            ("64:ff9b:1::1", true),
            ("100::1", true),
            ("100:0:0:1::1", true),
            ("2001:0:4136:e378:8000:63bf:3fff:fdd2", true),
            ("2001:1::1", false),
            ("2001:1::2", false),
            ("2001:1::3", false),
            ("2001:1::4", true),
            ("2001:2::1", true),
            ("2001:3::1", false),
            ("2001:4:112::1", false),
            ("2001:10::1", true),
            ("2001:20::1", false),
            ("2001:30::1", false),
            ("2001:db8::1", true),
            ("2002:c0a8:0101::1", true),
            ("2002:0808:0808::1", true),
            ("2620:4f:8000::1", false),
            ("3fff::1", true),
            ("5f00::1", true),
            ("fd00::1", true),
            ("fc00::1", true),
            ("fe80::1", true),
            ("ff02::1", true),
            ("::8.8.8.8", true),
            ("4000::1", true),
            ("2606:4700:4700::1111", false),
            ("2a00:1450:4001:80b::200e", false),
        ];
        for (ip, want) in cases {
            assert_eq!(blocked(ip), want, "{ip}");
        }
        for entry in IPV6 {
            let hit = cases.iter().any(|(ip, _)| {
                let a: Ipv6Addr = ip.parse().unwrap();
                most_specific::<_, 128>(IPV6, u128::from(a)).map(|e| e.name) == Some(entry.name)
            });
            assert!(hit, "no case for {}", entry.name);
        }
    }
}
