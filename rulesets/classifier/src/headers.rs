//! One pass over the request's header lines for the headers the rules read, and one
//! byte search over the whole block for injection payloads carried in any header
//! (log4shell lookups, shellshock); PHP object-injection payloads are looked for in
//! `X-Forwarded-For` here and in the user agent by the user-agent scan
//! ([`crate::crawlers::Marker::ObjectInjection`]), the headers PHP applications store.

use crate::attacks::{Finding, Kind};

/// The headers the classifier reads, found in one pass.
#[derive(Debug, Default)]
pub(crate) struct Headers<'a> {
    /// The first `user-agent`, empty when none was sent.
    pub(crate) user_agent: &'a str,
    /// `sec-ch-ua`, the Chromium brand list.
    pub(crate) sec_ch_ua: Option<&'a str>,
    /// `sec-ch-ua-platform`, quoted (`"Windows"`).
    pub(crate) sec_ch_ua_platform: Option<&'a str>,
    /// `sec-fetch-dest` (`document`, `image`, `script`...).
    pub(crate) sec_fetch_dest: Option<&'a str>,
    /// Whether `accept` was sent.
    pub(crate) accept: bool,
    /// Whether `accept-language` was sent.
    pub(crate) accept_language: bool,
    /// Whether `accept-encoding` was sent.
    pub(crate) accept_encoding: bool,
    /// Whether `upgrade` was sent (a WebSocket handshake carries no `accept`).
    pub(crate) upgrade: bool,
    /// An injection payload found in a header value (an object-injection payload in
    /// the user agent is the user-agent scan's to find).
    pub(crate) injection: Option<Finding>,
}

/// What follows `${` in a log4j lookup an attacker uses (compared ignoring case: log4j
/// lower-cases lookup names, so `${JnDi:` works too).
const LOG4J_LOOKUPS: &[&[u8]] = &[
    b"jndi:", b"${", b"lower:", b"upper:", b"env:", b"sys:", b"::-", b"date:", b"main:",
];

impl<'a> Headers<'a> {
    /// Reads the host's `name: value\n...` header block (names are lower case).
    pub(crate) fn parse(raw: &'a str) -> Self {
        let mut headers = Headers::default();
        let mut user_agent = None;
        let mut object_injection = false;
        let bytes = raw.as_bytes();
        let mut start = 0;
        while start < bytes.len() {
            let end = memchr::memchr(b'\n', &bytes[start..]).map_or(bytes.len(), |i| start + i);
            // `\n` is ASCII, so both ends are character boundaries.
            let line = &raw[start..end];
            start = end + 1;
            // Only names starting `u`, `s`, `a` or `x` matter: skip the rest (cookies...)
            // unread.
            if !matches!(line.as_bytes().first(), Some(b'u' | b's' | b'a' | b'x')) {
                continue;
            }
            let Some(colon) = line.bytes().position(|b| b == b':') else {
                continue;
            };
            let value = trim(&line[colon + 1..]);
            match trim(&line[..colon]) {
                "user-agent" => {
                    user_agent.get_or_insert(value);
                }
                "sec-ch-ua" => {
                    headers.sec_ch_ua.get_or_insert(value);
                }
                "sec-ch-ua-platform" => {
                    headers.sec_ch_ua_platform.get_or_insert(value);
                }
                "sec-fetch-dest" => {
                    headers.sec_fetch_dest.get_or_insert(value);
                }
                "accept" => headers.accept = true,
                "accept-language" => headers.accept_language = true,
                "accept-encoding" => headers.accept_encoding = true,
                "upgrade" => headers.upgrade = true,
                "x-forwarded-for" => object_injection |= has_object_injection(value),
                _ => {}
            }
        }
        headers.user_agent = user_agent.unwrap_or("");
        // One search for both payloads' first byte; most blocks hold neither (a `(` in
        // the user agent is the usual hit).
        let (mut log4j, mut shellshock) = (false, false);
        for at in memchr::memchr2_iter(b'$', b'(', bytes) {
            if bytes[at] == b'$' {
                log4j |= is_log4j_lookup(&bytes[at + 1..]);
            } else {
                shellshock |= is_shellshock(bytes, at);
            }
        }
        if log4j {
            headers.injection = Some(Kind::Log4Shell.finding());
        } else if shellshock {
            headers.injection = Some(Kind::Shellshock.finding());
        } else if object_injection {
            headers.injection = Some(Kind::PhpObjectInjection.finding());
        }
        headers
    }
}

/// `s` without the spaces, tabs and carriage returns around it.
fn trim(s: &str) -> &str {
    let blank = |b: &u8| matches!(b, b' ' | b'\t' | b'\r');
    let bytes = s.as_bytes();
    let start = bytes.iter().position(|b| !blank(b)).unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| !blank(b))
        .map_or(start, |i| i + 1);
    // Both ends sit next to ASCII bytes, so they are character boundaries.
    &s[start..end]
}

/// Whether a header value in `text` starts with a shell function definition, `() {`.
#[cfg(test)]
fn has_shellshock(text: &[u8]) -> bool {
    memchr::memchr_iter(b'(', text).any(|at| is_shellshock(text, at))
}

/// Whether the `(` at `at` in `text` starts a header value with `() {`.
fn is_shellshock(text: &[u8], at: usize) -> bool {
    text[at + 1..].starts_with(b") {")
        && text[..at]
            .iter()
            .rev()
            .find(|b| **b != b' ' && **b != b'\t')
            .is_some_and(|b| *b == b':')
}

/// Whether a header value carries a marker of a PHP object-injection payload.
fn has_object_injection(value: &str) -> bool {
    crate::crawlers::OBJECT_INJECTION
        .iter()
        .any(|m| botgate_ruleset_sdk::ua::contains_ignore_case(value, m))
}

/// Whether `text` holds `${` followed by a lookup an attacker uses.
#[cfg(test)]
fn has_log4j_lookup(text: &[u8]) -> bool {
    memchr::memchr_iter(b'$', text).any(|at| is_log4j_lookup(&text[at + 1..]))
}

/// Whether `after_dollar`, what follows a `$`, starts `{` and a lookup an attacker uses.
fn is_log4j_lookup(after_dollar: &[u8]) -> bool {
    let Some(rest) = after_dollar.strip_prefix(b"{") else {
        return false;
    };
    LOG4J_LOOKUPS
        .iter()
        .any(|l| rest.len() >= l.len() && rest[..l.len()].eq_ignore_ascii_case(l))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_reads_the_first_value_and_flags() {
        let h = Headers::parse(
            "host: a\nuser-agent: one\nuser-agent: two\naccept: */*\nsec-ch-ua-platform: \"Linux\"",
        );
        assert_eq!(h.user_agent, "one");
        assert!(h.accept && !h.accept_language && !h.accept_encoding);
        assert_eq!(h.sec_ch_ua_platform, Some("\"Linux\""));
        assert!(h.injection.is_none());
    }

    #[test]
    fn lookups_are_found_ignoring_case() {
        assert!(has_log4j_lookup(b"x-api: ${JnDi:ldap://a/b}"));
        assert!(has_log4j_lookup(b"referer: ${${lower:j}ndi:x}"));
        assert!(!has_log4j_lookup(b"accept: ${price} and $ {jndi:"));
    }

    #[test]
    fn object_injection_is_read_in_the_user_agent_and_forwarded_for() {
        use crate::crawlers::{Marker, scan_fresh};
        let chain = r#"}__test|O:21:"JDatabaseDriverMysqli":3:{}"#;
        let found = |raw: &str| Headers::parse(raw).injection;
        let object = Some(Kind::PhpObjectInjection.finding());
        // In the user agent, the scan finds each marker alone, in any case.
        assert!(scan_fresh(chain).has(Marker::ObjectInjection));
        for marker in crate::crawlers::OBJECT_INJECTION {
            let ua = format!("Mozilla/5.0 ({})", marker.to_ascii_uppercase());
            assert!(scan_fresh(&ua).has(Marker::ObjectInjection), "{ua}");
            assert!(has_object_injection(&ua), "{ua} in x-forwarded-for");
        }
        assert!(
            !scan_fresh("Mozilla/5.0 (X11; Linux x86_64) Chrome/131.0")
                .has(Marker::ObjectInjection)
        );
        assert_eq!(
            found(&format!(
                "x-forwarded-for: 1.2.3.4\nx-forwarded-for: {chain}"
            )),
            object
        );
        assert_eq!(found(&format!("referer: https://a/?q={chain}")), None);
        assert_eq!(
            found("user-agent: Mozilla/5.0 (X11)\nx-forwarded-for: 1.2.3.4"),
            None
        );
    }

    #[test]
    fn shellshock_is_a_value_starting_with_a_function() {
        assert!(has_shellshock(b"host: a\nuser-agent: () { :; }; echo"));
        assert!(!has_shellshock(b"user-agent: Mozilla/5.0 (X11) () { x"));
    }
}
