//! Which addresses the gateway may connect to as a website's origin (the origin address
//! policy), and the IPv4 address an IPv6 one carries, which every address policy judges
//! instead of the wrapper.

use ipnet::IpNet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The IPv4 address `v6` carries, if it is one of the forms that reach an IPv4 host:
/// IPv4-mapped (`::ffff:a.b.c.d`) and IPv4-compatible (`::a.b.c.d`), NAT64's
/// well-known prefix (`64:ff9b::/96`), 6to4 (`2002:AABB:CCDD::/48`) and Teredo
/// (`2001:0::/32`, the client's address inverted in the last 32 bits). (The local-use
/// NAT64 prefix `64:ff9b:1::/48` places the address where its translator chooses:
/// policies refuse it as a whole.)
pub fn embedded_ipv4(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = v6.segments();
    let last = Ipv4Addr::from(u32::from(s[6]) << 16 | u32::from(s[7]));
    if let Some(mapped) = v6.to_ipv4_mapped() {
        return Some(mapped);
    }
    match s {
        // `::` and `::1` are IPv6's own.
        [0, 0, 0, 0, 0, 0, 0, 0 | 1] => None,
        [0, 0, 0, 0, 0, 0, _, _] | [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Some(last),
        [0x2002, high, low, ..] => Some(Ipv4Addr::from(u32::from(high) << 16 | u32::from(low))),
        [0x2001, 0, ..] => Some(Ipv4Addr::from(!u32::from(last))),
        _ => None,
    }
}

/// The address itself and, for an IPv6 form that carries one, its IPv4 address: what
/// an address policy judges.
pub fn judged(ip: IpAddr) -> impl Iterator<Item = IpAddr> {
    let inner = match ip {
        IpAddr::V6(v6) => embedded_ipv4(v6).map(IpAddr::V4),
        IpAddr::V4(_) => None,
    };
    std::iter::once(ip).chain(inner)
}

/// Why an address may not be a website's origin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OriginRefusal {
    #[error("it is this gateway's own address")]
    Gateway,
    #[error("the operator denies the network {0}")]
    Denied(IpNet),
    #[error("loopback addresses are not origins")]
    Loopback,
    #[error("link-local addresses (cloud metadata services among them) are not origins")]
    LinkLocal,
    #[error("it is a cloud provider's metadata service")]
    Metadata,
    #[error("the unspecified address is not an origin")]
    Unspecified,
    #[error("multicast and broadcast addresses are not origins")]
    Multicast,
    #[error("a local-use NAT64 address (64:ff9b:1::/48) hides which IPv4 address it reaches")]
    LocalNat64,
}

/// Cloud metadata services outside the link-local ranges (Alibaba, Azure's wire server,
/// AWS over IPv6).
pub const METADATA: [IpAddr; 3] = [
    IpAddr::V4(Ipv4Addr::new(100, 100, 100, 200)),
    IpAddr::V4(Ipv4Addr::new(168, 63, 129, 16)),
    IpAddr::V6(Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254)),
];

/// The refusal `ip` gets by default, judged alone.
fn default_refusal(ip: IpAddr) -> Option<OriginRefusal> {
    if METADATA.contains(&ip) {
        return Some(OriginRefusal::Metadata);
    }
    match ip {
        IpAddr::V4(v4) => {
            let [first, ..] = v4.octets();
            if v4.is_loopback() {
                Some(OriginRefusal::Loopback)
            } else if v4.is_link_local() {
                Some(OriginRefusal::LinkLocal)
            } else if first == 0 {
                Some(OriginRefusal::Unspecified)
            } else if v4.is_multicast() || first >= 240 {
                // 240.0.0.0/4 is reserved, its last address the limited broadcast.
                Some(OriginRefusal::Multicast)
            } else {
                None
            }
        }
        IpAddr::V6(v6) => {
            if v6.is_loopback() {
                Some(OriginRefusal::Loopback)
            } else if v6.is_unicast_link_local() {
                Some(OriginRefusal::LinkLocal)
            } else if v6.is_unspecified() {
                Some(OriginRefusal::Unspecified)
            } else if v6.is_multicast() {
                Some(OriginRefusal::Multicast)
            } else if v6.segments()[..3] == [0x64, 0xff9b, 1] {
                Some(OriginRefusal::LocalNat64)
            } else {
                None
            }
        }
    }
}

/// Which addresses may be origins. By default anything but loopback, link-local and
/// metadata addresses, the unspecified address, multicast and broadcast (and the IPv6
/// forms that carry such an IPv4 address), and the gateway's own addresses; private
/// networks are allowed (origins often sit on one). Operators widen it with `allow`
/// and narrow it with `deny`, which wins; the gateway's own addresses are never allowed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OriginPolicy {
    /// Networks allowed although refused by default (`127.0.0.0/8` for a demo origin
    /// on the same machine).
    pub allow: Vec<IpNet>,
    /// Networks refused although allowed by default or by `allow`.
    pub deny: Vec<IpNet>,
    /// The gateway's own addresses (`--public-address`): a website pointing there would
    /// send the gateway its own requests.
    pub gateway: Vec<IpAddr>,
    /// The gateway's own listeners: an origin at one of them is the gateway itself (an
    /// unspecified listener address stands for loopback and `gateway`).
    pub listeners: Vec<SocketAddr>,
}

impl OriginPolicy {
    /// Whether `ip` may be an origin, judged on the address alone (as the API does when
    /// `ip` is written).
    pub fn check(&self, ip: IpAddr) -> Result<(), OriginRefusal> {
        if judged(ip).any(|ip| self.gateway.contains(&ip)) {
            return Err(OriginRefusal::Gateway);
        }
        if let Some(net) = judged(ip).find_map(|ip| self.deny.iter().find(|n| n.contains(&ip))) {
            return Err(OriginRefusal::Denied(*net));
        }
        // Each form is judged: an allowed wrapper does not let a refused IPv4 address
        // through, nor an allowed IPv4 address a refused wrapper.
        match judged(ip)
            .filter(|ip| !self.allow.iter().any(|n| n.contains(ip)))
            .find_map(default_refusal)
        {
            Some(refusal) => Err(refusal),
            None => Ok(()),
        }
    }

    /// Whether the gateway may connect to `origin` (as it does before every new origin
    /// connection): [`OriginPolicy::check`], and never one of its own listeners.
    pub fn check_connect(&self, origin: SocketAddr) -> Result<(), OriginRefusal> {
        let ip = origin.ip();
        let is_listener = self.listeners.iter().any(|listener| {
            listener.port() == origin.port()
                && judged(ip).any(|ip| {
                    listener.ip() == ip
                        || (listener.ip().is_unspecified()
                            && (ip.is_loopback() || self.gateway.contains(&ip)))
                })
        });
        if is_listener {
            return Err(OriginRefusal::Gateway);
        }
        self.check(ip)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn the_ipv4_address_inside_an_ipv6_one_is_found() {
        for (v6, v4) in [
            ("::ffff:127.0.0.1", "127.0.0.1"),
            ("64:ff9b::7f00:1", "127.0.0.1"),
            ("64:ff9b::a9fe:a9fe", "169.254.169.254"),
            ("::7f00:1", "127.0.0.1"),
            ("2002:7f00:1::1", "127.0.0.1"),
            ("2002:c0a8:101::", "192.168.1.1"),
            // Teredo: server 65.54.227.120, client 192.0.2.45 inverted.
            ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "192.0.2.45"),
        ] {
            assert_eq!(
                embedded_ipv4(v6.parse().unwrap()),
                Some(v4.parse().unwrap()),
                "{v6}"
            );
        }
        for alone in ["2606:4700::1111", "::", "::1", "64:ff9b:1::a00:1"] {
            assert_eq!(embedded_ipv4(alone.parse().unwrap()), None, "{alone}");
        }
    }

    #[test]
    fn origins_at_loopback_link_local_metadata_or_the_gateway_are_refused() {
        let policy = OriginPolicy {
            gateway: vec![ip("203.0.113.7")],
            ..OriginPolicy::default()
        };
        for (address, refusal) in [
            ("127.0.0.1", OriginRefusal::Loopback),
            ("127.1.2.3", OriginRefusal::Loopback),
            ("::1", OriginRefusal::Loopback),
            ("::ffff:127.0.0.1", OriginRefusal::Loopback),
            ("64:ff9b::7f00:1", OriginRefusal::Loopback),
            ("169.254.169.254", OriginRefusal::LinkLocal),
            ("64:ff9b::a9fe:a9fe", OriginRefusal::LinkLocal),
            ("::7f00:1", OriginRefusal::Loopback),
            ("64:ff9b:1:7f00:0:100:808:808", OriginRefusal::LocalNat64),
            ("fe80::1", OriginRefusal::LinkLocal),
            ("fd00:ec2::254", OriginRefusal::Metadata),
            ("100.100.100.200", OriginRefusal::Metadata),
            ("0.0.0.0", OriginRefusal::Unspecified),
            ("::", OriginRefusal::Unspecified),
            ("224.0.0.1", OriginRefusal::Multicast),
            ("255.255.255.255", OriginRefusal::Multicast),
            ("ff02::1", OriginRefusal::Multicast),
            ("203.0.113.7", OriginRefusal::Gateway),
            ("::ffff:203.0.113.7", OriginRefusal::Gateway),
        ] {
            assert_eq!(policy.check(ip(address)), Err(refusal), "{address}");
        }
        for allowed in [
            "192.0.2.10",
            "10.1.2.3",
            "192.168.1.1",
            "2001:db8::10",
            "64:ff9b::808:808",
        ] {
            assert_eq!(policy.check(ip(allowed)), Ok(()), "{allowed}");
        }
    }

    #[test]
    fn operators_widen_and_narrow_the_policy() {
        let policy = OriginPolicy {
            allow: vec!["127.0.0.0/8".parse().unwrap()],
            deny: vec![
                "10.0.0.0/8".parse().unwrap(),
                "127.0.0.9/32".parse().unwrap(),
            ],
            gateway: vec![ip("127.0.0.5")],
            listeners: vec![
                "127.0.0.1:8180".parse().unwrap(),
                "0.0.0.0:8443".parse().unwrap(),
            ],
        };
        assert_eq!(policy.check(ip("127.0.0.1")), Ok(()));
        assert_eq!(policy.check(ip("::ffff:127.0.0.1")), Ok(()));
        assert_eq!(policy.check(ip("::1")), Err(OriginRefusal::Loopback));
        assert!(matches!(
            policy.check(ip("10.2.3.4")),
            Err(OriginRefusal::Denied(_))
        ));
        assert!(matches!(
            policy.check(ip("127.0.0.9")),
            Err(OriginRefusal::Denied(_))
        ));
        assert_eq!(policy.check(ip("127.0.0.5")), Err(OriginRefusal::Gateway));
        // Allowing a wrapper's network lets no refused IPv4 address through it.
        let wrappers = OriginPolicy {
            allow: vec!["2002::/16".parse().unwrap()],
            ..OriginPolicy::default()
        };
        assert_eq!(wrappers.check(ip("2002:c000:20a::1")), Ok(()));
        assert_eq!(
            wrappers.check(ip("2002:7f00:1::1")),
            Err(OriginRefusal::Loopback)
        );
        // Allowed loopback is still never the gateway's own listener.
        let connect = |s: &str| policy.check_connect(s.parse().unwrap());
        assert_eq!(connect("127.0.0.1:9000"), Ok(()));
        assert_eq!(connect("127.0.0.1:8180"), Err(OriginRefusal::Gateway));
        assert_eq!(connect("127.0.0.2:8443"), Err(OriginRefusal::Gateway));
        assert_eq!(connect("127.0.0.2:8180"), Ok(()));
    }
}
