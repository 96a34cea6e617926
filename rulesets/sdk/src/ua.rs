//! User-agent helpers shared by rule components.

/// Whether `haystack` contains `needle` (case-sensitive): cheaper than `str::contains`
/// for the short paths and user agents rules look at, as it builds no searcher.
pub fn contains(haystack: &str, needle: &str) -> bool {
    find(haystack, needle).is_some()
}

/// Where `needle` first occurs in `haystack` (case-sensitive), like `str::find` but
/// without building a searcher: memchr jumps between occurrences of its first byte.
pub fn find(haystack: &str, needle: &str) -> Option<usize> {
    let (h, n) = (haystack.as_bytes(), needle.as_bytes());
    let Some((&first, rest)) = n.split_first() else {
        return Some(0);
    };
    let last_start = h.len().checked_sub(n.len())?;
    memchr::memchr_iter(first, &h[..=last_start]).find(|&i| &h[i + 1..i + n.len()] == rest)
}

/// Whether `haystack` contains `needle`, ignoring ASCII case, without allocating.
pub fn contains_ignore_case(haystack: &str, needle: &str) -> bool {
    let (h, n) = (haystack.as_bytes(), needle.as_bytes());
    let Some((&first, rest)) = n.split_first() else {
        return true;
    };
    if h.len() < n.len() {
        return false;
    }
    // Jump between occurrences of the first byte (either case) with memchr, then
    // compare the rest: most of the haystack is skipped a word at a time.
    let last_start = h.len() - n.len();
    memchr::memchr2_iter(first.to_ascii_lowercase(), first.to_ascii_uppercase(), h)
        .take_while(|&i| i <= last_start)
        .any(|i| h[i + 1..i + n.len()].eq_ignore_ascii_case(rest))
}

/// Whether `ua` contains any of `needles`, ignoring ASCII case.
pub fn contains_any_ignore_case(ua: &str, needles: &[&str]) -> bool {
    needles.iter().any(|n| contains_ignore_case(ua, n))
}

/// Tokens that real browsers do not send but bots, crawlers and libraries do.
const NON_BROWSER_MARKERS: &[&str] = &[
    "bot",
    "crawl",
    "spider",
    "slurp",
    "+http",
    "http://",
    "https://",
    "headless",
    "phantomjs",
    "python",
    "curl",
    "wget",
    "java/",
    "go-http",
    "okhttp",
    "scrapy",
    "libwww",
    "httpclient",
];

/// Tokens of the mainstream browser engines and brands.
const BROWSER_MARKERS: &[&str] = &["Chrome/", "Firefox/", "Safari/", "Edg/", "OPR/"];

/// One automaton over both marker lists (ASCII case-insensitive), built once per
/// instance: a user agent is scanned once instead of once per marker.
fn markers() -> &'static aho_corasick::AhoCorasick {
    static MARKERS: std::sync::OnceLock<aho_corasick::AhoCorasick> = std::sync::OnceLock::new();
    MARKERS.get_or_init(|| {
        aho_corasick::AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .kind(Some(aho_corasick::AhoCorasickKind::DFA))
            .build(BROWSER_MARKERS.iter().chain(NON_BROWSER_MARKERS))
            .expect("the marker lists are valid patterns")
    })
}

/// Whether `ua` looks like a mainstream desktop or mobile browser (Chrome, Edge, Firefox,
/// Safari, Opera, Samsung Internet) and carries no bot or library marker.
pub fn is_browser(ua: &str) -> bool {
    if !ua.starts_with("Mozilla/5.0 (") {
        return false;
    }
    let mut browser = false;
    for m in markers().find_overlapping_iter(ua) {
        if m.pattern().as_usize() < BROWSER_MARKERS.len() {
            browser = true;
        } else {
            return false;
        }
    }
    browser
}

/// The browser family a user agent claims, for consistency checks against client hints
/// and TLS fingerprints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BrowserFamily {
    /// Chrome, Edge, Opera, Brave, Samsung Internet: Chromium-based, send client hints.
    Chromium,
    /// Firefox: sends no client hints.
    Firefox,
    /// Safari: sends no client hints.
    Safari,
}

/// The browser family `ua` claims, if it claims one.
pub fn browser_family(ua: &str) -> Option<BrowserFamily> {
    if !is_browser(ua) {
        None
    } else if contains(ua, "Firefox/") || contains(ua, "FxiOS/") {
        Some(BrowserFamily::Firefox)
    } else if contains(ua, "Chrome/") && !contains(ua, "CriOS/") {
        Some(BrowserFamily::Chromium)
    } else if contains(ua, "Safari/") {
        Some(BrowserFamily::Safari)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{CHROME_UA, FIREFOX_UA, SAFARI_IOS_UA};

    #[test]
    fn browsers_are_recognised() {
        assert_eq!(browser_family(CHROME_UA), Some(BrowserFamily::Chromium));
        assert_eq!(browser_family(FIREFOX_UA), Some(BrowserFamily::Firefox));
        assert_eq!(browser_family(SAFARI_IOS_UA), Some(BrowserFamily::Safari));
    }

    #[test]
    fn bots_and_libraries_are_not_browsers() {
        for ua in [
            "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
            "curl/8.5.0",
            "python-requests/2.31.0",
            "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/120.0.0.0 Safari/537.36",
            "",
        ] {
            assert!(!is_browser(ua), "{ua}");
        }
    }

    #[test]
    fn contains_finds_substrings() {
        assert!(contains("/wp-content/uploads/x.php", "/uploads/"));
        assert!(contains("abc", "abc"));
        assert!(contains("abc", ""));
        assert!(!contains("abc", "abcd"));
        assert!(!contains("/a/b", "//"));
        assert!(contains("/a//b", "//"));
        assert!(!contains("ABC", "abc"));
    }

    #[test]
    fn find_answers_what_str_find_answers() {
        let ua = "Mozilla/5.0 (Linux; Android 14; wv) Chrome/131.0 Mobile Chrome/2";
        for needle in [
            "Chrome/",
            "; wv)",
            "M",
            "2",
            "",
            "Chrome/3",
            "x",
            ua,
            "Mozilla/5.0 (Linux; Android 14; wv) Chrome/131.0 Mobile Chrome/2!",
        ] {
            assert_eq!(find(ua, needle), ua.find(needle), "{needle:?}");
        }
        assert_eq!(find("", ""), Some(0));
        assert_eq!(find("", "a"), None);
    }

    #[test]
    fn contains_ignores_ascii_case() {
        assert!(contains_ignore_case("Mozilla WordPress/6.4", "wordpress"));
        assert!(!contains_ignore_case("abc", "abcd"));
    }
}
