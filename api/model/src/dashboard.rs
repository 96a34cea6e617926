//! The dashboard's framing rule: the origins of a partner's control panel, the only
//! pages that may show the dashboard in a frame (CSP `frame-ancestors`).

use crate::invalid::Invalid;
use serde::{Deserialize, Deserializer, Serialize};
use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

/// The most panel origins a partner may list.
pub const MAX_FRAME_ORIGINS: usize = 16;

/// One origin allowed to frame the dashboard: `https://` or `http://`, a host name
/// (optionally `*.` for any subdomain), an IPv4 address or a bracketed IPv6 address,
/// and an optional port; nothing else (no path, no query, nothing a CSP header would
/// read as another directive). Stored lower-case.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct FrameOrigin(String);

impl FrameOrigin {
    pub fn parse(text: &str) -> Result<FrameOrigin, Invalid> {
        let invalid = |why: &str| {
            Invalid::malformed(
                "frame_origins",
                format!(
                    "`{}` is not a panel origin: {why} (write it as `https://panel.example` \
                     or `https://panel.example:8443`)",
                    crate::names::shorten(text)
                ),
            )
        };
        let lower = text.trim().to_ascii_lowercase();
        let lower = lower.strip_suffix('/').unwrap_or(&lower);
        let (scheme, rest) = lower
            .split_once("://")
            .ok_or_else(|| invalid("it has no scheme"))?;
        if scheme != "https" && scheme != "http" {
            return Err(invalid("the scheme must be https or http"));
        }
        if rest.contains(['/', '?', '#', '@']) {
            return Err(invalid("an origin has no path, query, fragment or user"));
        }
        let (host, port) = match rest.strip_prefix('[') {
            Some(bracketed) => {
                let (address, after) = bracketed
                    .split_once(']')
                    .ok_or_else(|| invalid("the IPv6 address has no closing bracket"))?;
                address
                    .parse::<Ipv6Addr>()
                    .map_err(|_| invalid("the IPv6 address does not parse"))?;
                let port = match after {
                    "" => None,
                    _ => Some(
                        after
                            .strip_prefix(':')
                            .ok_or_else(|| invalid("only a port may follow the address"))?,
                    ),
                };
                (None, port)
            }
            None => match rest.rsplit_once(':') {
                Some((host, port)) => (Some(host), Some(port)),
                None => (Some(rest), None),
            },
        };
        if let Some(port) = port
            && (!port.bytes().all(|b| b.is_ascii_digit())
                || !matches!(port.parse::<u16>(), Ok(1..)))
        {
            return Err(invalid("the port must be a number from 1 to 65535"));
        }
        if let Some(host) = host
            && host.parse::<Ipv4Addr>().is_err()
        {
            let name = host.strip_prefix("*.").unwrap_or(host);
            let label_ok = |label: &str| {
                !label.is_empty()
                    && label.len() <= 63
                    && !label.starts_with('-')
                    && !label.ends_with('-')
                    && label
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-')
            };
            if name.len() > 253 || !name.split('.').all(label_ok) {
                return Err(invalid(
                    "the host must be a host name (punycode for other scripts), `*.` and a \
                     host name, or an IP address",
                ));
            }
            // `*.com` or `*.github.io` would let anyone's page frame the dashboard.
            if host.starts_with("*.") && psl::suffix_str(name) == Some(name) {
                return Err(invalid(
                    "`*.` covers a public suffix, whose names belong to anyone; name the \
                     panel's own domain",
                ));
            }
        }
        Ok(FrameOrigin(lower.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Checks a partner's whole list: each origin, at most [`MAX_FRAME_ORIGINS`],
    /// duplicates dropped (in the order given).
    pub fn parse_list<S: AsRef<str>>(texts: &[S]) -> Result<Vec<FrameOrigin>, Invalid> {
        if texts.len() > MAX_FRAME_ORIGINS {
            return Err(Invalid::too_large(
                "frame_origins",
                format!(
                    "{} panel origins; a partner lists at most {MAX_FRAME_ORIGINS}",
                    texts.len()
                ),
            ));
        }
        let mut origins: Vec<FrameOrigin> = Vec::with_capacity(texts.len());
        for (index, text) in texts.iter().enumerate() {
            let origin = FrameOrigin::parse(text.as_ref())
                .map_err(|e| e.at(format!("frame_origins[{index}]")))?;
            if !origins.contains(&origin) {
                origins.push(origin);
            }
        }
        Ok(origins)
    }
}

impl fmt::Display for FrameOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Reads stored origins back as they were written (they were checked then).
impl<'de> Deserialize<'de> for FrameOrigin {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(FrameOrigin)
    }
}

/// The CSP `frame-ancestors` source list for `origins`: `'none'` when there are none.
/// An origin stored before the checks refused it (`*.com`) is left out.
pub fn frame_ancestors(origins: &[FrameOrigin]) -> String {
    let sources: Vec<&str> = origins
        .iter()
        .map(FrameOrigin::as_str)
        .filter(|origin| FrameOrigin::parse(origin).is_ok())
        .collect();
    if sources.is_empty() {
        return "'none'".to_owned();
    }
    sources.join(" ")
}

/// Whether a query parameter's name, percent-decoded, is `api-key` (as a browser's
/// `URLSearchParams` reads it).
fn names_api_key(name: &str) -> bool {
    let hex = |b: u8| (b as char).to_digit(16);
    let bytes = name.as_bytes();
    let mut decoded = Vec::with_capacity(name.len());
    let mut at = 0;
    while at < bytes.len() {
        match (
            bytes[at],
            bytes.get(at + 1).and_then(|&b| hex(b)),
            bytes.get(at + 2).and_then(|&b| hex(b)),
        ) {
            (b'%', Some(high), Some(low)) => {
                decoded.push((high * 16 + low) as u8);
                at += 3;
            }
            (byte, _, _) => {
                decoded.push(byte);
                at += 1;
            }
        }
        if decoded.len() > "api-key".len() {
            return false;
        }
    }
    decoded == b"api-key"
}

/// `target` (a path and query) with the value of every `api-key` query parameter
/// replaced by `redacted`, for logs: a dashboard address carries a user's key there.
pub fn redact_api_key(target: &str) -> std::borrow::Cow<'_, str> {
    const NAME: &str = "api-key=";
    let Some(query_at) = target.find('?') else {
        return target.into();
    };
    let query = &target[query_at..];
    if !query.contains(NAME) && !query.contains('%') {
        return target.into();
    }
    let (path, query) = target.split_at(query_at + 1);
    let (query, fragment) = match query.find('#') {
        Some(at) => query.split_at(at),
        None => (query, ""),
    };
    let pairs: Vec<&str> = query
        .split('&')
        .map(|pair| {
            let name = pair.split('=').next().unwrap_or("");
            if pair.contains('=') && names_api_key(name) {
                "api-key=redacted"
            } else {
                pair
            }
        })
        .collect();
    format!("{path}{}{fragment}", pairs.join("&")).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_in_a_query_never_reaches_a_log() {
        for (target, logged) in [
            (
                "/en/website/a.example/edit?api-key=bgu_secret",
                "/en/website/a.example/edit?api-key=redacted",
            ),
            (
                "/x?a=1&api-key=bgu_secret&b=2",
                "/x?a=1&api-key=redacted&b=2",
            ),
            (
                "/x?api-key=one&api-key=two#top",
                "/x?api-key=redacted&api-key=redacted#top",
            ),
            ("/x?my-api-key=kept", "/x?my-api-key=kept"),
            ("/x?api%2Dkey=bgu_secret", "/x?api-key=redacted"),
            ("/x?%61pi-key=bgu_secret&b=%20", "/x?api-key=redacted&b=%20"),
            ("/x?a=%2", "/x?a=%2"),
            ("/api-key=in-path", "/api-key=in-path"),
            ("/plain", "/plain"),
        ] {
            assert_eq!(redact_api_key(target), logged, "{target}");
        }
    }

    #[test]
    fn origins_parse_to_their_canonical_form() {
        for (text, canonical) in [
            ("https://Panel.Example", "https://panel.example"),
            ("https://panel.example/", "https://panel.example"),
            ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
            ("https://*.hoster.example", "https://*.hoster.example"),
            ("https://[2001:db8::1]:443", "https://[2001:db8::1]:443"),
            (
                "https://xn--e1afmkfd.example",
                "https://xn--e1afmkfd.example",
            ),
        ] {
            assert_eq!(FrameOrigin::parse(text).unwrap().as_str(), canonical);
        }
    }

    #[test]
    fn anything_a_csp_header_could_read_as_more_is_refused() {
        for text in [
            "panel.example",
            "ftp://panel.example",
            "https://panel.example/path",
            "https://panel.example; script-src *",
            "https://panel.example 'unsafe-inline'",
            "https://user@panel.example",
            "https://panel.example:0",
            "https://panel.example:99999",
            "https://panel.example:+443",
            "https://*",
            "https://*.com",
            "https://*.co.uk",
            "https://*.github.io",
            "https://[::1",
            "https://-bad.example",
            "*",
            "'self'",
            "",
        ] {
            let refused = FrameOrigin::parse(text).unwrap_err();
            assert_eq!(refused.field, "frame_origins", "{text}");
            assert!(refused.message.contains("not a panel origin"), "{text}");
        }
    }

    #[test]
    fn a_list_is_bounded_deduplicated_and_names_the_bad_item() {
        let list = FrameOrigin::parse_list(&["https://a.example", "https://A.example/"]).unwrap();
        assert_eq!(list.len(), 1);
        let refused = FrameOrigin::parse_list(&["https://a.example", "nope"]).unwrap_err();
        assert_eq!(refused.field, "frame_origins[1]");
        let many: Vec<String> = (0..=MAX_FRAME_ORIGINS)
            .map(|n| format!("https://{n}.example"))
            .collect();
        assert!(FrameOrigin::parse_list(&many).is_err());
        assert_eq!(frame_ancestors(&[]), "'none'");
        assert_eq!(frame_ancestors(&list), "https://a.example");
    }
}
