//! Which IP addresses count as public destinations.
//!
//! The tables below follow the IANA IPv4 and IPv6 Special-Purpose Address
//! Registries as read on 2026-11-30 (sources in `docs/security-model.md`).
//! Every block whose "Globally Reachable" column is not `True` is denied,
//! plus multicast and the reserved IPv4 space. IPv6 is allow-listed: only
//! global unicast (`2000::/3`) outside the listed special blocks, and NAT64
//! `64:ff9b::/96` wrapping a public IPv4 address, are public.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The date on which [`NON_PUBLIC_V4`] and [`NON_PUBLIC_V6_IN_GLOBAL`] were
/// last compared with the IANA registries.
pub const ADDRESS_TABLE_DATE: &str = "2026-11-30";

/// IPv4 blocks that are never a public destination, as (network, prefix length, name).
pub const NON_PUBLIC_V4: &[(Ipv4Addr, u8, &str)] = &[
    (Ipv4Addr::new(0, 0, 0, 0), 8, "this network (RFC 791)"),
    (Ipv4Addr::new(10, 0, 0, 0), 8, "private use (RFC 1918)"),
    (
        Ipv4Addr::new(100, 64, 0, 0),
        10,
        "shared address space (RFC 6598)",
    ),
    (Ipv4Addr::new(127, 0, 0, 0), 8, "loopback (RFC 1122)"),
    (Ipv4Addr::new(169, 254, 0, 0), 16, "link local (RFC 3927)"),
    (Ipv4Addr::new(172, 16, 0, 0), 12, "private use (RFC 1918)"),
    (
        Ipv4Addr::new(192, 0, 0, 0),
        24,
        "IETF protocol assignments (RFC 6890)",
    ),
    (
        Ipv4Addr::new(192, 0, 2, 0),
        24,
        "documentation TEST-NET-1 (RFC 5737)",
    ),
    (
        Ipv4Addr::new(192, 88, 99, 0),
        24,
        "deprecated 6to4 relay anycast (RFC 7526)",
    ),
    (Ipv4Addr::new(192, 168, 0, 0), 16, "private use (RFC 1918)"),
    (Ipv4Addr::new(198, 18, 0, 0), 15, "benchmarking (RFC 2544)"),
    (
        Ipv4Addr::new(198, 51, 100, 0),
        24,
        "documentation TEST-NET-2 (RFC 5737)",
    ),
    (
        Ipv4Addr::new(203, 0, 113, 0),
        24,
        "documentation TEST-NET-3 (RFC 5737)",
    ),
    (Ipv4Addr::new(224, 0, 0, 0), 4, "multicast (RFC 5771)"),
    (
        Ipv4Addr::new(240, 0, 0, 0),
        4,
        "reserved and limited broadcast (RFC 1112, RFC 919)",
    ),
];

/// Globally reachable exceptions inside `192.0.0.0/24`.
pub const PUBLIC_V4_EXCEPTIONS: &[(Ipv4Addr, u8, &str)] = &[
    (
        Ipv4Addr::new(192, 0, 0, 9),
        32,
        "port control protocol anycast (RFC 7723)",
    ),
    (
        Ipv4Addr::new(192, 0, 0, 10),
        32,
        "traversal using relays around NAT anycast (RFC 8155)",
    ),
];

/// The one IPv6 block inside which unicast addresses may be public.
pub const GLOBAL_UNICAST_V6: (Ipv6Addr, u8) = (Ipv6Addr::new(0x2000, 0, 0, 0, 0, 0, 0, 0), 3);

/// Blocks inside `2000::/3` that are not globally reachable.
pub const NON_PUBLIC_V6_IN_GLOBAL: &[(Ipv6Addr, u8, &str)] = &[
    (
        Ipv6Addr::new(0x2001, 0, 0, 0, 0, 0, 0, 0),
        23,
        "IETF protocol assignments (RFC 2928)",
    ),
    (
        Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0),
        32,
        "documentation (RFC 3849)",
    ),
    (
        Ipv6Addr::new(0x2002, 0, 0, 0, 0, 0, 0, 0),
        16,
        "6to4 (RFC 3056)",
    ),
    (
        Ipv6Addr::new(0x3fff, 0, 0, 0, 0, 0, 0, 0),
        20,
        "documentation (RFC 9637)",
    ),
];

/// Globally reachable exceptions that IANA lists inside `2001::/23`.
pub const PUBLIC_V6_EXCEPTIONS: &[(Ipv6Addr, u8, &str)] = &[
    (
        Ipv6Addr::new(0x2001, 1, 0, 0, 0, 0, 0, 1),
        128,
        "port control protocol anycast (RFC 7723)",
    ),
    (
        Ipv6Addr::new(0x2001, 1, 0, 0, 0, 0, 0, 2),
        128,
        "TURN anycast (RFC 8155)",
    ),
    (
        Ipv6Addr::new(0x2001, 1, 0, 0, 0, 0, 0, 3),
        128,
        "DNS-SD service registration protocol anycast (RFC 9665)",
    ),
    (
        Ipv6Addr::new(0x2001, 3, 0, 0, 0, 0, 0, 0),
        32,
        "AMT (RFC 7450)",
    ),
    (
        Ipv6Addr::new(0x2001, 4, 0x112, 0, 0, 0, 0, 0),
        48,
        "AS112-v6 (RFC 7535)",
    ),
    (
        Ipv6Addr::new(0x2001, 0x20, 0, 0, 0, 0, 0, 0),
        28,
        "ORCHIDv2 (RFC 7343)",
    ),
    (
        Ipv6Addr::new(0x2001, 0x30, 0, 0, 0, 0, 0, 0),
        28,
        "drone remote ID (RFC 9374)",
    ),
];

/// The well-known NAT64 prefix; an address in it is public when the IPv4
/// address it embeds is.
pub const NAT64_WELL_KNOWN: (Ipv6Addr, u8) = (Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, 0, 0), 96);

fn v4_in(addr: Ipv4Addr, net: Ipv4Addr, len: u8) -> bool {
    let mask = if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len))
    };
    (u32::from(addr) & mask) == (u32::from(net) & mask)
}

fn v6_in(addr: Ipv6Addr, net: Ipv6Addr, len: u8) -> bool {
    let mask = if len == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(len))
    };
    (u128::from(addr) & mask) == (u128::from(net) & mask)
}

/// Whether an IPv4 address is a public (globally reachable unicast) destination.
pub fn is_public_v4(addr: Ipv4Addr) -> bool {
    if PUBLIC_V4_EXCEPTIONS
        .iter()
        .any(|&(net, len, _)| v4_in(addr, net, len))
    {
        return true;
    }
    !NON_PUBLIC_V4
        .iter()
        .any(|&(net, len, _)| v4_in(addr, net, len))
}

/// Whether an IPv6 address is a public (globally reachable unicast) destination.
///
/// IPv4-mapped addresses (`::ffff:0:0/96`) are never public, even when the
/// embedded IPv4 address is: a destination must be written in its own family.
pub fn is_public_v6(addr: Ipv6Addr) -> bool {
    let (nat64, nat64_len) = NAT64_WELL_KNOWN;
    if v6_in(addr, nat64, nat64_len) {
        let [.., a, b, c, d] = addr.octets();
        return is_public_v4(Ipv4Addr::new(a, b, c, d));
    }
    let (global, global_len) = GLOBAL_UNICAST_V6;
    if !v6_in(addr, global, global_len) {
        return false;
    }
    if PUBLIC_V6_EXCEPTIONS
        .iter()
        .any(|&(net, len, _)| v6_in(addr, net, len))
    {
        return true;
    }
    !NON_PUBLIC_V6_IN_GLOBAL
        .iter()
        .any(|&(net, len, _)| v6_in(addr, net, len))
}

/// Whether `addr` is a public destination: not inside any special-purpose
/// block that is not globally reachable.
///
/// ```
/// use std::net::IpAddr;
/// use countersign_canonical_policy::is_public;
///
/// assert!(is_public("93.184.216.34".parse::<IpAddr>().unwrap()));
/// assert!(!is_public("10.0.0.5".parse::<IpAddr>().unwrap()));
/// assert!(!is_public("::ffff:93.184.216.34".parse::<IpAddr>().unwrap()));
/// ```
pub fn is_public(addr: IpAddr) -> bool {
    match addr {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

/// First and last address of `net/len` as numbers, with the family width.
fn span(net: IpAddr, len: u8) -> (u128, u128) {
    let (width, value) = match net {
        IpAddr::V4(a) => (32u32, u128::from(u32::from(a))),
        IpAddr::V6(a) => (128u32, u128::from(a)),
    };
    let host_bits = width.saturating_sub(u32::from(len));
    let host_mask = u128::MAX.checked_shr(128 - host_bits).unwrap_or(0);
    (value & !host_mask, (value & !host_mask) | host_mask)
}

/// The first and one-past-last address of each row, as numbers.
fn edges<A: Copy + Into<IpAddr>>(
    rows: &'static [(A, u8, &'static str)],
) -> impl Iterator<Item = u128> {
    rows.iter().flat_map(|&(net, len, _)| {
        let (first, last) = span(net.into(), len);
        [Some(first), last.checked_add(1)].into_iter().flatten()
    })
}

/// A public address inside `net/len`, if there is one.
///
/// `is_public` is constant between consecutive edges of the tables' blocks
/// (inside the NAT64 prefix: of the IPv4 blocks it embeds), so checking the
/// range's first address and every edge inside it is exact.
pub(crate) fn public_address_in(net: IpAddr, len: u8) -> Option<IpAddr> {
    let (first, last) = span(net, len);
    let v4_edges = || edges(NON_PUBLIC_V4).chain(edges(PUBLIC_V4_EXCEPTIONS));
    let candidates: Vec<u128> = match net {
        IpAddr::V4(_) => v4_edges().collect(),
        IpAddr::V6(_) => {
            let (nat64, nat64_len) = NAT64_WELL_KNOWN;
            let (global, global_len) = GLOBAL_UNICAST_V6;
            let (nat64_first, nat64_last) = span(IpAddr::V6(nat64), nat64_len);
            let (global_first, global_last) = span(IpAddr::V6(global), global_len);
            edges(NON_PUBLIC_V6_IN_GLOBAL)
                .chain(edges(PUBLIC_V6_EXCEPTIONS))
                .chain([nat64_first, global_first])
                .chain(
                    [nat64_last.checked_add(1), global_last.checked_add(1)]
                        .into_iter()
                        .flatten(),
                )
                .chain(v4_edges().map(|edge| nat64_first | edge))
                .collect()
        }
    };
    let mut inside: Vec<u128> = std::iter::once(first)
        .chain(
            candidates
                .into_iter()
                .filter(|c| (first..=last).contains(c)),
        )
        .collect();
    // The lowest public address, so that the build error names a stable one.
    inside.sort_unstable();
    inside
        .into_iter()
        .map(|value| match net {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::from(u32::try_from(value).unwrap_or(u32::MAX))),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::from(value)),
        })
        .find(|&addr| is_public(addr))
}
