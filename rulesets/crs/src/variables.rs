//! A request's parts as ModSecurity's variables: `ARGS` and `ARGS_NAMES` from the query
//! (split on `&`, each side percent-decoded once, `+` as space), `REQUEST_COOKIES` from
//! the `Cookie` headers (split on `;`), the headers, `REQUEST_FILENAME` (the path
//! percent-decoded), `REQUEST_LINE`, `REQUEST_URI` and `QUERY_STRING` as sent.

use crate::Target;
use crate::matchers::ByteSet;
use std::borrow::Cow;
use std::cell::OnceCell;

/// What the rules read of a request.
#[derive(Clone, Copy, Debug)]
pub struct Parts<'a> {
    /// The method, upper case.
    pub method: &'a str,
    /// The request target as sent: the path, then `?` and the query.
    pub target: &'a str,
    /// `HTTP/1.1`, `HTTP/2.0`, ...
    pub protocol: &'a str,
    /// The headers in the order received, names in lower case.
    pub headers: &'a [(&'a str, &'a str)],
}

/// The collections that exclusions name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Collection {
    Cookie,
    Header,
}

/// What a value is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
enum Kind {
    Arg,
    ArgName,
    Cookie,
    CookieName,
    Header,
    HeaderName,
    Filename,
    Uri,
    QueryString,
    RequestLine,
}

/// One value: its kind, its name (lower case, for selectors and exclusions), its text.
struct Value<'a> {
    kind: Kind,
    name: Cow<'a, str>,
    text: Cow<'a, [u8]>,
}

/// The number of [`Kind`]s.
const KINDS: usize = 10;

/// Every value of one request, made once, and the indexes of each kind's values.
pub(crate) struct Values<'a> {
    values: Vec<Value<'a>>,
    /// The bytes of each value, on first use.
    bytes: Vec<OnceCell<ByteSet>>,
    by_kind: [Vec<usize>; KINDS],
    host: &'a str,
}

impl<'a> Values<'a> {
    pub(crate) fn new(parts: &Parts<'a>) -> Values<'a> {
        let (path, query) = parts.target.split_once('?').unwrap_or((parts.target, ""));
        let mut values = Vec::new();
        let mut push = |kind, name: Cow<'a, str>, text: Cow<'a, [u8]>| {
            values.push(Value { kind, name, text });
        };
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let name_text = decode(name.as_bytes());
            let lower: Cow<'a, str> =
                Cow::Owned(String::from_utf8_lossy(&name_text).to_ascii_lowercase());
            push(Kind::ArgName, lower.clone(), name_text);
            push(Kind::Arg, lower, decode(value.as_bytes()));
        }
        let mut host = "";
        for &(name, value) in parts.headers {
            if name == "host" && host.is_empty() {
                host = value;
            }
            if name == "cookie" {
                for cookie in value.split(';') {
                    let cookie = cookie.trim_start();
                    if cookie.is_empty() {
                        continue;
                    }
                    let (name, value) = cookie.split_once('=').unwrap_or((cookie, ""));
                    let lower: Cow<'a, str> = if name.bytes().any(|b| b.is_ascii_uppercase()) {
                        Cow::Owned(name.to_ascii_lowercase())
                    } else {
                        Cow::Borrowed(name)
                    };
                    push(
                        Kind::CookieName,
                        lower.clone(),
                        Cow::Borrowed(name.as_bytes()),
                    );
                    push(Kind::Cookie, lower, Cow::Borrowed(value.as_bytes()));
                }
            }
            push(
                Kind::HeaderName,
                Cow::Borrowed(name),
                Cow::Borrowed(name.as_bytes()),
            );
            push(
                Kind::Header,
                Cow::Borrowed(name),
                Cow::Borrowed(value.as_bytes()),
            );
        }
        let filename = percent_decode(path.as_bytes());
        push(Kind::Filename, Cow::Borrowed(""), filename);
        push(
            Kind::Uri,
            Cow::Borrowed(""),
            Cow::Borrowed(parts.target.as_bytes()),
        );
        push(
            Kind::QueryString,
            Cow::Borrowed(""),
            Cow::Borrowed(query.as_bytes()),
        );
        let line = format!("{} {} {}", parts.method, parts.target, parts.protocol);
        push(
            Kind::RequestLine,
            Cow::Borrowed(""),
            Cow::Owned(line.into_bytes()),
        );
        let mut by_kind: [Vec<usize>; KINDS] = Default::default();
        for (i, value) in values.iter().enumerate() {
            by_kind[value.kind as usize].push(i);
        }
        let bytes = values.iter().map(|_| OnceCell::new()).collect();
        Values {
            values,
            bytes,
            by_kind,
            host,
        }
    }

    /// How many values there are.
    pub(crate) fn len(&self) -> usize {
        self.values.len()
    }

    /// The indexes of the values `target` reads.
    pub(crate) fn select(&self, target: Target) -> impl Iterator<Item = usize> + '_ {
        let (kind, name) = read_by(target).unzip();
        let indexes = kind.map_or(&[][..], |kind| &self.by_kind[kind as usize]);
        let name = name.flatten();
        indexes
            .iter()
            .copied()
            .filter(move |&i| name.is_none_or(|name| self.values[i].name == name))
    }

    /// Whether `target` reads value `index`.
    pub(crate) fn reads(&self, target: Target, index: usize) -> bool {
        let v = &self.values[index];
        read_by(target)
            .is_some_and(|(kind, name)| v.kind == kind && name.is_none_or(|name| v.name == name))
    }

    /// What identifies value `index` for the rules: its kind, its name and its text.
    pub(crate) fn key(&self, index: usize) -> (u8, &str, &[u8]) {
        let v = &self.values[index];
        (v.kind as u8, &v.name, &v.text)
    }

    /// Whether `exclusion` removes value `index`.
    pub(crate) fn excluded(&self, index: usize, exclusion: &crate::Exclusion) -> bool {
        let v = &self.values[index];
        let kind = match exclusion.collection {
            Collection::Cookie => Kind::Cookie,
            Collection::Header => Kind::Header,
        };
        v.kind == kind
            && if exclusion.contains {
                v.name.contains(exclusion.name)
            } else {
                v.name == exclusion.name
            }
    }

    pub(crate) fn text(&self, index: usize) -> &[u8] {
        &self.values[index].text
    }

    /// The bytes value `index` holds.
    pub(crate) fn bytes(&self, index: usize) -> &ByteSet {
        self.bytes[index].get_or_init(|| ByteSet::of(&self.values[index].text))
    }

    /// The `Host` header's value.
    pub(crate) fn host(&self) -> &str {
        self.host
    }
}

/// The kind of value `target` reads, and the name when it reads one header; `None`
/// for the targets that read another condition's matches.
fn read_by(target: Target) -> Option<(Kind, Option<&'static str>)> {
    let kind = match target {
        Target::Args => Kind::Arg,
        Target::ArgNames => Kind::ArgName,
        Target::Cookies => Kind::Cookie,
        Target::CookieNames => Kind::CookieName,
        Target::Headers => Kind::Header,
        Target::Header(name) => return Some((Kind::Header, Some(name))),
        Target::HeaderNames => Kind::HeaderName,
        Target::Filename => Kind::Filename,
        Target::Uri | Target::UriRaw => Kind::Uri,
        Target::QueryString => Kind::QueryString,
        Target::RequestLine => Kind::RequestLine,
        Target::MatchedVars | Target::Capture(_) => return None,
    };
    Some((kind, None))
}

/// `%XX` decoded and `+` as space, as ModSecurity decodes arguments.
fn decode(v: &[u8]) -> Cow<'_, [u8]> {
    if !v.iter().any(|&b| b == b'%' || b == b'+') {
        return Cow::Borrowed(v);
    }
    crate::transform::one(v, crate::transform::Transform::UrlDecode)
}

/// `%XX` decoded (a `+` stays).
fn percent_decode(v: &[u8]) -> Cow<'_, [u8]> {
    if !v.contains(&b'%') {
        return Cow::Borrowed(v);
    }
    Cow::Owned(crate::transform::url_decode(v, false, false))
}
