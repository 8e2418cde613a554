//! The address ranges the `http` tool never connects to.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Is this address in a blocked range? Returns the range's name.
///
/// Blocked: unspecified, "this network", private (RFC 1918), CGNAT, loopback,
/// link-local (cloud metadata 169.254.169.254), IETF protocol assignments,
/// documentation, benchmarking, 6to4 relay, multicast, reserved, broadcast;
/// IPv6 unspecified, loopback, IPv4-mapped/-compatible/NAT64/6to4 embedding a
/// blocked IPv4, Teredo, discard, documentation, unique-local (`fd00:ec2::254`),
/// link-local, site-local, multicast.
pub fn blocked_range(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => blocked_v4(v4),
        IpAddr::V6(v6) => blocked_v6(v6),
    }
}

fn blocked_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let o = ip.octets();
    let n = u32::from(ip);
    let within = |net: u32, bits: u32| (n ^ net) >> (32 - bits) == 0;
    Some(match () {
        _ if n == u32::MAX => "broadcast",
        _ if o[0] == 0 => "unspecified / this-network",
        _ if o[0] == 127 => "loopback",
        _ if o[0] == 10 => "private",
        _ if within(0xAC10_0000, 12) => "private",
        _ if within(0xC0A8_0000, 16) => "private",
        _ if within(0x6440_0000, 10) => "shared (CGNAT)",
        _ if within(0xA9FE_0000, 16) => "link-local (cloud metadata)",
        _ if within(0xC000_0000, 24) => "IETF protocol assignment",
        _ if within(0xC000_0200, 24) => "documentation",
        _ if within(0xC633_6400, 24) => "documentation",
        _ if within(0xCB00_7100, 24) => "documentation",
        _ if within(0xC058_6300, 24) => "6to4 relay",
        _ if within(0xC612_0000, 15) => "benchmarking",
        _ if o[0] >= 224 && o[0] < 240 => "multicast",
        _ if o[0] >= 240 => "reserved",
        _ => return None,
    })
}

fn blocked_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    let embedded_v4 = |hi: u16, lo: u16| Ipv4Addr::from(((hi as u32) << 16) | lo as u32);
    if ip.is_unspecified() {
        return Some("unspecified");
    }
    if ip.is_loopback() {
        return Some("loopback");
    }
    // ::ffff:a.b.c.d (mapped) carries an IPv4 whose range decides.
    if s[..6] == [0, 0, 0, 0, 0, 0xffff] {
        return blocked_v4(embedded_v4(s[6], s[7]));
    }
    // ::a.b.c.d (deprecated IPv4-compatible form): never a real destination.
    if s[..6] == [0, 0, 0, 0, 0, 0] {
        return Some(blocked_v4(embedded_v4(s[6], s[7])).unwrap_or("IPv4-compatible"));
    }
    // NAT64 well-known prefix 64:ff9b::/96 embeds an IPv4.
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return blocked_v4(embedded_v4(s[6], s[7]));
    }
    Some(match s[0] {
        0x64 if s[1] == 0xff9b && s[2] == 1 => "local-use NAT64",
        0x100 if s[1..4] == [0, 0, 0] => "discard",
        0x2001 if s[1] == 0 => "Teredo",
        0x2001 if s[1] == 0xdb8 => "documentation",
        0x2002 => return blocked_v4(embedded_v4(s[1], s[2])),
        x if x & 0xfff0 == 0x3ff0 => "documentation",
        x if x & 0xfe00 == 0xfc00 => "unique-local",
        x if x & 0xffc0 == 0xfe80 => "link-local",
        x if x & 0xffc0 == 0xfec0 => "site-local",
        x if x & 0xff00 == 0xff00 => "multicast",
        _ => return None,
    })
}

pub(super) fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn ranges() {
        for s in [
            "0.0.0.0",
            "10.1.2.3",
            "100.64.0.1",
            "127.0.0.1",
            "127.255.0.9",
            "169.254.169.254",
            "172.16.0.1",
            "172.31.255.255",
            "192.0.0.170",
            "192.0.2.1",
            "192.168.1.1",
            "198.18.0.1",
            "198.51.100.7",
            "203.0.113.9",
            "224.0.0.1",
            "239.255.255.250",
            "240.0.0.1",
            "255.255.255.255",
            "100.100.100.200",
            "::",
            "::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "2002:a9fe:a9fe::1",
            "2001::1",
            "2001:db8::1",
            "fd00:ec2::254",
            "fc00::1",
            "fe80::1",
            "fec0::1",
            "ff02::1",
        ] {
            assert!(blocked_range(ip(s)).is_some(), "{s} should be blocked");
        }
        for s in ["1.1.1.1", "93.184.216.34", "172.32.0.1", "2606:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808"] {
            assert_eq!(blocked_range(ip(s)), None, "{s} should be allowed");
        }
    }
}
