//! Which addresses a webhook may be sent to: public ones, unless the operator allows
//! some private networks. The check is made on the address the connection is made to
//! (after resolution), so a name that resolves to a private address is refused too.

use botgate_model::addresses::{METADATA, judged};
use ipnet::IpNet;
use std::net::IpAddr;

/// Networks that are not the public internet (IANA's special-purpose registries):
/// loopback, private, link-local, shared (CGNAT), documentation, benchmarking,
/// multicast, reserved, and their IPv6 counterparts.
const NOT_PUBLIC: &[&str] = &[
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.0.0.0/24",
    "192.0.2.0/24",
    "192.88.99.0/24",
    "192.168.0.0/16",
    "198.18.0.0/15",
    "198.51.100.0/24",
    "203.0.113.0/24",
    "224.0.0.0/4",
    "240.0.0.0/4",
    "::/128",
    "::1/128",
    "64:ff9b:1::/48",
    "100::/64",
    "2001::/23",
    "2001:db8::/32",
    "2002::/16",
    "fc00::/7",
    "fe80::/10",
    "ff00::/8",
];

/// Where webhooks may go.
#[derive(Debug, Clone, Default)]
pub struct AddressPolicy {
    /// Private networks the operator allows (`127.0.0.0/8` for a receiver on the same
    /// machine, say).
    pub allowed: Vec<IpNet>,
}

impl AddressPolicy {
    /// Whether a connection to `address` may be made.
    pub fn permits(&self, address: IpAddr) -> bool {
        // An IPv6 address that carries an IPv4 one (mapped, NAT64, 6to4, Teredo) is
        // judged by both: each must be public or allowed, so allowing the wrapping
        // network does not open the addresses inside it.
        // A cloud metadata service is refused even inside an allowed network.
        judged(address).all(|a| {
            !METADATA.contains(&a)
                && (is_public(a) || self.allowed.iter().any(|net| net.contains(&a)))
        })
    }
}

/// Whether `address` is on the public internet (a cloud provider's metadata service,
/// public as its address may look, is not).
pub fn is_public(address: IpAddr) -> bool {
    !METADATA.contains(&address)
        && !NOT_PUBLIC.iter().any(|net| {
            net.parse::<IpNet>()
                .is_ok_and(|network| network.contains(&address))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_addresses_are_refused_unless_allowed() {
        let policy = AddressPolicy::default();
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "172.20.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            // NAT64, 6to4 and Teredo forms of private and loopback addresses.
            "64:ff9b::7f00:1",
            "64:ff9b::a00:1",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b:1::a00:1",
            "2002:7f00:1::1",
            "2002:a00:1::1",
            "2001:0:4136:e378:8000:63bf:80ff:fffe",
        ] {
            assert!(!policy.permits(private.parse().unwrap()), "{private}");
        }
        for public in [
            "8.8.8.8",
            "1.1.1.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
        ] {
            assert!(policy.permits(public.parse().unwrap()), "{public}");
        }
        let loopback = AddressPolicy {
            allowed: vec!["127.0.0.0/8".parse().unwrap()],
        };
        assert!(loopback.permits("127.0.0.1".parse().unwrap()));
        assert!(loopback.permits("::ffff:127.0.0.2".parse().unwrap()));
        assert!(!loopback.permits("10.0.0.1".parse().unwrap()));
        // Azure's metadata and DNS address is refused though it looks public.
        assert!(!policy.permits("168.63.129.16".parse().unwrap()));
        assert!(!policy.permits("::ffff:168.63.129.16".parse().unwrap()));
        // Allowing NAT64's network opens what it carries only where that is public or
        // allowed too.
        let nat64 = AddressPolicy {
            allowed: vec!["64:ff9b::/96".parse().unwrap()],
        };
        assert!(nat64.permits("64:ff9b::808:808".parse().unwrap()));
        assert!(!nat64.permits("64:ff9b::a9fe:a9fe".parse().unwrap()));
        assert!(!nat64.permits("64:ff9b::7f00:1".parse().unwrap()));
        let shared = AddressPolicy {
            allowed: vec!["100.64.0.0/10".parse().unwrap()],
        };
        assert!(shared.permits("100.100.1.1".parse().unwrap()));
        assert!(!shared.permits("100.100.100.200".parse().unwrap()));
    }
}
