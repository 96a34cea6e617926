//! A realistic mix of requests, as a protected WordPress/Nextcloud hosting server sees
//! them: browsers, verified and impostor crawlers, services, scanners and attacks.

use botgate_host::client::ClientFacts;
use botgate_host::rules::RequestFacts;
use botgate_host::rules::bindings::{
    AlpnProtocol, Behaviour, CrawlerVerification, TlsFacts, TlsVersion,
};
use botgate_host::rules::facts::{RequestParts, request_facts};
use std::net::IpAddr;

const CHROME: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36";
const CHROME_JA4: &str = "t13d1516h2_8daaf6152771_02713d6af862";

/// One request of the mix.
pub struct MixRequest {
    pub label: &'static str,
    pub facts: RequestFacts,
}

struct Req {
    method: &'static str,
    target: &'static str,
    headers: Vec<(&'static str, &'static str)>,
    ja4: Option<&'static str>,
    alpn: AlpnProtocol,
    ip: [u8; 4],
    crawler: CrawlerVerification,
    requests: u32,
}

fn req(method: &'static str, target: &'static str) -> Req {
    Req {
        method,
        target,
        headers: vec![("host", "www.example.com")],
        ja4: None,
        alpn: AlpnProtocol::H2,
        ip: [203, 0, 113, 10],
        crawler: CrawlerVerification::NoClaim,
        requests: 3,
    }
}

impl Req {
    fn h(mut self, name: &'static str, value: &'static str) -> Self {
        self.headers.push((name, value));
        self
    }

    fn chrome(self) -> Self {
        let mut r = self
            .h("user-agent", CHROME)
            .h("sec-ch-ua", "\"Google Chrome\";v=\"131\", \"Chromium\";v=\"131\", \"Not_A Brand\";v=\"24\"")
            .h("sec-ch-ua-mobile", "?0")
            .h("sec-ch-ua-platform", "\"Windows\"")
            .h("accept", "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8")
            .h("accept-encoding", "gzip, deflate, br, zstd")
            .h("accept-language", "en-GB,en;q=0.9")
            .h("sec-fetch-mode", "navigate");
        r.ja4 = Some(CHROME_JA4);
        r
    }

    fn tool(mut self, ua: &'static str) -> Self {
        self = self.h("user-agent", ua).h("accept", "*/*");
        self.alpn = AlpnProtocol::Http11;
        self.ja4 = Some("t13d3112h1_e8f1e7e78f70_6bebaf5329ac");
        self
    }

    fn build(self) -> RequestFacts {
        let (path, query) = self.target.split_once('?').unwrap_or((self.target, ""));
        let request = RequestParts {
            method: self.method,
            https: true,
            host: "www.example.com",
            path,
            query,
            version: if self.alpn == AlpnProtocol::H2 {
                http::Version::HTTP_2
            } else {
                http::Version::HTTP_11
            },
            headers: self.headers.iter().map(|(n, v)| (*n, v.as_bytes())),
            client_ip: IpAddr::from(self.ip),
        };
        let mut facts = request_facts(request, &ClientFacts::default());
        facts.tls = Some(TlsFacts {
            version: TlsVersion::Tls13,
            alpn: self.alpn,
            ja4: self.ja4.unwrap_or_default().into(),
        });
        facts.crawler = self.crawler;
        facts.behaviour = Behaviour {
            window_seconds: 60,
            requests: self.requests,
            distinct_paths: self.requests.min(3),
            failed_challenges: 0,
        };
        facts
    }
}

/// The mix: sixteen requests, most of them ordinary visitors as on a real site.
pub fn realistic_mix() -> Vec<MixRequest> {
    let mut googlebot = req("GET", "/blog/hello-world/")
        .h(
            "user-agent",
            "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
        )
        .h("accept", "text/html,application/xhtml+xml")
        .h("accept-encoding", "gzip, deflate, br");
    googlebot.crawler = CrawlerVerification::VerifiedSearchEngine;
    googlebot.ip = [66, 249, 66, 1];
    let mut impostor = req("GET", "/shop/")
        .h(
            "user-agent",
            "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
        )
        .h("accept", "*/*");
    impostor.crawler = CrawlerVerification::Failed;
    let mut brute = req("POST", "/wp-login.php")
        .tool("python-requests/2.31.0")
        .h("content-type", "application/x-www-form-urlencoded");
    brute.requests = 240;

    let entries = vec![
        ("browser home page", req("GET", "/").chrome()),
        ("browser blog post", req("GET", "/blog/2024/06/summer-sale/").chrome()),
        ("browser search", req("GET", "/?s=garden+chairs").chrome()),
        ("browser asset", req("GET", "/wp-content/themes/twentytwentyfour/style.css?ver=1.1").chrome()),
        ("browser product", req("GET", "/product/blue-mug/").chrome()),
        ("browser login", req("POST", "/wp-login.php").chrome().h("content-type", "application/x-www-form-urlencoded")),
        ("browser nextcloud files", req("GET", "/apps/files/").chrome()),
        ("browser cart", req("GET", "/cart/").chrome()),
        ("verified googlebot", googlebot),
        ("googlebot impostor", impostor),
        ("gptbot", req("GET", "/blog/").tool("Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)")),
        ("sqlmap", req("GET", "/index.php?id=1%27%20UNION%20SELECT%20NULL--").tool("sqlmap/1.8#stable (https://sqlmap.org)")),
        ("env probe", req("GET", "/.env").tool("Mozilla/5.0 zgrab/0.x")),
        ("wp-login brute force", brute),
        ("nextcloud sync client", req("PROPFIND", "/remote.php/dav/files/alice/")
            .tool("Mozilla/5.0 (Windows) mirall/3.14.1stable-Win64 (build 20240807) (Nextcloud, windows-10.0.22631 ClientArchitecture: x86_64 OsArchitecture: x86_64)")
            .h("authorization", "Basic YWxpY2U6c2VjcmV0")
            .h("depth", "1")),
        ("uptime monitor", req("HEAD", "/").tool("Mozilla/5.0+(compatible; UptimeRobot/2.0; http://www.uptimerobot.com/)")),
    ];
    entries
        .into_iter()
        .map(|(label, r)| MixRequest {
            label,
            facts: r.build(),
        })
        .collect()
}

/// Requests at the bounds of what rule components read, each value made distinct by
/// `salt` (so no remembered verdict answers them): the most arguments and cookies `crs`
/// reads, with values that pass its byte prefilters; the longest target (one value of
/// 16 KiB, as markup and as one long argument name); many header lines. The worst
/// cases a component's call must fit in its deadline.
pub fn maximal_requests(salt: u32) -> Vec<MixRequest> {
    let browser = |target: String, extra: Vec<(String, String)>| {
        let mut headers: Vec<(String, String)> = vec![
            ("user-agent".into(), CHROME.into()),
            ("accept".into(), "text/html,*/*;q=0.8".into()),
            ("accept-language".into(), "en-GB,en;q=0.9".into()),
        ];
        headers.extend(extra);
        crate::facts(
            "GET",
            &target,
            &headers
                .iter()
                .map(|(n, v)| (n.as_str(), v.as_str()))
                .collect::<Vec<_>>(),
        )
    };
    let arguments = |value: &dyn Fn(usize) -> String| {
        let pairs: Vec<String> = (0..255).map(|i| format!("a{i}={}", value(i))).collect();
        format!("/index.php?{}", pairs.join("&"))
    };
    // One `Cookie` field, as the gateway joins a browser's pieces.
    let pairs: Vec<String> = (0..250).map(|i| format!("c{i}=v'{i}s{salt}")).collect();
    let cookies = vec![("cookie".to_owned(), pairs.join("; "))];
    let lines: Vec<(String, String)> = (0..56)
        .map(|i| {
            (
                format!("x-h{i}"),
                format!("v{i}s{salt} a'b(c) <d> 1=1 -- /*e*/"),
            )
        })
        .collect();
    // Values of one-letter words, the most work per byte for libinjection: a
    // cookie and a referer, as the merged `Cookie` field and one line each.
    let words = || {
        vec![
            (
                "cookie".to_owned(),
                format!("c{salt}={}", "a/".repeat(4090)),
            ),
            (
                "referer".to_owned(),
                format!("https://www.example.com/?{salt}{}", "b/".repeat(3560)),
            ),
        ]
    };
    let mut many = cookies;
    many.extend(lines.clone());
    vec![
        MixRequest {
            label: "255 arguments, values through the prefilters",
            facts: browser(
                arguments(&|i| format!("{i}s{salt}x%27a%20b(c)%3D1--%20or%20y")),
                Vec::new(),
            ),
        },
        MixRequest {
            label: "255 arguments, 250 cookies, 56 more header lines",
            facts: browser(arguments(&|i| format!("{i}s{salt}'")), many),
        },
        MixRequest {
            label: "16 KiB of markup in one argument",
            facts: browser(
                format!("/?q={salt}{}", "%3Cscript%3E".repeat(1360)),
                Vec::new(),
            ),
        },
        MixRequest {
            label: "16 KiB argument name",
            facts: browser(format!("/?{salt}{}", "a/".repeat(8180)), Vec::new()),
        },
        MixRequest {
            label: "60 header lines",
            facts: browser(format!("/?s={salt}"), lines),
        },
        MixRequest {
            label: "8 KiB cookie and 7 KiB referer, word by word",
            facts: browser(format!("/?s={salt}"), words()),
        },
        MixRequest {
            label: "16 KiB argument name, 8 KiB cookie and 7 KiB referer",
            facts: browser(format!("/?{salt}{}", "a/".repeat(8180)), words()),
        },
    ]
}
