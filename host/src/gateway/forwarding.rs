//! The headers of a forwarded request and response: hop-by-hop headers removed (RFC
//! 9110 §7.6.1), the real client added as `X-Forwarded-For`, `X-Forwarded-Proto` and
//! `Forwarded` (RFC 7239), and the gateway's `Via` (RFC 9110 §7.6.3), by which it
//! knows a request it sent itself.

use botgate_http1::wire::header_tokens;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use smallvec::SmallVec;

/// Headers that describe one connection and never travel past it, `Expect` (the
/// gateway answers a `100-continue` itself, and an origin that refused the body
/// unasked could read it as its next request), and `Upgrade` last (it goes too, except
/// from a WebSocket handshake); [`hop_by_hop_bit`] numbers them.
static HOP_BY_HOP: [HeaderName; 10] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::EXPECT,
    header::UPGRADE,
];

/// The bit of `name` in a set of [`HOP_BY_HOP`] names (`1 << i` for the `i`-th), 0 for
/// any other name. One `match`: the compiler dispatches on the length first.
fn hop_by_hop_bit(name: &HeaderName) -> u16 {
    match name.as_str() {
        "connection" => 1,
        "keep-alive" => 1 << 1,
        "proxy-connection" => 1 << 2,
        "proxy-authenticate" => 1 << 3,
        "proxy-authorization" => 1 << 4,
        "te" => 1 << 5,
        "trailer" => 1 << 6,
        "transfer-encoding" => 1 << 7,
        "expect" => 1 << 8,
        "upgrade" => 1 << 9,
        _ => 0,
    }
}

const CONNECTION_BIT: u16 = 1;
const UPGRADE_BIT: u16 = 1 << 9;

/// Whether the request asks to switch to the WebSocket protocol.
pub fn is_websocket_upgrade(headers: &HeaderMap) -> bool {
    let upgrade = headers
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
    let connection_says_upgrade = header_tokens(headers, header::CONNECTION)
        .any(|token| token.eq_ignore_ascii_case(b"upgrade"));
    upgrade && connection_says_upgrade
}

/// Removes hop-by-hop headers and those the `Connection` header names. With `upgrade`
/// the `Connection: upgrade` and `Upgrade` pair is kept (a WebSocket handshake).
pub fn remove_hop_by_hop(headers: &mut HeaderMap, upgrade: bool) {
    // One pass over the names finds which hop-by-hop ones the message carries: most
    // requests carry none, most responses `Connection` alone, and only those present
    // are looked up again to go.
    let mut present = headers
        .keys()
        .fold(0, |set, name| set | hop_by_hop_bit(name));
    if upgrade {
        present &= !UPGRADE_BIT;
    }
    if present & CONNECTION_BIT != 0 {
        // The names `Connection` lists besides the hop-by-hop ones (which go below):
        // usually none (`keep-alive`), so usually no copy of a name.
        let mut named: SmallVec<[HeaderName; 2]> = SmallVec::new();
        for token in header_tokens(headers, header::CONNECTION) {
            // What most origins send; a hop-by-hop name, which goes below if present.
            if token.eq_ignore_ascii_case(b"keep-alive") {
                continue;
            }
            let Ok(name) = HeaderName::from_bytes(token) else {
                continue;
            };
            // A hop-by-hop name goes below if present (`Upgrade` stays in a handshake).
            if hop_by_hop_bit(&name) == 0 {
                named.push(name);
            }
        }
        for name in named {
            headers.remove(name);
        }
    }
    for (i, name) in HOP_BY_HOP.iter().enumerate() {
        if present & (1 << i) != 0 {
            headers.remove(name);
        }
    }
    if upgrade {
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    }
}

/// Whether `name` is a header a client could send to pass itself off, at an origin
/// that trusts its proxy, as another address, host, port, scheme or path (frameworks
/// read them: Rack, Symfony, IIS's URL rewriting). The gateway is the first HTTP hop
/// (the peers it trusts speak the PROXY protocol, not headers), so no earlier proxy set
/// them and they are dropped; the gateway's own `Host`, `X-Forwarded-Proto` and
/// `Forwarded` say what is true. (A client's own `X-Forwarded-For` stays, first, as
/// proxies append to it; the gateway's address for the client is always the last one.)
/// The same names with `_` for `-` are claims too, and so are `X_Forwarded_For` and
/// `X_Forwarded_Proto`: CGI, WSGI and PHP read both spellings as one variable
/// (`HTTP_X_FORWARDED_HOST`), so such a header could stand in for the gateway's own.
fn is_client_claim(name: &HeaderName) -> bool {
    let name = name.as_str();
    is_claim_name(name)
        // Every claim starts with one of these: the byte is a cheaper test than the
        // search for `_` in every name of every request.
        || (matches!(name.as_bytes().first(), Some(b'x' | b'f' | b't'))
            && name.contains('_')
            && is_underscored_claim(name))
}

fn is_underscored_claim(name: &str) -> bool {
    let dashed = name.replace('_', "-");
    is_claim_name(&dashed) || matches!(dashed.as_str(), "x-forwarded-for" | "x-forwarded-proto")
}

/// One `match`: the compiler dispatches on the length first.
fn is_claim_name(name: &str) -> bool {
    matches!(
        name,
        "x-forwarded-host"
            | "x-forwarded-port"
            | "x-forwarded-scheme"
            | "x-forwarded-ssl"
            | "x-forwarded-prefix"
            | "front-end-https"
            | "x-real-ip"
            | "x-client-ip"
            | "true-client-ip"
            | "x-original-url"
            | "x-rewrite-url"
    )
}

/// Adds the client's address (`client`, as text) and the scheme: appends to
/// `X-Forwarded-For` (what earlier proxies said is kept, the gateway's own knowledge
/// goes last), and sets `X-Forwarded-Proto` and `Forwarded` to what the gateway saw
/// itself; drops the client's claims ([`is_client_claim`]).
pub fn add_forwarded(headers: &mut HeaderMap, client: &str, https: bool, host: &str) {
    // Most requests carry none of them: one pass over the names finds out.
    if headers.keys().any(is_client_claim) {
        let claims: Vec<HeaderName> = headers
            .keys()
            .filter(|n| is_client_claim(n))
            .cloned()
            .collect();
        for name in claims {
            headers.remove(name);
        }
    }
    let x_forwarded_for = HeaderName::from_static("x-forwarded-for");
    let earlier = headers
        .get(&x_forwarded_for)
        .and_then(|earlier| earlier.to_str().ok());
    let xff = match earlier {
        Some(earlier) => HeaderValue::try_from(format!("{earlier}, {client}")),
        None => HeaderValue::try_from(client),
    };
    match xff {
        Ok(value) => {
            headers.insert(x_forwarded_for, value);
        }
        Err(_) => {
            headers.remove(x_forwarded_for);
        }
    }
    let proto = if https { "https" } else { "http" };
    headers.insert(
        HeaderName::from_static("x-forwarded-proto"),
        HeaderValue::from_static(proto),
    );
    let mut forwarded = String::with_capacity(client.len() + host.len() + 32);
    forwarded.push_str("for=");
    // RFC 7239 §6: an IPv6 node (the only addresses written with `:`) is bracketed
    // and quoted.
    if client.contains(':') {
        forwarded.push_str("\"[");
        forwarded.push_str(client);
        forwarded.push_str("]\"");
    } else {
        forwarded.push_str(client);
    }
    forwarded.push_str(";proto=");
    forwarded.push_str(proto);
    forwarded.push_str(";host=\"");
    forwarded.push_str(host);
    forwarded.push('"');
    // Handing the string over (not copying it) when its bytes are valid in a header.
    match HeaderValue::from_maybe_shared(bytes::Bytes::from(forwarded)) {
        Ok(value) => {
            headers.insert(header::FORWARDED, value);
        }
        Err(_) => {
            headers.remove(header::FORWARDED);
        }
    }
}

/// The gateway's `Via` entries, one per protocol version a request may arrive in
/// (`1.0`, `1.1`, `2`, `3`), each naming the gateway by its pseudonym.
#[derive(Debug, Clone)]
pub struct Via {
    pseudonym: String,
    entries: [HeaderValue; 4],
}

impl Via {
    /// `pseudonym` is a token (letters, digits, `-`).
    pub fn new(pseudonym: String) -> Via {
        let entry = |protocol: &str| {
            HeaderValue::try_from(format!("{protocol} {pseudonym}"))
                .unwrap_or(HeaderValue::from_static("1.1 botgate"))
        };
        Via {
            entries: [entry("1.0"), entry("1.1"), entry("2"), entry("3")],
            pseudonym,
        }
    }

    pub fn pseudonym(&self) -> &str {
        &self.pseudonym
    }

    /// Appends the gateway's entry for a request received as `version`.
    pub fn append(&self, headers: &mut HeaderMap, version: http::Version) {
        let entry = match version {
            http::Version::HTTP_09 | http::Version::HTTP_10 => 0,
            http::Version::HTTP_2 => 2,
            http::Version::HTTP_3 => 3,
            _ => 1,
        };
        headers.append(header::VIA, self.entries[entry].clone());
    }

    /// Whether the request has passed through this gateway (or another of its cluster)
    /// already: a loop, when a website's origin leads back to the gateway.
    pub fn seen_in(&self, headers: &HeaderMap) -> bool {
        headers
            .get_all(header::VIA)
            .iter()
            .flat_map(|value| value.as_bytes().split(|&b| b == b','))
            .any(|entry| {
                // `received-protocol received-by [comment]`.
                entry
                    .split(|b| b.is_ascii_whitespace())
                    .filter(|word| !word.is_empty())
                    .nth(1)
                    .is_some_and(|by| by.eq_ignore_ascii_case(self.pseudonym.as_bytes()))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The headers `add_forwarded` must drop.
    const CLIENT_CLAIMS: [&str; 11] = [
        "x-forwarded-host",
        "x-forwarded-port",
        "x-forwarded-scheme",
        "x-forwarded-ssl",
        "x-forwarded-prefix",
        "front-end-https",
        "x-real-ip",
        "x-client-ip",
        "true-client-ip",
        "x-original-url",
        "x-rewrite-url",
    ];

    #[test]
    fn hop_by_hop_and_connection_named_headers_go() {
        let mut h = HeaderMap::new();
        h.insert(
            header::CONNECTION,
            HeaderValue::from_static("keep-alive, x-secret"),
        );
        h.insert("x-secret", HeaderValue::from_static("1"));
        h.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        h.insert(
            header::TRANSFER_ENCODING,
            HeaderValue::from_static("chunked"),
        );
        h.insert("x-kept", HeaderValue::from_static("1"));
        remove_hop_by_hop(&mut h, false);
        assert_eq!(h.len(), 1);
        assert!(h.contains_key("x-kept"));

        // Every hop-by-hop name at once, each with two values, and names the
        // `Connection` header gives in any case.
        let mut h = HeaderMap::new();
        for name in &HOP_BY_HOP {
            h.append(name, HeaderValue::from_static("1"));
            h.append(name, HeaderValue::from_static("2"));
        }
        h.append(
            header::CONNECTION,
            HeaderValue::from_static("Keep-Alive, X-One"),
        );
        h.append(
            header::CONNECTION,
            HeaderValue::from_static(" close ,x-two"),
        );
        for name in ["x-one", "x-two", "close", "x-kept"] {
            h.insert(name, HeaderValue::from_static("1"));
        }
        remove_hop_by_hop(&mut h, false);
        assert_eq!(h.keys().collect::<Vec<_>>(), ["x-kept"]);
    }

    #[test]
    fn each_hop_by_hop_name_has_its_own_bit() {
        for (i, name) in HOP_BY_HOP.iter().enumerate() {
            assert_eq!(hop_by_hop_bit(name), 1 << i, "{name}");
        }
        assert_eq!(hop_by_hop_bit(&header::CONNECTION), CONNECTION_BIT);
        assert_eq!(hop_by_hop_bit(&header::UPGRADE), UPGRADE_BIT);
        assert_eq!(hop_by_hop_bit(&header::CONTENT_LENGTH), 0);
    }

    #[test]
    fn a_lone_upgrade_goes_and_clean_headers_stay() {
        let mut h = HeaderMap::new();
        h.insert(header::UPGRADE, HeaderValue::from_static("h2c"));
        h.insert("x-kept", HeaderValue::from_static("1"));
        remove_hop_by_hop(&mut h, false);
        assert_eq!(h.len(), 1);
        assert!(h.contains_key("x-kept"));
        remove_hop_by_hop(&mut h, false);
        assert_eq!(h.len(), 1);
        remove_hop_by_hop(&mut h, true);
        assert_eq!(h[header::CONNECTION], "upgrade");
    }

    #[test]
    fn forwarded_headers_for_an_ipv4_client_without_earlier_proxies() {
        let mut h = HeaderMap::new();
        add_forwarded(&mut h, "203.0.113.9", true, "shop.example");
        assert_eq!(h["x-forwarded-for"], "203.0.113.9");
        assert_eq!(h["x-forwarded-proto"], "https");
        assert_eq!(
            h[header::FORWARDED],
            "for=203.0.113.9;proto=https;host=\"shop.example\""
        );
        // A host that cannot be a header value leaves no `Forwarded` behind.
        add_forwarded(&mut h, "203.0.113.9", true, "bad\nhost");
        assert!(!h.contains_key(header::FORWARDED));
        assert_eq!(h["x-forwarded-for"], "203.0.113.9, 203.0.113.9");
    }

    #[test]
    fn websocket_handshakes_keep_upgrade() {
        let mut h = HeaderMap::new();
        h.insert(
            header::CONNECTION,
            HeaderValue::from_static("keep-alive, Upgrade"),
        );
        h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        assert!(is_websocket_upgrade(&h));
        remove_hop_by_hop(&mut h, true);
        assert_eq!(h[header::UPGRADE], "websocket");
        assert_eq!(h[header::CONNECTION], "upgrade");
    }

    #[test]
    fn the_claim_check_names_exactly_the_claims() {
        for claim in CLIENT_CLAIMS {
            assert!(is_client_claim(&HeaderName::from_static(claim)), "{claim}");
        }
        for other in [
            "x-forwarded-for",
            "x-forwarded-proto",
            "host",
            "user-agent",
            "x_custom_header",
        ] {
            assert!(!is_client_claim(&HeaderName::from_static(other)), "{other}");
        }
        // Spelt with underscores, as a CGI origin reads them alike.
        for underscored in [
            "x_forwarded_host",
            "x-forwarded_port",
            "x_real_ip",
            "x_forwarded_for",
            "x_forwarded_proto",
            "x_original_url",
        ] {
            assert!(
                is_client_claim(&HeaderName::from_static(underscored)),
                "{underscored}"
            );
        }
    }

    #[test]
    fn forwarded_headers_name_the_real_client() {
        let mut h = HeaderMap::new();
        h.insert("x-forwarded-for", HeaderValue::from_static("10.0.0.1"));
        h.insert("x-forwarded-proto", HeaderValue::from_static("https"));
        for claim in CLIENT_CLAIMS {
            h.insert(claim, HeaderValue::from_static("10.0.0.1"));
        }
        h.insert("x-kept", HeaderValue::from_static("1"));
        add_forwarded(&mut h, "2001:db8::7", false, "example.com");
        assert_eq!(h["x-forwarded-for"], "10.0.0.1, 2001:db8::7");
        assert_eq!(h["x-forwarded-proto"], "http");
        for claim in CLIENT_CLAIMS {
            assert!(!h.contains_key(claim), "{claim} passed on");
        }
        assert_eq!(h["x-kept"], "1");
        assert_eq!(
            h[header::FORWARDED],
            "for=\"[2001:db8::7]\";proto=http;host=\"example.com\""
        );
    }

    #[test]
    fn the_gateway_knows_its_own_via_entry_among_others() {
        let via = Via::new("botgate-0a1b2c3d4e5f".into());
        let mut headers = HeaderMap::new();
        headers.append(
            header::VIA,
            HeaderValue::from_static("1.1 cache-7, 2 edge (Squid)"),
        );
        assert!(!via.seen_in(&headers));
        via.append(&mut headers, http::Version::HTTP_2);
        assert_eq!(
            headers.get_all(header::VIA).iter().next_back().unwrap(),
            "2 botgate-0a1b2c3d4e5f"
        );
        assert!(via.seen_in(&headers));
        for (sent, seen) in [
            ("1.0 cache, 1.1   BOTGATE-0a1b2c3d4e5f  (comment)", true),
            ("1.1 botgate-0a1b2c3d4e5", false),
            ("botgate-0a1b2c3d4e5f", false),
            ("1.1 x-botgate-0a1b2c3d4e5f", false),
        ] {
            let mut headers = HeaderMap::new();
            headers.insert(header::VIA, HeaderValue::from_static(sent));
            assert_eq!(via.seen_in(&headers), seen, "{sent}");
        }
    }
}
