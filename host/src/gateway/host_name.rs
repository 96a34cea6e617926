//! The website a request names: its host from `:authority` or the one `Host`, in the
//! canonical form (lower case, no port, no trailing dot) that the website index, the
//! certificates and mounted services are keyed by.

use http::{Request, header};

/// The host name a request addressed: `:authority` or `Host`, lower case, without the
/// port or a trailing dot. `None` (a bad request) when there is none, when it is not a
/// host and port, or when the request carries more than one `Host` (RFC 9112 §3.2: the
/// gateway would judge one website and the origin might serve another).
pub fn request_host<B>(request: &Request<B>) -> Option<String> {
    let mut sent = request.headers().get_all(header::HOST).iter();
    let first = sent.next();
    if sent.next().is_some() {
        return None;
    }
    let host = match request.uri().authority() {
        Some(authority) => authority_host(authority)?,
        None => {
            let value = first?.as_bytes();
            match plain_host(value) {
                Some(host) => canonical_host(host),
                None => authority_host(&http::uri::Authority::try_from(value).ok()?)?,
            }
        }
    };
    (!host.is_empty()).then_some(host)
}

/// The canonical host of an authority; `None` when it carries user information
/// (`user@host`), which a `Host` never may and a request target must not (RFC 9110
/// §4.2.4).
fn authority_host(authority: &http::uri::Authority) -> Option<String> {
    (!authority.as_str().contains('@')).then(|| canonical_host(authority.host()))
}

/// The host of a `Host` value made only of lower-case letters, digits, `-` and `.`,
/// with an optional `:port` (what nearly every client sends), read without parsing it
/// as a URI authority; `None` for anything else, which that parse then judges.
fn plain_host(value: &[u8]) -> Option<&str> {
    let (host, port) = match value.iter().position(|&b| b == b':') {
        Some(colon) => (&value[..colon], &value[colon + 1..]),
        None => (value, &b""[..]),
    };
    let plain = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-' || *b == b'.';
    // All digits first: `u16`'s parse would take a `+` sign.
    let port_ok = value.len() == host.len()
        || std::str::from_utf8(port)
            .is_ok_and(|p| p.bytes().all(|b| b.is_ascii_digit()) && p.parse::<u16>().is_ok());
    if host.is_empty() || !host.iter().all(plain) || !port_ok {
        return None;
    }
    std::str::from_utf8(host).ok()
}

/// A host name without a trailing dot, in lower case.
pub fn canonical_host(host: &str) -> String {
    host.trim_end_matches('.').to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    /// What `request_host` answered before it had a fast path: every `Host` parsed as a
    /// URI authority.
    fn parsed_host(value: &str) -> Option<String> {
        let authority: http::uri::Authority = value.parse().ok()?;
        let host = authority_host(&authority)?;
        (!host.is_empty()).then_some(host)
    }

    #[test]
    fn the_host_fast_path_answers_what_the_authority_parse_answers() {
        for value in [
            "shop.example",
            "shop.example:8180",
            "shop.example.",
            "Shop.Example:443",
            "xn--bcher-kva.example",
            "127.0.0.1:80",
            "[2001:db8::1]:8443",
            "[2001:db8::1]",
            "shop.example:",
            "shop.example:99999",
            "shop.example:+80",
            "shop.example:80:80",
            "user@shop.example",
            ":80",
            "",
            ".",
            "a\tb",
            "shop_example",
        ] {
            let Ok(header) = HeaderValue::from_str(value) else {
                continue;
            };
            let request = Request::builder()
                .uri("/")
                .header(header::HOST, header)
                .body(())
                .unwrap();
            assert_eq!(request_host(&request), parsed_host(value), "Host: {value}");
        }
        let absolute = Request::builder()
            .uri("http://Shop.Example.:8180/x")
            .body(())
            .unwrap();
        assert_eq!(request_host(&absolute).as_deref(), Some("shop.example"));
    }

    #[test]
    fn two_hosts_or_user_information_name_no_website() {
        let request = |uri: &str, hosts: &[&str]| {
            let mut request = Request::builder().uri(uri);
            for host in hosts {
                request = request.header(header::HOST, *host);
            }
            request.body(()).unwrap()
        };
        assert_eq!(
            request_host(&request("/", &["shop.example"])).as_deref(),
            Some("shop.example")
        );
        for hosts in [
            &["shop.example", "admin.example"][..],
            &["shop.example", "shop.example"],
        ] {
            assert_eq!(request_host(&request("/", hosts)), None, "{hosts:?}");
            assert_eq!(
                request_host(&request("http://shop.example/", hosts)),
                None,
                "absolute form, {hosts:?}"
            );
        }
        assert_eq!(request_host(&request("/", &["user@shop.example"])), None);
        assert_eq!(
            request_host(&request("http://user@shop.example/", &[])),
            None
        );
        assert_eq!(request_host(&request("/", &[])), None);
    }
}
