//! A website's custom rules (`settings.custom_rules`): conditions on the client and the
//! request, all of which must hold, and an outcome (an action or a category). Checked
//! and compiled once when the settings change; evaluated in order, before the rule
//! components, against a [`Subject`] the gateway supplies.
//!
//! Every text comparison ignores case: values are compared lower-cased, the path and
//! query as the one normalisation reads them (decoded, dot segments resolved), and a
//! `matches` pattern is case-insensitive and matched as bytes, its classes (`\w`, `\d`,
//! `.`) ASCII, which keeps each compiled pattern small. A client whose country or ASN is unknown (no
//! database, no record) holds no condition on them, `is_not` included, so a rule never
//! fires on missing data. An absent header, referrer or JA4 reads as the empty string.

use crate::invalid::Invalid;
use crate::policy::{Action, Category};
use ipnet::IpNet;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::borrow::Cow;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, LazyLock, Mutex};

/// The most rules a website may have.
pub const MAX_RULES: usize = 50;
/// The most conditions one rule may have.
pub const MAX_CONDITIONS: usize = 10;
/// The longest value (a string, or one item of a list), in bytes.
pub const MAX_VALUE_BYTES: usize = 1024;
/// The most bytes a website's rules take as JSON, all together: what every gateway
/// holds for it in memory stays small whatever the other limits allow.
pub const MAX_RULES_BYTES: usize = 32 * 1024;
/// The most items of an `is_any_of` or network list.
pub const MAX_LIST_ITEMS: usize = 100;
/// The longest `matches` pattern, in bytes.
pub const MAX_PATTERN_BYTES: usize = 256;
/// The most `matches` conditions of one website, over all its rules.
pub const MAX_PATTERNS: usize = 20;
/// The most memory a website's patterns take together, compiled (each gateway holds
/// them): a pattern takes at most twice `PATTERN_MEMORY_BYTES`, and most a few KiB.
pub const MAX_PATTERNS_MEMORY: usize = 256 * 1024;
/// The longest description, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 200;
/// The longest header name, in bytes.
pub const MAX_HEADER_NAME_BYTES: usize = 64;
/// The most memory a compiled pattern may take (its program, and its lazy DFA's cache).
const PATTERN_MEMORY_BYTES: usize = 64 * 1024;

/// What a condition reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Field {
    /// The client's address (after a trusted proxy's PROXY header).
    Ip,
    /// The client's country, an ISO 3166-1 alpha-2 code, from the GeoIP database.
    Country,
    /// The client's autonomous system number, from the GeoIP database.
    Asn,
    UserAgent,
    /// The path as the gateway and the rule components read it.
    Path,
    /// The query (without `?`), decoded and lower case.
    Query,
    Method,
    /// The header named by the condition's `name`.
    Header,
    Referrer,
    /// The JA4 fingerprint of the client's TLS hello (empty over plain HTTP).
    Ja4,
}

impl Field {
    /// Every field, in the documented order.
    pub const ALL: [Field; 10] = [
        Field::Ip,
        Field::Country,
        Field::Asn,
        Field::UserAgent,
        Field::Path,
        Field::Query,
        Field::Method,
        Field::Header,
        Field::Referrer,
        Field::Ja4,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            Field::Ip => "ip",
            Field::Country => "country",
            Field::Asn => "asn",
            Field::UserAgent => "user_agent",
            Field::Path => "path",
            Field::Query => "query",
            Field::Method => "method",
            Field::Header => "header",
            Field::Referrer => "referrer",
            Field::Ja4 => "ja4",
        }
    }

    /// The operators that apply to the field.
    fn operators(self) -> &'static [Operator] {
        use Operator::*;
        match self {
            Field::Ip => &[Is, IsNot, IsAnyOf, InNetwork, NotInNetwork],
            Field::Country | Field::Asn => &[Is, IsNot, IsAnyOf],
            _ => &[Is, IsNot, Contains, StartsWith, Matches, IsAnyOf],
        }
    }
}

/// How a condition compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Operator {
    Is,
    IsNot,
    Contains,
    StartsWith,
    /// A regular expression (linear-time, size-limited), anywhere in the value.
    Matches,
    /// Any of a list of values.
    IsAnyOf,
    /// In a network (CIDR) or any of a list of networks.
    InNetwork,
    /// In none of the networks.
    NotInNetwork,
}

impl Operator {
    /// Every operator, in the documented order.
    pub const ALL: [Operator; 8] = [
        Operator::Is,
        Operator::IsNot,
        Operator::Contains,
        Operator::StartsWith,
        Operator::Matches,
        Operator::IsAnyOf,
        Operator::InNetwork,
        Operator::NotInNetwork,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            Operator::Is => "is",
            Operator::IsNot => "is_not",
            Operator::Contains => "contains",
            Operator::StartsWith => "starts_with",
            Operator::Matches => "matches",
            Operator::IsAnyOf => "is_any_of",
            Operator::InNetwork => "in_network",
            Operator::NotInNetwork => "not_in_network",
        }
    }
}

/// One condition, as the partner sent it and the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Condition {
    pub field: Field,
    /// The header's name, for `field: header` only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub operator: Operator,
    /// A string; a number for `asn`; a list for `is_any_of` (and for networks).
    pub value: Value,
}

/// One rule, as the partner sent it and the API shows it: every condition must hold,
/// then its `action` is taken, or the website's policy for its `category`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CustomRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<Action>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<Category>,
}

/// What a rule that holds decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleOutcome {
    /// This action, whatever the policy.
    Action(Action),
    /// The request is of this category; the website's policy gives the action.
    Category(Category),
}

/// The first rule that held for a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Matched<'a> {
    /// The rule's number, from 1 for the first in the list.
    pub number: usize,
    pub outcome: RuleOutcome,
    /// `custom.<number>`, the reason the access log and the metrics show.
    pub reason: &'a str,
}

/// The text a condition reads from the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TextSource {
    UserAgent,
    Path,
    Query,
    Method,
    Referrer,
    Ja4,
    /// A header, by its lower-case name.
    Header(Box<str>),
}

/// What the gateway knows of one request, read by the rules.
pub trait Subject {
    /// The client's address.
    fn client_ip(&self) -> IpAddr;
    /// The client's country (upper-case ISO 3166-1 alpha-2), when known.
    fn country(&self) -> Option<[u8; 2]>;
    /// The client's autonomous system number, when known.
    fn asn(&self) -> Option<u32>;
    /// Calls `visit` with each value of the text `source` names, until one answers
    /// true; whether one did. The path and query are read as the one normalisation
    /// reads them, the rest as sent; a header sent several times gives each of its
    /// values, an absent one (or a JA4 over plain HTTP) one empty value.
    fn any_text(&self, source: &TextSource, visit: &mut dyn FnMut(&str) -> bool) -> bool;

    /// As [`Subject::any_text`], each value lower-cased as the rules' values are. A
    /// subject many conditions read keeps them, so that each text is lower-cased once
    /// a request, not once a condition.
    fn any_lower_text(&self, source: &TextSource, visit: &mut dyn FnMut(&str) -> bool) -> bool {
        self.any_text(source, &mut |value| visit(&lower(value)))
    }
}

/// A website's custom rules, checked and compiled; cheap to clone. Compared, shown and
/// stored as the partner sent them.
#[derive(Clone, Default)]
pub struct CustomRules(Arc<Compiled>);

#[derive(Default)]
struct Compiled {
    source: Vec<CustomRule>,
    rules: Vec<CompiledRule>,
    disabled: Vec<(usize, Invalid)>,
    reads_geo: bool,
}

struct CompiledRule {
    /// `None` for a stored rule this release refuses (see [`CustomRules::disabled`]).
    tests: Option<Vec<Test>>,
    outcome: RuleOutcome,
    reason: Box<str>,
}

/// Whose rules are read: the partner's, checked in full, or the store's, which were
/// checked when sent and are kept whole if a later release refuses one.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reading {
    Sent,
    Stored,
}

enum Test {
    Ip {
        negate: bool,
        networks: Vec<IpNet>,
    },
    Country {
        negate: bool,
        codes: Vec<[u8; 2]>,
    },
    Asn {
        negate: bool,
        numbers: Vec<u32>,
    },
    Text {
        source: TextSource,
        check: TextCheck,
    },
}

enum TextCheck {
    OneOf { negate: bool, values: Vec<Box<str>> },
    Contains(Box<str>),
    StartsWith(Box<str>),
    Matches(Box<Pattern>),
}

/// The `matches` conditions of one website's rules, counted as they are read.
struct Patterns {
    count: usize,
    /// What the patterns compiled so far take (as sent; stored ones compile later),
    /// each text once (a gateway compiles a text once).
    memory: usize,
    texts: std::collections::HashSet<Box<str>>,
    reading: Reading,
}

/// A `matches` pattern, matched by a full DFA: one table step per byte of the text,
/// whatever the pattern, so no pattern makes a request slow (a lazy DFA falls back to
/// a simulation whose every byte costs the pattern's size: `a[ab]{1500}[^ab]` against
/// a long header would take seconds). Rules as sent are compiled at once (the partner
/// hears what is too complex); as stored, at their first match, so that reading a
/// partner's websites compiles nothing. Compiled patterns are shared by their text
/// across a gateway's websites and their versions ([`compiled`]).
struct Pattern {
    text: Box<str>,
    matcher: std::sync::OnceLock<Arc<Matcher>>,
}

type Dfa = regex_automata::dfa::dense::DFA<Vec<u32>>;

/// How a pattern is matched.
enum Matcher {
    Dfa(Box<Dfa>),
    /// A pattern stored by a release that took it, whose DFA is too large: matched as
    /// that release did (a lazy DFA and its fallback), so that a stored `deny` keeps
    /// acting. Sending it again is refused.
    Former(regex::bytes::Regex),
    /// Neither compiles (a syntax a later release took): matches nothing.
    Nothing,
}

impl Pattern {
    /// The memory its compiled matcher takes; 0 before it is compiled.
    fn memory(&self) -> usize {
        match self.matcher.get().map(|matcher| &**matcher) {
            Some(Matcher::Dfa(dfa)) => dfa.memory_usage(),
            _ => 0,
        }
    }

    fn is_match(&self, text: &[u8]) -> bool {
        use regex_automata::dfa::Automaton;
        let matcher = self.matcher.get_or_init(|| compiled(&self.text));
        match &**matcher {
            Matcher::Dfa(dfa) => {
                let input = regex_automata::Input::new(text).earliest(true);
                // Only a quit byte or a Unicode word boundary can fail a search;
                // neither is in a DFA that built.
                matches!(dfa.try_search_fwd(&input), Ok(Some(_)))
            }
            Matcher::Former(regex) => regex.is_match(text),
            Matcher::Nothing => false,
        }
    }
}

/// The gateway's compiled patterns by their text: a partner's websites sharing a
/// pattern, or a website written again, compile it once.
static COMPILED: LazyLock<Mutex<CompiledPatterns>> =
    LazyLock::new(|| Mutex::new(CompiledPatterns::new(COMPILED_PATTERNS)));

/// Compiled patterns by their text, at most `capacity`. When full, the one used
/// longest ago that no website holds goes (else the one used longest ago): one
/// partner's stream of new patterns never takes another's in use.
struct CompiledPatterns {
    by_text: HashMap<Box<str>, CompiledPattern>,
    /// Counts uses; each entry keeps the count of its last.
    uses: u64,
    capacity: usize,
}

struct CompiledPattern {
    matcher: Arc<Matcher>,
    used: u64,
}

impl CompiledPatterns {
    fn new(capacity: usize) -> Self {
        CompiledPatterns {
            by_text: HashMap::new(),
            uses: 0,
            capacity: capacity.max(1),
        }
    }

    fn get(&mut self, text: &str) -> Option<Arc<Matcher>> {
        self.uses += 1;
        let entry = self.by_text.get_mut(text)?;
        entry.used = self.uses;
        Some(entry.matcher.clone())
    }

    fn insert(&mut self, text: &str, matcher: Arc<Matcher>) {
        if self.by_text.len() >= self.capacity && !self.by_text.contains_key(text) {
            // Held elsewhere: by a website's rules (or a caller about to be).
            let evicted = self
                .by_text
                .iter()
                .min_by_key(|(_, entry)| (Arc::strong_count(&entry.matcher) > 1, entry.used))
                .map(|(text, _)| text.clone());
            if let Some(evicted) = evicted {
                self.by_text.remove(&evicted);
            }
        }
        self.uses += 1;
        let used = self.uses;
        self.by_text
            .insert(text.into(), CompiledPattern { matcher, used });
    }
}

thread_local! {
    static MAY_COMPILE: std::cell::Cell<bool> = const { std::cell::Cell::new(true) };
    static COMPILED_HERE: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    static COMPILE_WANTED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// What [`compiling`] saw of a parse's patterns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PatternsCompiled {
    /// Patterns compiled (not found compiled): some milliseconds each.
    pub new: u64,
    /// A new pattern was refused because compiling was not allowed.
    pub refused: bool,
}

/// Runs `parse` (synchronous: on this thread) letting it compile patterns not compiled
/// before only if `may_compile`; a pattern it may not compile is refused as invalid.
pub fn compiling<T>(may_compile: bool, parse: impl FnOnce() -> T) -> (T, PatternsCompiled) {
    /// Puts the thread's settings back however `parse` ends (a panic included).
    struct Restore {
        may_compile: bool,
        wanted: bool,
    }
    impl Drop for Restore {
        fn drop(&mut self) {
            MAY_COMPILE.set(self.may_compile);
            COMPILE_WANTED.set(self.wanted);
        }
    }
    let compiled_before = COMPILED_HERE.get();
    let restore = Restore {
        may_compile: MAY_COMPILE.replace(may_compile),
        wanted: COMPILE_WANTED.replace(false),
    };
    let parsed = parse();
    let compiled = PatternsCompiled {
        new: COMPILED_HERE.get() - compiled_before,
        refused: COMPILE_WANTED.get(),
    };
    drop(restore);
    (parsed, compiled)
}

fn cached(text: &str) -> Option<Arc<Matcher>> {
    let mut cache = COMPILED.lock().unwrap_or_else(|e| e.into_inner());
    cache.get(text)
}

fn remember(text: &str, matcher: Matcher) -> Arc<Matcher> {
    let matcher = Arc::new(matcher);
    let mut cache = COMPILED.lock().unwrap_or_else(|e| e.into_inner());
    cache.insert(text, matcher.clone());
    matcher
}

/// The matcher of a stored pattern: its DFA, else as the release that took it matched
/// it.
fn compiled(text: &str) -> Arc<Matcher> {
    cached(text).unwrap_or_else(|| {
        let matcher = match compile_dfa(text) {
            Ok(dfa) => Matcher::Dfa(Box::new(dfa)),
            Err(_) => former(text).map_or(Matcher::Nothing, Matcher::Former),
        };
        remember(text, matcher)
    })
}

/// The most compiled patterns a gateway keeps for reuse.
const COMPILED_PATTERNS: usize = 4096;

/// `text` as a release before the DFAs compiled it.
fn former(text: &str) -> Option<regex::bytes::Regex> {
    regex::bytes::RegexBuilder::new(text)
        .case_insensitive(true)
        .unicode(false)
        .size_limit(PATTERN_MEMORY_BYTES)
        .dfa_size_limit(PATTERN_MEMORY_BYTES)
        .build()
        .ok()
}

impl CustomRules {
    /// Checks and compiles `settings.custom_rules` as sent: an array of rules. The
    /// first problem is reported with its field (`settings.custom_rules[2].conditions[0].value`).
    pub fn parse(value: &Value) -> Result<CustomRules, Invalid> {
        CustomRules::read(value, Reading::Sent)
    }

    fn read(value: &Value, reading: Reading) -> Result<CustomRules, Invalid> {
        const FIELD: &str = "settings.custom_rules";
        let Some(items) = value.as_array() else {
            return Err(Invalid::malformed(
                FIELD,
                "`settings.custom_rules` must be a JSON array of rules",
            ));
        };
        if items.len() > MAX_RULES && reading == Reading::Sent {
            return Err(Invalid::too_large(
                FIELD,
                format!(
                    "{} custom rules; a website may have at most {MAX_RULES}",
                    items.len()
                ),
            ));
        }
        if reading == Reading::Sent {
            let bytes = serde_json::to_vec(value).map_or(usize::MAX, |json| json.len());
            if bytes > MAX_RULES_BYTES {
                return Err(Invalid::too_large(
                    FIELD,
                    format!(
                        "the custom rules take {bytes} bytes as JSON; a website's take at \
                         most {MAX_RULES_BYTES}"
                    ),
                ));
            }
        }
        let mut compiled = Compiled::default();
        let mut patterns = Patterns {
            count: 0,
            memory: 0,
            texts: Default::default(),
            reading,
        };
        for (i, item) in items.iter().enumerate() {
            let field = format!("{FIELD}[{i}]");
            let rule: CustomRule = serde_json::from_value(item.clone())
                .map_err(|err| Invalid::malformed(&field, format!("{field}: {err}")))?;
            let checked = match compile_rule(&rule, &field, i + 1, &mut patterns) {
                Ok(checked) => checked,
                Err(refused) if reading == Reading::Stored => {
                    compiled.disabled.push((i + 1, refused));
                    CompiledRule {
                        tests: None,
                        outcome: RuleOutcome::Action(Action::Grant),
                        reason: format!("custom.{}", i + 1).into(),
                    }
                }
                Err(refused) => return Err(refused),
            };
            compiled.reads_geo |= checked
                .tests
                .iter()
                .flatten()
                .any(|test| matches!(test, Test::Country { .. } | Test::Asn { .. }));
            compiled.rules.push(checked);
            compiled.source.push(rule);
        }
        Ok(CustomRules(Arc::new(compiled)))
    }

    /// Whether the website has no custom rules.
    pub fn is_empty(&self) -> bool {
        self.0.rules.is_empty()
    }

    /// The rules as sent.
    pub fn rules(&self) -> &[CustomRule] {
        &self.0.source
    }

    /// Stored rules this release refuses, by number, and why: they never match, and are
    /// kept (and shown) until the partner replaces them.
    pub fn disabled(&self) -> &[(usize, Invalid)] {
        &self.0.disabled
    }

    /// Whether a rule reads the client's country or ASN.
    pub fn reads_geo(&self) -> bool {
        self.0.reads_geo
    }

    /// The rule that decides the request, given as its `readings`: one [`Subject`] for
    /// each way an origin may read its path (usually one; two when servlet containers
    /// drop `;` parameters that other servers keep). Under each reading the first rule
    /// all of whose conditions hold decides, except that a rule whose action (by
    /// `action_of`: its own, or the policy's for its category) grants must hold under
    /// every reading; where the readings' rules differ, the strictest action wins
    /// (deny, then captcha), the earlier rule among equals.
    pub fn first_match(
        &self,
        readings: &[&dyn Subject],
        action_of: impl Fn(RuleOutcome) -> Action,
    ) -> Option<Matched<'_>> {
        let holds =
            |tests: &Vec<Test>, subject: &dyn Subject| tests.iter().all(|test| test.holds(subject));
        let strictness = |action: Action| match action {
            Action::Grant => 0,
            Action::Captcha => 1,
            Action::Deny => 2,
        };
        let first_under = |subject: &dyn Subject| {
            self.0.rules.iter().enumerate().find(|(_, rule)| {
                rule.tests.as_ref().is_some_and(|tests| {
                    if action_of(rule.outcome) == Action::Grant {
                        readings.iter().all(|reading| holds(tests, *reading))
                    } else {
                        holds(tests, subject)
                    }
                })
            })
        };
        readings
            .iter()
            .filter_map(|reading| first_under(*reading))
            .max_by_key(|(i, rule)| (strictness(action_of(rule.outcome)), std::cmp::Reverse(*i)))
            .map(|(i, rule)| Matched {
                number: i + 1,
                outcome: rule.outcome,
                reason: &rule.reason,
            })
    }
}

impl PartialEq for CustomRules {
    fn eq(&self, other: &Self) -> bool {
        self.0.source == other.0.source
    }
}

impl Eq for CustomRules {}

impl std::fmt::Debug for CustomRules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.source.fmt(f)
    }
}

impl Serialize for CustomRules {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.source.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for CustomRules {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        CustomRules::read(&value, Reading::Stored).map_err(serde::de::Error::custom)
    }
}

fn compile_rule(
    rule: &CustomRule,
    field: &str,
    number: usize,
    patterns: &mut Patterns,
) -> Result<CompiledRule, Invalid> {
    if let Some(description) = &rule.description {
        let chars = description.chars().count();
        if chars > MAX_DESCRIPTION_CHARS {
            return Err(Invalid::too_large(
                format!("{field}.description"),
                format!("the description has {chars} characters; at most {MAX_DESCRIPTION_CHARS}"),
            ));
        }
        if description.chars().any(char::is_control) {
            return Err(Invalid::malformed(
                format!("{field}.description"),
                "the description may not hold control characters",
            ));
        }
    }
    let outcome = match (rule.action, rule.category) {
        (Some(action), None) => RuleOutcome::Action(action),
        (None, Some(category)) => RuleOutcome::Category(category),
        (action, _) => {
            let which = if action.is_some() { "both" } else { "neither" };
            return Err(Invalid::malformed(
                field,
                format!(
                    "a rule has an `action` (grant, deny or captcha) or a `category` (whose \
                     action the website's policy gives), not {which}"
                ),
            ));
        }
    };
    if rule.conditions.is_empty() {
        return Err(Invalid::malformed(
            format!("{field}.conditions"),
            "a rule needs at least one condition",
        ));
    }
    if rule.conditions.len() > MAX_CONDITIONS {
        return Err(Invalid::too_large(
            format!("{field}.conditions"),
            format!(
                "{} conditions; a rule may have at most {MAX_CONDITIONS}",
                rule.conditions.len()
            ),
        ));
    }
    let tests = rule
        .conditions
        .iter()
        .enumerate()
        .map(|(j, condition)| {
            compile_condition(condition, &format!("{field}.conditions[{j}]"), patterns)
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(CompiledRule {
        tests: Some(tests),
        outcome,
        reason: format!("custom.{number}").into(),
    })
}

fn compile_condition(
    condition: &Condition,
    field: &str,
    patterns: &mut Patterns,
) -> Result<Test, Invalid> {
    let Condition {
        field: reads,
        name,
        operator,
        value,
    } = condition;
    let (reads, operator) = (*reads, *operator);
    if !reads.operators().contains(&operator) {
        let allowed: Vec<&str> = reads.operators().iter().map(|o| o.as_str()).collect();
        return Err(Invalid::unacceptable(
            format!("{field}.operator"),
            format!(
                "`{}` does not apply to `{}`; it takes {}",
                operator.as_str(),
                reads.as_str(),
                allowed.join(", ")
            ),
        ));
    }
    let name = match (reads, name) {
        (Field::Header, Some(name)) => Some(header_name(name, &format!("{field}.name"))?),
        (Field::Header, None) => return Err(Invalid::missing(&format!("{field}.name"))),
        (_, Some(_)) => {
            return Err(Invalid::unacceptable(
                format!("{field}.name"),
                "`name` is for `field: header` only",
            ));
        }
        (_, None) => None,
    };
    let value_field = format!("{field}.value");
    let negate = matches!(operator, Operator::IsNot | Operator::NotInNetwork);
    Ok(match reads {
        Field::Ip => {
            let networks = match operator {
                Operator::Is | Operator::IsNot => vec![address(
                    text(one(value, &value_field)?, &value_field)?,
                    &value_field,
                )?],
                Operator::IsAnyOf => list(value, &value_field)?
                    .iter()
                    .map(|item| address(text(item, &value_field)?, &value_field))
                    .collect::<Result<_, _>>()?,
                _ => one_or_list(value, &value_field)?
                    .iter()
                    .map(|item| network(text(item, &value_field)?, &value_field))
                    .collect::<Result<_, _>>()?,
            };
            Test::Ip { negate, networks }
        }
        Field::Country => {
            let codes = values(operator, value, &value_field)?
                .iter()
                .map(|item| country(text(item, &value_field)?, &value_field))
                .collect::<Result<_, _>>()?;
            Test::Country { negate, codes }
        }
        Field::Asn => {
            let numbers = values(operator, value, &value_field)?
                .iter()
                .map(|item| asn(item, &value_field))
                .collect::<Result<_, _>>()?;
            Test::Asn { negate, numbers }
        }
        _ => {
            let source = match reads {
                Field::UserAgent => TextSource::UserAgent,
                Field::Path => TextSource::Path,
                Field::Query => TextSource::Query,
                Field::Method => TextSource::Method,
                Field::Referrer => TextSource::Referrer,
                Field::Ja4 => TextSource::Ja4,
                _ => TextSource::Header(name.unwrap_or_default().into()),
            };
            let lower = |item: &Value| -> Result<Box<str>, Invalid> {
                Ok(text(item, &value_field)?.to_lowercase().into())
            };
            let check = match operator {
                Operator::Contains => TextCheck::Contains(lower(one(value, &value_field)?)?),
                Operator::StartsWith => TextCheck::StartsWith(lower(one(value, &value_field)?)?),
                Operator::Matches => {
                    patterns.count += 1;
                    if patterns.count > MAX_PATTERNS {
                        return Err(Invalid::too_large(
                            format!("{field}.operator"),
                            format!(
                                "a website may have at most {MAX_PATTERNS} `matches` conditions"
                            ),
                        ));
                    }
                    let sent = text(one(value, &value_field)?, &value_field)?;
                    let pattern = pattern(sent, &value_field, patterns.reading)?;
                    if patterns.texts.insert(sent.into()) {
                        patterns.memory += pattern.memory();
                    }
                    if patterns.memory > MAX_PATTERNS_MEMORY {
                        return Err(Invalid::too_large(
                            value_field,
                            format!(
                                "the website's patterns compile to {} KiB together, past \
                                 {} KiB; make some simpler, or fewer",
                                patterns.memory.div_ceil(1024),
                                MAX_PATTERNS_MEMORY / 1024
                            ),
                        ));
                    }
                    TextCheck::Matches(Box::new(pattern))
                }
                _ => TextCheck::OneOf {
                    negate,
                    values: values(operator, value, &value_field)?
                        .iter()
                        .map(lower)
                        .collect::<Result<_, _>>()?,
                },
            };
            Test::Text { source, check }
        }
    })
}

/// The single value of an operator that takes one.
fn one<'a>(value: &'a Value, field: &str) -> Result<&'a Value, Invalid> {
    if value.is_array() {
        return Err(Invalid::malformed(
            field,
            "this operator takes one value, not a list (`is_any_of` takes a list)",
        ));
    }
    Ok(value)
}

/// The list of `is_any_of`: 1 to [`MAX_LIST_ITEMS`] values.
fn list<'a>(value: &'a Value, field: &str) -> Result<&'a [Value], Invalid> {
    let Some(items) = value.as_array() else {
        return Err(Invalid::malformed(
            field,
            "`is_any_of` takes a list of values",
        ));
    };
    if items.is_empty() {
        return Err(Invalid::malformed(field, "the list is empty"));
    }
    if items.len() > MAX_LIST_ITEMS {
        return Err(Invalid::too_large(
            field,
            format!(
                "{} values; a list may hold at most {MAX_LIST_ITEMS}",
                items.len()
            ),
        ));
    }
    Ok(items)
}

fn one_or_list<'a>(value: &'a Value, field: &str) -> Result<&'a [Value], Invalid> {
    match value {
        Value::Array(_) => list(value, field),
        single => Ok(std::slice::from_ref(single)),
    }
}

/// The values an operator compares with: a list for `is_any_of`, else one.
fn values<'a>(operator: Operator, value: &'a Value, field: &str) -> Result<&'a [Value], Invalid> {
    match operator {
        Operator::IsAnyOf => list(value, field),
        _ => Ok(std::slice::from_ref(one(value, field)?)),
    }
}

fn text<'a>(value: &'a Value, field: &str) -> Result<&'a str, Invalid> {
    let Some(text) = value.as_str() else {
        return Err(Invalid::malformed(
            field,
            format!(
                "expected a string, not {}",
                crate::names::shorten(&value.to_string())
            ),
        ));
    };
    if text.len() > MAX_VALUE_BYTES {
        return Err(Invalid::too_large(
            field,
            format!("a value of {} bytes; at most {MAX_VALUE_BYTES}", text.len()),
        ));
    }
    Ok(text)
}

fn header_name(name: &str, field: &str) -> Result<String, Invalid> {
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if name.is_empty() || name.len() > MAX_HEADER_NAME_BYTES || !name.bytes().all(token) {
        return Err(Invalid::malformed(
            field,
            format!(
                "`{}` is not a header name (1 to {MAX_HEADER_NAME_BYTES} letters, digits or -_.!#$%&'*+^`|~)",
                crate::names::shorten(name)
            ),
        ));
    }
    Ok(name.to_ascii_lowercase())
}

fn address(text: &str, field: &str) -> Result<IpNet, Invalid> {
    let ip: IpAddr = text.parse().map_err(|_| {
        Invalid::malformed(
            field,
            format!("`{}` is not an IP address", crate::names::shorten(text)),
        )
    })?;
    Ok(IpNet::from(canonical(ip)))
}

fn network(text: &str, field: &str) -> Result<IpNet, Invalid> {
    if !text.contains('/') {
        return address(text, field);
    }
    let net: IpNet = text.parse().map_err(|_| {
        Invalid::malformed(
            field,
            format!(
                "`{}` is not a network (an address and a prefix length: 203.0.113.0/24, 2001:db8::/32)",
                crate::names::shorten(text)
            ),
        )
    })?;
    // An IPv4-mapped network (`::ffff:10.0.0.0/104`) is the IPv4 network it maps:
    // clients are read as IPv4.
    if let IpNet::V6(v6) = net
        && v6.prefix_len() >= 96
        && let Some(v4) = v6.addr().to_ipv4_mapped()
        && let Ok(mapped) = ipnet::Ipv4Net::new(v4, v6.prefix_len() - 96)
    {
        return Ok(IpNet::V4(mapped.trunc()));
    }
    Ok(net.trunc())
}

/// An IPv4-mapped IPv6 address as the IPv4 address it is.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

fn country(text: &str, field: &str) -> Result<[u8; 2], Invalid> {
    match text.as_bytes() {
        [a, b] if a.is_ascii_alphabetic() && b.is_ascii_alphabetic() => {
            Ok([a.to_ascii_uppercase(), b.to_ascii_uppercase()])
        }
        _ => Err(Invalid::malformed(
            field,
            format!(
                "`{}` is not a country code (two letters, ISO 3166-1: DE, US)",
                crate::names::shorten(text)
            ),
        )),
    }
}

/// An ASN as a number or a string (`13335`, `"AS13335"`).
fn asn(value: &Value, field: &str) -> Result<u32, Invalid> {
    let number = match value {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => {
            let digits = s
                .strip_prefix("AS")
                .or_else(|| s.strip_prefix("as"))
                .unwrap_or(s);
            digits.parse::<u64>().ok()
        }
        _ => None,
    };
    number.and_then(|n| u32::try_from(n).ok()).ok_or_else(|| {
        Invalid::malformed(
            field,
            format!(
                "{} is not an autonomous system number (13335 or \"AS13335\")",
                crate::names::shorten(&value.to_string())
            ),
        )
    })
}

/// Why a pattern has no DFA.
enum PatternError {
    Syntax(String),
    TooComplex,
    /// What a DFA cannot do (a Unicode word boundary, `(?u:\b)`).
    Unsupported(String),
}

/// The NFA of `text`: case-insensitive for ASCII letters, over bytes, at most
/// `PATTERN_MEMORY_BYTES`.
fn compile_nfa(text: &str) -> Result<regex_automata::nfa::thompson::NFA, PatternError> {
    use regex_automata::{nfa::thompson, util::syntax};
    let config = syntax::Config::new()
        .case_insensitive(true)
        .unicode(false)
        .utf8(false);
    let hir = syntax::parse_with(text, &config).map_err(|err| {
        // The parser's message ends in its one-line reason.
        let text = err.to_string();
        let reason = text
            .lines()
            .last()
            .map_or(text.as_str(), |l| l.trim_start_matches("error: "));
        PatternError::Syntax(reason.to_owned())
    })?;
    thompson::Compiler::new()
        .configure(
            thompson::Config::new()
                .utf8(false)
                .nfa_size_limit(Some(PATTERN_MEMORY_BYTES)),
        )
        .build_from_hir(&hir)
        .map_err(|err| match err.size_limit() {
            Some(_) => PatternError::TooComplex,
            None => PatternError::Unsupported(err.to_string()),
        })
}

/// The DFA of `text` ([`compile_nfa`]), at most twice `PATTERN_MEMORY_BYTES` (its
/// making at most eight times).
fn compile_dfa(text: &str) -> Result<Dfa, PatternError> {
    use regex_automata::dfa::dense;
    let nfa = compile_nfa(text)?;
    dense::Builder::new()
        .configure(
            dense::Config::new()
                .start_kind(regex_automata::dfa::StartKind::Unanchored)
                .dfa_size_limit(Some(2 * PATTERN_MEMORY_BYTES))
                .determinize_size_limit(Some(8 * PATTERN_MEMORY_BYTES)),
        )
        .build_from_nfa(&nfa)
        .map_err(|err| {
            if err.is_size_limit_exceeded() {
                PatternError::TooComplex
            } else {
                PatternError::Unsupported(err.to_string())
            }
        })
}

fn pattern(text: &str, field: &str, reading: Reading) -> Result<Pattern, Invalid> {
    if text.len() > MAX_PATTERN_BYTES {
        return Err(Invalid::too_large(
            field,
            format!(
                "a pattern of {} bytes; at most {MAX_PATTERN_BYTES}",
                text.len()
            ),
        ));
    }
    let matcher = std::sync::OnceLock::new();
    let refused = |err| match err {
        PatternError::Syntax(reason) => {
            Invalid::malformed(field, format!("not a regular expression: {reason}"))
        }
        PatternError::TooComplex => Invalid::malformed(
            field,
            "the pattern compiles too large; make it simpler (fewer repetitions; `.*` \
             rather than `.{0,20}` between two words)",
        ),
        PatternError::Unsupported(reason) => {
            Invalid::malformed(field, format!("a pattern cannot use this: {reason}"))
        }
    };
    match reading {
        // Sent: its DFA now (the one compiled before, if it was).
        Reading::Sent => {
            let known = cached(text).filter(|known| matches!(**known, Matcher::Dfa(_)));
            let compiled = match known {
                Some(known) => known,
                None => {
                    if !MAY_COMPILE.get() {
                        COMPILE_WANTED.set(true);
                        return Err(Invalid::unacceptable(
                            field,
                            "too many new patterns were compiled for this partner lately; \
                             retry in a moment",
                        ));
                    }
                    COMPILED_HERE.set(COMPILED_HERE.get() + 1);
                    remember(
                        text,
                        Matcher::Dfa(Box::new(compile_dfa(text).map_err(refused)?)),
                    )
                }
            };
            let _ = matcher.set(compiled);
        }
        // Stored: nothing until the first match (reading a partner's websites, or
        // every website at a gateway's start, compiles no pattern); one no release
        // compiles then matches nothing.
        Reading::Stored => {}
    }
    Ok(Pattern {
        text: text.into(),
        matcher,
    })
}

/// `text` lower-cased as the values were at compile time, borrowed when that changes
/// nothing.
pub fn lower(text: &str) -> Cow<'_, str> {
    if text
        .chars()
        .any(|c| c.to_lowercase().ne(std::iter::once(c)))
    {
        Cow::Owned(text.to_lowercase())
    } else {
        Cow::Borrowed(text)
    }
}

impl Test {
    fn holds(&self, subject: &dyn Subject) -> bool {
        match self {
            Test::Ip { negate, networks } => {
                let ip = canonical(subject.client_ip());
                networks.iter().any(|net| net.contains(&ip)) != *negate
            }
            Test::Country { negate, codes } => subject
                .country()
                .is_some_and(|code| codes.contains(&code) != *negate),
            Test::Asn { negate, numbers } => subject
                .asn()
                .is_some_and(|asn| numbers.contains(&asn) != *negate),
            // Of a header sent several times, one value must hold a condition; for
            // `is_not`, none may be the value.
            Test::Text { source, check } => match check {
                TextCheck::OneOf { negate, values } => {
                    let listed = |value: &str| values.iter().any(|v| **v == *value);
                    subject.any_lower_text(source, &mut |value| listed(value)) != *negate
                }
                TextCheck::Contains(needle) => {
                    subject.any_lower_text(source, &mut |value| value.contains(&**needle))
                }
                TextCheck::StartsWith(prefix) => {
                    subject.any_lower_text(source, &mut |value| value.starts_with(&**prefix))
                }
                // Case-insensitive for ASCII letters by the pattern's own flag.
                TextCheck::Matches(regex) => {
                    subject.any_text(source, &mut |value| regex.is_match(value.as_bytes()))
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_full_pattern_cache_keeps_what_websites_hold_and_what_is_used() {
        let mut cache = CompiledPatterns::new(4);
        let held = Arc::new(Matcher::Nothing);
        cache.insert("held", held.clone());
        cache.insert("used", Arc::new(Matcher::Nothing));
        for churn in 0..10 {
            cache.get("used");
            cache.insert(&format!("new{churn}"), Arc::new(Matcher::Nothing));
        }
        assert_eq!(cache.by_text.len(), 4);
        assert!(Arc::ptr_eq(&cache.get("held").unwrap(), &held));
        assert!(cache.get("used").is_some());
        assert!(cache.get("new7").is_none(), "the older new ones went");
        assert!(cache.get("new8").is_some() && cache.get("new9").is_some());

        // Every entry held: still no more than the capacity.
        let mut cache = CompiledPatterns::new(2);
        let all: Vec<_> = (0..3).map(|_| Arc::new(Matcher::Nothing)).collect();
        for (n, matcher) in all.iter().enumerate() {
            cache.insert(&format!("p{n}"), matcher.clone());
        }
        assert_eq!(cache.by_text.len(), 2);
        assert!(cache.get("p0").is_none() && cache.get("p2").is_some());
    }

    #[derive(Default)]
    struct Request {
        ip: Option<IpAddr>,
        country: Option<[u8; 2]>,
        asn: Option<u32>,
        user_agent: &'static str,
        path: &'static str,
        query: &'static str,
        method: &'static str,
        headers: Vec<(&'static str, &'static str)>,
        ja4: &'static str,
    }

    impl Subject for Request {
        fn client_ip(&self) -> IpAddr {
            self.ip.unwrap_or([192, 0, 2, 1].into())
        }
        fn country(&self) -> Option<[u8; 2]> {
            self.country
        }
        fn asn(&self) -> Option<u32> {
            self.asn
        }
        fn any_text(&self, source: &TextSource, visit: &mut dyn FnMut(&str) -> bool) -> bool {
            let headers = |name: &str| -> Vec<&str> {
                let values: Vec<&str> = self
                    .headers
                    .iter()
                    .filter(|(n, _)| n.eq_ignore_ascii_case(name))
                    .map(|(_, v)| *v)
                    .collect();
                if values.is_empty() { vec![""] } else { values }
            };
            let values = match source {
                TextSource::UserAgent => vec![self.user_agent],
                TextSource::Path => vec![self.path],
                TextSource::Query => vec![self.query],
                TextSource::Method => vec![self.method],
                TextSource::Referrer => headers("referer"),
                TextSource::Ja4 => vec![self.ja4],
                TextSource::Header(name) => headers(name),
            };
            values.into_iter().any(visit)
        }
    }

    fn rules(value: Value) -> CustomRules {
        CustomRules::parse(&value).unwrap_or_else(|err| panic!("{value}: {err}"))
    }

    fn decided(rules: &CustomRules, request: &Request) -> Option<(usize, RuleOutcome)> {
        rules
            .first_match(&[request], |_| Action::Deny)
            .map(|m| (m.number, m.outcome))
    }

    #[test]
    fn the_first_rule_whose_conditions_all_hold_decides() {
        let rules = rules(json!([
            {"description": "office", "conditions": [
                {"field": "ip", "operator": "in_network", "value": ["203.0.113.0/24", "2001:db8::/32"]},
            ], "action": "grant"},
            {"conditions": [
                {"field": "path", "operator": "starts_with", "value": "/Admin/"},
                {"field": "method", "operator": "is", "value": "post"},
            ], "action": "deny"},
            {"conditions": [
                {"field": "header", "name": "X-Api-Key", "operator": "is_not", "value": "s3cret"},
                {"field": "path", "operator": "starts_with", "value": "/api/"},
            ], "category": "security_issues"},
        ]));
        let office = Request {
            ip: Some("203.0.113.9".parse().unwrap()),
            path: "/admin/x",
            method: "POST",
            ..Request::default()
        };
        assert_eq!(
            decided(&rules, &office),
            Some((1, RuleOutcome::Action(Action::Grant)))
        );
        let mapped = Request {
            ip: Some("::ffff:203.0.113.9".parse().unwrap()),
            ..Request::default()
        };
        assert_eq!(decided(&rules, &mapped).map(|d| d.0), Some(1));
        let admin_post = Request {
            path: "/admin/x",
            method: "POST",
            ..Request::default()
        };
        assert_eq!(
            decided(&rules, &admin_post),
            Some((2, RuleOutcome::Action(Action::Deny)))
        );
        let admin_get = Request {
            path: "/admin/x",
            method: "GET",
            ..Request::default()
        };
        assert_eq!(
            decided(&rules, &admin_get),
            None,
            "every condition must hold"
        );
        let api_without_key = Request {
            path: "/api/orders",
            ..Request::default()
        };
        assert_eq!(
            decided(&rules, &api_without_key),
            Some((3, RuleOutcome::Category(Category::SecurityIssues)))
        );
        let api_with_key = Request {
            path: "/api/orders",
            headers: vec![("x-api-key", "S3CRET")],
            ..Request::default()
        };
        assert_eq!(decided(&rules, &api_with_key), None);
        assert_eq!(
            rules
                .first_match(&[&admin_post], |_| Action::Deny)
                .unwrap()
                .reason,
            "custom.2"
        );
        assert!(!rules.reads_geo());
    }

    #[test]
    fn readings_that_disagree_resolve_to_the_stricter_outcome() {
        let rules = rules(json!([
            {"conditions": [{"field": "path", "operator": "contains", "value": "public"}], "action": "grant"},
            {"conditions": [{"field": "path", "operator": "starts_with", "value": "/admin/"}], "action": "deny"},
            {"conditions": [{"field": "path", "operator": "is", "value": "/login"}], "category": "humans"},
        ]));
        // `/admin;public/panel`: as sent, and as a servlet container reads it.
        let as_sent = Request {
            path: "/admin;public/panel",
            ..Request::default()
        };
        let servlet = Request {
            path: "/admin/panel",
            ..Request::default()
        };
        let grants = |outcome: RuleOutcome| match outcome {
            RuleOutcome::Action(action) => action,
            RuleOutcome::Category(Category::Humans) => Action::Grant,
            RuleOutcome::Category(_) => Action::Deny,
        };
        let decided = |readings: &[&dyn Subject]| {
            rules
                .first_match(readings, grants)
                .map(|m| (m.number, m.outcome))
        };
        // One reading alone grants; read both ways, the deny of `/admin/` holds.
        assert_eq!(
            decided(&[&as_sent]),
            Some((1, RuleOutcome::Action(Action::Grant)))
        );
        assert_eq!(
            decided(&[&as_sent, &servlet]),
            Some((2, RuleOutcome::Action(Action::Deny)))
        );
        // A granting rule that holds under both readings still grants.
        let public = Request {
            path: "/public;v=2/logo",
            ..Request::default()
        };
        let public_servlet = Request {
            path: "/public/logo",
            ..Request::default()
        };
        assert_eq!(decided(&[&public, &public_servlet]).map(|d| d.0), Some(1));
        // A category the policy grants permits too: `/login;x` is not `/login` as sent.
        let login = Request {
            path: "/login;x",
            ..Request::default()
        };
        let login_servlet = Request {
            path: "/login",
            ..Request::default()
        };
        assert_eq!(decided(&[&login, &login_servlet]), None);
        assert_eq!(
            rules
                .first_match(&[&login, &login_servlet], |_| Action::Deny)
                .map(|m| m.number),
            Some(3),
            "a category the policy does not grant holds under one reading"
        );
    }

    #[test]
    fn a_weaker_rule_under_one_reading_does_not_override_a_stricter_one_under_another() {
        let rules = rules(json!([
            {"conditions": [{"field": "path", "operator": "starts_with", "value": "/app/"}], "action": "captcha"},
            {"conditions": [{"field": "path", "operator": "contains", "value": ";"}], "action": "deny"},
        ]));
        let as_sent = Request {
            path: "/app;x/secret",
            ..Request::default()
        };
        let servlet = Request {
            path: "/app/secret",
            ..Request::default()
        };
        let action = |outcome: RuleOutcome| match outcome {
            RuleOutcome::Action(action) => action,
            RuleOutcome::Category(_) => Action::Grant,
        };
        let decided = rules.first_match(&[&as_sent, &servlet], action).unwrap();
        assert_eq!(decided.number, 2, "deny under one reading beats captcha");
        let decided = rules.first_match(&[&servlet, &servlet], action).unwrap();
        assert_eq!(decided.number, 1);
    }

    #[test]
    fn every_operator_compares_as_documented() {
        let ua = |operator: &str, value: Value| {
            rules(
                json!([{"conditions": [{"field": "user_agent", "operator": operator, "value": value}], "action": "deny"}]),
            )
        };
        let curl = Request {
            user_agent: "curl/8.5.0",
            ..Request::default()
        };
        let holds = |r: &CustomRules| r.first_match(&[&curl], |_| Action::Deny).is_some();
        assert!(holds(&ua("is", json!("CURL/8.5.0"))));
        assert!(!holds(&ua("is", json!("curl"))));
        assert!(holds(&ua("is_not", json!("wget"))));
        assert!(!holds(&ua("is_not", json!("curl/8.5.0"))));
        assert!(holds(&ua("contains", json!("L/8"))));
        assert!(!holds(&ua("contains", json!("wget"))));
        assert!(holds(&ua("starts_with", json!("curl/"))));
        assert!(!holds(&ua("starts_with", json!("8.5"))));
        assert!(holds(&ua("matches", json!(r"^curl/\d+\.\d+"))));
        assert!(
            holds(&ua("matches", json!(r"^\w+/[\w.]+$"))),
            "Unicode classes fit"
        );
        assert!(!holds(&ua("matches", json!(r"^wget"))));
        // What rule authors write compiles and matches anywhere in the text, with ASCII
        // letters in either case.
        for (pattern, matched) in [
            (r"(sqlmap|nikto|nmap|masscan)", false),
            (r"\bcurl\b", true),
            (r"CURL/[0-9]{1,5}\.", true),
            (r"^[a-z]+/\d+(\.\d+){1,3}$", true),
            (r"\.(php|asp)x?$", false),
        ] {
            assert_eq!(holds(&ua("matches", json!(pattern))), matched, "{pattern}");
        }
        assert!(holds(&ua("is_any_of", json!(["wget", "curl/8.5.0"]))));
        assert!(!holds(&ua("is_any_of", json!(["wget", "curl"]))));

        let from = |country: Option<&[u8; 2]>, asn: Option<u32>| Request {
            country: country.copied(),
            asn,
            ..Request::default()
        };
        let geo = rules(json!([
            {"conditions": [{"field": "country", "operator": "is_any_of", "value": ["de", "AT"]}], "action": "captcha"},
            {"conditions": [{"field": "asn", "operator": "is", "value": "AS64500"}], "action": "deny"},
            {"conditions": [{"field": "country", "operator": "is_not", "value": "FR"}], "action": "grant"},
        ]));
        assert!(geo.reads_geo());
        assert_eq!(
            decided(&geo, &from(Some(b"AT"), None)).map(|d| d.0),
            Some(1)
        );
        assert_eq!(
            decided(&geo, &from(Some(b"FR"), Some(64500))).map(|d| d.0),
            Some(2)
        );
        assert_eq!(
            decided(&geo, &from(Some(b"US"), Some(1))).map(|d| d.0),
            Some(3)
        );
        assert_eq!(decided(&geo, &from(Some(b"FR"), Some(1))), None);
        // Unknown country and ASN hold no condition, `is_not` included.
        assert_eq!(decided(&geo, &from(None, None)), None);

        let ips = rules(json!([
            {"conditions": [{"field": "ip", "operator": "is_any_of", "value": ["192.0.2.7", "2001:db8::7"]}], "action": "deny"},
            {"conditions": [{"field": "ip", "operator": "not_in_network", "value": "10.0.0.0/8"}], "action": "captcha"},
        ]));
        let at = |ip: &str| {
            decided(
                &ips,
                &Request {
                    ip: Some(ip.parse().unwrap()),
                    ..Request::default()
                },
            )
            .map(|d| d.0)
        };
        assert_eq!(at("192.0.2.7"), Some(1));
        assert_eq!(at("2001:db8::7"), Some(1));
        assert_eq!(at("192.0.2.8"), Some(2));
        assert_eq!(at("10.1.2.3"), None);
    }

    #[test]
    fn a_header_sent_twice_holds_a_condition_by_either_value() {
        let r = rules(json!([
            {"conditions": [{"field": "header", "name": "x-debug", "operator": "is", "value": "on"}], "action": "deny"},
            {"conditions": [{"field": "header", "name": "x-key", "operator": "is_not", "value": "s3cret"}], "action": "captcha"},
        ]));
        let twice = Request {
            headers: vec![("x-debug", "off"), ("X-Debug", "ON"), ("x-key", "s3cret")],
            ..Request::default()
        };
        assert_eq!(decided(&r, &twice).map(|d| d.0), Some(1));
        // `is_not` holds when no value is the one named.
        let key_twice = Request {
            headers: vec![("x-key", "guess"), ("x-key", "s3cret")],
            ..Request::default()
        };
        assert_eq!(decided(&r, &key_twice), None);
        let wrong_key = Request {
            headers: vec![("x-key", "guess")],
            ..Request::default()
        };
        assert_eq!(decided(&r, &wrong_key).map(|d| d.0), Some(2));
    }

    #[test]
    fn mapped_networks_and_non_ascii_values_compare_as_their_clients_read() {
        let r = rules(json!([
            {"conditions": [{"field": "ip", "operator": "in_network", "value": "::ffff:10.0.0.0/104"}], "action": "deny"},
            {"conditions": [{"field": "user_agent", "operator": "contains", "value": "ÜBER"}], "action": "captcha"},
            {"conditions": [{"field": "user_agent", "operator": "matches", "value": "^Crawler"}], "action": "grant"},
        ]));
        let inside = Request {
            ip: Some("10.1.2.3".parse().unwrap()),
            ..Request::default()
        };
        assert_eq!(decided(&r, &inside).map(|d| d.0), Some(1));
        let german = Request {
            user_agent: "Der Über-Bot/1.0",
            ..Request::default()
        };
        assert_eq!(decided(&r, &german).map(|d| d.0), Some(2));
        let titlecase = Request {
            user_agent: "ǅ-crawler über",
            ..Request::default()
        };
        assert_eq!(decided(&r, &titlecase).map(|d| d.0), Some(2));
        let crawler = Request {
            user_agent: "CRAWLER/2",
            ..Request::default()
        };
        assert_eq!(decided(&r, &crawler).map(|d| d.0), Some(3));
    }

    #[test]
    fn a_stored_rule_this_release_refuses_is_kept_and_never_matches() {
        // Stored under looser limits: a pattern too large for any release (found so at
        // its first match: reading compiles nothing), and 51 rules.
        let mut stored: Vec<Value> = vec![
            json!({"conditions": [{"field": "path", "operator": "matches", "value": r"(\w{100}){100}"}], "action": "deny"}),
        ];
        stored.extend(std::iter::repeat_n(
            json!({"conditions": [{"field": "method", "operator": "is", "value": "DELETE"}], "action": "deny"}),
            MAX_RULES,
        ));
        let stored = Value::Array(stored);
        assert!(CustomRules::parse(&stored).is_err(), "refused when sent");
        let read: CustomRules = serde_json::from_value(stored.clone()).unwrap();
        assert_eq!(read.rules().len(), MAX_RULES + 1);
        let delete = Request {
            method: "DELETE",
            path: "/anything",
            ..Request::default()
        };
        assert_eq!(decided(&read, &delete).map(|d| d.0), Some(2));
        assert_eq!(serde_json::to_value(&read).unwrap(), stored, "nothing lost");
        // A pattern a former release took whose DFA is too large is found so at its
        // first match (reading compiles none), and matched as that release did: its
        // `deny` still acts.
        let lazy = json!([{"conditions": [{"field": "user_agent", "operator": "matches", "value": "a.{40}b"}], "action": "deny"}]);
        assert!(CustomRules::parse(&lazy).is_err(), "refused when sent");
        let read: CustomRules = serde_json::from_value(lazy).unwrap();
        assert!(read.disabled().is_empty());
        let matching = Request {
            user_agent: "a0123456789012345678901234567890123456789b",
            ..Request::default()
        };
        assert_eq!(decided(&read, &matching).map(|d| d.0), Some(1));
        let other = Request {
            user_agent: "a-short-b",
            ..Request::default()
        };
        assert_eq!(decided(&read, &other), None);
    }

    #[test]
    fn field_and_operator_names_are_their_json_names() {
        for field in Field::ALL {
            assert_eq!(serde_json::to_value(field).unwrap(), field.as_str());
        }
        for operator in Operator::ALL {
            assert_eq!(serde_json::to_value(operator).unwrap(), operator.as_str());
        }
    }

    #[test]
    fn an_absent_header_reads_empty() {
        let r = rules(json!([{"conditions": [
            {"field": "referrer", "operator": "is", "value": ""},
            {"field": "ja4", "operator": "is", "value": ""},
        ], "action": "captcha"}]));
        assert!(
            r.first_match(&[&Request::default()], |_| Action::Deny)
                .is_some()
        );
        let with_referrer = Request {
            headers: vec![("Referer", "https://example.com/")],
            ..Request::default()
        };
        assert!(r.first_match(&[&with_referrer], |_| Action::Deny).is_none());
    }

    #[test]
    fn rules_are_shown_and_stored_as_sent_and_compiled_when_read_back() {
        let sent = json!([{"description": "bad bots", "conditions": [
            {"field": "header", "name": "X-Bot", "operator": "matches", "value": "^evil"},
        ], "category": "content_scrapers"}]);
        let parsed = rules(sent.clone());
        let shown = serde_json::to_value(&parsed).unwrap();
        assert_eq!(shown, sent);
        let back: CustomRules = serde_json::from_value(shown).unwrap();
        assert_eq!(back, parsed);
        let bot = Request {
            headers: vec![("x-bot", "Evil crawler")],
            ..Request::default()
        };
        assert_eq!(
            decided(&back, &bot),
            Some((1, RuleOutcome::Category(Category::ContentScrapers)))
        );
        assert!(CustomRules::default().is_empty());
    }

    /// The field and the message of the problem `value` has.
    fn refusal(value: &Value) -> (String, String) {
        let err = CustomRules::parse(value).unwrap_err();
        (err.field, err.message)
    }

    #[test]
    fn bad_rules_name_the_field_and_the_problem() {
        let get = json!({"field": "method", "operator": "is", "value": "GET"});
        let many_rules = vec![json!({"conditions": [get], "action": "deny"}); MAX_RULES + 1];
        let many_patterns: Vec<Value> = (0..=MAX_PATTERNS)
            .map(|i| json!({"conditions": [{"field": "path", "operator": "matches", "value": format!("^/{i}")}], "action": "deny"}))
            .collect();
        // Each under its own bound, too large together (as one text many times is not).
        let large = |last: char| json!({"conditions": [{"field": "user_agent", "operator": "matches", "value": format!("a[ab]{{9}}[^ab]{last}")}], "action": "deny"});
        let large_patterns: Vec<Value> = "cdefg".chars().map(large).collect();
        let one_text_five_times = Value::Array(vec![large('c'); 5]);
        let once = CustomRules::parse(&one_text_five_times);
        assert!(once.is_ok(), "{:?}", once.err());
        // (settings.custom_rules, field under it, part of the message)
        let rules = [
            (json!({}), "", "array"),
            (Value::Array(many_rules), "", "at most 50"),
            (
                Value::Array(vec![
                    json!({"conditions": [{"field": "path", "operator": "is_any_of",
                                           "value": vec!["/".repeat(300); 100]}],
                           "action": "deny"});
                    2
                ]),
                "",
                "at most 32768",
            ),
            (
                Value::Array(many_patterns),
                "[20].conditions[0].operator",
                "at most 20",
            ),
            (
                Value::Array(large_patterns),
                "[3].conditions[0].value",
                "KiB together, past 256 KiB",
            ),
            (json!([{"conditions": []}]), "[0]", "neither"),
            (
                json!([{"conditions": [], "action": "deny", "category": "humans"}]),
                "[0]",
                "both",
            ),
            (
                json!([{"conditions": [], "action": "deny"}]),
                "[0].conditions",
                "at least one",
            ),
            (
                json!([{"conditions": vec![get.clone(); 11], "action": "deny"}]),
                "[0].conditions",
                "at most 10",
            ),
            (
                json!([{"conditions": [get], "action": "allow"}]),
                "[0]",
                "unknown variant `allow`",
            ),
            (
                json!([{"conditions": [get], "action": "deny", "priority": 1}]),
                "[0]",
                "unknown field `priority`",
            ),
            (
                json!([{"description": "x".repeat(201), "conditions": [get], "action": "deny"}]),
                "[0].description",
                "at most 200",
            ),
        ];
        for (value, field, message) in rules {
            let (got, text) = refusal(&value);
            assert_eq!(
                got,
                format!("settings.custom_rules{field}"),
                "{value}: {text}"
            );
            assert!(text.contains(message), "{value}: {text} lacks {message:?}");
        }
        // (field, name, operator, value; field under the condition, part of the message)
        let conditions = [
            (
                "cookie",
                None,
                "is",
                json!("x"),
                "",
                "unknown variant `cookie`",
            ),
            (
                "ip",
                None,
                "contains",
                json!("10."),
                ".operator",
                "does not apply to `ip`",
            ),
            (
                "path",
                None,
                "in_network",
                json!("10.0.0.0/8"),
                ".operator",
                "does not apply to `path`",
            ),
            (
                "ip",
                None,
                "in_network",
                json!("10.0.0.0/33"),
                ".value",
                "not a network",
            ),
            (
                "ip",
                None,
                "is",
                json!("localhost"),
                ".value",
                "not an IP address",
            ),
            (
                "country",
                None,
                "is",
                json!("Germany"),
                ".value",
                "not a country code",
            ),
            (
                "asn",
                None,
                "is",
                json!("AS-1"),
                ".value",
                "autonomous system",
            ),
            ("header", None, "is", json!("x"), ".name", "required"),
            (
                "header",
                Some("bad name"),
                "is",
                json!("x"),
                ".name",
                "not a header name",
            ),
            ("path", Some("x"), "is", json!("/"), ".name", "header` only"),
            ("path", None, "is", json!(["/a"]), ".value", "one value"),
            ("path", None, "is_any_of", json!("/a"), ".value", "list"),
            ("path", None, "is_any_of", json!([]), ".value", "empty"),
            (
                "path",
                None,
                "is_any_of",
                json!(vec!["/a"; 101]),
                ".value",
                "at most 100",
            ),
            ("path", None, "is", json!(7), ".value", "a string"),
            (
                "path",
                None,
                "is",
                json!("/".repeat(1025)),
                ".value",
                "at most 1024",
            ),
            (
                "path",
                None,
                "matches",
                json!("(unclosed"),
                ".value",
                "unclosed group",
            ),
            (
                "path",
                None,
                "matches",
                json!("a".repeat(257)),
                ".value",
                "at most 256",
            ),
            (
                "path",
                None,
                "matches",
                json!(r"(\w{100}){100}"),
                ".value",
                "too large",
            ),
            // Small to write, but matched by a simulation whose every byte costs the
            // pattern's size: refused, so a visitor's long header cannot cost seconds.
            (
                "user_agent",
                None,
                "matches",
                json!("a[ab]{1500}[^ab]"),
                ".value",
                "too large",
            ),
            (
                "user_agent",
                None,
                "matches",
                json!("a.{40}b"),
                ".value",
                "too large",
            ),
            (
                "user_agent",
                None,
                "matches",
                json!(r"(?u:\b)bot"),
                ".value",
                "cannot use",
            ),
        ];
        for (reads, name, operator, value, field, message) in conditions {
            let mut condition = json!({"field": reads, "operator": operator, "value": value});
            if let Some(name) = name {
                condition["name"] = json!(name);
            }
            let value = json!([{"conditions": [condition], "action": "deny"}]);
            let (got, text) = refusal(&value);
            // A condition serde refuses is reported for its rule.
            let at = if field.is_empty() {
                "settings.custom_rules[0]".to_owned()
            } else {
                format!("settings.custom_rules[0].conditions[0]{field}")
            };
            assert_eq!(got, at, "{value}: {text}");
            assert!(text.contains(message), "{value}: {text} lacks {message:?}");
        }
    }
}
