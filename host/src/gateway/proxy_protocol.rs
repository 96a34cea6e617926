//! PROXY protocol v2: the real client address a trusted TCP proxy (the cluster's
//! HAProxy) puts in front of each connection. The header is read exactly once, by
//! length, so not one byte of the client's own data is consumed with it; the parsing is
//! the `ppp` crate's.

use ppp::v2::{Addresses, Command, Header};
use std::net::SocketAddr;
use tokio::io::{AsyncRead, AsyncReadExt};

/// The fixed part of a v2 header: the 12-byte signature, version and command, family
/// and protocol, and the length of what follows.
const FIXED_LEN: usize = 16;
const SIGNATURE: [u8; 12] = *b"\r\n\r\n\0\r\nQUIT\n";
/// The longest header accepted (addresses plus TLVs such as HAProxy's SSL facts).
const MAX_LEN: usize = FIXED_LEN + 4096;

/// Why a connection from a trusted peer was closed before any HTTP.
#[derive(Debug, thiserror::Error)]
pub enum ProxyHeaderError {
    #[error("the connection did not start with a PROXY protocol v2 header")]
    Missing,
    #[error("malformed PROXY protocol v2 header: {0}")]
    Malformed(String),
    #[error("PROXY protocol header longer than {MAX_LEN} bytes")]
    TooLong,
    #[error("reading the PROXY protocol header: {0}")]
    Io(#[from] std::io::Error),
}

/// Reads one v2 header from `stream` and answers the client address it carries:
/// the source address for a `PROXY` command, `None` for `LOCAL` (the proxy's own
/// health check) or an unspecified family, which keep the peer's address.
pub async fn read_header<S: AsyncRead + Unpin>(
    stream: &mut S,
) -> Result<Option<SocketAddr>, ProxyHeaderError> {
    let mut buffer = vec![0u8; FIXED_LEN];
    stream.read_exact(&mut buffer).await?;
    if buffer[..12] != SIGNATURE {
        return Err(ProxyHeaderError::Missing);
    }
    let rest = usize::from(u16::from_be_bytes([buffer[14], buffer[15]]));
    if FIXED_LEN + rest > MAX_LEN {
        return Err(ProxyHeaderError::TooLong);
    }
    buffer.resize(FIXED_LEN + rest, 0);
    stream.read_exact(&mut buffer[FIXED_LEN..]).await?;
    let header = Header::try_from(&buffer[..])
        .map_err(|err| ProxyHeaderError::Malformed(err.to_string()))?;
    if header.command == Command::Local {
        return Ok(None);
    }
    Ok(match header.addresses {
        Addresses::IPv4(a) => Some(SocketAddr::from((a.source_address, a.source_port))),
        Addresses::IPv6(a) => Some(SocketAddr::from((a.source_address, a.source_port))),
        Addresses::Unspecified | Addresses::Unix(_) => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ppp::v2::{Builder, Protocol, Version};

    fn header(command: Command, from: &str, to: &str) -> Vec<u8> {
        let addresses: Addresses = (
            from.parse::<SocketAddr>().unwrap(),
            to.parse::<SocketAddr>().unwrap(),
        )
            .into();
        Builder::with_addresses(Version::Two | command, Protocol::Stream, addresses)
            .build()
            .unwrap()
    }

    #[tokio::test]
    async fn reads_exactly_the_header_and_no_more() {
        let mut bytes = header(Command::Proxy, "203.0.113.9:5555", "127.0.0.1:8180");
        bytes.extend_from_slice(b"GET / HTTP/1.1\r\n");
        let mut stream = &bytes[..];
        let client = read_header(&mut stream).await.unwrap();
        assert_eq!(client, Some("203.0.113.9:5555".parse().unwrap()));
        assert_eq!(stream, b"GET / HTTP/1.1\r\n");
    }

    #[tokio::test]
    async fn ipv6_and_local_commands() {
        let bytes = header(Command::Proxy, "[2001:db8::1]:443", "[::1]:8443");
        let client = read_header(&mut &bytes[..]).await.unwrap();
        assert_eq!(client, Some("[2001:db8::1]:443".parse().unwrap()));
        let bytes = header(Command::Local, "127.0.0.1:1", "127.0.0.1:2");
        assert_eq!(read_header(&mut &bytes[..]).await.unwrap(), None);
    }

    #[tokio::test]
    async fn plain_http_and_garbage_are_refused() {
        let plain = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
        assert!(matches!(
            read_header(&mut &plain[..]).await,
            Err(ProxyHeaderError::Missing)
        ));
        let mut bad = header(Command::Proxy, "203.0.113.9:5555", "127.0.0.1:8180");
        bad[12] = 0x11; // version 1 in a v2 header
        assert!(matches!(
            read_header(&mut &bad[..]).await,
            Err(ProxyHeaderError::Malformed(_))
        ));
        let short = &header(Command::Proxy, "203.0.113.9:5555", "127.0.0.1:8180")[..20];
        assert!(matches!(
            read_header(&mut &short[..]).await,
            Err(ProxyHeaderError::Io(_))
        ));
    }
}
