//! Building the request-facts record the host hands to rule components, with the
//! contract's bounds on path, query and headers applied.

use super::bindings::{
    Behaviour, ChallengePass, CrawlerVerification, HttpVersion, IpAddress, RequestFacts, Scheme,
    TlsFacts, TlsVersion,
};
use std::net::IpAddr;

/// Most bytes of `path` and of `query` passed to components.
pub const MAX_PATH_BYTES: usize = 8 * 1024;
/// Most header lines passed to components.
pub const MAX_HEADER_LINES: usize = 64;
/// Most bytes of the joined header string passed to components.
pub const MAX_HEADER_BYTES: usize = 16 * 1024;

/// `s` cut to at most `max` bytes at a character boundary.
pub fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Joins headers as the contract wants them: `name: value` lines, names lower-cased,
/// separated by `\n`, at most [`MAX_HEADER_LINES`] lines and [`MAX_HEADER_BYTES`] bytes
/// (whole lines only). Values that are not UTF-8 are passed lossily; line breaks inside
/// a value are replaced by spaces so that a value can never forge a header line.
pub fn join_headers<'a, I>(headers: I) -> String
where
    I: IntoIterator<Item = (&'a str, &'a [u8])>,
{
    let mut out = String::with_capacity(512);
    for (lines, (name, value)) in headers.into_iter().enumerate() {
        if lines == MAX_HEADER_LINES {
            break;
        }
        let value = String::from_utf8_lossy(value);
        let extra = name.len() + 2 + value.len() + usize::from(!out.is_empty());
        if out.len() + extra > MAX_HEADER_BYTES {
            break;
        }
        if !out.is_empty() {
            out.push('\n');
        }
        out.extend(name.chars().map(|c| c.to_ascii_lowercase()));
        out.push_str(": ");
        out.extend(
            value
                .chars()
                .map(|c| if c == '\n' || c == '\r' { ' ' } else { c }),
        );
    }
    out
}

/// The WIT form of an address.
pub fn ip_address(ip: IpAddr) -> IpAddress {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, c, d] = v4.octets();
            IpAddress::Ipv4((a, b, c, d))
        }
        IpAddr::V6(v6) => {
            let [a, b, c, d, e, f, g, h] = v6.segments();
            IpAddress::Ipv6((a, b, c, d, e, f, g, h))
        }
    }
}

/// `host` without a `:port` suffix (`[::1]:8443` → `[::1]`).
fn strip_port(host: &str) -> &str {
    match host.rfind(':') {
        Some(i)
            if !host[i..].contains(']')
                && (host.starts_with('[') || host[..i].find(':').is_none()) =>
        {
            &host[..i]
        }
        _ => host,
    }
}

/// A request record with the bounds applied; the data plane's one way to build facts.
#[allow(clippy::too_many_arguments)]
pub fn request_facts<'a>(
    method: &str,
    scheme: Scheme,
    host: &str,
    path: &str,
    query: &str,
    version: HttpVersion,
    headers: impl IntoIterator<Item = (&'a str, &'a [u8])>,
    client_ip: IpAddr,
) -> RequestFacts {
    RequestFacts {
        method: truncate(method, 32).to_ascii_uppercase(),
        scheme,
        host: truncate(strip_port(host), 253).to_ascii_lowercase(),
        path: truncate(path, MAX_PATH_BYTES).to_owned(),
        query: truncate(query, MAX_PATH_BYTES).to_owned(),
        version,
        headers: join_headers(headers),
        client_ip: ip_address(client_ip),
        tls: None,
        crawler: CrawlerVerification::NoClaim,
        challenge: ChallengePass::None,
        behaviour: Behaviour {
            window_seconds: 60,
            requests: 1,
            distinct_paths: 1,
            failed_challenges: 0,
        },
    }
}

/// The request every component must survive at load time: an ordinary browser
/// fetching a page over HTTPS.
pub fn smoke_facts() -> RequestFacts {
    let headers: [(&str, &[u8]); 5] = [
        ("host", b"www.example.com"),
        ("user-agent", b"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"),
        ("accept", b"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"),
        ("accept-language", b"en-GB,en;q=0.9"),
        ("accept-encoding", b"gzip, deflate, br"),
    ];
    let mut facts = request_facts(
        "GET",
        Scheme::Https,
        "www.example.com",
        "/",
        "",
        HttpVersion::Http2,
        headers,
        IpAddr::from([192, 0, 2, 1]),
    );
    facts.tls = Some(TlsFacts {
        version: TlsVersion::Tls13,
        alpn: "h2".into(),
        ja4: "t13d1516h2_8daaf6152771_02713d6af862".into(),
    });
    facts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncate_respects_char_boundaries() {
        assert_eq!(truncate("héllo", 2), "h");
        assert_eq!(truncate("abc", 10), "abc");
    }

    #[test]
    fn headers_are_lowercased_and_joined() {
        let joined = join_headers([("User-Agent", &b"x"[..]), ("Accept", b"*/*")]);
        assert_eq!(joined, "user-agent: x\naccept: */*");
    }

    #[test]
    fn header_values_cannot_forge_lines() {
        let joined = join_headers([("x-a", &b"1\nuser-agent: forged"[..])]);
        assert_eq!(joined.lines().count(), 1);
    }

    #[test]
    fn header_count_and_size_are_bounded() {
        let many: Vec<(String, Vec<u8>)> = (0..200)
            .map(|i| (format!("x-{i}"), vec![b'v'; 10]))
            .collect();
        let joined = join_headers(many.iter().map(|(n, v)| (n.as_str(), v.as_slice())));
        assert_eq!(joined.lines().count(), MAX_HEADER_LINES);

        let big = vec![b'v'; 6000];
        let joined = join_headers((0..10).map(|_| ("x-big", big.as_slice())));
        assert!(joined.len() <= MAX_HEADER_BYTES);
        assert_eq!(joined.lines().count(), 2);
    }

    #[test]
    fn path_and_host_are_bounded_and_normalised() {
        let long = "/".repeat(20_000);
        let facts = request_facts(
            "get",
            Scheme::Http,
            "WWW.Example.COM:8080",
            &long,
            "",
            HttpVersion::Http11,
            [],
            IpAddr::from([10, 0, 0, 1]),
        );
        assert_eq!(facts.method, "GET");
        assert_eq!(facts.host, "www.example.com");
        assert_eq!(facts.path.len(), MAX_PATH_BYTES);
        assert_eq!(strip_port("[::1]:8443"), "[::1]");
        assert_eq!(strip_port("[::1]"), "[::1]");
        assert_eq!(strip_port("example.com"), "example.com");
    }
}
