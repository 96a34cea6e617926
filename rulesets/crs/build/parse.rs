//! Reads ModSecurity rule files (the subset the Core Rule Set's request rules use) into
//! [`Rule`]s: variables, operator, transformations, severity, paranoia level and chains.

/// One `SecRule` with its chained conditions.
#[derive(Debug, Clone)]
pub struct Rule {
    pub id: u32,
    pub paranoia: u8,
    pub severity: Option<String>,
    /// The rule's own condition first, then each chained one.
    pub links: Vec<Link>,
}

/// One condition: `SecRule VARIABLES OPERATOR ACTIONS`.
#[derive(Debug, Clone)]
pub struct Link {
    pub variables: Vec<Variable>,
    pub negated: bool,
    pub operator: String,
    pub argument: String,
    pub transforms: Vec<String>,
    pub multi_match: bool,
}

/// One entry of a rule's variable list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variable {
    /// `!VAR:selector`: removes entries from the others.
    pub exclude: bool,
    /// `&VAR`: the number of entries.
    pub count: bool,
    pub collection: String,
    pub selector: Option<String>,
}

/// The rules of one file's text. Paranoia levels come from each rule's
/// `paranoia-level/N` tag, else from the file's `EXECUTING_PARANOIA_LEVEL` sections.
pub fn rules(file: &str, text: &str) -> Result<Vec<Rule>, String> {
    let joined = text.replace("\\\r\n", " ").replace("\\\n", " ");
    let mut out: Vec<Rule> = Vec::new();
    let mut section = 1u8;
    let mut chained = false;
    for (number, line) in joined.lines().enumerate() {
        let line = line.trim();
        if !line.starts_with("SecRule ") {
            continue;
        }
        let at = |e: String| format!("{file}: statement {}: {e}", number + 1);
        let words = words(&line["SecRule ".len()..]).map_err(at)?;
        let [variables, operator, rest @ ..] = words.as_slice() else {
            return Err(at("a SecRule needs variables and an operator".into()));
        };
        let actions = actions(rest.first().map(String::as_str).unwrap_or(""));
        if variables == "TX:EXECUTING_PARANOIA_LEVEL" {
            if let Some(level) = operator.strip_prefix("@lt ") {
                section = level
                    .trim()
                    .parse()
                    .map_err(|_| at(format!("level {level}")))?;
            }
            continue;
        }
        let (negated, op, argument) = operator_parts(operator);
        let link = Link {
            variables: parse_variables(variables),
            negated,
            operator: op,
            argument,
            transforms: actions
                .iter()
                .filter(|(k, _)| k == "t")
                .map(|(_, v)| v.clone())
                .collect(),
            multi_match: actions.iter().any(|(k, _)| k == "multiMatch"),
        };
        let chains = actions.iter().any(|(k, _)| k == "chain");
        if chained {
            let rule = out
                .last_mut()
                .ok_or_else(|| at("a chain without a rule".into()))?;
            rule.links.push(link);
        } else {
            let id = actions
                .iter()
                .find(|(k, _)| k == "id")
                .and_then(|(_, v)| v.parse().ok())
                .ok_or_else(|| at("a rule without an id".into()))?;
            let tagged = actions.iter().find_map(|(k, v)| {
                (k == "tag").then(|| v.strip_prefix("paranoia-level/")?.parse().ok())?
            });
            out.push(Rule {
                id,
                paranoia: tagged.unwrap_or(section),
                severity: actions
                    .iter()
                    .find(|(k, _)| k == "severity")
                    .map(|(_, v)| v.clone()),
                links: vec![link],
            });
        }
        chained = chains;
    }
    Ok(out)
}

/// Splits a statement into its double-quoted or bare words; `\"` inside quotes is `"`.
fn words(s: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let Some(&first) = chars.peek() else {
            return Ok(out);
        };
        let mut word = String::new();
        if first == '"' {
            chars.next();
            loop {
                match chars.next() {
                    None => return Err("an unclosed quote".into()),
                    Some('"') => break,
                    Some('\\') if chars.peek() == Some(&'"') => {
                        chars.next();
                        word.push('"');
                    }
                    Some(c) => word.push(c),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                word.push(c);
                chars.next();
            }
        }
        out.push(word);
    }
}

/// The actions as (name, value) pairs, values without their single quotes.
fn actions(s: &str) -> Vec<(String, String)> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    for c in s.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                current.push(c);
            }
            ',' if !quoted => parts.push(std::mem::take(&mut current)),
            c => current.push(c),
        }
    }
    parts.push(current);
    parts
        .into_iter()
        .map(|part| {
            let part = part.trim();
            let (name, value) = part.split_once(':').unwrap_or((part, ""));
            let value = value.trim();
            let value = value
                .strip_prefix('\'')
                .and_then(|v| v.strip_suffix('\''))
                .unwrap_or(value);
            (name.trim().to_string(), value.to_string())
        })
        .filter(|(name, _)| !name.is_empty())
        .collect()
}

/// `!@name argument` → (negated, name, argument); a bare pattern is `@rx`.
fn operator_parts(s: &str) -> (bool, String, String) {
    let (negated, s) = match s.strip_prefix('!') {
        Some(rest) if rest.starts_with('@') => (true, rest),
        _ => (false, s),
    };
    match s.strip_prefix('@') {
        Some(rest) => {
            let (name, argument) = rest.split_once(' ').unwrap_or((rest, ""));
            (negated, name.to_string(), argument.to_string())
        }
        None => (negated, "rx".to_string(), s.to_string()),
    }
}

/// `A|!A:/x/|&B:c` → its variables.
fn parse_variables(s: &str) -> Vec<Variable> {
    s.split('|')
        .map(|v| {
            let (exclude, v) = v.strip_prefix('!').map_or((false, v), |r| (true, r));
            let (count, v) = v.strip_prefix('&').map_or((false, v), |r| (true, r));
            let (collection, selector) = match v.split_once(':') {
                Some((c, sel)) => (c, Some(sel.to_string())),
                None => (v, None),
            };
            Variable {
                exclude,
                count,
                collection: collection.to_string(),
                selector,
            }
        })
        .collect()
}

/// The phrases of a `.data` file: one per line, `#` comments and blank lines skipped.
pub fn phrases(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}
