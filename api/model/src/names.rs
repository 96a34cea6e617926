//! Validated names: website domains (IDNA-aware), subdomain labels, user ids and tags.

use crate::invalid::Invalid;
use serde::{Deserialize, Serialize};

/// The most subdomains a website may list.
pub const MAX_SUBDOMAINS: usize = 100;
/// The most tags a user or website may carry.
pub const MAX_TAGS: usize = 32;
/// The longest tag, in bytes.
pub const MAX_TAG_BYTES: usize = 64;
/// The most origin addresses a website may list.
pub const MAX_ORIGINS: usize = 32;
/// The longest user id, in bytes.
pub const MAX_USER_ID_BYTES: usize = 128;

/// The conversions every validated string type shares: from a `String` through its
/// `parse` (so serde checks stored and sent values alike), back into a `String`, and
/// `Display` as the string itself.
macro_rules! validated_string {
    ($($ty:ident),+) => {$(
        impl TryFrom<String> for $ty {
            type Error = Invalid;
            fn try_from(s: String) -> Result<Self, Invalid> {
                $ty::parse(&s)
            }
        }

        impl From<$ty> for String {
            fn from(value: $ty) -> String {
                value.0
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }
    )+};
}
pub(crate) use validated_string;

validated_string!(Domain, Subdomain, UserId);

/// A website's domain, in its ASCII (punycode) form, lower case, without a trailing
/// dot: `bücher.example` is kept as `xn--bcher-kva.example`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Domain(String);

impl Domain {
    /// Validates `input` as a domain a website can be served under: IDNA (UTS #46,
    /// strict) to ASCII, at least two labels, 1 to 63 bytes per label, 253 in all, not
    /// an IP address.
    pub fn parse(input: &str) -> Result<Domain, Invalid> {
        let field = "domain";
        let trimmed = input.trim();
        let trimmed = trimmed.strip_suffix('.').unwrap_or(trimmed);
        if trimmed.is_empty() {
            return Err(Invalid::malformed(field, "the domain is empty"));
        }
        if trimmed.len() > 253 {
            return Err(Invalid::too_large(
                field,
                format!("a domain of {} bytes, at most 253", trimmed.len()),
            ));
        }
        if trimmed.parse::<std::net::IpAddr>().is_ok() {
            return Err(Invalid::malformed(
                field,
                format!("`{trimmed}` is an IP address; a website needs a domain name"),
            ));
        }
        let ascii = idna::domain_to_ascii_strict(trimmed).map_err(|_| {
            Invalid::malformed(
                field,
                format!("`{}` is not a valid domain name", shorten(trimmed)),
            )
        })?;
        check_host_labels(&ascii, field)?;
        if !ascii.contains('.') {
            return Err(Invalid::malformed(
                field,
                format!("`{ascii}` has a single label; use a full domain such as example.com"),
            ));
        }
        let tld = ascii.rsplit('.').next().unwrap_or_default();
        if tld.bytes().all(|b| b.is_ascii_digit()) {
            return Err(Invalid::malformed(
                field,
                format!("`{ascii}` ends in a numeric label"),
            ));
        }
        Ok(Domain(ascii))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this domain is itself a public suffix (`co.uk`, `github.io`: Mozilla's
    /// Public Suffix List, ICANN and private sections), under which names belong to
    /// many owners. A domain of an unlisted top-level domain (`shop.example`) is not.
    pub fn is_public_suffix(&self) -> bool {
        psl::suffix_str(&self.0) == Some(self.0.as_str())
    }

    /// The labels in reverse order (`a.shop.example` → `example.shop.a`), so that the
    /// names under a domain sort right after it, each starting with its reverse and a
    /// dot.
    pub fn reversed(&self) -> String {
        self.0.rsplit('.').collect::<Vec<_>>().join(".")
    }

    /// The full name of `subdomain` under this domain (`www.example.com`).
    pub fn with_subdomain(&self, subdomain: &Subdomain) -> String {
        format!("{}.{}", subdomain.as_str(), self.0)
    }
}

/// One entry of a website's `subdomain` list: one or more labels put in front of the
/// domain (`www`, `shop`, `eu.cdn`), ASCII (punycode) lower case.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Subdomain(String);

impl Subdomain {
    /// Validates `input` as subdomain labels (IDNA-aware).
    pub fn parse(input: &str) -> Result<Subdomain, Invalid> {
        let field = "subdomain";
        let trimmed = input.trim();
        if trimmed.is_empty() {
            return Err(Invalid::malformed(field, "a subdomain is empty"));
        }
        let ascii = idna::domain_to_ascii_strict(trimmed).map_err(|_| {
            Invalid::malformed(
                field,
                format!("`{}` is not a valid subdomain label", shorten(trimmed)),
            )
        })?;
        check_host_labels(&ascii, field)?;
        Ok(Subdomain(ascii))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Letters, digits and inner hyphens per label, 1 to 63 bytes each, 253 in all.
fn check_host_labels(ascii: &str, field: &str) -> Result<(), Invalid> {
    if ascii.len() > 253 {
        return Err(Invalid::malformed(
            field,
            format!("a name of {} bytes, at most 253", ascii.len()),
        ));
    }
    for label in ascii.split('.') {
        let ok = (1..=63).contains(&label.len())
            && label
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !label.starts_with('-')
            && !label.ends_with('-');
        if !ok {
            return Err(Invalid::malformed(
                field,
                format!(
                    "label `{}` of `{}` is not a valid DNS label (letters, digits, inner \
                     hyphens, 1 to 63 bytes)",
                    shorten(label),
                    shorten(ascii)
                ),
            ));
        }
    }
    Ok(())
}

/// A user's id, chosen by the partner (the specification's example is e-mail shaped):
/// 1 to 128 bytes of letters, digits and `.`, `_`, `-`, `+`, `@`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct UserId(String);

impl UserId {
    pub fn parse(input: &str) -> Result<UserId, Invalid> {
        let field = "id";
        if input.is_empty() {
            return Err(Invalid::malformed(field, "the user id is empty"));
        }
        if input.len() > MAX_USER_ID_BYTES {
            return Err(Invalid::too_large(
                field,
                format!(
                    "a user id of {} bytes, at most {MAX_USER_ID_BYTES}",
                    input.len()
                ),
            ));
        }
        if let Some(bad) = input
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || "._-+@".contains(*c)))
        {
            return Err(Invalid::malformed(
                field,
                format!(
                    "the user id contains {bad:?}; use letters, digits and . _ - + @ \
                     (an e-mail address works)"
                ),
            ));
        }
        Ok(UserId(input.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Refuses a list of more than `max` entries that are not blank, counted as sent
/// (before duplicates are dropped and before any entry is checked), so a long list
/// costs one pass over it.
fn count_entries(field: &str, what: &str, input: &[String], max: usize) -> Result<(), Invalid> {
    let sent = input.iter().filter(|e| !e.trim().is_empty()).count();
    if sent > max {
        return Err(Invalid::too_large(
            field,
            format!("{sent} {what}, at most {max}"),
        ));
    }
    Ok(())
}

/// Checks a tag list: at most [`MAX_TAGS`] tags of 1 to [`MAX_TAG_BYTES`] bytes of
/// printable text; blank entries are dropped, duplicates kept once, order kept.
pub fn tags(field: &str, input: Vec<String>) -> Result<Vec<String>, Invalid> {
    count_entries(field, "tags", &input, MAX_TAGS)?;
    let mut seen = std::collections::HashSet::with_capacity(input.len());
    let mut out: Vec<String> = Vec::new();
    for tag in &input {
        let tag = tag.trim();
        if tag.is_empty() || !seen.insert(tag) {
            continue;
        }
        if tag.len() > MAX_TAG_BYTES {
            return Err(Invalid::too_large(
                field,
                format!("a tag of {} bytes, at most {MAX_TAG_BYTES}", tag.len()),
            ));
        }
        if tag.chars().any(char::is_control) {
            return Err(Invalid::malformed(
                field,
                "a tag contains a control character",
            ));
        }
        out.push(tag.to_owned());
    }
    Ok(out)
}

/// Checks a subdomain list: at most [`MAX_SUBDOMAINS`], each valid, duplicates kept once.
pub fn subdomains(input: Vec<String>) -> Result<Vec<Subdomain>, Invalid> {
    count_entries("subdomain", "subdomains", &input, MAX_SUBDOMAINS)?;
    let mut seen = std::collections::HashSet::with_capacity(input.len());
    let mut out: Vec<Subdomain> = Vec::new();
    for entry in input {
        if entry.trim().is_empty() {
            continue;
        }
        let sub = Subdomain::parse(&entry)?;
        if seen.insert(sub.clone()) {
            out.push(sub);
        }
    }
    Ok(out)
}

/// Checks an origin address list: IPv4 or IPv6 literals (`[::1]` accepted), at least
/// one, at most 32, duplicates kept once.
pub fn origin_ips(field: &str, input: Vec<String>) -> Result<Vec<std::net::IpAddr>, Invalid> {
    count_entries(field, "origin addresses", &input, MAX_ORIGINS)?;
    let mut seen = std::collections::HashSet::with_capacity(input.len());
    let mut out = Vec::new();
    for entry in &input {
        let entry = entry.trim();
        if entry.is_empty() {
            continue;
        }
        let bare = entry
            .strip_prefix('[')
            .and_then(|e| e.strip_suffix(']'))
            .unwrap_or(entry);
        let ip: std::net::IpAddr = bare.parse().map_err(|_| {
            Invalid::malformed(
                field,
                format!("`{}` is not an IPv4 or IPv6 address", shorten(entry)),
            )
        })?;
        if ip.is_unspecified() || ip.is_multicast() {
            return Err(Invalid::unacceptable(
                field,
                format!("`{ip}` cannot be an origin (unspecified or multicast)"),
            ));
        }
        if seen.insert(ip) {
            out.push(ip);
        }
    }
    Ok(out)
}

/// At most 64 characters of `s`, for error messages.
pub fn shorten(s: &str) -> String {
    if s.chars().count() <= 64 {
        return s.to_owned();
    }
    let mut out: String = s.chars().take(61).collect();
    out.push_str("...");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_counted_as_sent_before_duplicates_are_dropped() {
        let same = vec!["www".to_owned(); 30_000];
        let refused = subdomains(same).unwrap_err();
        assert_eq!(refused.field, "subdomain");
        assert!(refused.message.contains("30000 subdomains"), "{refused}");
        let refused = tags("tag", vec!["dc1".to_owned(); MAX_TAGS + 1]).unwrap_err();
        assert!(refused.message.contains("33 tags"), "{refused}");
        let refused = origin_ips("ip", vec!["192.0.2.1".to_owned(); MAX_ORIGINS + 1]).unwrap_err();
        assert!(refused.message.contains("33 origin"), "{refused}");
        // Blank entries are not counted; duplicates within the limit are kept once.
        let mut blanks = vec![String::new(); 1000];
        blanks.extend(["www".to_owned(), " www ".to_owned(), "shop".to_owned()]);
        assert_eq!(subdomains(blanks).unwrap().len(), 2);
    }

    #[test]
    fn public_suffixes_are_known() {
        for suffix in ["co.uk", "github.io", "pages.dev", "com.au"] {
            assert!(
                Domain::parse(suffix).unwrap().is_public_suffix(),
                "{suffix}"
            );
        }
        for registrable in [
            "example.co.uk",
            "user.github.io",
            "shop.example",
            "example.com",
        ] {
            assert!(
                !Domain::parse(registrable).unwrap().is_public_suffix(),
                "{registrable}"
            );
        }
    }

    #[test]
    fn a_domain_reversed_sorts_its_names_together() {
        let domain = Domain::parse("a.shop.example").unwrap();
        assert_eq!(domain.reversed(), "example.shop.a");
    }

    #[test]
    fn domains_are_kept_in_ascii_lower_case() {
        assert_eq!(
            Domain::parse("Example.COM").unwrap().as_str(),
            "example.com"
        );
        assert_eq!(
            Domain::parse("example.com.").unwrap().as_str(),
            "example.com"
        );
        assert_eq!(
            Domain::parse("bücher.example").unwrap().as_str(),
            "xn--bcher-kva.example"
        );
        assert_eq!(
            Domain::parse("xn--bcher-kva.example").unwrap().as_str(),
            "xn--bcher-kva.example"
        );
    }

    #[test]
    fn bad_domains_are_refused_with_the_reason() {
        for bad in [
            "",
            "localhost",
            "192.0.2.1",
            "::1",
            "exa mple.com",
            "-example.com",
            "example-.com",
            "ex_ample.com",
            "example..com",
            "example.123",
            "a/b.com",
        ] {
            let err = Domain::parse(bad).unwrap_err();
            assert_eq!(err.field, "domain", "{bad}");
        }
        let long = format!("{}.com", "a".repeat(64));
        assert!(Domain::parse(&long).is_err());
        let huge = vec!["abcdefghij"; 30].join(".") + ".com";
        assert!(Domain::parse(&huge).unwrap_err().message.contains("253"));
    }

    #[test]
    fn subdomains_accept_labels_and_refuse_junk() {
        assert_eq!(Subdomain::parse("WWW").unwrap().as_str(), "www");
        assert_eq!(Subdomain::parse("eu.cdn").unwrap().as_str(), "eu.cdn");
        assert_eq!(
            Subdomain::parse("münchen").unwrap().as_str(),
            "xn--mnchen-3ya"
        );
        assert!(Subdomain::parse("a b").is_err());
        assert!(Subdomain::parse("*.x").is_err());
        let list = subdomains(vec!["www".into(), " ".into(), "WWW".into(), "shop".into()]).unwrap();
        assert_eq!(list.len(), 2);
    }

    #[test]
    fn user_ids_are_email_shaped_or_simple() {
        assert!(UserId::parse("alice@example.com").is_ok());
        assert!(UserId::parse("user-42").is_ok());
        assert!(UserId::parse("").is_err());
        assert!(UserId::parse("a/b").unwrap_err().message.contains("'/'"));
        assert_eq!(
            UserId::parse(&"a".repeat(129)).unwrap_err().kind,
            crate::InvalidKind::TooLarge
        );
    }

    #[test]
    fn ips_take_both_families() {
        let ips = origin_ips(
            "ip",
            vec![
                "192.0.2.10".into(),
                "[2001:db8::1]".into(),
                "2001:db8::1".into(),
            ],
        )
        .unwrap();
        assert_eq!(ips.len(), 2);
        assert!(
            origin_ips("ip", vec!["192.0.2.300".into()])
                .unwrap_err()
                .message
                .contains("192.0.2.300")
        );
        assert!(origin_ips("ip", vec!["0.0.0.0".into()]).is_err());
    }

    #[test]
    fn tags_are_bounded() {
        assert_eq!(
            tags("tag", vec!["dc1".into(), "dc1".into(), "".into()]).unwrap(),
            ["dc1"]
        );
        assert!(tags("tag", vec!["x".repeat(65)]).is_err());
        let many: Vec<String> = (0..33).map(|i| format!("t{i}")).collect();
        assert!(tags("tag", many).is_err());
    }
}
