//! A native test kit: realistic request builders and assertions for rule components.
//!
//! ```ignore
//! use botgate_ruleset_sdk::testing::*;
//! assert_category::<MyCms>(post("/login").browser(), Some(Category::Humans));
//! ```

use crate::{
    AlpnProtocol, Behaviour, Category, ChallengePass, CrawlerVerification, HttpVersion, IpAddress,
    Opinion, Request, RequestFacts, Ruleset, Scheme, TlsFacts, TlsVersion,
};
use std::net::IpAddr;

mod generated;
pub mod kinds;
pub use generated::{assert_scope_holds, assert_scope_holds_with, string_literals};

/// Chrome 131 on Windows.
pub const CHROME_UA: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36";
/// Firefox 133 on Linux.
pub const FIREFOX_UA: &str =
    "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0";
/// Safari on an iPhone.
pub const SAFARI_IOS_UA: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.6 Mobile/15E148 Safari/604.1";
/// A JA4 fingerprint of Chrome's ClientHello.
pub const CHROME_JA4: &str = "t13d1516h2_8daaf6152771_02713d6af862";
/// A JA4 fingerprint of Firefox's ClientHello.
pub const FIREFOX_JA4: &str = "t13d1715h2_5b57614c22b0_3d5424432f57";
/// A JA4 fingerprint of Safari's ClientHello.
pub const SAFARI_JA4: &str = "t13d2014h2_a09f3c656075_14788d8d241b";
/// A JA4 fingerprint of curl's ClientHello (offers only HTTP/1.1).
pub const CURL_JA4: &str = "t13d3112h1_e8f1e7e78f70_6bebaf5329ac";
/// A JA4 fingerprint of Python's `requests` (TLS 1.2 and 1.3, HTTP/1.1 only).
pub const PYTHON_JA4: &str = "t13d1812h1_85036bcba153_b26ce05bbdd6";

/// A request under construction. Starts bare: HTTPS over HTTP/2 with TLS 1.3 and no
/// headers but `host`, from a public address, no crawler claim, no pass, a quiet client.
#[derive(Clone)]
pub struct RequestBuilder {
    facts: RequestFacts,
    headers: Vec<(String, String)>,
}

/// A request with `method` to `target` (a path with an optional `?query`).
pub fn request(method: &str, target: &str) -> RequestBuilder {
    RequestBuilder {
        facts: RequestFacts {
            method: method.to_ascii_uppercase(),
            scheme: Scheme::Https,
            target: target.into(),
            version: HttpVersion::Http2,
            headers: String::new(),
            truncated: false,
            client_ip: IpAddress::Ipv4((203, 0, 113, 10)),
            tls: Some(TlsFacts {
                version: TlsVersion::Tls13,
                alpn: AlpnProtocol::H2,
                ja4: String::new(),
            }),
            crawler: CrawlerVerification::NoClaim,
            challenge: ChallengePass::None,
            behaviour: Behaviour {
                window_seconds: 60,
                requests: 1,
                distinct_paths: 1,
                failed_challenges: 0,
            },
        },
        headers: vec![("host".into(), "www.example.com".into())],
    }
}

/// A `GET` of `target`.
pub fn get(target: &str) -> RequestBuilder {
    request("GET", target)
}

/// A `POST` to `target`.
pub fn post(target: &str) -> RequestBuilder {
    request("POST", target)
}

impl RequestBuilder {
    /// Adds a header (the name is lower-cased); `host` sets the host name instead.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        if name.eq_ignore_ascii_case("host") {
            return self.host(value);
        }
        self.headers.push((name.to_ascii_lowercase(), value.into()));
        self
    }

    /// Sets or replaces the `user-agent` header.
    pub fn ua(mut self, ua: &str) -> Self {
        self.headers.retain(|(n, _)| n != "user-agent");
        self.header("user-agent", ua)
    }

    /// Sets the host name (the first header line, as the host writes it).
    pub fn host(mut self, host: &str) -> Self {
        self.headers[0].1 = host.to_ascii_lowercase();
        self
    }

    /// The headers and TLS fingerprint Chrome 131 on Windows sends.
    pub fn browser(self) -> Self {
        self.ua(CHROME_UA)
            .header("sec-ch-ua", "\"Google Chrome\";v=\"131\", \"Chromium\";v=\"131\", \"Not_A Brand\";v=\"24\"")
            .header("sec-ch-ua-mobile", "?0")
            .header("sec-ch-ua-platform", "\"Windows\"")
            .header("accept", "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8")
            .header("accept-encoding", "gzip, deflate, br, zstd")
            .header("accept-language", "en-GB,en;q=0.9")
            .header("sec-fetch-site", "none")
            .header("sec-fetch-mode", "navigate")
            .header("sec-fetch-dest", "document")
            .ja4(CHROME_JA4)
    }

    /// The headers and TLS fingerprint Firefox 133 on Linux sends.
    pub fn firefox(self) -> Self {
        self.ua(FIREFOX_UA)
            .header(
                "accept",
                "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
            )
            .header("accept-encoding", "gzip, deflate, br, zstd")
            .header("accept-language", "de,en-US;q=0.7,en;q=0.3")
            .header("sec-fetch-mode", "navigate")
            .ja4(FIREFOX_JA4)
    }

    /// The headers a simple machine client sends: a user agent and `accept: */*`,
    /// HTTP/1.1 over TLS with an HTTP/1.1-only fingerprint.
    pub fn machine(self, ua: &str) -> Self {
        self.ua(ua)
            .header("accept", "*/*")
            .version(HttpVersion::Http11)
            .alpn("http/1.1")
            .ja4(CURL_JA4)
    }

    /// Sets the JA4 fingerprint (keeps TLS on).
    pub fn ja4(mut self, ja4: &str) -> Self {
        if let Some(tls) = self.facts.tls.as_mut() {
            tls.ja4 = ja4.into();
        }
        self
    }

    /// Sets the negotiated ALPN protocol (keeps TLS on).
    pub fn alpn(mut self, alpn: &str) -> Self {
        if let Some(tls) = self.facts.tls.as_mut() {
            tls.alpn = match alpn {
                "" => AlpnProtocol::None,
                "http/1.1" => AlpnProtocol::Http11,
                "h2" => AlpnProtocol::H2,
                "h3" => AlpnProtocol::H3,
                _ => AlpnProtocol::Other,
            };
        }
        self
    }

    /// Plain HTTP/1.1 without TLS.
    pub fn http(mut self) -> Self {
        self.facts.scheme = Scheme::Http;
        self.facts.tls = None;
        self.facts.version = HttpVersion::Http11;
        self
    }

    /// Sets the HTTP version.
    pub fn version(mut self, version: HttpVersion) -> Self {
        self.facts.version = version;
        self
    }

    /// Sets the client address.
    pub fn ip(mut self, ip: &str) -> Self {
        self.facts.client_ip = match ip.parse::<IpAddr>().expect("a valid IP address") {
            IpAddr::V4(v4) => {
                let [a, b, c, d] = v4.octets();
                IpAddress::Ipv4((a, b, c, d))
            }
            IpAddr::V6(v6) => {
                let [a, b, c, d, e, f, g, h] = v6.segments();
                IpAddress::Ipv6((a, b, c, d, e, f, g, h))
            }
        };
        self
    }

    /// Marks the request as cut to the host's bounds.
    pub fn truncated(mut self) -> Self {
        self.facts.truncated = true;
        self
    }

    /// Sets the host's crawler verification.
    pub fn crawler(mut self, crawler: CrawlerVerification) -> Self {
        self.facts.crawler = crawler;
        self
    }

    /// Sets the challenge-pass state.
    pub fn challenge(mut self, challenge: ChallengePass) -> Self {
        self.facts.challenge = challenge;
        self
    }

    /// Sets the behaviour counters of a 60-second window.
    pub fn behaviour(mut self, requests: u32, distinct_paths: u32, failed_challenges: u32) -> Self {
        self.facts.behaviour = Behaviour {
            window_seconds: 60,
            requests,
            distinct_paths,
            failed_challenges,
        };
        self
    }

    /// The finished facts, headers joined as the host joins them.
    pub fn build(&self) -> RequestFacts {
        let mut facts = self.facts.clone();
        facts.headers = self
            .headers
            .iter()
            .map(|(n, v)| format!("{n}: {v}"))
            .collect::<Vec<_>>()
            .join("\n");
        facts
    }
}

/// Runs `R` on `req` as the host would ([`crate::judge`]), and fails the test when the
/// scope is malformed or when `R` has an opinion on a request outside its scope: the
/// host would never have asked, so the scope is missing a marker.
#[track_caller]
pub fn evaluate<R: Ruleset>(req: &RequestBuilder) -> Option<Opinion> {
    if let Err(err) = botgate_normalise::check_scope(R::SCOPE) {
        panic!("the rule set's SCOPE is refused by the host: {err}");
    }
    let facts = req.build();
    let request = Request::new(&facts);
    let judged = crate::judge::<R>(&request);
    if judged.is_none()
        && let Some(opinion) = R::evaluate(&request)
    {
        panic!(
            "{opinion:?} for {} {} is outside the rule set's SCOPE {:?}: the host would never \
             call it; add a marker that this path ({:?}), query ({:?}) or user agent \
             ({:?}, as `ua:…`) contains",
            facts.method,
            facts.target,
            R::SCOPE,
            request.path_lower(),
            request.query_lower(),
            request.user_agent().to_ascii_lowercase()
        );
    }
    judged
}

/// Asserts that `R` puts `req` in `expected` (`None`: abstains), showing the opinion
/// on failure.
#[track_caller]
pub fn assert_category<R: Ruleset>(req: RequestBuilder, expected: Option<Category>) {
    let got = evaluate::<R>(&req);
    let category = got.as_ref().map(|o| o.category);
    assert!(
        category == expected,
        "expected {expected:?}, got {got:?} for {} {} headers:\n{}",
        req.facts.method,
        req.facts.target,
        req.build().headers
    );
    if let Some(o) = &got {
        assert!(
            crate::is_valid_reason(&o.reason),
            "bad reason id {:?}",
            o.reason
        );
        assert!(o.confidence <= 100);
    }
}

/// Ordinary browsing that no CMS rule set needs to see: a home page, a post, a product,
/// a cart, an asset, a search.
pub const ORDINARY_PAGES: &[&str] = &[
    "/",
    "/blog/2024/06/summer-sale/",
    "/product/blue-mug/",
    "/cart/",
    "/assets/app.js?v=3",
    "/?s=garden+chairs",
];

/// Asserts that a browser's `GET` of each of `targets` is outside `R`'s scope, so the
/// gateway does not call `R` for it.
#[track_caller]
pub fn assert_outside_scope<R: Ruleset>(targets: &[&str]) {
    for target in targets {
        let facts = get(target).browser().build();
        assert!(
            !crate::in_scope(R::SCOPE, &Request::new(&facts)),
            "{target} is inside the scope {:?}",
            R::SCOPE
        );
    }
}

/// Spellings of the path of `target` that an origin's web server resolves to the same
/// file: a `.` segment (plain, `%2e`, `.%2F`), a doubled `/`, a `\` (plain and `%5C`),
/// and a detour through a folder and `..` (plain and `%2e%2e`). The query is kept.
pub fn path_spellings(target: &str) -> Vec<String> {
    let (path, query) = botgate_normalise::split_target(target);
    let query = if query.is_empty() {
        String::new()
    } else {
        format!("?{query}")
    };
    let cut = path.rfind('/').unwrap_or(0);
    let (folder, file) = (&path[..cut], &path[cut + 1..]);
    [
        format!("{folder}/./{file}"),
        format!("{folder}/%2e/{file}"),
        format!("{folder}/.%2F{file}"),
        format!("{folder}//{file}"),
        format!("{folder}\\{file}"),
        format!("{folder}%5C{file}"),
        format!("{folder}/botgate-x/../{file}"),
        format!("{folder}/botgate-x/%2e%2e/{file}"),
        format!("/.{path}"),
    ]
    .into_iter()
    .map(|spelled| format!("{spelled}{query}"))
    .collect()
}

/// Asserts that `R` has an opinion on the request `make` builds for each of `targets`,
/// and the same opinion for every [`path_spellings`] of it: a sensitive path cannot be
/// reached by spelling it differently.
#[track_caller]
pub fn assert_spellings_agree<R: Ruleset>(make: impl Fn(&str) -> RequestBuilder, targets: &[&str]) {
    let judge =
        |target: &str| evaluate::<R>(&make(target)).map(|o| (o.category, o.confidence, o.reason));
    for target in targets {
        let plain = judge(target);
        assert!(
            plain.is_some(),
            "no opinion on {target}: not a sensitive path"
        );
        for spelled in path_spellings(target) {
            assert_eq!(
                judge(&spelled),
                plain,
                "{spelled} is judged unlike {target}"
            );
        }
    }
}
