//! [`Request`]: read-only helpers over the request facts the host passes in.

use crate::{
    Behaviour, ChallengePass, CrawlerVerification, IpAddress, RequestFacts, Scheme, TlsFacts,
};
use percent_encoding::percent_decode_str;
use std::borrow::Cow;
use std::cell::OnceCell;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// One request as a rule component sees it, with normalised views computed once.
pub struct Request<'a> {
    facts: &'a RequestFacts,
    path: &'a str,
    query: &'a str,
    /// The normalised path, on first use.
    path_lower: OnceCell<Cow<'a, str>>,
    /// The decoded, lower-case query, on first use.
    query_lower: OnceCell<Cow<'a, str>>,
    /// [`crate::ua::is_browser`] of the user agent, computed on first use.
    browser: OnceCell<bool>,
    /// The header lines split into (name, value), on first use.
    header_index: OnceCell<Vec<(&'a str, &'a str)>>,
}

impl<'a> Request<'a> {
    /// Wraps the facts the host passed in.
    pub fn new(facts: &'a RequestFacts) -> Self {
        let (path, query) = botgate_normalise::split_target(&facts.target);
        Request {
            facts,
            path,
            query,
            path_lower: OnceCell::new(),
            query_lower: OnceCell::new(),
            browser: OnceCell::new(),
            header_index: OnceCell::new(),
        }
    }

    /// The raw facts.
    pub fn facts(&self) -> &RequestFacts {
        self.facts
    }

    /// The method, upper case.
    pub fn method(&self) -> &str {
        &self.facts.method
    }

    /// Whether the method is `method` (compared case-insensitively).
    pub fn is_method(&self, method: &str) -> bool {
        self.facts.method.eq_ignore_ascii_case(method)
    }

    /// Whether the method only reads (`GET`, `HEAD`, `OPTIONS`).
    pub fn is_read(&self) -> bool {
        ["GET", "HEAD", "OPTIONS"]
            .iter()
            .any(|m| self.facts.method.eq_ignore_ascii_case(m))
    }

    /// The host name the request addressed, lower case, without the port (the first
    /// header line, as the host writes it).
    pub fn host(&self) -> &'a str {
        // Only the first line is read: a component that asks for nothing else never
        // pays for splitting the whole block.
        let headers: &'a str = &self.facts.headers;
        let first =
            memchr::memchr(b'\n', headers.as_bytes()).map_or(headers, |end| &headers[..end]);
        botgate_normalise::header(first, "host").unwrap_or("")
    }

    /// The path as sent (percent-encoded, original case).
    pub fn path(&self) -> &str {
        self.path
    }

    /// The path percent-decoded, lower case, with repeated `/` collapsed.
    pub fn path_lower(&self) -> &str {
        self.path_lower
            .get_or_init(|| botgate_normalise::path(self.path))
    }

    /// Whether the normalised path starts with any of `prefixes` (give them lower case).
    pub fn path_starts_with_any(&self, prefixes: &[&str]) -> bool {
        let path = self.path_lower();
        prefixes.iter().any(|p| path.starts_with(p))
    }

    /// Whether the normalised path ends with any of `suffixes` (give them lower case).
    pub fn path_ends_with_any(&self, suffixes: &[&str]) -> bool {
        let path = self.path_lower();
        suffixes.iter().any(|s| path.ends_with(s))
    }

    /// Whether the normalised path contains any of `needles` (give them lower case).
    pub fn path_contains_any(&self, needles: &[&str]) -> bool {
        needles
            .iter()
            .any(|n| crate::ua::contains(self.path_lower(), n))
    }

    /// The last path segment of the normalised path (`wp-login.php` for `/blog/wp-login.php`).
    pub fn file_name(&self) -> &str {
        self.path_lower().rsplit('/').next().unwrap_or("")
    }

    /// The query string as sent, without `?`.
    pub fn query(&self) -> &str {
        self.query
    }

    /// The query string percent-decoded (`+` as space) and lower case.
    pub fn query_lower(&self) -> &str {
        self.query_lower
            .get_or_init(|| botgate_normalise::query(self.query))
    }

    /// The decoded value of the first query parameter called `name` (case-sensitive
    /// name); `Some("")` for a parameter without a value.
    pub fn query_param(&self, name: &str) -> Option<String> {
        self.query.split('&').find_map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let key = percent_decode_str(key).decode_utf8_lossy();
            (key == name).then(|| {
                let value = value.replace('+', " ");
                percent_decode_str(&value).decode_utf8_lossy().into_owned()
            })
        })
    }

    /// Whether the query has a parameter called `name`.
    pub fn has_query_param(&self, name: &str) -> bool {
        self.query_param(name).is_some()
    }

    /// The header lines as (name, value) pairs, split once per request.
    pub fn headers(&self) -> &[(&'a str, &'a str)] {
        self.header_index.get_or_init(|| {
            let headers: &'a str = &self.facts.headers;
            let mut index = Vec::with_capacity(16);
            let mut rest = headers;
            while !rest.is_empty() {
                let end = memchr::memchr(b'\n', rest.as_bytes()).unwrap_or(rest.len());
                let line = &rest[..end];
                rest = rest.get(end + 1..).unwrap_or("");
                if let Some(colon) = memchr::memchr(b':', line.as_bytes()) {
                    index.push((line[..colon].trim_ascii(), line[colon + 1..].trim_ascii()));
                }
            }
            index
        })
    }

    /// The values of every header called `name` (give it lower case), in order.
    pub fn header_values<'s>(&'s self, name: &'s str) -> impl Iterator<Item = &'a str> + 's {
        self.headers()
            .iter()
            .filter(move |(key, _)| *key == name)
            .map(|(_, value)| *value)
    }

    /// The first value of the header called `name` (give it lower case).
    pub fn header(&self, name: &str) -> Option<&'a str> {
        self.header_values(name).next()
    }

    /// Whether a header called `name` was sent.
    pub fn has_header(&self, name: &str) -> bool {
        self.header(name).is_some()
    }

    /// The `user-agent` header, empty when none was sent (found without splitting the
    /// other lines).
    pub fn user_agent(&self) -> &'a str {
        let headers: &'a str = &self.facts.headers;
        botgate_normalise::user_agent(headers).unwrap_or("")
    }

    /// Whether the user agent contains `needle`, ignoring ASCII case.
    pub fn ua_contains(&self, needle: &str) -> bool {
        crate::ua::contains_ignore_case(self.user_agent(), needle)
    }

    /// Whether the user agent looks like a real desktop or mobile browser.
    pub fn is_browser(&self) -> bool {
        *self
            .browser
            .get_or_init(|| crate::ua::is_browser(self.user_agent()))
    }

    /// The number of header lines.
    pub fn header_count(&self) -> usize {
        self.headers().len()
    }

    /// Whether the host cut the path, query or headers to its bounds.
    pub fn truncated(&self) -> bool {
        self.facts.truncated
    }

    /// The real client address.
    pub fn client_ip(&self) -> IpAddr {
        match self.facts.client_ip {
            IpAddress::Ipv4((a, b, c, d)) => IpAddr::V4(Ipv4Addr::new(a, b, c, d)),
            IpAddress::Ipv6((a, b, c, d, e, f, g, h)) => {
                IpAddr::V6(Ipv6Addr::new(a, b, c, d, e, f, g, h))
            }
        }
    }

    /// Whether the client address is loopback or private (RFC 1918, unique local).
    pub fn client_is_private(&self) -> bool {
        match self.client_ip() {
            IpAddr::V4(v4) => v4.is_loopback() || v4.is_private(),
            IpAddr::V6(v6) => v6.is_loopback() || (v6.segments()[0] & 0xfe00) == 0xfc00,
        }
    }

    /// Whether the request came over TLS.
    pub fn is_https(&self) -> bool {
        matches!(self.facts.scheme, Scheme::Https)
    }

    /// The TLS facts, when the request came over TLS.
    pub fn tls(&self) -> Option<&'a TlsFacts> {
        self.facts.tls.as_ref()
    }

    /// The host's verification of a crawler claim.
    pub fn crawler(&self) -> CrawlerVerification {
        self.facts.crawler
    }

    /// The client's challenge-pass state.
    pub fn challenge(&self) -> ChallengePass {
        self.facts.challenge
    }

    /// The client's behaviour counters.
    pub fn behaviour(&self) -> Behaviour {
        self.facts.behaviour
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::get;

    #[test]
    fn path_is_decoded_lowered_and_collapsed() {
        let facts = get("//WP%2DLogin.php?a=1").build();
        let req = crate::Request::new(&facts);
        assert_eq!(req.path_lower(), "/wp-login.php");
        assert_eq!(req.file_name(), "wp-login.php");
        assert_eq!(req.query(), "a=1");
    }

    #[test]
    fn query_params_are_decoded() {
        let facts = get("/x?q=a+b%21&flag&x=1").build();
        let req = crate::Request::new(&facts);
        assert_eq!(req.query_param("q").as_deref(), Some("a b!"));
        assert_eq!(req.query_param("flag").as_deref(), Some(""));
        assert_eq!(req.query_param("missing"), None);
        assert_eq!(req.query_lower(), "q=a b!&flag&x=1");
    }

    #[test]
    fn headers_are_found_by_lower_case_name() {
        let facts = get("/")
            .header("X-Test", "one")
            .header("x-test", "two")
            .build();
        let req = crate::Request::new(&facts);
        assert_eq!(req.header("x-test"), Some("one"));
        assert_eq!(
            req.header_values("x-test").collect::<Vec<_>>(),
            ["one", "two"]
        );
        assert_eq!(req.user_agent(), "");
    }

    #[test]
    fn the_host_is_the_first_line_and_nothing_else() {
        let facts = get("/").host("Shop.Example").header("x-a", "1").build();
        let req = crate::Request::new(&facts);
        assert_eq!(req.host(), "shop.example");
        assert_eq!(req.headers()[0], ("host", req.host()));
        // A block whose first line is not `host` (a host that sent none) has no host.
        for headers in ["x-a: 1\nhost: late.example", "", "host", "hostname: x"] {
            let mut facts = get("/").build();
            facts.headers = headers.into();
            assert_eq!(crate::Request::new(&facts).host(), "", "{headers:?}");
        }
        let mut facts = get("/").build();
        facts.headers = "host:  spaced.example \r".into();
        assert_eq!(crate::Request::new(&facts).host(), "spaced.example");
        for (headers, host) in [(" host :[::1]\nx: y", "[::1]"), ("host:[::1]", "[::1]")] {
            facts.headers = headers.into();
            assert_eq!(crate::Request::new(&facts).host(), host, "{headers:?}");
        }
    }
}
