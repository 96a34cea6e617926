//! A request's parts as ModSecurity's variables: `ARGS` and `ARGS_NAMES` from the query
//! (split on `&`, each side percent-decoded once, `+` as space), `REQUEST_COOKIES` from
//! the `Cookie` headers (split on `;`), the headers, `REQUEST_FILENAME` (the path
//! percent-decoded), `REQUEST_LINE`, `REQUEST_URI` and `QUERY_STRING` as sent.

use crate::Target;
use crate::matchers::ByteSet;
use crate::verdicts::Key;
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
    /// The same headers as the text they were read from (`name: value` lines), or
    /// empty. With it, a request whose header block and request line were both seen
    /// clean before is answered without reading its values again.
    pub header_block: &'a str,
}

/// The collections that exclusions name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Collection {
    Cookie,
    Header,
}

/// What a value is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
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

/// One value: its kind, its name (lower case, for selectors and exclusions), its text,
/// and the bytes it holds (on first use).
struct Value<'a> {
    kind: Kind,
    name: Cow<'a, str>,
    text: Cow<'a, [u8]>,
    bytes: OnceCell<ByteSet>,
}

/// Every value of one request, made once.
pub(crate) struct Values<'a> {
    values: Vec<Value<'a>>,
    host: &'a str,
}

impl<'a> Values<'a> {
    pub(crate) fn new(parts: &Parts<'a>) -> Values<'a> {
        let (path, query) = parts.target.split_once('?').unwrap_or((parts.target, ""));
        // Two values a header, two an argument, and four of the request.
        let capacity =
            2 * parts.headers.len() + 2 * query.bytes().filter(|&b| b == b'&').count() + 6;
        let mut values = Vec::with_capacity(capacity);
        let mut push = |kind, name: Cow<'a, str>, text: Cow<'a, [u8]>| {
            values.push(Value {
                kind,
                name,
                text,
                bytes: OnceCell::new(),
            });
        };
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let name_text = decode(name.as_bytes());
            let lower = lower_case(&name_text);
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
                    let lower = lower_case(&Cow::Borrowed(name.as_bytes()));
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
        let line = [parts.method, " ", parts.target, " ", parts.protocol].concat();
        push(
            Kind::RequestLine,
            Cow::Borrowed(""),
            Cow::Owned(line.into_bytes()),
        );
        Values { values, host }
    }

    /// How many values there are.
    pub(crate) fn len(&self) -> usize {
        self.values.len()
    }

    /// The indexes of the values `target` reads.
    pub(crate) fn select(&self, target: Target) -> impl Iterator<Item = usize> + '_ {
        (0..self.values.len()).filter(move |&i| self.reads(target, i))
    }

    /// Whether `target` reads value `index`.
    pub(crate) fn reads(&self, target: Target, index: usize) -> bool {
        let v = &self.values[index];
        read_by(target)
            .is_some_and(|(kind, name)| v.kind == kind && name.is_none_or(|name| v.name == name))
    }

    /// What identifies value `index` for the rules: its kind, its name and its text.
    pub(crate) fn key(&self, index: usize) -> Key<'_> {
        let v = &self.values[index];
        Key::Value(v.kind as u8, &v.name, &v.text)
    }

    /// Whether value `index` was read from the headers (else from the request line).
    pub(crate) fn is_from_headers(&self, index: usize) -> bool {
        matches!(
            self.values[index].kind,
            Kind::Header | Kind::HeaderName | Kind::Cookie | Kind::CookieName
        )
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
        let v = &self.values[index];
        v.bytes.get_or_init(|| ByteSet::of(&v.text))
    }

    /// The `Host` header's value.
    pub(crate) fn host(&self) -> &str {
        self.host
    }
}

/// The bound `parts` goes past, if any: arguments and cookies counted as
/// [`Values::new`] reads them, without reading them.
pub(crate) fn over_limit(parts: &Parts<'_>) -> Option<crate::Limit> {
    let query = parts.target.split_once('?').map_or("", |(_, query)| query);
    let arguments = query.split('&').filter(|p| !p.is_empty()).count();
    if arguments > crate::MAX_ARGUMENTS {
        return Some(crate::Limit::Arguments);
    }
    let cookies: usize = parts
        .headers
        .iter()
        .filter(|(name, _)| *name == "cookie")
        .map(|(_, value)| {
            value
                .split(';')
                .filter(|c| !c.trim_start().is_empty())
                .count()
        })
        .sum();
    (cookies > crate::MAX_COOKIES).then_some(crate::Limit::Cookies)
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

/// `name` as text in lower case, borrowed when it already is.
fn lower_case<'a>(name: &Cow<'a, [u8]>) -> Cow<'a, str> {
    match name {
        Cow::Borrowed(bytes) => match std::str::from_utf8(bytes) {
            Ok(text) if !text.bytes().any(|b| b.is_ascii_uppercase()) => Cow::Borrowed(text),
            _ => Cow::Owned(String::from_utf8_lossy(bytes).to_ascii_lowercase()),
        },
        Cow::Owned(bytes) => Cow::Owned(String::from_utf8_lossy(bytes).to_ascii_lowercase()),
    }
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
