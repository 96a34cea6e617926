//! Facts for the consistency rules: the platform `sec-ch-ua-platform` claims (the user
//! agent's comes from the user-agent scan), the Chrome major version, the headless
//! brand in `sec-ch-ua`, and the `a` part of a JA4 fingerprint.

/// The platforms the platform-consistency rule compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Platform {
    Windows,
    MacOs,
    Linux,
    Android,
    /// Chrome OS, iOS and anything else: never compared.
    Other,
}

/// The platform `sec-ch-ua-platform` names (`"Windows"`, quotes included).
pub(crate) fn hint_platform(value: &str) -> Platform {
    match value.trim().trim_matches('"') {
        "Windows" => Platform::Windows,
        "macOS" => Platform::MacOs,
        "Linux" => Platform::Linux,
        "Android" => Platform::Android,
        _ => Platform::Other,
    }
}

/// Whether the user agent's platform and the client hint's contradict each other.
/// Chrome on Android asked for the desktop site sends a Linux user agent with the
/// `"Android"` hint, so that pair is consistent.
pub(crate) fn platforms_disagree(ua: Platform, hint: Platform) -> bool {
    ua != Platform::Other
        && hint != Platform::Other
        && ua != hint
        && !(ua == Platform::Linux && hint == Platform::Android)
}

/// The major version of the `Chrome/` token.
pub(crate) fn chrome_major(ua: &str) -> Option<u32> {
    let at = botgate_ruleset_sdk::ua::find(ua, "Chrome/")? + "Chrome/".len();
    let digits = ua[at..].bytes().take_while(u8::is_ascii_digit).count();
    ua[at..at + digits].parse().ok()
}

/// Whether the user agent is an Android WebView (`; wv)`), which may omit client hints.
pub(crate) fn is_webview(ua: &str) -> bool {
    botgate_ruleset_sdk::ua::contains(ua, "; wv)")
}

/// Whether `sec-ch-ua`'s brand list names a headless browser (`"HeadlessChrome"`).
pub(crate) fn hints_headless(sec_ch_ua: &str) -> bool {
    let bytes = sec_ch_ua.as_bytes();
    memchr::memchr2_iter(b'h', b'H', bytes).any(|at| {
        bytes
            .get(at..at + 8)
            .is_some_and(|w| w.eq_ignore_ascii_case(b"headless"))
    })
}

/// The `a` part of a JA4 fingerprint: `t13d1516h2` is TCP, TLS 1.3, SNI present,
/// 15 ciphers, 16 extensions, first ALPN `h2`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ja4 {
    /// The highest TLS version offered, two characters (`13`, `12`, `s3`...).
    pub(crate) version: [u8; 2],
    /// Whether SNI was sent (`d`) rather than not (`i`).
    pub(crate) sni: bool,
    /// The first and last character of the first ALPN value (`h2`, `h1`, `00`).
    pub(crate) alpn: [u8; 2],
}

impl Ja4 {
    /// Parses the `a` part; `None` when `ja4` is empty or malformed.
    pub(crate) fn parse(ja4: &str) -> Option<Ja4> {
        let a = ja4.as_bytes().get(..10)?;
        let transport_ok = matches!(a[0], b't' | b'q' | b'd');
        let sni = match a[3] {
            b'd' => true,
            b'i' => false,
            _ => return None,
        };
        let counts_ok = a[4..8].iter().all(u8::is_ascii_digit);
        (transport_ok && counts_ok).then_some(Ja4 {
            version: [a[1], a[2]],
            sni,
            alpn: [a[8], a[9]],
        })
    }

    /// Whether the client offered HTTP/2 or HTTP/3 first, as every browser does.
    pub(crate) fn offers_h2_or_h3(&self) -> bool {
        &self.alpn == b"h2" || &self.alpn == b"h3"
    }

    /// Whether the client offered TLS 1.3, as every current browser does.
    pub(crate) fn offers_tls13(&self) -> bool {
        &self.version == b"13"
    }
}

/// Whether `host` is an IP literal (a browser sends no SNI for those).
pub(crate) fn host_is_ip(host: &str) -> bool {
    host.parse::<std::net::IpAddr>().is_ok()
        || host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .is_some_and(|h| h.parse::<std::net::Ipv6Addr>().is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ja4_a_part_is_parsed() {
        let ja4 = Ja4::parse("t13d1516h2_8daaf6152771_02713d6af862").unwrap();
        assert!(ja4.sni && ja4.offers_h2_or_h3() && ja4.offers_tls13());
        let curl = Ja4::parse("t13d3112h1_e8f1e7e78f70_6bebaf5329ac").unwrap();
        assert!(!curl.offers_h2_or_h3());
        let old = Ja4::parse("t12i0607h2_aaaaaaaaaaaa_bbbbbbbbbbbb").unwrap();
        assert!(!old.offers_tls13() && !old.sni);
        assert_eq!(Ja4::parse(""), None);
        assert_eq!(Ja4::parse("garbage"), None);
    }

    #[test]
    fn hint_platforms_are_compared() {
        assert_eq!(hint_platform("\"macOS\""), Platform::MacOs);
        assert!(platforms_disagree(Platform::Windows, Platform::MacOs));
        assert!(!platforms_disagree(Platform::Linux, Platform::Android));
        assert!(!platforms_disagree(Platform::Other, Platform::Windows));
    }

    #[test]
    fn headless_brands_are_found_ignoring_case() {
        assert!(hints_headless(
            "\"HeadlessChrome\";v=\"131\", \"Chromium\";v=\"131\""
        ));
        assert!(hints_headless("\"headless shell\";v=\"1\""));
        assert!(!hints_headless(
            "\"Google Chrome\";v=\"131\", \"Not_A Brand\";v=\"24\""
        ));
    }

    #[test]
    fn chrome_major_is_read() {
        assert_eq!(
            chrome_major(botgate_ruleset_sdk::testing::CHROME_UA),
            Some(131)
        );
        assert_eq!(chrome_major("Mozilla/5.0 Firefox/133.0"), None);
    }
}
