//! The OWASP Core Rule Set's request rules at paranoia level 1, compiled from the rule
//! files themselves (`coreruleset/`, CRS 3.3.4 as Debian ships it; Apache-2.0) into
//! native checks a rule component runs on the parts of a request it sees: the path,
//! the query's arguments, the cookies and the headers.
//!
//! As in CRS, each matching rule adds its severity's anomaly score (critical 5, error
//! 4, warning 3, notice 2) and a request scoring [`THRESHOLD`] or more is an attack.
//! The variables are read as ModSecurity reads them (`ARGS` percent-decoded once, each
//! rule's transformations after that); bodies, uploads and XML are not seen, so the
//! rules that read only those are left out ([`SKIPPED`]). `@detectSQLi` and
//! `@detectXSS` are libinjection's checks (`libinjectionrs`). [`component`] is the
//! `crs` rule component the gateway calls for every request.

pub mod component;
mod matchers;
mod transform;
mod variables;
mod verdicts;

use matchers::{Aligned, ByteSet, Matcher, Regex};
use std::borrow::Cow;
use std::collections::BTreeMap;
use transform::Transform;
pub use variables::Parts;
use variables::{Collection, Values};
use verdicts::{Key, RuleSet};

mod generated {
    use super::*;
    include!(concat!(env!("OUT_DIR"), "/crs_rules.rs"));
}
pub use generated::SKIPPED;

/// The inbound anomaly score from which a request is an attack (CRS's default).
pub const THRESHOLD: u32 = 5;

/// Most query arguments a request may have: CRS's own example for rule 920380
/// (`tx.max_num_args`). Every value costs every rule that reads it, so past this a
/// request is an attack without its values being read, as ModSecurity's
/// `SecArgumentsLimit` refuses one: read, thousands would take longer than the
/// gateway's deadline for a call, and a call past it gives no opinion.
pub const MAX_ARGUMENTS: usize = 255;
/// Most cookies a request may have, for the same reason (browsers keep at most 180 a
/// site).
pub const MAX_COOKIES: usize = 255;

/// A bound a request went past, so its values were not read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// More than [`MAX_ARGUMENTS`] query arguments.
    Arguments,
    /// More than [`MAX_COOKIES`] cookies.
    Cookies,
}

impl Limit {
    /// The limit's name in reason ids.
    pub fn name(self) -> &'static str {
        match self {
            Limit::Arguments => "too-many-arguments",
            Limit::Cookies => "too-many-cookies",
        }
    }
}

/// The attack family of a rule, by its rule file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    Scanner,
    ProtocolAttack,
    Lfi,
    Rfi,
    Rce,
    Php,
    NodeJs,
    Xss,
    Sqli,
    SessionFixation,
    Java,
}

impl Family {
    /// The family's name in reason ids.
    pub fn name(self) -> &'static str {
        match self {
            Family::Scanner => "scanner",
            Family::ProtocolAttack => "protocol-attack",
            Family::Lfi => "lfi",
            Family::Rfi => "rfi",
            Family::Rce => "rce",
            Family::Php => "php",
            Family::NodeJs => "nodejs",
            Family::Xss => "xss",
            Family::Sqli => "sqli",
            Family::SessionFixation => "session-fixation",
            Family::Java => "java",
        }
    }
}

/// One compiled rule.
pub(crate) struct Rule {
    id: u32,
    family: Family,
    score: u8,
    /// The rule's condition, then its chained ones: all must hold.
    links: &'static [Link],
}

/// One condition of a rule.
pub(crate) struct Link {
    targets: &'static [Target],
    exclusions: &'static [Exclusion],
    /// `&VARIABLE`: the operator reads how many values there are.
    count: bool,
    transforms: &'static [Transform],
    /// The chain's slot in a request's memo (one per distinct chain).
    chain: usize,
    operator: Operator,
    negated: bool,
    /// Also tested after each transformation, not only after the last.
    multi_match: bool,
}

/// What a condition reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    Args,
    ArgNames,
    Cookies,
    CookieNames,
    Headers,
    /// One header, by lower-case name.
    Header(&'static str),
    HeaderNames,
    Filename,
    Uri,
    UriRaw,
    QueryString,
    RequestLine,
    /// The values the previous condition matched.
    MatchedVars,
    /// A capture group of the previous condition's match (`TX:1`).
    Capture(u8),
}

/// `!VARIABLE:name` in a condition's list.
pub(crate) struct Exclusion {
    collection: Collection,
    /// Lower case.
    name: &'static str,
    /// Names containing `name` (a `/name/` selector), else exactly `name`.
    contains: bool,
}

/// A condition's test.
pub(crate) enum Operator {
    Rx(usize),
    Pm(usize),
    DetectSqli,
    DetectXss,
    /// `@endsWith %{request_headers.host}`.
    EndsWithRequestHost,
    Eq(i64),
}

/// What CRS found in a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inspection {
    /// The anomaly score of all matching rules.
    pub score: u32,
    /// The matching rules, in the rule files' order, with their families.
    pub matched: Vec<(u32, Family)>,
    /// The bound the request went past; its values were not read.
    pub over: Option<Limit>,
}

impl Inspection {
    /// Whether the score reaches [`THRESHOLD`], or the request went past a bound.
    pub fn is_attack(&self) -> bool {
        self.score >= THRESHOLD || self.over.is_some()
    }

    /// The rule that names the attack: the first matching rule of the highest score.
    pub fn leading_rule(&self) -> Option<(u32, Family)> {
        self.matched.first().copied()
    }
}

/// Whether a request with this request line and header block (`name: value` lines)
/// was seen before and fired no rule: every value comes from one or the other, so
/// when neither fires a rule, no value does. Answers `false` for what is not known.
pub fn seen_clean(method: &str, target: &str, protocol: &str, header_block: &str) -> bool {
    !header_block.is_empty()
        && verdicts::known(Key::Headers(header_block)) == Some(0)
        && verdicts::known(Key::Line(method, target, protocol)) == Some(0)
}

/// Runs every rule on `parts`.
pub fn inspect(parts: &Parts<'_>) -> Inspection {
    if seen_clean(
        parts.method,
        parts.target,
        parts.protocol,
        parts.header_block,
    ) {
        return Inspection {
            score: 0,
            matched: Vec::new(),
            over: None,
        };
    }
    if let Some(limit) = variables::over_limit(parts) {
        return Inspection {
            score: 0,
            matched: Vec::new(),
            over: Some(limit),
        };
    }
    let line = Key::Line(parts.method, parts.target, parts.protocol);
    let block = (!parts.header_block.is_empty()).then_some(Key::Headers(parts.header_block));
    let values = Values::new(parts);
    let mut memo = Memo {
        entries: BTreeMap::new(),
    };
    // Each rule's first condition, value by value (remembered across requests).
    let (mut from_headers, mut from_line): (RuleSet, RuleSet) = (0, 0);
    for index in 0..values.len() {
        let fired = verdicts::fired(values.key(index), || {
            local_rules_on(index, &values, &mut memo)
        });
        // One value's transformations serve its own rules: kept no longer, so a request
        // of thousands of new values holds one value's at a time.
        memo.entries.clear();
        if values.is_from_headers(index) {
            from_headers |= fired;
        } else {
            from_line |= fired;
        }
    }
    verdicts::remember(line, from_line);
    if let Some(block) = block {
        verdicts::remember(block, from_headers);
    }
    let fired = from_headers | from_line;
    let mut inspection = Inspection {
        score: 0,
        matched: Vec::new(),
        over: None,
    };
    let mut best_score = 0;
    // The fired rules in the rule files' order; a chained one only when the rest of its
    // conditions hold too.
    let mut rest = fired;
    while rest != 0 {
        let i = rest.trailing_zeros() as usize;
        rest &= rest - 1;
        let rule = &generated::RULES[i];
        if rule.links.len() == 1 || rule_matches(rule, &values, &mut memo) {
            inspection.score += u32::from(rule.score);
            if rule.score > best_score {
                best_score = rule.score;
                inspection.matched.insert(0, (rule.id, rule.family));
            } else {
                inspection.matched.push((rule.id, rule.family));
            }
        }
    }
    inspection
}

/// The rules whose first condition holds on value `index`.
fn local_rules_on<'v>(index: usize, values: &'v Values<'_>, memo: &mut Memo<'v>) -> RuleSet {
    let mut fired = 0;
    // build.rs compiles only rules whose first condition reads values one by one.
    for (i, rule) in generated::RULES.iter().enumerate() {
        let Some(link) = rule.links.first() else {
            continue;
        };
        let read = link.targets.iter().any(|&t| values.reads(t, index))
            && !link.exclusions.iter().any(|e| values.excluded(index, e));
        if read && memo_test(link, index, values, memo, None) {
            fired |= 1 << i;
        }
    }
    fired
}

/// The transformed values of this request, kept while its rules run: rules share
/// transformation chains.
struct Memo<'v> {
    /// By value index and chain; only what was worked out (a request may hold
    /// thousands of values, most of them remembered).
    entries: BTreeMap<(usize, usize), Transformed<'v>>,
}

/// A value through a chain of transformations, and the bytes it holds.
type Transformed<'v> = (Cow<'v, [u8]>, ByteSet);

/// One value a condition matched: its index (`usize::MAX` for one made during the
/// rule, such as a capture) and its text.
type Matched = (usize, Vec<u8>);

fn rule_matches<'v>(rule: &Rule, values: &'v Values<'_>, memo: &mut Memo<'v>) -> bool {
    let mut previous: Vec<Matched> = Vec::new();
    let mut groups: Vec<Vec<u8>> = Vec::new();
    for (i, link) in rule.links.iter().enumerate() {
        let wants_groups = rule
            .links
            .get(i + 1)
            .is_some_and(|next| next.targets.iter().any(|t| matches!(t, Target::Capture(_))));
        let mut matched: Vec<Matched> = Vec::new();
        let mut new_groups = Vec::new();
        let candidates = candidates(link, values, &previous, &groups);
        if link.count {
            let count = candidates.len().to_string();
            if test(link, count.as_bytes(), values, None) {
                matched.push((usize::MAX, count.into_bytes()));
            }
        } else {
            for (index, raw) in candidates {
                let hit = if index == usize::MAX {
                    let value = transform::apply(&raw, link.transforms);
                    test_value(
                        link,
                        &value,
                        values,
                        wants_groups.then_some(&mut new_groups),
                    )
                } else {
                    memo_test(
                        link,
                        index,
                        values,
                        memo,
                        wants_groups.then_some(&mut new_groups),
                    )
                };
                if hit {
                    matched.push((index, raw.into_owned()));
                    if !wants_groups {
                        break;
                    }
                }
            }
        }
        if matched.is_empty() {
            return false;
        }
        previous = matched;
        groups = new_groups;
    }
    true
}

/// The values a condition reads: (index into `values`, or `usize::MAX`, and the text).
fn candidates<'v>(
    link: &Link,
    values: &'v Values<'_>,
    previous: &'v [Matched],
    groups: &'v [Vec<u8>],
) -> Vec<(usize, Cow<'v, [u8]>)> {
    let mut out = Vec::new();
    for target in link.targets {
        match target {
            Target::MatchedVars => {
                out.extend(
                    previous
                        .iter()
                        .map(|(i, v)| (*i, Cow::Borrowed(v.as_slice()))),
                );
            }
            Target::Capture(n) => {
                if let Some(text) = groups.get(usize::from(*n)) {
                    out.push((usize::MAX, Cow::Borrowed(text.as_slice())));
                }
            }
            target => {
                for index in values.select(*target) {
                    let excluded = link.exclusions.iter().any(|e| values.excluded(index, e));
                    if !excluded {
                        out.push((index, Cow::Borrowed(values.text(index))));
                    }
                }
            }
        }
    }
    out
}

/// The test of one value of the request, its transformed form taken from or kept in
/// the memo.
fn memo_test<'v>(
    link: &Link,
    index: usize,
    values: &'v Values<'_>,
    memo: &mut Memo<'v>,
    groups: Option<&mut Vec<Vec<u8>>>,
) -> bool {
    if link.multi_match {
        let mut current = Cow::Borrowed(values.text(index));
        if test_value(link, &current, values, None) {
            return true;
        }
        for &t in link.transforms {
            if let Cow::Owned(next) = transform::one(&current, t) {
                current = Cow::Owned(next);
                if test_value(link, &current, values, None) {
                    return true;
                }
            }
        }
        return false;
    }
    let (value, bytes) = memo.entries.entry((index, link.chain)).or_insert_with(|| {
        let raw = values.bytes(index);
        match transform::apply_known(values.text(index), raw, link.transforms) {
            Cow::Borrowed(value) => (Cow::Borrowed(value), *raw),
            Cow::Owned(value) => {
                let bytes = ByteSet::of(&value);
                (Cow::Owned(value), bytes)
            }
        }
    });
    test(link, value, values, Some((bytes, groups)))
}

fn test_value(
    link: &Link,
    value: &[u8],
    values: &Values<'_>,
    groups: Option<&mut Vec<Vec<u8>>>,
) -> bool {
    let bytes = ByteSet::of(value);
    test(link, value, values, Some((&bytes, groups)))
}

/// The operator on one value, negated when the condition says so.
fn test(
    link: &Link,
    value: &[u8],
    values: &Values<'_>,
    context: Option<(&ByteSet, Option<&mut Vec<Vec<u8>>>)>,
) -> bool {
    let number = || {
        std::str::from_utf8(value)
            .ok()
            .and_then(|v| v.trim().parse::<i64>().ok())
            .unwrap_or(0)
    };
    let hit = match &link.operator {
        Operator::Rx(slot) => {
            let (bytes, groups) = match context {
                Some((bytes, groups)) => (*bytes, groups),
                None => (ByteSet::of(value), None),
            };
            matchers::regex_matches(*slot, value, &bytes, groups)
        }
        Operator::Pm(slot) => matchers::phrases_match(*slot, value),
        Operator::DetectSqli => libinjectionrs::detect_sqli(value).is_injection(),
        Operator::DetectXss => libinjectionrs::detect_xss(value).is_injection(),
        Operator::EndsWithRequestHost => value.ends_with(values.host().as_bytes()),
        Operator::Eq(n) => number() == *n,
    };
    hit != link.negated
}

#[cfg(test)]
mod tests;
