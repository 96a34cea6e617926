//! Shared fixtures for the classifier tests: realistic browsers and clients, and an
//! assertion on the category and reason of the classifier's opinion.

pub(crate) use crate::Classifier;
pub(crate) use botgate_ruleset_sdk::Category::{self, *};
pub(crate) use botgate_ruleset_sdk::testing::*;
pub(crate) use botgate_ruleset_sdk::{ChallengePass, CrawlerVerification, HttpVersion};

/// Chrome 131 on macOS.
pub(crate) const CHROME_MAC_UA: &str = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36";
/// Chrome 131 on Android (reduced user agent).
pub(crate) const CHROME_ANDROID_UA: &str = "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36";
/// Chrome 131 on Linux (also what Android sends for "desktop site").
pub(crate) const CHROME_LINUX_UA: &str = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36";
/// Edge 131 on Windows.
pub(crate) const EDGE_UA: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0";
/// Samsung Internet 26 on Android.
pub(crate) const SAMSUNG_UA: &str = "Mozilla/5.0 (Linux; Android 13; SAMSUNG SM-A536B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/26.0 Chrome/122.0.0.0 Mobile Safari/537.36";
/// Safari 18 on macOS.
pub(crate) const SAFARI_MAC_UA: &str = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15";
/// Firefox 133 on Windows.
pub(crate) const FIREFOX_WINDOWS_UA: &str =
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0";
/// An Android WebView in an app (no client hints on older WebViews).
pub(crate) const WEBVIEW_UA: &str = "Mozilla/5.0 (Linux; Android 14; SM-G991B Build/UP1A.231005.007; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/131.0.6778.81 Mobile Safari/537.36 [FB_IAB/FB4A;FBAV/490.0.0.58.82;]";
/// Headless Chrome as Puppeteer launches it.
pub(crate) const HEADLESS_UA: &str = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/131.0.0.0 Safari/537.36";

/// A Chromium browser's request: brand list, platform, the usual headers and Chrome's
/// JA4, minus the headers named in `skip`.
pub(crate) fn chromium(
    target: &str,
    ua: &str,
    brand: &str,
    platform: &str,
    mobile: bool,
    skip: &[&str],
) -> RequestBuilder {
    let brands = format!("\"{brand}\";v=\"131\", \"Chromium\";v=\"131\", \"Not_A Brand\";v=\"24\"");
    let platform = format!("\"{platform}\"");
    let headers = [
        ("sec-ch-ua", brands.as_str()),
        ("sec-ch-ua-mobile", if mobile { "?1" } else { "?0" }),
        ("sec-ch-ua-platform", platform.as_str()),
        (
            "accept",
            "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8",
        ),
        ("accept-encoding", "gzip, deflate, br, zstd"),
        ("accept-language", "en-GB,en;q=0.9"),
        ("sec-fetch-site", "none"),
        ("sec-fetch-mode", "navigate"),
        ("sec-fetch-dest", "document"),
    ];
    let mut req = get(target).ua(ua).ja4(CHROME_JA4);
    for (name, value) in headers {
        if !skip.contains(&name) {
            req = req.header(name, value);
        }
    }
    req
}

/// Chrome on Windows (the SDK's `.browser()`).
pub(crate) fn chrome(target: &str) -> RequestBuilder {
    get(target).browser()
}

/// Chrome on Windows without the headers named in `skip`.
pub(crate) fn chrome_without(target: &str, skip: &[&str]) -> RequestBuilder {
    chromium(target, CHROME_UA, "Google Chrome", "Windows", false, skip)
}

/// Chrome on Android.
pub(crate) fn chrome_android(target: &str) -> RequestBuilder {
    chromium(
        target,
        CHROME_ANDROID_UA,
        "Google Chrome",
        "Android",
        true,
        &[],
    )
}

/// Safari with its headers and JA4 (`ua` picks iPhone or Mac).
pub(crate) fn safari(target: &str, ua: &str) -> RequestBuilder {
    get(target)
        .ua(ua)
        .header(
            "accept",
            "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
        )
        .header("accept-encoding", "gzip, deflate, br")
        .header("accept-language", "en-GB,en;q=0.9")
        .header("sec-fetch-mode", "navigate")
        .ja4(SAFARI_JA4)
}

/// A machine client: its user agent, `accept: */*`, HTTP/1.1 and curl's JA4.
pub(crate) fn bot(ua: &str) -> RequestBuilder {
    get("/").machine(ua)
}

/// A crawler fetching a page, with the host's verification result.
pub(crate) fn crawler(ua: &str, verification: CrawlerVerification) -> RequestBuilder {
    get("/blog/hello-world")
        .machine(ua)
        .header("accept-encoding", "gzip")
        .crawler(verification)
}

/// Asserts the classifier's category and reason for `req`.
#[track_caller]
pub(crate) fn assert_opinion(req: RequestBuilder, category: Category, reason: &str) {
    let got = evaluate::<Classifier>(&req);
    let facts = req.build();
    let Some(opinion) = got else {
        panic!(
            "expected {category:?} ({reason}), got no opinion for {} {}\n{}",
            facts.method, facts.target, facts.headers
        );
    };
    assert!(
        opinion.category == category && opinion.reason == reason,
        "expected {category:?} ({reason}), got {:?} ({}, {}) for {} {}\n{}",
        opinion.category,
        opinion.reason,
        opinion.confidence,
        facts.method,
        facts.target,
        facts.headers
    );
    assert!(botgate_ruleset_sdk::is_valid_reason(&opinion.reason));
    assert!(opinion.confidence <= 100);
}

/// The confidence the classifier gives `req` (panics without an opinion).
pub(crate) fn confidence(req: RequestBuilder) -> u8 {
    evaluate::<Classifier>(&req).expect("an opinion").confidence
}
