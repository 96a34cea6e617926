//! Forward-confirmed reverse DNS: the names an address's PTR records give that resolve
//! back to the same address, looked up once per address and kept for a while.
//!
//! A crawler whose operator publishes host-name suffixes rather than (or besides)
//! networks — `crawl-66-249-66-1.googlebot.com` — is verified when one of the address's
//! confirmed names ends in one of them. Only claims outside the listed networks reach
//! this; concurrent requests from one address wait for one lookup.
//!
//! An IPv6 client can rotate through the 2^64 addresses of its network; a bot doing so
//! with a crawler's user agent would cost one lookup per request. So an address that
//! failed confirmation marks its whole /64 unconfirmed for as long as the answer is
//! kept, and the other addresses of that network are not looked up meanwhile. (A real
//! crawler's network confirms; the networks the operators publish are checked before
//! any lookup.)

use hickory_resolver::TokioResolver;
use hickory_resolver::config::{ConnectionConfig, NameServerConfig, ResolverConfig};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::proto::rr::RData;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Where and how long names are looked up and kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReverseDnsConfig {
    /// DNS servers (UDP and TCP) to ask; the system's (`/etc/resolv.conf`) when empty.
    pub servers: Vec<SocketAddr>,
    /// The longest one lookup (PTR, then the forward lookups) may take.
    pub timeout: Duration,
    /// How long a confirmed name is kept.
    pub confirmed_for: Duration,
    /// How long "no confirmed name" (or a failed lookup) is kept.
    pub unconfirmed_for: Duration,
    /// Addresses whose answers are kept at most.
    pub capacity: usize,
}

impl Default for ReverseDnsConfig {
    fn default() -> Self {
        ReverseDnsConfig {
            servers: Vec::new(),
            timeout: Duration::from_secs(2),
            confirmed_for: Duration::from_secs(3600),
            unconfirmed_for: Duration::from_secs(300),
            capacity: 65_536,
        }
    }
}

/// Why the resolver could not be set up.
#[derive(Debug, thiserror::Error)]
#[error("setting up the DNS resolver: {0}")]
pub struct ResolverError(String);

/// The confirmed names of one address, and until when they hold.
#[derive(Clone)]
struct Answer {
    names: Arc<[String]>,
    until: Instant,
}

/// Forward-confirmed reverse lookups with a bounded cache.
pub struct ReverseDns {
    resolver: TokioResolver,
    cache: quick_cache::sync::Cache<IpAddr, Answer>,
    /// IPv6 /64 networks (the address's first 64 bits) with an address that failed
    /// confirmation, and until when that holds.
    unconfirmed_networks: quick_cache::sync::Cache<u64, Instant>,
    lookups: AtomicU64,
    config: ReverseDnsConfig,
}

/// The /64 network of an IPv6 address; IPv4 addresses (and IPv4-mapped IPv6 ones) are
/// looked up one by one.
fn ipv6_network(address: IpAddr) -> Option<u64> {
    match address {
        IpAddr::V6(v6) if v6.to_ipv4_mapped().is_none() => Some((v6.to_bits() >> 64) as u64),
        _ => None,
    }
}

impl ReverseDns {
    pub fn new(config: ReverseDnsConfig) -> Result<ReverseDns, ResolverError> {
        let resolver = resolver(&config.servers, config.timeout)?;
        Ok(ReverseDns {
            resolver,
            cache: quick_cache::sync::Cache::new(config.capacity.max(16)),
            unconfirmed_networks: quick_cache::sync::Cache::new(config.capacity.max(16)),
            lookups: AtomicU64::new(0),
            config,
        })
    }

    /// The names of `address` whose forward lookup includes `address` again.
    pub async fn confirmed_names(&self, address: IpAddr) -> Arc<[String]> {
        if let Some(answer) = self.cache.get(&address) {
            if answer.until > Instant::now() {
                return answer.names;
            }
            self.cache.remove(&address);
        }
        let network = ipv6_network(address);
        if network
            .and_then(|network| self.unconfirmed_networks.get(&network))
            .is_some_and(|until| until > Instant::now())
        {
            return Arc::from([]);
        }
        let guard = match self.cache.get_value_or_guard_async(&address).await {
            Ok(answer) => return answer.names,
            Err(guard) => guard,
        };
        let names: Arc<[String]> =
            match tokio::time::timeout(self.config.timeout * 2, self.look_up(address)).await {
                Ok(names) => names.into(),
                Err(_) => {
                    tracing::debug!(%address, "reverse DNS timed out");
                    Arc::from([])
                }
            };
        let keep = if names.is_empty() {
            self.config.unconfirmed_for
        } else {
            self.config.confirmed_for
        };
        let until = Instant::now() + keep;
        if let (true, Some(network)) = (names.is_empty(), network) {
            self.unconfirmed_networks.insert(network, until);
        }
        let _ = guard.insert(Answer {
            names: names.clone(),
            until,
        });
        names
    }

    /// Reverse lookups started so far (each may be followed by forward lookups).
    pub fn lookups(&self) -> u64 {
        self.lookups.load(Ordering::Relaxed)
    }

    async fn look_up(&self, address: IpAddr) -> Vec<String> {
        self.lookups.fetch_add(1, Ordering::Relaxed);
        let pointers = match self.resolver.reverse_lookup(address).await {
            Ok(lookup) => lookup
                .answers()
                .iter()
                .filter_map(|record| match &record.data {
                    RData::PTR(name) => Some(name.0.to_ascii()),
                    _ => None,
                })
                .collect::<Vec<_>>(),
            Err(err) => {
                tracing::debug!(%address, %err, "no PTR record");
                return Vec::new();
            }
        };
        let mut confirmed = Vec::new();
        // A hostile PTR zone may list many names; a handful is plenty.
        for name in pointers.into_iter().take(4) {
            let Ok(forward) = self.resolver.lookup_ip(name.as_str()).await else {
                continue;
            };
            if forward.iter().any(|ip| ip == address) {
                confirmed.push(normalise(&name));
            }
        }
        confirmed
    }
}

/// A resolver asking `servers` (UDP, then TCP) or, when none are given, the system's
/// (`/etc/resolv.conf`); one attempt per query, each bounded by `timeout`.
pub fn resolver(servers: &[SocketAddr], timeout: Duration) -> Result<TokioResolver, ResolverError> {
    let mut builder = if servers.is_empty() {
        TokioResolver::builder_tokio().map_err(|err| ResolverError(err.to_string()))?
    } else {
        let servers = servers
            .iter()
            .map(|server| {
                let connections = [ConnectionConfig::udp(), ConnectionConfig::tcp()]
                    .into_iter()
                    .map(|mut connection| {
                        connection.port = server.port();
                        connection
                    })
                    .collect();
                NameServerConfig::new(server.ip(), true, connections)
            })
            .collect();
        TokioResolver::builder_with_config(
            ResolverConfig::from_name_servers(servers),
            TokioRuntimeProvider::default(),
        )
    };
    let options = builder.options_mut();
    options.timeout = timeout;
    options.attempts = 1;
    let resolver = builder
        .build()
        .map_err(|err| ResolverError(err.to_string()))?;
    Ok(resolver)
}

/// A host name in lower case without the root's trailing dot.
fn normalise(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// Whether `name` is `suffix` or a name under it.
pub fn under(name: &str, suffix: &str) -> bool {
    let suffix = suffix.trim_start_matches('.').trim_end_matches('.');
    !suffix.is_empty()
        && name.len() >= suffix.len()
        && name[name.len() - suffix.len()..].eq_ignore_ascii_case(suffix)
        && (name.len() == suffix.len() || name.as_bytes()[name.len() - suffix.len() - 1] == b'.')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_unconfirmed_ipv6_address_spares_the_lookups_of_its_network() {
        // A server that answers nothing: every lookup fails, so nothing confirms.
        let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let dns = ReverseDns::new(ReverseDnsConfig {
            servers: vec![silent.local_addr().unwrap()],
            timeout: Duration::from_millis(100),
            ..ReverseDnsConfig::default()
        })
        .unwrap();
        let first: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        assert!(dns.confirmed_names(first).await.is_empty());
        assert_eq!(dns.lookups(), 1);
        // The same /64, another address: no lookup.
        let rotated: IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        assert!(dns.confirmed_names(rotated).await.is_empty());
        assert_eq!(dns.lookups(), 1);
        // Another /64 and IPv4 addresses are looked up one by one.
        let neighbour: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert!(dns.confirmed_names(neighbour).await.is_empty());
        assert_eq!(dns.lookups(), 2);
        for v4 in ["192.0.2.1", "192.0.2.2"] {
            assert!(dns.confirmed_names(v4.parse().unwrap()).await.is_empty());
        }
        assert_eq!(dns.lookups(), 4);
    }

    #[test]
    fn names_match_whole_labels() {
        assert!(under("crawl-1.googlebot.com", "googlebot.com"));
        assert!(under("crawl-1.googlebot.com", ".googlebot.com"));
        assert!(under("googlebot.com", "googlebot.com"));
        assert!(under("CRAWL.GoogleBot.com", "googlebot.com"));
        assert!(!under("evilgooglebot.com", "googlebot.com"));
        assert!(!under("googlebot.com.evil.net", "googlebot.com"));
        assert!(!under("com", "googlebot.com"));
        assert!(!under("anything", ""));
    }
}
