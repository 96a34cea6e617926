//! Build script: turns `data/crawler-user-agents.json` into the crawler table the
//! classifier matches user agents against (`$OUT_DIR/crawler_table.rs`).
//!
//! For every entry it
//! - picks the entry's class from its tags by a fixed priority (scanner first), after
//!   applying the few documented corrections in [`CORRECTIONS`];
//! - extracts one required literal "needle" per top-level alternative of the pattern:
//!   the longest run of literal characters outside groups, classes, anchors and
//!   quantified atoms, lower-cased (`[wW]get` folds to `wget`, `(sistrix|SISTRIX)` to
//!   `sistrix`), so one case-insensitive Aho-Corasick automaton finds candidates;
//! - keeps a regex only when the pattern is not a plain literal (anchors, classes,
//!   optional parts), compiled here into a small DFA (`$OUT_DIR/regex_N.dfa`) that the
//!   component deserialises on first use: no regex compiler runs in the sandbox;
//! - lists the entries without a usable needle (shorter than 3 bytes): they are
//!   confirmed by regex directly on every user agent.
//!
//! The table keeps the JSON order, so entry `i` of the table is entry `i` of the file.

use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

/// The data file, relative to the crate root.
const DATA: &str = "data/crawler-user-agents.json";

/// Tags in the order they win when an entry has several (documented in the crate doc):
/// scanners first; then automation, which drives a real browser; then AI crawlers, since
/// AI answer engines also carry `search-engine` and, unverified, are content copiers
/// rather than impostors (the host's verification still makes them search engines);
/// then the claims the host verifies; content copying; services; libraries last.
const TAG_PRIORITY: &[(&str, &str)] = &[
    ("scanner", "Scanner"),
    ("browser-automation", "Automation"),
    ("ai-crawler", "AiCrawler"),
    ("search-engine", "SearchEngine"),
    ("social-preview", "SocialPreview"),
    ("archiver", "Archiver"),
    ("academic", "Academic"),
    ("seo", "Seo"),
    ("advertising", "Advertising"),
    ("monitoring", "Monitoring"),
    ("feed-reader", "FeedReader"),
    ("http-library", "HttpLibrary"),
];

/// A correction of one data entry.
enum Fix {
    /// Use this class instead of the one the tags give.
    Class(&'static str),
    /// Match with this pattern instead of the data's pattern.
    Pattern(&'static str),
    /// Keep the entry (so its examples are still recognised) but give no opinion.
    Ignore,
}

/// Documented corrections of the upstream data, keyed by the entry's pattern. Each one
/// fixes a mapping that would block traffic a website depends on or that matches real
/// browsers. The build fails if a key no longer exists in the data.
const CORRECTIONS: &[(&str, Fix, &str)] = &[
    // Certificate authorities and TLS checkers tagged `scanner`: blocking them breaks
    // certificate issuance and renewal (ACME HTTP-01, DCV).
    (
        "Let's Encrypt",
        Fix::Class("Service"),
        "certificate validation",
    ),
    (
        "DigiCert DCV",
        Fix::Class("Service"),
        "certificate validation",
    ),
    (
        r"Google-Trust-Services\/",
        Fix::Class("Service"),
        "certificate validation",
    ),
    (
        "Test Certificate Info",
        Fix::Class("Service"),
        "certificate check",
    ),
    (
        r"SSL Labs \(https:\/\/www\.ssllabs\.com",
        Fix::Class("Service"),
        "TLS check",
    ),
    ("SSL Labs$", Fix::Class("Service"), "TLS check"),
    (
        "hstspreload-bot",
        Fix::Class("Service"),
        "HSTS preload check",
    ),
    // Services a website owner subscribes to, tagged `scanner`.
    (
        "VaultPress",
        Fix::Class("Service"),
        "WordPress backup service",
    ),
    (
        "AkismetBot",
        Fix::Class("Service"),
        "WordPress anti-spam service",
    ),
    (
        r"Sansec Security Monitor\/",
        Fix::Class("Service"),
        "owner-hired malware monitor",
    ),
    (
        "Cookiebot",
        Fix::Class("Service"),
        "consent compliance scanner",
    ),
    (
        "CookieYesbot",
        Fix::Class("Service"),
        "consent compliance scanner",
    ),
    (
        "CookieHubScan",
        Fix::Class("Service"),
        "consent compliance scanner",
    ),
    (
        "CookieHubVerify",
        Fix::Class("Service"),
        "consent compliance scanner",
    ),
    (
        "CookieHub Bot",
        Fix::Class("Service"),
        "consent compliance scanner",
    ),
    (
        "cookie-maestro",
        Fix::Class("Service"),
        "consent compliance scanner",
    ),
    (
        r"iubenda-radar\/",
        Fix::Class("Service"),
        "consent compliance scanner",
    ),
    (
        "LegalMonster",
        Fix::Class("Service"),
        "consent compliance scanner",
    ),
    // Payment callbacks and webhooks tagged `seo`: they must reach the website.
    (r"PayPal\/", Fix::Class("Service"), "payment callback (IPN)"),
    (r"Stripe\/", Fix::Class("Service"), "payment webhook"),
    ("GoPay", Fix::Class("Service"), "payment gateway"),
    (
        "Mollie HTTP client",
        Fix::Class("Service"),
        "payment gateway",
    ),
    (r"Trustly\/", Fix::Class("Service"), "payment provider"),
    ("ChargeBeeBot", Fix::Class("Service"), "billing webhook"),
    (
        r"Recurly Webhooks\/",
        Fix::Class("Service"),
        "billing webhook",
    ),
    (
        r"Svix-Webhooks\/",
        Fix::Class("Service"),
        "webhook delivery",
    ),
    (
        "Shopify-Captain-Hook",
        Fix::Class("Service"),
        "webhook delivery",
    ),
    ("Zendesk Webhook", Fix::Class("Service"), "webhook delivery"),
    (
        "Bitbucket-Webhooks",
        Fix::Class("Service"),
        "webhook delivery",
    ),
    (
        "Cloudflare-Stream-Webhook",
        Fix::Class("Service"),
        "webhook delivery",
    ),
    (
        "Cloudflare-Stream-Hook",
        Fix::Class("Service"),
        "webhook delivery",
    ),
    (r"YokoyGroupAG\/", Fix::Class("Service"), "webhook delivery"),
    (
        "WP Time Capsule",
        Fix::Class("Service"),
        "WordPress backup service",
    ),
    // Patterns that match real browsers and apps.
    (
        r"AP3A\.240617\.008",
        Fix::Ignore,
        "an Android build id: matches every WebView on that firmware",
    ),
    (
        "Sonic",
        Fix::Pattern(r"RankSonic|Sonic\/"),
        "bare `Sonic` matches the Slack desktop app (`Sonic Slack_SSB`)",
    ),
];

/// Needles shorter than this that start with a letter or digit must start a token
/// (the byte before them is not a letter or digit), so `NING/` does not match
/// `Lightning/`.
const BOUNDARY_BELOW: usize = 6;

/// The shortest needle worth an automaton entry; shorter ones are regex-only.
const MIN_NEEDLE: usize = 3;

fn main() {
    println!("cargo:rerun-if-changed={DATA}");
    println!("cargo:rerun-if-changed=build.rs");

    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(manifest.join(DATA)).expect("read the crawler data");
    let data: Value = serde_json::from_str(&text).expect("the crawler data is JSON");
    let entries = data.as_array().expect("the crawler data is an array");

    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let mut used_corrections = vec![false; CORRECTIONS.len()];
    let mut classes = Vec::with_capacity(entries.len());
    let mut regex_of = Vec::with_capacity(entries.len());
    let mut regexes: Vec<String> = Vec::new();
    let mut needles: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    let mut needleless = Vec::new();
    let mut comments = Vec::with_capacity(entries.len());

    for (index, entry) in entries.iter().enumerate() {
        let original = entry["pattern"]
            .as_str()
            .expect("every entry has a pattern");
        let tags: Vec<&str> = entry["tags"]
            .as_array()
            .expect("every entry has tags")
            .iter()
            .map(|t| t.as_str().expect("tags are strings"))
            .collect();
        let mut class = class_of(original, &tags);
        let mut pattern = original;
        let mut note = String::new();
        if let Some(at) = CORRECTIONS.iter().position(|(p, _, _)| *p == original) {
            used_corrections[at] = true;
            let (_, fix, why) = &CORRECTIONS[at];
            match fix {
                Fix::Class(c) => class = c,
                Fix::Pattern(p) => pattern = p,
                Fix::Ignore => class = "Ignored",
            }
            note = format!(" (corrected: {why})");
        }

        let analysis = analyse(pattern);
        let short = analysis.needles.iter().any(|n| n.len() < MIN_NEEDLE);
        let regex = if !analysis.literal || short {
            let slot = regexes.len();
            let dfa = compile_dfa(pattern)
                .unwrap_or_else(|e| panic!("entry {index}: pattern {pattern:?}: {e}"));
            std::fs::write(out_dir.join(format!("regex_{slot}.dfa")), dfa)
                .expect("write a regex DFA");
            regexes.push(pattern.to_owned());
            Some(slot)
        } else {
            None
        };
        if short {
            needleless.push(index);
        } else {
            for needle in analysis.needles {
                let list = needles.entry(needle).or_default();
                if !list.contains(&index) {
                    list.push(index);
                }
            }
        }
        classes.push(class);
        regex_of.push(regex);
        comments.push(format!("{original:?}{note}").replace('\n', " "));
    }

    for ((pattern, _, _), used) in CORRECTIONS.iter().zip(&used_corrections) {
        assert!(
            *used,
            "correction for {pattern:?} matches no entry of {DATA}"
        );
    }
    assert!(
        needleless.len() <= 8,
        "too many entries without a needle ({}); they cost a regex run per request",
        needleless.len()
    );
    assert!(entries.len() < u16::MAX as usize && regexes.len() < u16::MAX as usize);

    let mut out = String::new();
    let _ = writeln!(out, "// @generated by build.rs from {DATA}; do not edit.");
    let _ = writeln!(
        out,
        "// {} entries, {} needles, {} regexes, {} entries without a needle.\n",
        entries.len(),
        needles.len(),
        regexes.len(),
        needleless.len()
    );
    let _ = writeln!(out, "/// The number of data entries.");
    let _ = writeln!(
        out,
        "pub(crate) const ENTRY_COUNT: usize = {};",
        entries.len()
    );
    let _ = writeln!(out, "/// The number of distinct needles.");
    let _ = writeln!(
        out,
        "pub(crate) const NEEDLE_COUNT: usize = {};",
        needles.len()
    );
    let _ = writeln!(out, "/// The number of entries confirmed by regex.");
    let _ = writeln!(
        out,
        "pub(crate) const REGEX_COUNT: usize = {};\n",
        regexes.len()
    );
    let _ = writeln!(out, "/// One entry per data entry, in file order.");
    let _ = writeln!(out, "pub(crate) static ENTRIES: [Entry; ENTRY_COUNT] = [");
    for (index, ((class, regex), comment)) in
        classes.iter().zip(&regex_of).zip(&comments).enumerate()
    {
        let regex = match regex {
            Some(r) => format!("Some({r})"),
            None => "None".to_owned(),
        };
        let _ = writeln!(
            out,
            "    Entry {{ class: Class::{class}, regex: {regex} }}, // {index}: {comment}"
        );
    }
    let _ = writeln!(out, "];\n");

    let _ = writeln!(
        out,
        "/// Lower-case needles and the entries each one nominates."
    );
    let _ = writeln!(out, "pub(crate) static NEEDLES: [Needle; NEEDLE_COUNT] = [");
    for (needle, list) in &needles {
        let boundary = needle.len() < BOUNDARY_BELOW
            && needle
                .as_bytes()
                .first()
                .is_some_and(|b| b.is_ascii_alphanumeric());
        let list: Vec<String> = list.iter().map(|i| i.to_string()).collect();
        let _ = writeln!(
            out,
            "    Needle {{ text: {needle:?}, boundary: {boundary}, entries: &[{}] }},",
            list.join(", ")
        );
    }
    let _ = writeln!(out, "];\n");

    let _ = writeln!(
        out,
        "/// The serialised DFA of each regex slot, 4-byte aligned."
    );
    let _ = writeln!(
        out,
        "pub(crate) static REGEX_DFAS: [&Aligned<[u8]>; REGEX_COUNT] = ["
    );
    for slot in 0..regexes.len() {
        let _ = writeln!(
            out,
            "    &Aligned {{ _align: [], bytes: *include_bytes!(concat!(env!(\"OUT_DIR\"), \"/regex_{slot}.dfa\")) }},"
        );
    }
    let _ = writeln!(out, "];\n");
    let _ = writeln!(
        out,
        "/// The pattern of each regex slot (matched ignoring ASCII case)."
    );
    let _ = writeln!(out, "#[cfg(test)]");
    let _ = writeln!(
        out,
        "pub(crate) static REGEX_SOURCES: [&str; REGEX_COUNT] = ["
    );
    for source in &regexes {
        let _ = writeln!(out, "    {source:?},");
    }
    let _ = writeln!(out, "];\n");

    let _ = writeln!(
        out,
        "/// Entries without a usable needle: confirmed by regex on every user agent."
    );
    let _ = writeln!(
        out,
        "pub(crate) static NEEDLELESS: [u16; {}] = [",
        needleless.len()
    );
    for index in &needleless {
        let _ = writeln!(out, "    {index}, // {}", comments[*index]);
    }
    let _ = writeln!(out, "];");

    std::fs::write(out_dir.join("crawler_table.rs"), out).expect("write the crawler table");
}

/// Compiles `pattern` into a minimised dense DFA for unanchored search, ASCII
/// case-insensitive with ASCII classes (as user agents are), serialised little-endian
/// (wasm32 and the test host are both little-endian) without its alignment padding.
fn compile_dfa(pattern: &str) -> Result<Vec<u8>, String> {
    use regex_automata::dfa::{StartKind, dense};
    use regex_automata::util::syntax;
    let dfa = dense::Builder::new()
        .configure(
            dense::Config::new()
                .minimize(true)
                .start_kind(StartKind::Unanchored),
        )
        .syntax(
            syntax::Config::new()
                .case_insensitive(true)
                .unicode(false)
                .utf8(false),
        )
        .build(pattern)
        .map_err(|e| format!("does not compile into a DFA: {e}"))?;
    let (bytes, padding) = dfa.to_bytes_little_endian();
    if bytes.len() - padding > 64 << 10 {
        return Err(format!("its DFA takes {} bytes", bytes.len() - padding));
    }
    Ok(bytes[padding..].to_vec())
}

/// The class of an entry from its tags, by [`TAG_PRIORITY`].
fn class_of(pattern: &str, tags: &[&str]) -> &'static str {
    for tag in tags {
        assert!(
            TAG_PRIORITY.iter().any(|(t, _)| t == tag),
            "entry {pattern:?} has the unmapped tag {tag:?}: map it in build.rs and the crate doc"
        );
    }
    TAG_PRIORITY
        .iter()
        .find(|(t, _)| tags.contains(t))
        .map(|(_, class)| *class)
        .unwrap_or_else(|| panic!("entry {pattern:?} has no tag"))
}

/// What the matcher needs to know of one pattern.
struct Analysis {
    /// One lower-case needle per top-level alternative (deduplicated).
    needles: Vec<String>,
    /// Whether every alternative is a plain literal (ASCII case aside), so a needle hit
    /// is a match and no regex is needed.
    literal: bool,
}

/// Splits `pattern` into top-level alternatives and extracts their needles.
fn analyse(pattern: &str) -> Analysis {
    let chars: Vec<char> = pattern.chars().collect();
    let mut needles: Vec<String> = Vec::new();
    let mut literal = true;
    for alternative in split_alternatives(&chars) {
        let parsed = parse_sequence(&alternative);
        literal &= parsed.literal;
        let needle = parsed.longest_run();
        if !needles.contains(&needle) {
            needles.push(needle);
        }
    }
    Analysis { needles, literal }
}

/// One element of a parsed alternative.
enum Item {
    /// Characters that must appear exactly (lower case).
    Literal(String),
    /// Anything else: a class, a group, an anchor, an optional or repeated atom.
    Other,
}

/// A parsed alternative.
struct Sequence {
    items: Vec<Item>,
    literal: bool,
}

impl Sequence {
    /// The longest run of consecutive literal items (the first of equal length).
    fn longest_run(&self) -> String {
        let mut best = String::new();
        let mut run = String::new();
        for item in &self.items {
            match item {
                Item::Literal(s) => run.push_str(s),
                Item::Other => {
                    if run.len() > best.len() {
                        best = std::mem::take(&mut run);
                    }
                    run.clear();
                }
            }
        }
        if run.len() > best.len() {
            best = run;
        }
        best
    }
}

/// Splits on `|` outside groups and classes.
fn split_alternatives(chars: &[char]) -> Vec<Vec<char>> {
    let mut parts = Vec::new();
    let mut current = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\\' => {
                current.push(c);
                if let Some(&next) = chars.get(i + 1) {
                    current.push(next);
                }
                i += 2;
                continue;
            }
            '[' => {
                let end = class_end(chars, i);
                current.extend_from_slice(&chars[i..end]);
                i = end;
                continue;
            }
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            '|' if depth == 0 => {
                parts.push(std::mem::take(&mut current));
                i += 1;
                continue;
            }
            _ => {}
        }
        current.push(c);
        i += 1;
    }
    parts.push(current);
    parts
}

/// The index just past the class that opens at `start` (`chars[start] == '['`).
fn class_end(chars: &[char], start: usize) -> usize {
    let mut i = start + 1;
    if chars.get(i) == Some(&'^') {
        i += 1;
    }
    if chars.get(i) == Some(&']') {
        i += 1;
    }
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            ']' => return i + 1,
            _ => i += 1,
        }
    }
    chars.len()
}

/// The index of the `)` closing the group that opens at `start`.
fn group_end(chars: &[char], start: usize) -> usize {
    let mut depth = 0usize;
    let mut i = start;
    while i < chars.len() {
        match chars[i] {
            '\\' => {
                i += 2;
                continue;
            }
            '[' => {
                i = class_end(chars, i);
                continue;
            }
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
        i += 1;
    }
    chars.len()
}

/// Parses one alternative into literal and other items.
fn parse_sequence(chars: &[char]) -> Sequence {
    let mut items = Vec::new();
    let mut literal = true;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\\' => {
                match chars.get(i + 1) {
                    // `\d`, `\s`, `\b`, `\n`, back-references...: not a plain character.
                    Some(e) if e.is_ascii_alphanumeric() => {
                        items.push(Item::Other);
                        literal = false;
                    }
                    Some(e) => items.push(Item::Literal(e.to_ascii_lowercase().to_string())),
                    None => {
                        items.push(Item::Other);
                        literal = false;
                    }
                }
                i += 2;
            }
            '[' => {
                let end = class_end(chars, i);
                match folded_class(&chars[i..end]) {
                    Some(c) => items.push(Item::Literal(c.to_string())),
                    None => {
                        items.push(Item::Other);
                        literal = false;
                    }
                }
                i = end;
            }
            '(' => {
                let end = group_end(chars, i);
                let inner = &chars[(i + 1).min(end)..end];
                match folded_group(inner) {
                    Some(s) => items.push(Item::Literal(s)),
                    None => {
                        items.push(Item::Other);
                        literal = false;
                    }
                }
                i = end + 1;
            }
            '.' | '^' | '$' | ')' => {
                items.push(Item::Other);
                literal = false;
                i += 1;
            }
            '?' | '*' => {
                // The previous atom is optional: it is not required text.
                if let Some(last) = items.last_mut() {
                    *last = Item::Other;
                }
                literal = false;
                i += 1;
                if chars.get(i) == Some(&'?') {
                    i += 1;
                }
            }
            '+' => {
                // The previous atom is required, but what follows need not touch it.
                items.push(Item::Other);
                literal = false;
                i += 1;
                if chars.get(i) == Some(&'?') {
                    i += 1;
                }
            }
            '{' => match repetition(chars, i) {
                Some((min, end)) => {
                    if min == 0 {
                        if let Some(last) = items.last_mut() {
                            *last = Item::Other;
                        }
                    } else {
                        items.push(Item::Other);
                    }
                    literal = false;
                    i = end;
                }
                None => {
                    items.push(Item::Literal("{".to_owned()));
                    i += 1;
                }
            },
            _ => {
                items.push(Item::Literal(c.to_ascii_lowercase().to_string()));
                i += 1;
            }
        }
    }
    Sequence { items, literal }
}

/// A `{m}`, `{m,}` or `{m,n}` repetition at `start`: its minimum and the index past it.
fn repetition(chars: &[char], start: usize) -> Option<(usize, usize)> {
    let close = chars[start..].iter().position(|&c| c == '}')? + start;
    let body: String = chars[start + 1..close].iter().collect();
    let min = body.split(',').next()?;
    let min: usize = min.parse().ok()?;
    let mut end = close + 1;
    if chars.get(end) == Some(&'?') {
        end += 1;
    }
    Some((min, end))
}

/// A class such as `[wW]` whose members are one letter in both cases: that letter.
fn folded_class(class: &[char]) -> Option<char> {
    let members = &class[1..class.len().checked_sub(1)?];
    if members.is_empty() || members[0] == '^' {
        return None;
    }
    let first = members[0];
    (members
        .iter()
        .all(|c| c.is_ascii_alphabetic() && c.eq_ignore_ascii_case(&first)))
    .then(|| first.to_ascii_lowercase())
}

/// A group such as `(sistrix|SISTRIX)` whose alternatives are one literal in different
/// cases: that literal, lower case.
fn folded_group(inner: &[char]) -> Option<String> {
    let inner = match inner {
        ['?', ':', rest @ ..] => rest,
        ['?', ..] => return None,
        _ => inner,
    };
    let mut folded: Option<String> = None;
    for alternative in split_alternatives(inner) {
        let parsed = parse_sequence(&alternative);
        if !parsed.literal {
            return None;
        }
        let text = parsed.longest_run();
        match &folded {
            None => folded = Some(text),
            Some(f) if *f == text => {}
            Some(_) => return None,
        }
    }
    folded.filter(|f| !f.is_empty())
}
