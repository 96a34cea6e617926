//! The general traffic classifier: gives almost every request one of the eight traffic
//! categories, from known crawlers, attack payloads, automation markers, the agreement
//! of user agent, client hints and TLS fingerprint, missing headers and behaviour.
//!
//! # Evaluation order
//!
//! The first step that decides returns; steps 4 to 6 are pooled and the strongest
//! signal among them wins (ties: consistency, then headers, then behaviour).
//!
//! 1. **Security**: a scanner user agent, an injection payload in any header, an attack
//!    payload in the path or query (also after a second decoding), a leaked-file probe.
//! 2. **Crawlers**: the host's crawler verification, then the known-crawler table.
//! 3. **Automation** markers.
//! 4. **Consistency** of a browser user agent with its client hints, TLS and HTTP version.
//! 5. **Headers**: an empty user agent, a browser without its usual headers, an
//!    unrecognised client, a URL cut at the host's bound.
//! 6. **Behaviour** counters of the host's window (rates are scaled to 60 seconds).
//! 7. **Humans** for a browser user agent that tripped nothing.
//!
//! A valid challenge pass softens the weak signals, marked *weak* below: a client that
//! holds one and trips only weak signals is `humans` (`classifier.valid-pass`, or
//! `classifier.waited-pass` for the pass a client without JavaScript waited for). Strong
//! signals (attacks, scanners, known crawlers, automation, consistency, floods, crawl
//! patterns) are not softened.
//!
//! # Rules (reason id → category, confidence: trigger)
//!
//! Security issues:
//! - `classifier.scanner` → security-issues 95: a table entry tagged `scanner` (sqlmap,
//!   Nikto, zgrab, masscan, WPScan, Acunetix, Nmap...) or a built-in attack-tool marker
//!   the data lacks (Nuclei, gobuster, ffuf, dirsearch, feroxbuster, wfuzz, Netsparker,
//!   Arachni, w3af, skipfish, commix, Jorgee, Morfeus, DotDotPwn, Havij, sqlninja, fimap,
//!   the `Hello, world` botnet probe).
//! - `classifier.log4shell` 95: `${jndi:` and obfuscated lookups (`${${`, `${lower:`...)
//!   in any header, the path or the query. `classifier.shellshock` 95: a header value
//!   starting `() {`.
//! - `classifier.php-object-injection` 95: a PHP object-injection payload in the user
//!   agent or any `X-Forwarded-For` (the gadget chain of the Joomla session exploit,
//!   CVE-2015-8562: `JDatabaseDriverMysql`, `JSimplepieFactory`, `disconnectHandlers`,
//!   `}__test`, ignoring case), on any path.
//! - `classifier.sql-injection` 95: `union [all] select`, tautologies such as
//!   `' or '1'='1` or `or 1=1--`, `sleep(5)`, `benchmark(n,`, `information_schema.`,
//!   `load_file(`, `xp_cmdshell`, `into outfile`, `@@version`, `'; drop table`...
//! - `classifier.xss` 90: `<script`, `javascript:` with code, `on...=` handlers after
//!   markup or a quote, `<svg ` / `<iframe` / `<object` / `<embed`, `alert(1)`,
//!   `data:text/html`, `document.cookie`.
//! - `classifier.path-traversal` 95: `../` or `..\` starting a path segment (in a query:
//!   climbing twice or aiming at a system file), `/etc/passwd`, `/etc/shadow`,
//!   `/proc/self/`, `win.ini`, `boot.ini`, `system32`, `c:\windows`.
//! - `classifier.command-injection` 95: `;`, `|`, `&&`, a new line, `$(` or a backtick
//!   followed by a shell command used as injections use it (`;wget http://`, `|curl `,
//!   `$(id)`, `` `whoami` ``, `;cat /etc/hosts`), `cmd.exe`.
//! - `classifier.template-injection` 90: `{{7*7}}`, `${7*7}`, `#{7*7}`, `{{config.`,
//!   `{{self.`, `<%=`, `__class__`, `__globals__`...
//! - `classifier.stream-wrapper` 95: `php://`, `data://`, `expect://`, `phar://`,
//!   `zip://`, `file://`, `gopher://`, `dict://`.
//! - `classifier.ssrf-metadata` 90: cloud metadata addresses (`169.254.169.254`...).
//! - `classifier.null-byte` 90: a decoded NUL in the path or query.
//! - `classifier.vcs-probe` 90: `/.git` (directory or git files), `/.svn`, `/.hg`,
//!   `/.bzr`, `/CVS/Entries`.
//! - `classifier.secret-file-probe` 90: `/.env*`, `/.aws`, `/.ssh`, `id_rsa`-style keys,
//!   `/.htpasswd`, `/.htaccess`, `/.DS_Store`, `/.npmrc`, `/.netrc`, `/.pgpass`,
//!   shell histories, `/WEB-INF/`, `/wp-config.` copies (`wp-config.php.bak`...).
//! - `classifier.debug-endpoint-probe` 90: `/phpinfo.php`, `/server-status`,
//!   `/server-info`, `/actuator/*` (not `health` or `info`), `/vendor/phpunit/`,
//!   `/_ignition/`, `/debug/pprof`, `/_profiler`, `/jmx-console`, `/manager/html`.
//! - `classifier.backup-file-probe` 90: a file name ending `.sql`, `.sql.gz` (and other
//!   compressed dumps), `.bak`, `.old`, `.swp`, `.swo`, `.save`, `.orig`, `.backup`, or
//!   `~` after a dotted name; an archive (`.zip`, `.tar.gz`, `.tgz`, `.rar`, `.7z`...)
//!   named `backup`, `www`, `site`, `db`, `dump`, `htdocs`... or after the host name.
//! - Found only after a second percent-decoding: the same reason, confidence 95.
//!
//! Crawlers:
//! - `classifier.verified-search-engine` → search-engines 95 and
//!   `classifier.verified-social-network` → social-networks 95: the host verified the
//!   crawler claim, whatever the user agent.
//! - `classifier.impostor-crawler` → suspicious-behaviour 85: the host's check failed.
//! - `classifier.unverified-search-engine` / `classifier.unverified-social-network` →
//!   suspicious-behaviour 85: a table search engine or social previewer the host did not
//!   verify (no claim it knows, or verification pending).
//! - Other table entries, by class (see the mapping below).
//! - `classifier.http-library` → suspicious-behaviour 60 (pooled with steps 4-6, so a
//!   flood can raise it): a table `http-library` or a library prefix the data lacks
//!   (`Java/`, `node`, `undici`, `GuzzleHttp/`, `PostmanRuntime/`, `Dart/`...).
//! - `classifier.known-service` → services-and-payments 80: a corrected table entry
//!   (below) or a payment callback the data lacks (`PayPal IPN`).
//! - `classifier.unlisted-crawler` → content-scrapers 60: a non-browser user agent that
//!   calls itself a bot, crawler, spider or scraper but is not in the table.
//!
//! Automation (emulated-humans):
//! - `classifier.headless-client-hints` 85: `sec-ch-ua` names a headless browser.
//! - `classifier.webdriver` 85: `webdriver`, `chromedriver`, `geckodriver` in the user agent.
//! - `classifier.automation-runtime` 85: `headless`, `jsdom`, `SlimerJS`, `HtmlUnit`,
//!   `Nightmare`, `Cypress` in the user agent.
//! - `classifier.electron-shell` 80: `Electron/` without a `Chrome/` token.
//!
//! Consistency (emulated-humans, browser user agents only):
//! - `classifier.chromium-without-client-hints` 75: Chrome/Edge/Opera ≥ 89 over HTTPS
//!   without `sec-ch-ua` (Android WebView exempt).
//! - `classifier.client-hints-platform-mismatch` 75: `sec-ch-ua-platform` names another
//!   of Windows, macOS, Linux, Android than the user agent (Android's "desktop site"
//!   Linux user agent with the Android hint is consistent).
//! - `classifier.client-hints-from-non-chromium` 75: a Firefox or Safari user agent
//!   sending `sec-ch-ua`.
//! - `classifier.browser-tls-without-h2` 75: the JA4 shows a first ALPN other than `h2`
//!   or `h3` (`h1`, `00`).
//! - `classifier.browser-tls-legacy-version` 70: the JA4 shows no TLS 1.3.
//! - `classifier.browser-tls-without-sni` 70: the JA4 shows no SNI (unless the host is
//!   an IP address).
//! - `classifier.browser-http10` 75: a browser user agent over HTTP/1.0.
//!
//! Headers (suspicious-behaviour, weak):
//! - `classifier.empty-user-agent` 60 (65 without `accept` either).
//! - `classifier.browser-without-accept` 55 (WebSocket handshakes exempt),
//!   `classifier.browser-without-accept-language` 55,
//!   `classifier.browser-without-accept-encoding` 55.
//! - `classifier.unrecognised-client` 40: a non-browser user agent nothing recognises.
//! - `classifier.oversized-url` 55: the host cut the request target at its 16 KiB bound
//!   (`truncated`; a header cut alone, such as a large cookie, is not a signal).
//!
//! Behaviour (per 60 seconds):
//! - `classifier.repeated-failed-challenges` → suspicious-behaviour 85 (weak: a valid
//!   pass proves a later success): 3 or more failed challenges.
//! - `classifier.request-flood` → suspicious-behaviour 80: more than 600 requests.
//! - `classifier.crawl-pattern` → content-scrapers 75: more than 100 distinct paths
//!   making up at least 3/4 of the requests (not for a consistent browser's asset fetch,
//!   `sec-fetch-dest` image/script/style/font/media).
//! - `classifier.high-request-rate` → suspicious-behaviour 65 (weak): more than 180.
//!
//! Everything else:
//! - `classifier.browser` → humans 50: a browser user agent that tripped nothing.
//! - `classifier.valid-pass` → humans 50: a valid pass and only weak signals.
//! - `classifier.waited-pass` → humans 40: the same with a waited pass.
//! - `classifier.mobile-app-client` → services-and-payments 45: an app's HTTP stack
//!   (`CFNetwork/`, `Dalvik/`).
//!
//! # Known crawlers: tags and categories
//!
//! The table is generated at build time from `data/crawler-user-agents.json` (see
//! build.rs). An entry with several tags takes the first in this order: scanner,
//! browser-automation, ai-crawler, search-engine, social-preview, archiver, academic,
//! seo, advertising, monitoring, feed-reader, http-library.
//!
//! | tag | category | confidence | reason |
//! |---|---|---|---|
//! | scanner | security-issues | 95 | `classifier.scanner` |
//! | browser-automation | emulated-humans | 85 | `classifier.automation-tool` |
//! | ai-crawler | content-scrapers | 85 | `classifier.ai-crawler` |
//! | search-engine | search-engines only if verified, else suspicious-behaviour | 95 / 85 | see above |
//! | social-preview | social-networks only if verified, else suspicious-behaviour | 95 / 85 | see above |
//! | archiver | content-scrapers | 80 | `classifier.archiver` |
//! | academic | content-scrapers | 80 | `classifier.academic-crawler` |
//! | seo | content-scrapers | 80 | `classifier.seo-crawler` |
//! | advertising | services-and-payments | 80 | `classifier.advertising-crawler` |
//! | monitoring | services-and-payments | 80 | `classifier.monitoring` |
//! | feed-reader | services-and-payments | 80 | `classifier.feed-reader` |
//! | http-library | suspicious-behaviour | 60 | `classifier.http-library` |
//!
//! Corrections of the data (build.rs `CORRECTIONS`), mapped to services-and-payments 80
//! (`classifier.known-service`): certificate validators and TLS checkers tagged scanner
//! (Let's Encrypt, DigiCert DCV, Google Trust Services, SSL Labs, hstspreload), services
//! a site owner hires tagged scanner (VaultPress, Akismet, Sansec, consent scanners such
//! as Cookiebot, CookieYes, CookieHub, iubenda, LegalMonster) and payment callbacks and
//! webhooks tagged seo (PayPal IPN, Stripe, GoPay, Mollie, Trustly, Chargebee, Recurly,
//! Svix, Shopify, Zendesk, Bitbucket, Cloudflare Stream, Yokoy, WP Time Capsule).
//! The `AP3A.240617.008` entry (an Android build id that matches every WebView on that
//! firmware) gives no opinion, and `Sonic` is narrowed to `RankSonic|Sonic/` (it matched
//! the Slack desktop app).
//!
//! # Matching and cost
//!
//! build.rs extracts from every data pattern one literal needle per top-level
//! alternative (the longest literal run, lower case; `[wW]get` folds to `wget`) and
//! compiles the 21 patterns that are real regexes (anchors, classes, optional parts)
//! into small DFAs. At run time one Aho-Corasick DFA over all needles and the built-in
//! markers (automation, scanners, the SDK's browser and non-browser tokens, platform
//! tokens, PHP object-injection payloads) scans one ASCII lower-case copy of the user agent once; a needle shorter
//! than 6 bytes must start a token (`NING/` does not match `Lightning/`). A hit whose
//! pattern is a regex is confirmed by that pattern's DFA, deserialised on first use and
//! cached. A match starting inside a longer match drops out (`ICBot/` inside
//! `NewRelicbot/`); then the tag order above decides. A second, small automaton scans
//! the decoded path and query for attack needles, each with a context check.
//!
//! The scan's result for each of the last 64 user agents (one per slot by a word-wise hash,
//! the user agent kept to confirm a hit) is kept by the instance between calls: real
//! traffic repeats a few hundred user agents, and the scan is a pure function of the
//! user agent, so the memo changes no answer (`tests/data.rs` checks it against fresh
//! scans over every known user agent).
//!
//! Both automata are built on an instance's first call (the host's warm-up request):
//! about 3.8 MB and some 110 million instructions, once. A request then costs some
//! 3,000 to 9,000 instructions (x86-64; the SDK's `Request::new` included) with one
//! allocation of ours: the lower-case user agent (plus a decoded copy of a path or
//! query that still holds `%XX` escapes). Nothing calls WASI: no hash maps with random
//! state, clocks, environment or files.
//!
//! The crawler data comes from the crawler-user-agents project by Martin Monperrus and
//! contributors, under the MIT licence (`data/crawler-user-agents.LICENSE`).

mod attacks;
mod crawlers;
mod fingerprint;
mod headers;

#[cfg(test)]
mod tests;

use botgate_ruleset_sdk::ua::BrowserFamily;
use botgate_ruleset_sdk::{
    Category, ChallengePass, CrawlerVerification, HttpVersion, Info, Opinion, Request, Ruleset,
    opinion,
};
use crawlers::{Class, Marker};
use fingerprint::Ja4;
use headers::Headers;

/// The general traffic classifier.
pub struct Classifier;

impl Ruleset for Classifier {
    fn info() -> Info {
        botgate_ruleset_sdk::info!(
            "classifier",
            "General traffic classifier: known crawlers and services, scanners, attack payloads, automation, fingerprint consistency, missing headers, behaviour and real browsers."
        )
    }

    fn evaluate(req: &Request<'_>) -> Option<Opinion> {
        classify(req)
    }
}

botgate_ruleset_sdk::export_ruleset!(Classifier);

/// Library user-agent prefixes the crawler data lacks (compared ignoring case).
const LIBRARY_PREFIXES: &[&str] = &[
    "java/",
    "java-http-client/",
    "apache-httpasyncclient/",
    "jakarta commons-httpclient/",
    "windowspowershell/",
    "undici",
    "deno/",
    "bun/",
    "reqwest/",
    "guzzlehttp/",
    "ruby",
    "http.rb/",
    "faraday v",
    "rest-client/",
    "typhoeus",
    "python/",
    "python-urllib3/",
    "pycurl/",
    "libcurl/",
    "postmanruntime/",
    "insomnia/",
    "restsharp/",
    "dart/",
    "lua-resty-http/",
    "fasthttp",
    "http-kit/",
    "aria2/",
];

/// `sec-fetch-dest` values of static assets a page pulls in.
const ASSET_DESTINATIONS: &[&str] = &[
    "image", "script", "style", "font", "audio", "video", "track", "manifest",
];

/// The pooled signals of steps 4 to 6: the strongest wins, the first of equals.
struct Verdict {
    best: Option<(Category, u8, &'static str)>,
    /// The client holds a valid challenge pass (earned by work or by waiting).
    pass: bool,
    /// A weak signal was dropped because of the pass.
    softened: bool,
}

impl Verdict {
    fn offer(&mut self, category: Category, confidence: u8, reason: &'static str) {
        if self.best.is_none_or(|(_, best, _)| confidence > best) {
            self.best = Some((category, confidence, reason));
        }
    }

    /// A weak signal: dropped when the client holds a valid pass.
    fn offer_weak(&mut self, category: Category, confidence: u8, reason: &'static str) {
        if self.pass {
            self.softened = true;
        } else {
            self.offer(category, confidence, reason);
        }
    }
}

/// The classifier's opinion of one request.
fn classify(req: &Request<'_>) -> Option<Opinion> {
    let headers = Headers::parse(&req.facts().headers);
    let ua = headers.user_agent;
    let scan = crawlers::scan(ua);
    let class = scan.class();

    // 1. Security issues.
    if class == Some(Class::Scanner) || scan.has(Marker::Scanner) {
        return opinion(Category::SecurityIssues, 95, "classifier.scanner");
    }
    let injection = headers.injection.or_else(|| {
        scan.has(Marker::ObjectInjection)
            .then(|| attacks::Kind::PhpObjectInjection.finding())
    });
    if let Some(found) = injection {
        return found.opinion();
    }
    if let Some(found) = attacks::inspect(req) {
        return found.opinion();
    }

    // 2. Crawlers: the host's verification first, then the table.
    match req.crawler() {
        CrawlerVerification::VerifiedSearchEngine => {
            return opinion(
                Category::SearchEngines,
                95,
                "classifier.verified-search-engine",
            );
        }
        CrawlerVerification::VerifiedSocialNetwork => {
            return opinion(
                Category::SocialNetworks,
                95,
                "classifier.verified-social-network",
            );
        }
        CrawlerVerification::Failed => {
            return opinion(
                Category::SuspiciousBehaviour,
                85,
                "classifier.impostor-crawler",
            );
        }
        CrawlerVerification::NoClaim | CrawlerVerification::Pending => {}
    }
    let mut verdict = Verdict {
        best: None,
        pass: matches!(
            req.challenge(),
            ChallengePass::Valid | ChallengePass::Waited
        ),
        softened: false,
    };
    if let Some((category, confidence, reason)) = class.and_then(table_opinion) {
        if class != Some(Class::HttpLibrary) {
            return opinion(category, confidence, reason);
        }
        // A library alone is weak evidence: pooled, so behaviour can outweigh it.
        verdict.offer(category, confidence, reason);
    }
    if class.is_none() && scan.has(Marker::Service) {
        return opinion(
            Category::ServicesAndPayments,
            80,
            "classifier.known-service",
        );
    }
    let browser = scan.is_browser(ua);
    if class.is_none() && !browser && !ua.is_empty() {
        if is_library(ua) {
            verdict.offer(Category::SuspiciousBehaviour, 60, "classifier.http-library");
        } else if scan.has(Marker::CrawlerWord) {
            return opinion(Category::ContentScrapers, 60, "classifier.unlisted-crawler");
        }
    }

    // 3. Automation markers.
    if headers.sec_ch_ua.is_some_and(fingerprint::hints_headless) {
        return opinion(
            Category::EmulatedHumans,
            85,
            "classifier.headless-client-hints",
        );
    }
    if scan.has(Marker::WebDriver) {
        return opinion(Category::EmulatedHumans, 85, "classifier.webdriver");
    }
    if scan.has(Marker::Headless) || scan.has(Marker::Automation) {
        return opinion(
            Category::EmulatedHumans,
            85,
            "classifier.automation-runtime",
        );
    }
    if scan.has(Marker::Electron) && !botgate_ruleset_sdk::ua::contains(ua, "Chrome/") {
        return opinion(Category::EmulatedHumans, 80, "classifier.electron-shell");
    }

    // 4. Consistency of a browser user agent.
    let consistent = !browser || check_consistency(req, &headers, &scan, &mut verdict);

    // 5. Headers and request shape.
    if req.truncated() && is_at_target_bound(req) {
        verdict.offer_weak(
            Category::SuspiciousBehaviour,
            55,
            "classifier.oversized-url",
        );
    }
    if ua.is_empty() {
        let confidence = if headers.accept { 60 } else { 65 };
        verdict.offer_weak(
            Category::SuspiciousBehaviour,
            confidence,
            "classifier.empty-user-agent",
        );
    } else if browser {
        let websocket = headers.upgrade || req.is_method("CONNECT");
        if !headers.accept && !websocket {
            verdict.offer_weak(
                Category::SuspiciousBehaviour,
                55,
                "classifier.browser-without-accept",
            );
        }
        if !headers.accept_language {
            verdict.offer_weak(
                Category::SuspiciousBehaviour,
                55,
                "classifier.browser-without-accept-language",
            );
        }
        if !headers.accept_encoding {
            verdict.offer_weak(
                Category::SuspiciousBehaviour,
                55,
                "classifier.browser-without-accept-encoding",
            );
        }
    } else if class.is_none() && !scan.has(Marker::MobileApp) {
        verdict.offer_weak(
            Category::SuspiciousBehaviour,
            40,
            "classifier.unrecognised-client",
        );
    }

    // 6. Behaviour.
    let asset = browser
        && consistent
        && headers
            .sec_fetch_dest
            .is_some_and(|d| ASSET_DESTINATIONS.contains(&d));
    check_behaviour(req, asset, &mut verdict);

    if let Some((category, confidence, reason)) = verdict.best {
        return opinion(category, confidence, reason);
    }

    // 7. Humans and the rest.
    if browser {
        opinion(Category::Humans, 50, "classifier.browser")
    } else if verdict.softened && req.challenge() == ChallengePass::Waited {
        opinion(Category::Humans, 40, "classifier.waited-pass")
    } else if verdict.softened {
        opinion(Category::Humans, 50, "classifier.valid-pass")
    } else if scan.has(Marker::MobileApp) {
        opinion(
            Category::ServicesAndPayments,
            45,
            "classifier.mobile-app-client",
        )
    } else {
        None
    }
}

/// The opinion a table class gives (`None` for scanners, handled first, and ignored
/// entries).
fn table_opinion(class: Class) -> Option<(Category, u8, &'static str)> {
    use Category::*;
    Some(match class {
        Class::SearchEngine => (
            SuspiciousBehaviour,
            85,
            "classifier.unverified-search-engine",
        ),
        Class::SocialPreview => (
            SuspiciousBehaviour,
            85,
            "classifier.unverified-social-network",
        ),
        Class::Automation => (EmulatedHumans, 85, "classifier.automation-tool"),
        Class::AiCrawler => (ContentScrapers, 85, "classifier.ai-crawler"),
        Class::Archiver => (ContentScrapers, 80, "classifier.archiver"),
        Class::Academic => (ContentScrapers, 80, "classifier.academic-crawler"),
        Class::Seo => (ContentScrapers, 80, "classifier.seo-crawler"),
        Class::Advertising => (ServicesAndPayments, 80, "classifier.advertising-crawler"),
        Class::Monitoring => (ServicesAndPayments, 80, "classifier.monitoring"),
        Class::FeedReader => (ServicesAndPayments, 80, "classifier.feed-reader"),
        Class::Service => (ServicesAndPayments, 80, "classifier.known-service"),
        Class::HttpLibrary => (SuspiciousBehaviour, 60, "classifier.http-library"),
        Class::Scanner | Class::Ignored => return None,
    })
}

/// The host's bound on the request target (`request-facts` in the WIT).
const TARGET_BOUND: usize = 16 << 10;

/// Whether the request target is at the host's bound, so the host cut it (a cut at a
/// character boundary can leave up to 3 bytes less).
fn is_at_target_bound(req: &Request<'_>) -> bool {
    req.facts().target.len() + 3 >= TARGET_BOUND
}

/// Whether `ua` starts like an HTTP library the crawler data lacks.
fn is_library(ua: &str) -> bool {
    ua.eq_ignore_ascii_case("node")
        || LIBRARY_PREFIXES.iter().any(|p| {
            ua.get(..p.len())
                .is_some_and(|head| head.eq_ignore_ascii_case(p))
        })
}

/// Offers the consistency signals of a browser user agent; returns whether it is
/// consistent (nothing offered).
fn check_consistency(
    req: &Request<'_>,
    headers: &Headers<'_>,
    scan: &crawlers::UaScan,
    verdict: &mut Verdict,
) -> bool {
    let ua = headers.user_agent;
    let mut consistent = true;
    let mut flag = |confidence: u8, reason: &'static str| {
        verdict.offer(Category::EmulatedHumans, confidence, reason);
        consistent = false;
    };
    match scan.browser_family(ua) {
        Some(BrowserFamily::Chromium) => {
            // Chrome 89 and later send `sec-ch-ua` on every HTTPS request.
            if req.is_https()
                && headers.sec_ch_ua.is_none()
                && !fingerprint::is_webview(ua)
                && fingerprint::chrome_major(ua).is_some_and(|major| major >= 89)
            {
                flag(75, "classifier.chromium-without-client-hints");
            }
            if let Some(hint) = headers.sec_ch_ua_platform {
                let (claimed, hinted) = (scan.platform(), fingerprint::hint_platform(hint));
                if fingerprint::platforms_disagree(claimed, hinted) {
                    flag(75, "classifier.client-hints-platform-mismatch");
                }
            }
        }
        Some(BrowserFamily::Firefox | BrowserFamily::Safari) if headers.sec_ch_ua.is_some() => {
            flag(75, "classifier.client-hints-from-non-chromium");
        }
        _ => {}
    }
    if let Some(ja4) = req.tls().and_then(|tls| Ja4::parse(&tls.ja4)) {
        if !ja4.offers_h2_or_h3() {
            flag(75, "classifier.browser-tls-without-h2");
        }
        if !ja4.offers_tls13() {
            flag(70, "classifier.browser-tls-legacy-version");
        }
        if !ja4.sni && !fingerprint::host_is_ip(req.host()) {
            flag(70, "classifier.browser-tls-without-sni");
        }
    }
    if req.facts().version == HttpVersion::Http10 {
        flag(75, "classifier.browser-http10");
    }
    consistent
}

/// Offers the behaviour signals; counts are scaled to a 60-second window.
fn check_behaviour(req: &Request<'_>, asset: bool, verdict: &mut Verdict) {
    let b = req.behaviour();
    let window = u64::from(if b.window_seconds == 0 {
        60
    } else {
        b.window_seconds
    });
    let per_minute = |n: u32| u64::from(n) * 60 / window;
    if b.failed_challenges >= 3 {
        verdict.offer_weak(
            Category::SuspiciousBehaviour,
            85,
            "classifier.repeated-failed-challenges",
        );
    }
    let rate = per_minute(b.requests);
    if rate > 600 {
        verdict.offer(
            Category::SuspiciousBehaviour,
            80,
            "classifier.request-flood",
        );
    }
    if per_minute(b.distinct_paths) > 100
        && u64::from(b.distinct_paths) * 4 >= u64::from(b.requests) * 3
        && !asset
    {
        verdict.offer(Category::ContentScrapers, 75, "classifier.crawl-pattern");
    }
    if (181..=600).contains(&rate) {
        verdict.offer_weak(
            Category::SuspiciousBehaviour,
            65,
            "classifier.high-request-rate",
        );
    }
}
