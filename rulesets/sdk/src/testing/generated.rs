//! Generated requests that look for answers outside a rule set's scope.
//!
//! The gateway never calls a rule set for a request outside its [`Ruleset::SCOPE`], so
//! an opinion there is one the gateway silently drops. Hand-written tests only cover
//! the requests their author thought of; [`assert_scope_holds`] builds many more from
//! the rule set's own vocabulary (the string literals of its source: the paths, file
//! names, parameters and agents its rules look for), combined, re-cased and
//! percent-encoded the way real traffic is, and fails on the first few it answers
//! outside the scope.

use super::{CHROME_UA, FIREFOX_UA, RequestBuilder, request};
use crate::{CrawlerVerification, Request, Ruleset};
use std::path::Path;

/// Generic path words every rule set meets in real traffic.
const WORDS: &[&str] = &[
    "blog",
    "x",
    "123",
    "abc.php",
    "a.jpg",
    "index.php",
    "admin",
    "user",
    "login",
    "api",
    "v1",
    "",
    "12",
    "foo.bar",
    "start",
    "wiki",
    "en",
    "module",
    "modules",
    "data",
    "s",
    "tmp",
    "cache",
    "images",
    "upload",
    "uploads",
    "logs",
    "log",
    "config",
    "install",
    "core",
    "sites",
    "default",
    "files",
    "vendor",
    "src",
    "lib",
    "exe",
    "rest",
    "local",
    "component",
    "components",
    "wp-login.php",
    "remote.php",
    "xmlrpc.php",
    "administrator",
    "index.php?id=1",
];

/// User agents of browsers, scripts and the machine clients rule sets know.
const AGENTS: &[&str] = &[
    CHROME_UA,
    FIREFOX_UA,
    "curl/8.5.0",
    "python-requests/2.31.0",
    "Wget/1.21.4",
    "WordPress/6.5.2; https://www.example.com",
    "WordPress/6.5; http://www.example.com; verifying pingback from 1.2.3.4",
    "",
];

/// Header names rule sets read.
const HEADER_NAMES: &[&str] = &[
    "authorization",
    "cookie",
    "content-type",
    "origin",
    "referer",
    "x-forwarded-for",
    "x-requested-with",
    "stripe-signature",
    "paypal-transmission-sig",
    "ocs-apirequest",
];

/// Header values with the shapes rule sets check for.
const HEADER_VALUES: &[&str] = &[
    "Basic QWxhZGRpbjpvcGVuc2VzYW1l",
    "Bearer abcdefghijklmnopqrstuvwxyz012345",
    "cpanel alice:TOKEN1234567890",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
    "session=1; nc_session=1",
    "t=1,v1=abc",
    "https://www.example.com/page",
];

/// The string literals in Rust `sources`: what a rule set's rules compare requests with.
pub fn string_literals(sources: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    for source in sources {
        let mut chars = source.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                // A comment runs to the end of the line.
                '/' if chars.peek() == Some(&'/') => {
                    for c in chars.by_ref() {
                        if c == '\n' {
                            break;
                        }
                    }
                }
                // A char literal (`'"'`) or a lifetime (`'a`): skip the quoted character.
                '\'' => {
                    if chars.peek() == Some(&'\\') {
                        chars.next();
                    }
                    chars.next();
                    if chars.peek() == Some(&'\'') {
                        chars.next();
                    }
                }
                '"' => {
                    let mut literal = String::new();
                    while let Some(c) = chars.next() {
                        match c {
                            '"' => break,
                            '\\' => {
                                if let Some(escaped) = chars.next() {
                                    literal.push(escaped);
                                }
                            }
                            c => literal.push(c),
                        }
                    }
                    if !literal.is_empty() && !literal.contains('\n') && literal.len() <= 200 {
                        found.push(literal);
                    }
                }
                _ => {}
            }
        }
    }
    found.sort();
    found.dedup();
    found
}

/// A small deterministic generator (xorshift): the same requests on every run.
struct Generator(u64);

impl Generator {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// True `percent` times in a hundred.
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    fn pick<'a, S: AsRef<str>>(&mut self, from: &'a [S]) -> &'a str {
        from[self.below(from.len())].as_ref()
    }

    /// A word of the rule set's vocabulary, or a generic one.
    fn word<'a>(&mut self, vocabulary: &'a [String]) -> &'a str {
        if self.chance(60) {
            self.pick(vocabulary)
        } else {
            self.pick(WORDS)
        }
    }

    /// `s` with some letters upper-cased, as scanners and odd clients send.
    fn recase(&mut self, s: &str) -> String {
        if !self.chance(20) {
            return s.to_owned();
        }
        s.chars()
            .map(|c| {
                if self.chance(50) {
                    c.to_ascii_uppercase()
                } else {
                    c
                }
            })
            .collect()
    }

    /// `s` with some characters percent-encoded (never the delimiters).
    fn encode(&mut self, s: &str) -> String {
        if !self.chance(15) {
            return s.to_owned();
        }
        let mut out = String::with_capacity(s.len() * 2);
        for c in s.chars() {
            if c.is_ascii() && !"/&=?".contains(c) && self.chance(20) {
                out.push_str(&format!("%{:02X}", c as u32));
            } else {
                out.push(c);
            }
        }
        out
    }

    fn path(&mut self, vocabulary: &[String]) -> String {
        if self.chance(12) {
            return "/".into();
        }
        if self.chance(12) {
            return self
                .pick(&["/index.php", "/admin.php", "/forum/index.php"])
                .into();
        }
        let mut path = String::new();
        if self.chance(10) {
            path.push_str(self.pick(&["/nextcloud", "/wiki", "/forum", "/shop"]));
        }
        for _ in 0..1 + self.below(4) {
            let word = self.word(vocabulary);
            if !word.starts_with('/') {
                path.push('/');
            }
            path.push_str(word);
        }
        if self.chance(10) {
            path.push('/');
        }
        let path = self.recase(&path);
        self.encode(&path).replace(['?', '#', ' '], "")
    }

    fn query(&mut self, vocabulary: &[String]) -> String {
        let mut pairs = Vec::new();
        for _ in 0..self.below(5) {
            let key = self.word(vocabulary).to_owned();
            match self.below(6) {
                0 => pairs.push(key),
                1 => pairs.push(format!("{key}={}", "a".repeat(1 + self.below(80)))),
                _ => {
                    let value = self.word(vocabulary);
                    pairs.push(format!("{key}={value}"));
                }
            }
        }
        if self.chance(30) {
            let value = self.word(vocabulary).trim_start_matches('/').to_owned();
            pairs.insert(0, format!("q={value}"));
        }
        let query = if self.chance(5) {
            self.word(vocabulary).to_owned()
        } else {
            pairs.join("&")
        };
        let query = self.recase(&query);
        self.encode(&query).replace([' ', '#'], "+")
    }

    fn request(&mut self, vocabulary: &[String]) -> RequestBuilder {
        let path = self.path(vocabulary);
        let query = self.query(vocabulary);
        let target = if query.is_empty() {
            path
        } else {
            format!("{path}?{query}")
        };
        let method = self.pick(&[
            "GET", "POST", "HEAD", "PUT", "PATCH", "DELETE", "OPTIONS", "PROPFIND",
        ]);
        let mut req = request(method, &target);
        if self.chance(50) {
            req = req.browser();
        }
        let agent = match self.below(5) {
            0 => self.pick(AGENTS).to_owned(),
            1 => format!("{CHROME_UA} {}", self.pick(vocabulary)),
            2 => format!(
                "Mozilla/5.0 ({}) {}",
                self.pick(vocabulary),
                self.pick(vocabulary)
            ),
            _ => self.pick(vocabulary).to_owned(),
        };
        let agent = self.recase(&agent);
        if self.chance(90) {
            req = req.ua(&agent);
        }
        for _ in 0..self.below(6) {
            let name = if self.chance(40) {
                self.pick(HEADER_NAMES).to_owned()
            } else {
                self.pick(vocabulary).to_ascii_lowercase()
            };
            let value = if self.chance(60) {
                self.pick(HEADER_VALUES)
            } else {
                self.pick(vocabulary)
            };
            if !name.is_empty() && !name.contains(':') {
                req = req.header(&name, value);
            }
        }
        if self.chance(30) {
            req = req.ip(self.pick(&["10.0.0.5", "127.0.0.1", "192.168.1.2", "fd00::1"]));
        }
        if self.chance(60) {
            let requests = 1 + self.below(120) as u32;
            let distinct = 1 + self.below(requests as usize) as u32;
            req = req.behaviour(requests, distinct, self.below(4) as u32);
        }
        if self.chance(10) {
            req = req.crawler(CrawlerVerification::VerifiedSearchEngine);
        }
        req
    }
}

/// Builds `count` requests from the string literals of the rule set's source (every
/// `.rs` file under `crate_dir/src`; pass `env!("CARGO_MANIFEST_DIR")`) and generic
/// traffic, and fails the test when `R` has an opinion on any of them outside
/// [`Ruleset::SCOPE`], naming the first few. The requests are the same on every run.
#[track_caller]
pub fn assert_scope_holds<R: Ruleset>(crate_dir: &str, count: usize) {
    let sources = rust_sources(&Path::new(crate_dir).join("src"));
    let sources: Vec<&str> = sources.iter().map(String::as_str).collect();
    assert_scope_holds_with::<R>(&sources, count);
}

/// The text of every `.rs` file under `dir`, in a stable order.
fn rust_sources(dir: &Path) -> Vec<String> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let entries = std::fs::read_dir(&dir)
            .unwrap_or_else(|err| panic!("cannot read {}: {err}", dir.display()));
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
        .iter()
        .map(|f| {
            std::fs::read_to_string(f)
                .unwrap_or_else(|err| panic!("cannot read {}: {err}", f.display()))
        })
        .collect()
}

/// [`assert_scope_holds`] with the vocabulary taken from `sources` (Rust source text).
#[track_caller]
pub fn assert_scope_holds_with<R: Ruleset>(sources: &[&str], count: usize) {
    let vocabulary = string_literals(sources);
    assert!(
        !vocabulary.is_empty(),
        "no string literals in the sources given"
    );
    let mut generator = Generator(0x9E37_79B9_7F4A_7C15);
    let mut outside = Vec::new();
    for _ in 0..count {
        let facts = generator.request(&vocabulary).build();
        let req = Request::new(&facts);
        if let Some(opinion) = R::evaluate(&req)
            && !crate::in_scope(R::SCOPE, &req)
        {
            outside.push(format!(
                "{} {} (user agent {:?}) -> {}",
                facts.method,
                facts.target,
                req.user_agent(),
                opinion.reason
            ));
            if outside.len() == 5 {
                break;
            }
        }
    }
    assert!(
        outside.is_empty(),
        "opinions outside the SCOPE {:?}; the gateway would never ask for these, so \
         the scope is missing a marker:\n  {}",
        R::SCOPE,
        outside.join("\n  ")
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Category, Info, Opinion, opinion};

    /// Flags XML-RPC, but its scope forgot the marker for it.
    struct Forgetful;

    impl Ruleset for Forgetful {
        const SCOPE: &'static [&'static str] = &["/wp-"];

        fn info() -> Info {
            crate::info!("forgetful", "Flags XML-RPC outside its scope.")
        }

        fn evaluate(req: &Request<'_>) -> Option<Opinion> {
            let path = req.path_lower();
            if path.contains("/wp-") || path.contains("xmlrpc") {
                return opinion(Category::SecurityIssues, 90, "forgetful.xmlrpc");
            }
            None
        }
    }

    /// The same rules with the scope they need.
    struct Careful;

    impl Ruleset for Careful {
        const SCOPE: &'static [&'static str] = &["/wp-", "xmlrpc"];

        fn info() -> Info {
            crate::info!("careful", "Flags XML-RPC inside its scope.")
        }

        fn evaluate(req: &Request<'_>) -> Option<Opinion> {
            Forgetful::evaluate(req)
        }
    }

    const SOURCE: &str = r#"path.contains("/wp-") || path.contains("/xmlrpc.php")"#;

    #[test]
    #[should_panic(expected = "forgetful.xmlrpc")]
    fn a_rule_outside_the_scope_is_found() {
        assert_scope_holds_with::<Forgetful>(&[SOURCE], 2_000);
    }

    #[test]
    fn a_scope_that_holds_passes() {
        assert_scope_holds_with::<Careful>(&[SOURCE], 2_000);
    }

    #[test]
    fn literals_are_read_without_comments_or_chars() {
        let source = r#"
            // "not this"
            const A: &[&str] = &["/wp-", "say \"hi\""];
            let c = '"'; let d = "after";
        "#;
        assert_eq!(string_literals(&[source]), ["/wp-", "after", "say \"hi\""]);
    }
}
