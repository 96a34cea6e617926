//! What every listener and the request phases share of a client connection: its facts
//! (`ConnectionInfo`), its limits, the canonical form of its address, and the signal
//! that drains it.

use crate::client::TlsInfo;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;
use tokio::sync::watch;

/// What a request knows of its connection.
#[derive(Debug, Clone)]
pub struct ConnectionInfo {
    /// The real client: from the PROXY header when the peer is a trusted proxy; an
    /// IPv4-mapped IPv6 address is given as IPv4 ([`canonical_address`]), so every later
    /// phase (trusted networks, rate limits, passes, crawler networks) sees one form.
    pub client: SocketAddr,
    /// Whether the connection is TLS (HTTP/3 included).
    pub https: bool,
    /// Whether the connection is QUIC (HTTP/3).
    pub http3: bool,
    /// The TLS facts for the rule components.
    pub tls: Option<TlsInfo>,
    /// `client`'s address as text, formatted once per connection for the access log
    /// and the forwarded headers of each of its requests.
    pub client_text: Box<str>,
}

impl ConnectionInfo {
    pub fn new(client: SocketAddr, https: bool, http3: bool, tls: Option<TlsInfo>) -> Self {
        ConnectionInfo {
            client,
            https,
            http3,
            tls,
            client_text: client.ip().to_string().into(),
        }
    }
}

/// Limits of client connections.
#[derive(Debug, Clone)]
pub struct ConnectionLimits {
    /// The longest a client may take to send a request head (slowloris), and the
    /// PROXY header and TLS handshake before it.
    pub header_read_timeout: Duration,
    /// A connection that moves no byte this long is closed.
    pub idle_timeout: Duration,
    /// The largest request head, in bytes (HTTP/1.1 buffer, HTTP/2 header list).
    pub max_header_bytes: usize,
    /// The most header fields in one HTTP/1.1 request.
    pub max_headers: usize,
    /// How long a graceful shutdown waits for open connections.
    pub drain_timeout: Duration,
}

/// A setting the operator may change while the gateway runs (a configuration reload):
/// read once per connection, swapped whole.
pub type Live<T> = std::sync::Arc<arc_swap::ArcSwap<T>>;

/// `value` as a [`Live`] setting.
pub fn live<T>(value: T) -> Live<T> {
    std::sync::Arc::new(arc_swap::ArcSwap::from_pointee(value))
}

impl ConnectionLimits {
    /// What the HTTP/1.1 loop allows a request head.
    pub fn head(&self) -> botgate_http1::server::HeadLimits {
        botgate_http1::server::HeadLimits {
            max_headers: self.max_headers,
            max_bytes: self.max_header_bytes,
            read_timeout: self.header_read_timeout,
        }
    }
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_header_bytes: 64 * 1024,
            max_headers: 100,
            drain_timeout: Duration::from_secs(30),
        }
    }
}

/// An IPv4-mapped IPv6 address (a dual-stack socket's view of an IPv4 client) as IPv4.
pub fn canonical_address(address: SocketAddr) -> SocketAddr {
    match address.ip() {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(v4.into(), address.port()),
            None => address,
        },
        IpAddr::V4(_) => address,
    }
}

/// Signals the listeners to stop accepting and connections to finish.
#[derive(Clone)]
pub struct Shutdown {
    receiver: watch::Receiver<bool>,
}

impl Shutdown {
    /// A shutdown signal and the sender that triggers it.
    pub fn new() -> (watch::Sender<bool>, Shutdown) {
        let (sender, receiver) = watch::channel(false);
        (sender, Shutdown { receiver })
    }

    /// Resolves once shutdown was asked for (or its sender is gone).
    pub async fn wait(&mut self) {
        let _ = self.receiver.wait_for(|stop| *stop).await;
    }

    /// [`Shutdown::wait`], owning the signal (for `with_graceful_shutdown`).
    pub async fn stopped(mut self) {
        self.wait().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mapped_address_is_its_ipv4_address() {
        let mapped: SocketAddr = "[::ffff:192.0.2.7]:4000".parse().unwrap();
        assert_eq!(
            canonical_address(mapped),
            "192.0.2.7:4000".parse::<SocketAddr>().unwrap()
        );
        let v6: SocketAddr = "[2001:db8::7]:4000".parse().unwrap();
        assert_eq!(canonical_address(v6), v6);
    }
}
