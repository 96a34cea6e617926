//! The one normalisation of a request's path and query, shared by the gateway and the
//! rule-component SDK.
//!
//! A rule set reads the normalised path and query (`/WP%2DLogin.php` reads
//! `/wp-login.php`) and declares its *scope* as markers over the same strings and the
//! lower-cased user agent; the host checks the scope before it calls the component.
//! Both sides call this crate, so the string the host checks is, byte for byte, the
//! string the rule set reads.

#![forbid(unsafe_code)]

use memchr::memmem;
use percent_encoding::percent_decode_str;
use std::borrow::Cow;
use std::sync::LazyLock;

/// The most markers a scope may hold.
pub const MAX_SCOPE_MARKERS: usize = 64;
/// The longest part of a marker, in bytes.
pub const MAX_MARKER_BYTES: usize = 64;
/// The most parts one marker may join with [`MARKER_JOIN`].
pub const MAX_MARKER_PARTS: usize = 4;
/// Joins the parts of a compound marker, which holds a request only when every part
/// occurs in it: `/upload/&.ph` is PHP under an `/upload/` folder. `&` cannot itself
/// be part of a marker.
pub const MARKER_JOIN: char = '&';

/// Percent-decodes `s` (and `+` as space when `plus_is_space`), lossily as UTF-8, then
/// lower-cases it; borrows `s` when there is nothing to change (the usual case).
fn decode_lower(s: &str, plus_is_space: bool) -> Cow<'_, str> {
    let clean = s.bytes().all(|b| {
        b != b'%' && !b.is_ascii_uppercase() && b.is_ascii() && !(plus_is_space && b == b'+')
    });
    if clean {
        return Cow::Borrowed(s);
    }
    let decoded = if plus_is_space && s.contains('+') {
        let spaced = s.replace('+', " ");
        percent_decode_str(&spaced).decode_utf8_lossy().into_owned()
    } else {
        percent_decode_str(s).decode_utf8_lossy().into_owned()
    };
    Cow::Owned(decoded.to_lowercase())
}

/// The path as the origin's web server resolves it: percent-decoded, lower case, `\`
/// read as `/`, repeated `/` collapsed, and dot segments removed (RFC 3986 §5.2.4), so
/// `//WP-Login.php`, `/wp%2Dlogin.php`, `/x/../wp-login.php` and `/.%2Fwp-login.php`
/// all read `/wp-login.php`. A path with no single reading ([`refusal`]) reads as if it
/// had one; the host refuses it before anyone reads it. Borrows when nothing changes.
pub fn path(path: &str) -> Cow<'_, str> {
    resolve(decode_lower(path, false)).0
}

/// The path as sent with every segment's `;` parameters removed
/// (`/admin;x/panel;jsessionid=1` reads `/admin/panel`), as Java servlet containers and
/// Spring resolve it before routing; `None` when the path has no `;`. The gateway judges
/// its own path tests (custom rules, the cache's static files) under both readings.
pub fn without_parameters(path: &str) -> Option<String> {
    if !path.contains(';') {
        return None;
    }
    let mut out = String::with_capacity(path.len());
    for (i, segment) in path.split('/').enumerate() {
        if i > 0 {
            out.push('/');
        }
        out.push_str(segment.split_once(';').map_or(segment, |(name, _)| name));
    }
    Some(out)
}

/// Why a path has no single reading, and is refused before any rule reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PathRefusal {
    /// A `..` climbs above the root (`/a/../../etc/passwd`, `/%2e%2e/x`).
    #[error("the path climbs above the root")]
    AboveRoot,
    /// A `.` or `..` segment in a path with a `\` (`/wp-login.php/..\`,
    /// `/a%5cb/../x`): Windows servers read the `\` as a separator, others as part of
    /// a name, so which file the origin serves depends on the origin.
    #[error("a dot segment in a path with a backslash reads differently on different servers")]
    DotSegmentWithBackslash,
    /// A `.` or `..` segment with `;` parameters (`/api/..;/admin`): Java servers drop
    /// the parameters and climb, others read a file name.
    #[error("a dot segment with parameters reads differently on different servers")]
    DotSegmentWithParameters,
    /// An encoded `;` (`%3B`): some servers decode it before they drop `;` parameters,
    /// others keep it as part of a name.
    #[error("an encoded `;` reads differently on different servers")]
    EncodedSemicolon,
}

/// Whether the path, as [`path`] reads it, is one the gateway refuses. Most paths hold
/// neither a `%`, a `\` nor a `/.`, and are judged by one scan.
pub fn refusal(path: &str) -> Option<PathRefusal> {
    let raw = path.as_bytes();
    let plain =
        !raw.iter().any(|&b| b == b'%' || b == b'\\') && !raw.windows(2).any(|w| w == b"/.");
    if plain {
        return None;
    }
    if raw
        .windows(3)
        .any(|w| w[0] == b'%' && w[1] == b'3' && w[2] | 0x20 == b'b')
    {
        return Some(PathRefusal::EncodedSemicolon);
    }
    let decoded = decode_lower(path, false);
    if dot_segment_with_backslash(&decoded) {
        return Some(PathRefusal::DotSegmentWithBackslash);
    }
    if dot_segment_with_parameters(&decoded) {
        return Some(PathRefusal::DotSegmentWithParameters);
    }
    resolve(decoded).1.then_some(PathRefusal::AboveRoot)
}

/// Whether a path with a `\` has a segment `.` or `..` (between `/` or `\`).
fn dot_segment_with_backslash(decoded: &str) -> bool {
    decoded.contains('\\')
        && decoded
            .split(['/', '\\'])
            .any(|segment| segment == "." || segment == "..")
}

/// Whether a decoded path has a segment `.` or `..` followed by `;` parameters.
fn dot_segment_with_parameters(decoded: &str) -> bool {
    decoded.contains(';')
        && decoded.split(['/', '\\']).any(|segment| {
            segment
                .split_once(';')
                .is_some_and(|(name, _)| name == "." || name == "..")
        })
}

/// Whether a decoded path has anything to resolve: a `\`, an empty segment or a
/// segment starting with a dot (which may be `.` or `..`).
fn needs_resolving(path: &str) -> bool {
    let bytes = path.as_bytes();
    bytes.contains(&b'\\')
        || bytes
            .windows(2)
            .any(|w| w[0] == b'/' && (w[1] == b'/' || w[1] == b'.'))
}

/// The decoded path with `\` as `/`, repeated `/` collapsed and dot segments removed;
/// and whether a `..` climbed above the root.
fn resolve(decoded: Cow<'_, str>) -> (Cow<'_, str>, bool) {
    if !needs_resolving(&decoded) {
        return (decoded, false);
    }
    let slashed = decoded.replace('\\', "/");
    let mut segments: Vec<&str> = Vec::new();
    let mut climbed = false;
    // Whether the resolved path ends in `/`: after `.`, `..` or an empty last segment.
    let mut trailing = false;
    let rooted = slashed.starts_with('/');
    for segment in slashed.split('/') {
        trailing = matches!(segment, "" | "." | "..");
        match segment {
            "" | "." => {}
            ".." => climbed |= segments.pop().is_none(),
            segment => segments.push(segment),
        }
    }
    let mut out = String::with_capacity(slashed.len());
    if rooted {
        out.push('/');
    }
    out.push_str(&segments.join("/"));
    if trailing && !segments.is_empty() {
        out.push('/');
    }
    (Cow::Owned(out), climbed)
}

/// The query (without `?`) percent-decoded, `+` as space, lower case. Borrows when
/// nothing changes.
pub fn query(query: &str) -> Cow<'_, str> {
    decode_lower(query, true)
}

/// Splits a request target into its path and query (without `?`).
pub fn split_target(target: &str) -> (&str, &str) {
    target.split_once('?').unwrap_or((target, ""))
}

/// The prefix of a marker matched against the user agent rather than the path and query.
pub const USER_AGENT_MARKER: &str = "ua:";
/// The prefix of a marker part that names the request method (`method:post`): it holds
/// when the method is that one, ignoring case. Alone it holds every request with that
/// method; joined to other parts (`/blog/&method:post`) it narrows them.
pub const METHOD_MARKER: &str = "method:";

/// The first value of the header `name` (lower case) in the host's header block (one
/// `name: value` line each, names lower case), trimmed; what the SDK's
/// `Request::header` answers.
///
/// `name` holds no `:` and no white space (a header name), so a line is `name`'s when it
/// starts with `name`, blanks aside, then `:`: the first line is read first, then `name`
/// is searched for in the whole block at once, and only the lines it occurs in are
/// looked at.
pub fn header<'a>(headers: &'a str, name: &str) -> Option<&'a str> {
    first_value(headers, name, || memmem::Finder::new(name))
}

/// The first `user-agent` value in the host's header block: [`header`] with a searcher
/// built once (the host's scope check and rule sets ask it on every request).
pub fn user_agent(headers: &str) -> Option<&str> {
    const USER_AGENT: &str = "user-agent";
    static FINDER: LazyLock<memmem::Finder<'static>> =
        LazyLock::new(|| memmem::Finder::new(USER_AGENT));
    first_value(headers, USER_AGENT, || FINDER.as_ref())
}

/// [`header`]'s search, with the searcher for `name` made only when the first line
/// is not `name`'s.
fn first_value<'a, 'n>(
    headers: &'a str,
    name: &str,
    finder: impl FnOnce() -> memmem::Finder<'n>,
) -> Option<&'a str> {
    debug_assert!(
        !name.bytes().any(|b| b == b':' || b.is_ascii_whitespace()),
        "{name:?} is not a header name"
    );
    let bytes = headers.as_bytes();
    // The value of the line whose name ends at `after`, if a colon follows it.
    let value_after = |after: usize| {
        let end = memchr::memchr(b'\n', &bytes[after..]).map_or(bytes.len(), |n| after + n);
        let value = headers[after..end].trim_ascii_start().strip_prefix(':')?;
        Some(value.trim_ascii())
    };
    // The first line first, without a searcher (building one costs more than reading a
    // line): the host's own line, and the usual question of one line.
    if bytes.starts_with(name.as_bytes())
        && let Some(value) = value_after(name.len())
    {
        return Some(value);
    }
    let finder = finder();
    let is_blank = |b: u8| b != b'\n' && b.is_ascii_whitespace();
    let mut from = 0;
    while let Some(found) = bytes.get(from..).and_then(|rest| finder.find(rest)) {
        let at = from + found;
        from = at + 1;
        let line_start = bytes[..at].iter().rposition(|&b| !is_blank(b));
        if line_start.is_some_and(|i| bytes[i] != b'\n') {
            continue;
        }
        if let Some(value) = value_after(at + name.len()) {
            return Some(value);
        }
    }
    None
}

/// The parts of a request a scope is matched against, each normalised.
#[derive(Debug, Clone, Copy)]
pub struct ScopeView<'a> {
    /// The request method, as sent.
    pub method: &'a str,
    /// The normalised path ([`path`]).
    pub path: &'a str,
    /// The normalised query ([`query`]).
    pub query: &'a str,
    /// The user agent, ASCII lower case.
    pub user_agent: &'a str,
}

impl ScopeView<'_> {
    /// Whether `marker` occurs: every one of its parts (one, or several joined by
    /// [`MARKER_JOIN`]) occurs, a `ua:` part in the user agent, a `method:` part as the
    /// method, any other part in the path or the query.
    pub fn contains(&self, marker: &str) -> bool {
        marker
            .split(MARKER_JOIN)
            .all(|part| self.contains_part(part))
    }

    fn contains_part(&self, part: &str) -> bool {
        if let Some(ua) = part.strip_prefix(USER_AGENT_MARKER) {
            return self.user_agent.contains(ua);
        }
        if let Some(method) = part.strip_prefix(METHOD_MARKER) {
            return self.method.eq_ignore_ascii_case(method);
        }
        self.path.contains(part) || self.query.contains(part)
    }
}

/// Whether a request is inside the scope `markers`: some marker occurs in it (see
/// [`ScopeView::contains`]). An empty scope holds every request.
pub fn in_scope<S: AsRef<str>>(markers: &[S], view: &ScopeView<'_>) -> bool {
    markers.is_empty() || markers.iter().any(|m| view.contains(m.as_ref()))
}

/// Why a scope marker is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MarkerError {
    #[error("{0} scope markers, at most {MAX_SCOPE_MARKERS}")]
    TooMany(usize),
    /// An empty marker would hold every request; an empty scope says that.
    #[error("an empty scope marker (an empty scope, not an empty marker, holds every request)")]
    Empty,
    #[error("a scope marker part of {0} bytes, at most {MAX_MARKER_BYTES}")]
    TooLong(usize),
    #[error("scope marker {0:?} joins more than {MAX_MARKER_PARTS} parts with '&'")]
    TooManyParts(String),
    /// Upper case or a `%` escape: the marker could never match a normalised string.
    #[error("scope marker {0:?} is not lower case and percent-decoded, so it can never match")]
    NotNormalised(String),
    /// A `method:` part that is not a method name (letters and `-`, as in `method:post`).
    #[error("scope marker {0:?} names no method: write `method:` and a lower-case method name")]
    BadMethod(String),
}

/// Checks that `markers` is a well-formed scope: at most [`MAX_SCOPE_MARKERS`] markers,
/// each of 1 to [`MAX_MARKER_PARTS`] parts of 1 to [`MAX_MARKER_BYTES`] bytes, already
/// in the normalised form they are matched against.
pub fn check_scope<S: AsRef<str>>(markers: &[S]) -> Result<(), MarkerError> {
    if markers.len() > MAX_SCOPE_MARKERS {
        return Err(MarkerError::TooMany(markers.len()));
    }
    let shown = |m: &str| m.chars().take(MAX_MARKER_BYTES).collect::<String>();
    for marker in markers {
        let m = marker.as_ref();
        if m.split(MARKER_JOIN).count() > MAX_MARKER_PARTS {
            return Err(MarkerError::TooManyParts(shown(m)));
        }
        for part in m.split(MARKER_JOIN) {
            if part.is_empty() || part == USER_AGENT_MARKER {
                return Err(MarkerError::Empty);
            }
            if let Some(method) = part.strip_prefix(METHOD_MARKER)
                && (method.is_empty()
                    || !method.bytes().all(|b| b.is_ascii_lowercase() || b == b'-'))
            {
                return Err(MarkerError::BadMethod(shown(m)));
            }
            if part.len() > MAX_MARKER_BYTES {
                return Err(MarkerError::TooLong(part.len()));
            }
        }
        if m.contains('%') || m.to_lowercase() != m {
            return Err(MarkerError::NotNormalised(shown(m)));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_of_a_path_reads_as_the_origin_resolves_it() {
        for spelling in [
            "/wp-admin/install.php",
            "/wp-admin/./install.php",
            "/wp-admin/%2e/install.php",
            "/wp-admin/%2E/install.php",
            "/wp-admin/.%2Finstall.php",
            "/wp-admin/.%2finstall.php",
            "/wp-admin//install.php",
            "/wp-admin\\install.php",
            "/wp-admin%5Cinstall.php",
            "/wp-admin/x/../install.php",
            "/wp-admin/x/%2e%2e/install.php",
            "/wp-admin/x/..%2Finstall.php",
            "/WP-ADMIN/./x/./../Install.php",
            "//wp-admin/.//./install.php",
        ] {
            assert_eq!(path(spelling), "/wp-admin/install.php", "{spelling}");
            assert_eq!(refusal(spelling), None, "{spelling}");
        }
        assert_eq!(path("/a/b/.."), "/a/");
        assert_eq!(path("/a/b/."), "/a/b/");
        assert_eq!(path("/a/b/"), "/a/b/");
        assert_eq!(path("/"), "/");
        assert_eq!(path("/.."), "/");
        assert_eq!(path("/./"), "/");
        assert_eq!(path("*"), "*");
        for climbing in [
            "/..",
            "/../etc/passwd",
            "/a/../../etc/passwd",
            "/%2e%2e/x",
            "/a/..%2f..%2fx",
        ] {
            assert_eq!(
                refusal(climbing),
                Some(PathRefusal::AboveRoot),
                "{climbing}"
            );
        }
        for staying in [
            "/a/..",
            "/..a/b",
            "/a../b",
            "/...",
            "/a/b/../../c",
            "/a%20b",
        ] {
            assert_eq!(refusal(staying), None, "{staying}");
        }
        // A dot segment in a path with a backslash: `/wp-login.php/..\` is `/` on Windows, and
        // `wp-login.php` with path information elsewhere.
        for ambiguous in [
            "/wp-login.php/..\\",
            "/wp-login.php/..%5c",
            "/a\\..\\b",
            "/a/.\\b",
            "/..%5cwin.ini",
            "/wp-admin/a%5cb/../install.php",
        ] {
            assert_eq!(
                refusal(ambiguous),
                Some(PathRefusal::DotSegmentWithBackslash),
                "{ambiguous}"
            );
        }
        for plain in ["/a\\b.php", "/a\\.htaccess", "/a\\b\\"] {
            assert_eq!(refusal(plain), None, "{plain}");
        }
        // A dot segment with parameters: Tomcat reads `/api/..;/admin` as `/admin`.
        for ambiguous in [
            "/api/..;/admin",
            "/a/.;x/b",
            "/api/%2e%2e;jsessionid=1/admin",
        ] {
            assert_eq!(
                refusal(ambiguous),
                Some(PathRefusal::DotSegmentWithParameters),
                "{ambiguous}"
            );
        }
        for plain in ["/shop/cart;jsessionid=ab12", "/a;b/../c", "/..a;b"] {
            assert_eq!(refusal(plain), None, "{plain}");
        }
        // An encoded `;`: a separator to some servers, part of a name to others.
        for ambiguous in ["/admin%3Bx/panel", "/a%3b", "/%3B"] {
            assert_eq!(
                refusal(ambiguous),
                Some(PathRefusal::EncodedSemicolon),
                "{ambiguous}"
            );
        }
        for plain in ["/a%3", "/a%30b", "/a%253B"] {
            assert_eq!(refusal(plain), None, "{plain}");
        }
        assert_eq!(path("/..."), "/...");
    }

    #[test]
    fn parameters_come_off_every_segment_as_a_servlet_container_reads_them() {
        let cases = [
            ("/admin;x/panel", Some("/admin/panel")),
            ("/admin/panel;jsessionid=1", Some("/admin/panel")),
            ("/a;b=1;c=2/d;/e", Some("/a/d/e")),
            (";x/y", Some("/y")),
            ("/heroes;id=15;foo=foo", Some("/heroes")),
            ("/plain/path", None),
            ("/encoded%3Bsemicolon", None),
        ];
        for (sent, expected) in cases {
            assert_eq!(without_parameters(sent).as_deref(), expected, "{sent}");
        }
        // Read under the one normalisation, it is the Java origin's path.
        let stripped = without_parameters("/Admin;x/../Secret;y/Panel").unwrap();
        assert_eq!(path(&stripped), "/secret/panel");
    }

    #[test]
    fn paths_are_decoded_lowered_and_collapsed() {
        assert_eq!(path("//WP%2DLogin.php"), "/wp-login.php");
        assert!(matches!(path("/blog/post/"), Cow::Borrowed(_)));
        assert_eq!(path("/a//b///c"), "/a/b/c");
        assert_eq!(path("/.well-known/x"), "/.well-known/x");
        assert_eq!(path("/a/.htaccess"), "/a/.htaccess");
        assert_eq!(path("/caf%C3%A9/%FF"), "/café/\u{fffd}");
    }

    #[test]
    fn queries_decode_plus_as_space() {
        assert_eq!(query("Q=A+b%21&flag"), "q=a b!&flag");
        assert!(matches!(query("s=garden"), Cow::Borrowed(_)));
    }

    #[test]
    fn targets_split_at_the_first_question_mark() {
        assert_eq!(split_target("/a?b=1?c"), ("/a", "b=1?c"));
        assert_eq!(split_target("/a"), ("/a", ""));
    }

    #[test]
    fn scope_matches_path_query_or_user_agent() {
        let view = |path, query, user_agent| ScopeView {
            method: "GET",
            path,
            query,
            user_agent,
        };
        let scope = ["/wp-", "author=", "ua:wordpress/"];
        assert!(in_scope(&scope, &view("/wp-login.php", "", "")));
        assert!(in_scope(&scope, &view("/", "author=1", "")));
        assert!(in_scope(
            &scope,
            &view("/", "", "wordpress/6.5; https://a.example")
        ));
        assert!(!in_scope(&scope, &view("/blog/", "s=wp", "curl/8")));
        assert!(!in_scope(&scope, &view("/ua:wordpress/", "", "")));
        let compound = ["/upload/&.ph", "/rest/&ua:bitrix"];
        assert!(in_scope(&compound, &view("/upload/x.php", "", "")));
        assert!(in_scope(&compound, &view("/upload/x", "f=a.php", "")));
        assert!(!in_scope(&compound, &view("/upload/x.jpg", "", "")));
        assert!(!in_scope(&compound, &view("/wp-login.php", "", "")));
        assert!(in_scope(&compound, &view("/rest/1", "", "bitrix24/1")));
        assert!(!in_scope(&compound, &view("/rest/1", "", "curl/8")));
        let post = |path| ScopeView {
            method: "POST",
            ..view(path, "", "")
        };
        let by_method = ["/blog/&method:post", "method:propfind"];
        assert!(in_scope(&by_method, &post("/blog/1")));
        assert!(!in_scope(&by_method, &view("/blog/1", "", "")));
        assert!(!in_scope(&by_method, &post("/shop/")));
        let propfind = ScopeView {
            method: "PROPFIND",
            ..view("/x", "", "")
        };
        assert!(in_scope(&by_method, &propfind));
        assert!(in_scope::<&str>(&[], &view("/anything", "", "")));
    }

    #[test]
    fn header_reads_the_first_value_by_name() {
        let headers = "host: a.example\nuser-agent:  Curl/8 \nuser-agent: two";
        assert_eq!(header(headers, "user-agent"), Some("Curl/8"));
        assert_eq!(header(headers, "host"), Some("a.example"));
        assert_eq!(header(headers, "accept"), None);
    }

    #[test]
    fn header_answers_what_splitting_each_line_at_its_colon_answers() {
        // The plain reading: each line cut at its first colon, the name compared trimmed.
        let by_colon = |headers: &'static str, name: &str| {
            headers.lines().find_map(|line| {
                let (key, value) = line.split_once(':')?;
                (key.trim_ascii() == name).then(|| value.trim_ascii())
            })
        };
        let blocks = [
            "user-agent: a",
            " user-agent :b\r\nuser-agent: c",
            "user-agentx: no\nuser-agent",
            "user-agent-2: no\nx: user-agent: no\nuser-agent:\t\tyes \r",
            "host: h\n\nuser-agent: : colon\n",
            "user-agent\n: split\nuser-agent:",
            "uuser-agent: no\nx: a user-agent: no\n \t user-agent : yes",
            "user-agentuser-agent: no\nuser-agent\u{e9}: no\n\u{e9}user-agent: no",
            ":x\n",
            "",
        ];
        for block in blocks {
            for name in ["user-agent", "host", "x", ""] {
                assert_eq!(
                    header(block, name),
                    by_colon(block, name),
                    "{block:?} {name}"
                );
            }
            assert_eq!(
                user_agent(block),
                by_colon(block, "user-agent"),
                "{block:?}"
            );
        }
    }

    #[test]
    fn header_answers_what_reading_line_by_line_answers() {
        // Every block of up to 7 bytes over an alphabet that makes names overlap, lines
        // start with blanks and colons come early or late.
        fn line_by_line<'a>(headers: &'a str, name: &str) -> Option<&'a str> {
            headers.split('\n').find_map(|line| {
                let after_name = line.trim_ascii_start().strip_prefix(name)?;
                Some(
                    after_name
                        .trim_ascii_start()
                        .strip_prefix(':')?
                        .trim_ascii(),
                )
            })
        }
        let alphabet = ['a', 'b', '\n', ' ', ':', '\r'];
        let mut block = String::new();
        for length in 0..=7u32 {
            for mut code in 0..alphabet.len().pow(length) {
                block.clear();
                for _ in 0..length {
                    block.push(alphabet[code % alphabet.len()]);
                    code /= alphabet.len();
                }
                for name in ["a", "ab", "aa", ""] {
                    assert_eq!(
                        header(&block, name),
                        line_by_line(&block, name),
                        "{block:?} {name:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn malformed_scopes_are_refused() {
        assert_eq!(check_scope(&["/wp-"]), Ok(()));
        assert_eq!(check_scope(&[""]), Err(MarkerError::Empty));
        assert_eq!(check_scope(&["ua:"]), Err(MarkerError::Empty));
        assert!(matches!(
            check_scope(&["ua:Curl"]),
            Err(MarkerError::NotNormalised(_))
        ));
        assert!(matches!(
            check_scope(&["/WP-"]),
            Err(MarkerError::NotNormalised(_))
        ));
        assert!(matches!(
            check_scope(&["/wp%2d"]),
            Err(MarkerError::NotNormalised(_))
        ));
        assert!(matches!(
            check_scope(&["x".repeat(65)]),
            Err(MarkerError::TooLong(65))
        ));
        assert_eq!(check_scope(&["/upload/&.ph&ua:x"]), Ok(()));
        assert_eq!(check_scope(&["/blog/&method:post"]), Ok(()));
        for bad in ["method:", "method:POST", "/blog/&method:po st"] {
            assert!(
                matches!(check_scope(&[bad]), Err(MarkerError::BadMethod(_))),
                "{bad}"
            );
        }
        assert_eq!(check_scope(&["/upload/&"]), Err(MarkerError::Empty));
        assert_eq!(check_scope(&["&.ph"]), Err(MarkerError::Empty));
        assert_eq!(check_scope(&["/a&ua:"]), Err(MarkerError::Empty));
        assert!(matches!(
            check_scope(&["a&b&c&d&e"]),
            Err(MarkerError::TooManyParts(_))
        ));
        let many: Vec<String> = (0..65).map(|i| format!("/m{i}")).collect();
        assert_eq!(check_scope(&many), Err(MarkerError::TooMany(65)));
    }
}
