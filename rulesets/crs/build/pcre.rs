//! PCRE patterns as the rule files write them, turned into `regex-automata` syntax, and
//! the bytes a pattern's every match must contain (a prefilter for the search).

use regex_automata::nfa::thompson::{NFA, State};
use regex_automata::util::syntax;

/// The pattern in `regex-syntax`'s dialect: escaped punctuation becomes `\xHH` (PCRE's
/// `\<` is a literal, `regex-syntax`'s a word boundary), a `{` or `}` that is not part
/// of a counted repetition is a literal, and `[`, `&`, `~` inside a class are literals
/// (`regex-syntax` reads nested classes and set operations there).
pub fn translate(pattern: &str) -> Result<String, String> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut i = 0;
    let mut in_class = false;
    // The index of the first char of the current class body (where `]` is literal).
    let mut class_start = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\\' => {
                let Some(&next) = chars.get(i + 1) else {
                    return Err("a trailing backslash".into());
                };
                if next.is_ascii_alphanumeric() {
                    match next {
                        'd'
                        | 'D'
                        | 'w'
                        | 'W'
                        | 's'
                        | 'S'
                        | 'b'
                        | 'B'
                        | 'A'
                        | 'z'
                        | 'x'
                        | 'n'
                        | 'r'
                        | 't'
                        | 'f'
                        | 'v'
                        | '0'..='9' => {
                            if next == 'b' && in_class {
                                out.push_str("\\x08");
                            } else if next.is_ascii_digit() {
                                if next == '0' {
                                    out.push_str("\\x00");
                                } else {
                                    return Err(format!("a back-reference \\{next}"));
                                }
                            } else {
                                out.push('\\');
                                out.push(next);
                            }
                        }
                        'Z' => out.push_str("\\z"),
                        'e' => out.push_str("\\x1b"),
                        'h' => out.push_str(if in_class { " \\t" } else { "[ \\t]" }),
                        other => return Err(format!("the escape \\{other}")),
                    }
                } else if next.is_ascii() {
                    out.push_str(&format!("\\x{:02x}", next as u32));
                } else {
                    out.push(next);
                }
                i += 2;
                continue;
            }
            '[' if !in_class => {
                in_class = true;
                out.push('[');
                i += 1;
                if chars.get(i) == Some(&'^') {
                    out.push('^');
                    i += 1;
                }
                class_start = i;
                continue;
            }
            '[' if in_class => {
                if chars.get(i + 1) == Some(&':') {
                    // A POSIX class, `[:alpha:]`: copied whole.
                    let end = (i + 2..chars.len().saturating_sub(1))
                        .find(|&j| chars[j] == ':' && chars[j + 1] == ']')
                        .ok_or("an unclosed POSIX class")?;
                    out.extend(&chars[i..end + 2]);
                    i = end + 2;
                    continue;
                }
                out.push_str("\\x5b");
            }
            ']' if in_class && i == class_start => out.push_str("\\x5d"),
            ']' if in_class => {
                in_class = false;
                out.push(']');
            }
            '&' | '~' if in_class => out.push_str(&format!("\\x{:02x}", c as u32)),
            '{' if !in_class => {
                let rest: String = chars[i..].iter().take(24).collect();
                match counted_repetition(&rest) {
                    Some(len) => {
                        out.push_str(&rest[..len]);
                        i += len;
                        continue;
                    }
                    None => out.push_str("\\x7b"),
                }
            }
            '}' if !in_class => out.push_str("\\x7d"),
            '(' if chars.get(i + 1) == Some(&'?') => {
                let next = chars.get(i + 2).copied();
                if matches!(next, Some('<') | Some('=') | Some('!') | Some('>')) {
                    let kind = if next == Some('<')
                        && chars.get(i + 3) != Some(&'=')
                        && chars.get(i + 3) != Some(&'!')
                    {
                        "a named group"
                    } else {
                        "a look-around or atomic group"
                    };
                    return Err(kind.into());
                }
                out.push(c);
            }
            c => out.push(c),
        }
        i += 1;
    }
    if in_class {
        return Err("an unclosed class".into());
    }
    Ok(out)
}

/// The length of a counted repetition `{n}`, `{n,}` or `{n,m}` at the start of `s`.
fn counted_repetition(s: &str) -> Option<usize> {
    let body = s.strip_prefix('{')?;
    let end = body.find('}')?;
    let inner = &body[..end];
    let (low, high) = inner.split_once(',').unwrap_or((inner, "0"));
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    (digits(low) && (high.is_empty() || digits(high))).then_some(end + 2)
}

/// The syntax every pattern is read with: bytes, not Unicode (as PCRE without its UTF
/// flag reads them, and as ModSecurity compiles CRS's patterns).
pub fn syntax_config() -> syntax::Config {
    syntax::Config::new().unicode(false).utf8(false)
}

/// A set of bytes as four words.
pub type ByteSet = [u64; 4];

fn contains(set: &ByteSet, b: u8) -> bool {
    set[usize::from(b >> 6)] & (1 << (b & 63)) != 0
}

fn insert(set: &mut ByteSet, b: u8) {
    set[usize::from(b >> 6)] |= 1 << (b & 63);
}

/// Bytes that benign values are full of: a prefilter over them would never skip.
fn common(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b' ' || b == b'.' || b == b'-' || b == b'_'
}

/// The bytes of which every match of `nfa` holds at least one, chosen among the rarer
/// bytes of benign values, or `None` when a match may consist of letters, digits,
/// spaces, dots, dashes and underscores alone. Look-around assertions are taken as
/// always holding, so the set is never too small: a value without any of its bytes
/// cannot match.
pub fn required_bytes(nfa: &NFA) -> Option<ByteSet> {
    let mut required: ByteSet = [0; 4];
    for _ in 0..32 {
        let Some(path) = match_path(nfa, &required) else {
            return Some(required);
        };
        // Block the path's transition whose bytes (not yet blocked) are fewest and
        // rarest; a transition on a common byte cannot be blocked.
        let mut best: Option<(usize, Vec<u8>)> = None;
        for (start, end) in path {
            let bytes: Vec<u8> = (start..=end).filter(|&b| !contains(&required, b)).collect();
            if bytes.iter().any(|&b| common(b)) {
                continue;
            }
            let cost = bytes.len();
            if best.as_ref().is_none_or(|(c, _)| cost < *c) {
                best = Some((cost, bytes));
            }
        }
        let (_, bytes) = best?;
        for b in bytes {
            insert(&mut required, b);
        }
    }
    None
}

/// How the search reached a state: the state before it, and the byte range of the
/// transition (`None` for an ε-transition).
type Step = (usize, Option<(u8, u8)>);

/// A path of byte transitions from the anchored start to a match that avoids the
/// `blocked` bytes (each transition as its inclusive byte range), if there is one.
fn match_path(nfa: &NFA, blocked: &ByteSet) -> Option<Vec<(u8, u8)>> {
    use std::collections::VecDeque;
    let count = nfa.states().len();
    // For each state, how it was reached: (previous state, the range, or none for ε).
    let mut parent: Vec<Option<Step>> = vec![None; count];
    let start = nfa.start_anchored().as_usize();
    let mut seen = vec![false; count];
    seen[start] = true;
    let mut queue = VecDeque::from([start]);
    let open = |lo: u8, hi: u8| (lo..=hi).any(|b| !contains(blocked, b));
    while let Some(id) = queue.pop_front() {
        let mut next: Vec<Step> = Vec::new();
        match nfa.state(regex_automata::util::primitives::StateID::new(id).ok()?) {
            State::ByteRange { trans } => {
                if open(trans.start, trans.end) {
                    next.push((trans.next.as_usize(), Some((trans.start, trans.end))));
                }
            }
            State::Sparse(sparse) => {
                for t in sparse.transitions.iter() {
                    if open(t.start, t.end) {
                        next.push((t.next.as_usize(), Some((t.start, t.end))));
                    }
                }
            }
            State::Dense(dense) => {
                for (b, to) in dense.transitions.iter().enumerate() {
                    let b = b as u8;
                    if to.as_usize() != 0 && !contains(blocked, b) {
                        next.push((to.as_usize(), Some((b, b))));
                    }
                }
            }
            State::Look { next: to, .. } | State::Capture { next: to, .. } => {
                next.push((to.as_usize(), None));
            }
            State::Union { alternates } => {
                next.extend(alternates.iter().map(|a| (a.as_usize(), None)));
            }
            State::BinaryUnion { alt1, alt2 } => {
                next.push((alt1.as_usize(), None));
                next.push((alt2.as_usize(), None));
            }
            State::Fail => {}
            State::Match { .. } => {
                let mut path = Vec::new();
                let mut at = id;
                while let Some((previous, range)) = parent[at] {
                    if let Some(range) = range {
                        path.push(range);
                    }
                    at = previous;
                }
                path.reverse();
                return Some(path);
            }
        }
        for (to, range) in next {
            if !seen[to] {
                seen[to] = true;
                parent[to] = Some((id, range));
                queue.push_back(to);
            }
        }
    }
    None
}

/// The Thompson NFA of a translated pattern, for [`required_bytes`].
pub fn nfa(pattern: &str) -> Result<NFA, String> {
    NFA::compiler()
        .syntax(syntax_config())
        .configure(NFA::config().utf8(false).shrink(false))
        .build(pattern)
        .map_err(|e| e.to_string())
}
