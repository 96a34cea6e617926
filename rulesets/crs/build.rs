//! Compiles the Core Rule Set's request rules (`coreruleset/rules/*.conf`, paranoia
//! level 1) into `$OUT_DIR/crs_rules.rs`: one table of rules, their patterns as DFAs
//! (`$OUT_DIR/crs_N.dfa`) with the bytes every match needs, and their phrase lists.
//! A rule that needs what the gateway's rules never see (bodies, uploads, XML) or an
//! operator this crate does not run is listed in `SKIPPED` with the reason.

#[path = "build/parse.rs"]
mod parse;
#[path = "build/pcre.rs"]
mod pcre;

use parse::{Link, Rule, Variable};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The rule files compiled, by the family each names.
const FILES: &[(&str, &str)] = &[
    ("REQUEST-913-SCANNER-DETECTION.conf", "Scanner"),
    ("REQUEST-921-PROTOCOL-ATTACK.conf", "ProtocolAttack"),
    ("REQUEST-930-APPLICATION-ATTACK-LFI.conf", "Lfi"),
    ("REQUEST-931-APPLICATION-ATTACK-RFI.conf", "Rfi"),
    ("REQUEST-932-APPLICATION-ATTACK-RCE.conf", "Rce"),
    ("REQUEST-933-APPLICATION-ATTACK-PHP.conf", "Php"),
    ("REQUEST-934-APPLICATION-ATTACK-NODEJS.conf", "NodeJs"),
    ("REQUEST-941-APPLICATION-ATTACK-XSS.conf", "Xss"),
    ("REQUEST-942-APPLICATION-ATTACK-SQLI.conf", "Sqli"),
    (
        "REQUEST-943-APPLICATION-ATTACK-SESSION-FIXATION.conf",
        "SessionFixation",
    ),
    ("REQUEST-944-APPLICATION-ATTACK-JAVA.conf", "Java"),
];

/// Collections the gateway's rules never see: a rule reading only these is skipped,
/// and they are dropped from the others' lists.
const UNSEEN: &[&str] = &[
    "XML",
    "REQUEST_BODY",
    "FILES",
    "FILES_NAMES",
    "MULTIPART_PART_HEADERS",
    "ARGS_POST",
    "ARGS_POST_NAMES",
];

/// A DFA larger than this runs as a PikeVM instead (compiled on first use).
const MAX_DFA_BYTES: usize = 1 << 20;

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("manifest dir"));
    let rules_dir = root.join("coreruleset/rules");
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    println!("cargo:rerun-if-changed=coreruleset/rules");
    println!("cargo:rerun-if-changed=build");
    let mut generator = Generator::default();
    for (file, family) in FILES {
        let text = std::fs::read_to_string(rules_dir.join(file))
            .unwrap_or_else(|e| panic!("reading {file}: {e}"));
        let rules = parse::rules(file, &text).unwrap_or_else(|e| panic!("{e}"));
        for rule in rules.into_iter().filter(|r| r.paranoia == 1) {
            match generator.rule(&rule, family, &rules_dir, &out_dir) {
                Ok(code) => generator.rules.push(code),
                Err(reason) => generator.skipped.push((rule.id, reason)),
            }
        }
    }
    std::fs::write(out_dir.join("crs_rules.rs"), generator.finish()).expect("write crs_rules.rs");
}

#[derive(Default)]
struct Generator {
    rules: Vec<String>,
    skipped: Vec<(u32, String)>,
    regexes: Vec<String>,
    phrase_lists: Vec<String>,
    /// The distinct transformation chains, each a slot of a request's memo.
    chains: Vec<Vec<String>>,
}

impl Generator {
    /// The table entry of `rule`, or why it is skipped.
    fn rule(
        &mut self,
        rule: &Rule,
        family: &str,
        rules_dir: &Path,
        out_dir: &Path,
    ) -> Result<String, String> {
        let score = match rule.severity.as_deref() {
            Some("CRITICAL") => 5,
            Some("ERROR") => 4,
            Some("WARNING") => 3,
            Some("NOTICE") => 2,
            other => return Err(format!("no anomaly score for severity {other:?}")),
        };
        // A chained link that reads a capture needs its parent's groups.
        let captures: Vec<bool> = (0..rule.links.len())
            .map(|i| {
                rule.links.get(i + 1).is_some_and(|next| {
                    next.variables.iter().any(|v| {
                        v.collection == "TX"
                            && v.selector
                                .as_deref()
                                .is_some_and(|s| s.parse::<u8>().is_ok())
                    })
                })
            })
            .collect();
        // The engine tests a rule's first condition value by value and remembers the
        // answer per value: that condition must read the request's values one by one.
        if let Some(first) = rule.links.first() {
            if first.variables.iter().any(|v| v.count && !v.exclude) {
                return Err("its first condition counts values".into());
            }
            if first
                .variables
                .iter()
                .any(|v| matches!(v.collection.as_str(), "MATCHED_VARS" | "MATCHED_VAR" | "TX"))
            {
                return Err("its first condition reads another condition's matches".into());
            }
            // A remembered answer is keyed by the value alone, not the request's host.
            if first.operator == "endsWith" {
                return Err("its first condition compares with the request's host".into());
            }
        }
        let mut links = Vec::new();
        for (link, capture) in rule.links.iter().zip(captures) {
            links.push(self.link(link, capture, rules_dir, out_dir)?);
        }
        Ok(format!(
            "Rule {{ id: {}, family: Family::{family}, score: {score}, links: &[{}] }}",
            rule.id,
            links.join(", ")
        ))
    }

    fn link(
        &mut self,
        link: &Link,
        capture: bool,
        rules_dir: &Path,
        out_dir: &Path,
    ) -> Result<String, String> {
        let mut targets = Vec::new();
        let mut exclusions = Vec::new();
        let mut count = false;
        for variable in &link.variables {
            if UNSEEN.contains(&variable.collection.as_str()) {
                continue;
            }
            if variable.exclude {
                exclusions.push(exclusion(variable)?);
                continue;
            }
            count |= variable.count;
            targets.push(target(variable)?);
        }
        if targets.is_empty() {
            return Err(
                "reads only what the gateway's rules never see (bodies, uploads, XML)".into(),
            );
        }
        let transforms = link
            .transforms
            .iter()
            .filter(|t| *t != "none")
            .map(|t| transform(t))
            .collect::<Result<Vec<_>, _>>()?;
        let operator = match link.operator.as_str() {
            "rx" => format!(
                "Operator::Rx({})",
                self.regex(&link.argument, capture, out_dir)?
            ),
            "pm" => {
                let phrases: Vec<String> = link
                    .argument
                    .split_whitespace()
                    .map(str::to_string)
                    .collect();
                format!("Operator::Pm({})", self.phrases(&phrases))
            }
            "pmFromFile" => {
                let text = std::fs::read_to_string(rules_dir.join(&link.argument))
                    .map_err(|e| format!("{}: {e}", link.argument))?;
                format!("Operator::Pm({})", self.phrases(&parse::phrases(&text)))
            }
            "detectSQLi" => "Operator::DetectSqli".into(),
            "detectXSS" => "Operator::DetectXss".into(),
            "endsWith" if link.argument == "%{request_headers.host}" => {
                "Operator::EndsWithRequestHost".into()
            }
            "eq" => {
                let n: i64 = link
                    .argument
                    .trim()
                    .parse()
                    .map_err(|_| format!("@eq needs a number, not {:?}", link.argument))?;
                format!("Operator::Eq({n})")
            }
            other => return Err(format!("the operator @{other}")),
        };
        let chain = match self.chains.iter().position(|c| *c == transforms) {
            Some(chain) => chain,
            None => {
                self.chains.push(transforms.clone());
                self.chains.len() - 1
            }
        };
        Ok(format!(
            "Link {{ targets: &[{}], exclusions: &[{}], count: {count}, transforms: &[{}], chain: {chain}, operator: {operator}, negated: {}, multi_match: {} }}",
            targets.join(", "),
            exclusions.join(", "),
            transforms.join(", "),
            link.negated,
            link.multi_match
        ))
    }

    /// The slot of a pattern: a DFA (dense when small, else sparse) with the bytes every
    /// match needs, or, for a pattern whose groups a chained link reads or whose DFA is
    /// too large, the pattern itself for a PikeVM.
    fn regex(&mut self, pattern: &str, capture: bool, out_dir: &Path) -> Result<usize, String> {
        use regex_automata::dfa::{StartKind, dense};
        let translated = pcre::translate(pattern).map_err(|e| format!("its pattern has {e}"))?;
        let nfa = pcre::nfa(&translated).map_err(|e| format!("its pattern: {e}"))?;
        let required = match pcre::required_bytes(&nfa) {
            Some(set) => format!("Some({set:?})"),
            None => "None".into(),
        };
        let slot = self.regexes.len();
        let escaped = format!("{translated:?}");
        let matcher = if capture {
            format!("Matcher::Pattern({escaped})")
        } else {
            let dfa = dense::Builder::new()
                .syntax(pcre::syntax_config())
                .thompson(regex_automata::nfa::thompson::Config::new().utf8(false))
                .configure(
                    dense::Config::new()
                        .start_kind(StartKind::Unanchored)
                        .dfa_size_limit(Some(MAX_DFA_BYTES * 8))
                        .determinize_size_limit(Some(MAX_DFA_BYTES * 32)),
                )
                .build(&translated);
            match dfa {
                Ok(dfa) => {
                    let (bytes, padding, kind) = if dfa.memory_usage() <= 32 << 10 {
                        let (b, p) = dfa.to_bytes_little_endian();
                        (b, p, "Dense")
                    } else {
                        let sparse = dfa.to_sparse().map_err(|e| e.to_string())?;
                        let (b, p) = (sparse.to_bytes_little_endian(), 0);
                        (b, p, "Sparse")
                    };
                    if bytes.len() - padding > MAX_DFA_BYTES {
                        format!("Matcher::Pattern({escaped})")
                    } else {
                        let file = format!("crs_{slot}.dfa");
                        std::fs::write(out_dir.join(&file), &bytes[padding..])
                            .map_err(|e| e.to_string())?;
                        format!(
                            "Matcher::{kind}(&Aligned {{ _align: [], bytes: *include_bytes!(concat!(env!(\"OUT_DIR\"), \"/{file}\")) }})"
                        )
                    }
                }
                Err(_) => format!("Matcher::Pattern({escaped})"),
            }
        };
        self.regexes.push(format!(
            "Regex {{ required: {required}, matcher: {matcher} }}"
        ));
        Ok(slot)
    }

    fn phrases(&mut self, phrases: &[String]) -> usize {
        self.phrase_lists.push(format!("&{phrases:?}"));
        self.phrase_lists.len() - 1
    }

    fn finish(self) -> String {
        // A request's fired rules are one `u128` (`verdicts::RuleSet`).
        assert!(
            self.rules.len() <= 128,
            "{} rules compiled; the engine holds at most 128",
            self.rules.len()
        );
        let mut out = String::new();
        let _ = writeln!(out, "/// The compiled rules, in the rule files' order.");
        let _ = writeln!(out, "pub(crate) static RULES: &[Rule] = &[");
        for rule in &self.rules {
            let _ = writeln!(out, "    {rule},");
        }
        let _ = writeln!(out, "];\n");
        let _ = writeln!(out, "/// The paranoia-level-1 rules not compiled, and why.");
        let _ = writeln!(out, "pub static SKIPPED: &[(u32, &str)] = &[");
        for (id, reason) in &self.skipped {
            let _ = writeln!(out, "    ({id}, {reason:?}),");
        }
        let _ = writeln!(out, "];\n");
        let _ = writeln!(
            out,
            "pub(crate) const REGEX_COUNT: usize = {};",
            self.regexes.len()
        );
        let _ = writeln!(out, "pub(crate) static REGEXES: [Regex; REGEX_COUNT] = [");
        for regex in &self.regexes {
            let _ = writeln!(out, "    {regex},");
        }
        let _ = writeln!(out, "];\n");
        let _ = writeln!(
            out,
            "pub(crate) const PHRASE_LIST_COUNT: usize = {};",
            self.phrase_lists.len()
        );
        let _ = writeln!(
            out,
            "pub(crate) static PHRASE_LISTS: [&[&str]; PHRASE_LIST_COUNT] = ["
        );
        for list in &self.phrase_lists {
            let _ = writeln!(out, "    {list},");
        }
        let _ = writeln!(out, "];");
        out
    }
}

/// The target of a variable.
fn target(variable: &Variable) -> Result<String, String> {
    let selector = variable.selector.as_deref();
    Ok(match (variable.collection.as_str(), selector) {
        ("ARGS" | "ARGS_GET", None) => "Target::Args".into(),
        ("ARGS_NAMES" | "ARGS_GET_NAMES", None) => "Target::ArgNames".into(),
        ("REQUEST_COOKIES", None) => "Target::Cookies".into(),
        ("REQUEST_COOKIES_NAMES", None) => "Target::CookieNames".into(),
        ("REQUEST_HEADERS", None) => "Target::Headers".into(),
        ("REQUEST_HEADERS", Some(name)) if !name.starts_with('/') => {
            format!("Target::Header({:?})", name.to_ascii_lowercase())
        }
        ("REQUEST_HEADERS_NAMES", None) => "Target::HeaderNames".into(),
        ("REQUEST_FILENAME", None) => "Target::Filename".into(),
        ("REQUEST_URI", None) => "Target::Uri".into(),
        ("REQUEST_URI_RAW", None) => "Target::UriRaw".into(),
        ("QUERY_STRING", None) => "Target::QueryString".into(),
        ("REQUEST_LINE", None) => "Target::RequestLine".into(),
        ("MATCHED_VARS" | "MATCHED_VAR", None) => "Target::MatchedVars".into(),
        ("TX", Some(group)) if group.parse::<u8>().is_ok() => format!("Target::Capture({group})"),
        (collection, selector) => {
            return Err(format!(
                "the variable {collection}{}",
                selector.map(|s| format!(":{s}")).unwrap_or_default()
            ));
        }
    })
}

/// The exclusion of `!VARIABLE:selector`.
fn exclusion(variable: &Variable) -> Result<String, String> {
    let selector = variable
        .selector
        .as_deref()
        .ok_or("an exclusion without a selector")?;
    let kind = match variable.collection.as_str() {
        "REQUEST_COOKIES" => "Cookie",
        "REQUEST_HEADERS" => "Header",
        other => return Err(format!("an exclusion from {other}")),
    };
    // `/text/` is a regex selector; the rule files use plain text in it only.
    let (contains, name) = match selector.strip_prefix('/').and_then(|s| s.strip_suffix('/')) {
        Some(text)
            if text
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') =>
        {
            (true, text)
        }
        Some(text) => return Err(format!("the exclusion pattern /{text}/")),
        None => (false, selector),
    };
    Ok(format!(
        "Exclusion {{ collection: Collection::{kind}, name: {:?}, contains: {contains} }}",
        name.to_ascii_lowercase()
    ))
}

fn transform(name: &str) -> Result<String, String> {
    Ok(format!(
        "Transform::{}",
        match name {
            "lowercase" => "Lowercase",
            "urlDecode" => "UrlDecode",
            "urlDecodeUni" => "UrlDecodeUni",
            "htmlEntityDecode" => "HtmlEntityDecode",
            "jsDecode" => "JsDecode",
            "cssDecode" => "CssDecode",
            "removeNulls" => "RemoveNulls",
            "utf8toUnicode" => "Utf8ToUnicode",
            "cmdLine" => "CmdLine",
            "normalizePath" | "normalisePath" => "NormalizePath",
            "normalizePathWin" | "normalisePathWin" => "NormalizePathWin",
            "compressWhitespace" => "CompressWhitespace",
            "replaceComments" => "ReplaceComments",
            "base64Decode" => "Base64Decode",
            other => return Err(format!("the transformation t:{other}")),
        }
    ))
}
