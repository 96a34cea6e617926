//! ModSecurity's transformations (`t:…`) as the Core Rule Set names them, each a
//! function of bytes to bytes that borrows its input when it changes nothing.

use crate::matchers::ByteSet;
use std::borrow::Cow;

/// One transformation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Transform {
    Lowercase,
    UrlDecode,
    UrlDecodeUni,
    HtmlEntityDecode,
    JsDecode,
    CssDecode,
    RemoveNulls,
    Utf8ToUnicode,
    CmdLine,
    NormalizePath,
    NormalizePathWin,
    CompressWhitespace,
    ReplaceComments,
    Base64Decode,
}

/// `value` through `transforms` in order.
pub(crate) fn apply<'a>(value: &'a [u8], transforms: &[Transform]) -> Cow<'a, [u8]> {
    let mut current = Cow::Borrowed(value);
    for &t in transforms {
        if let Cow::Owned(changed) = one(&current, t) {
            current = Cow::Owned(changed);
        }
    }
    current
}

/// `value`, whose bytes are `bytes`, through `transforms`: the transformations its
/// bytes show cannot change it are skipped without reading it.
pub(crate) fn apply_known<'a>(
    value: &'a [u8],
    bytes: &ByteSet,
    transforms: &[Transform],
) -> Cow<'a, [u8]> {
    let first = transforms.iter().position(|&t| may_change(t, bytes));
    match first {
        None => Cow::Borrowed(value),
        Some(first) => apply(value, &transforms[first..]),
    }
}

/// Whether `t` may change a value holding `bytes` (`false`: it certainly does not).
fn may_change(t: Transform, bytes: &ByteSet) -> bool {
    let space = || bytes.has_any(b" \t\n\r\x0b\x0c\xa0");
    match t {
        Transform::Lowercase => bytes.has_upper(),
        Transform::UrlDecode | Transform::UrlDecodeUni => bytes.has_any(b"%+"),
        Transform::HtmlEntityDecode => bytes.has(b'&'),
        Transform::JsDecode | Transform::CssDecode => bytes.has(b'\\'),
        Transform::RemoveNulls => bytes.has(0),
        Transform::Utf8ToUnicode => bytes.has_non_ascii(),
        Transform::CmdLine => bytes.has_upper() || bytes.has_any(b"\\\"'^,;") || space(),
        Transform::NormalizePath => bytes.has_any(b"/."),
        Transform::NormalizePathWin => bytes.has_any(b"/.\\"),
        Transform::CompressWhitespace => space(),
        Transform::ReplaceComments => bytes.has(b'/') && bytes.has(b'*'),
        Transform::Base64Decode => true,
    }
}

/// One transformation of `v`; `Cow::Borrowed(v)` when nothing changes.
pub(crate) fn one(v: &[u8], t: Transform) -> Cow<'_, [u8]> {
    let unchanged = match t {
        Transform::Lowercase => !v.iter().any(u8::is_ascii_uppercase),
        Transform::UrlDecode => !v.iter().any(|&b| b == b'%' || b == b'+'),
        Transform::UrlDecodeUni => !v.contains(&b'%') && !v.contains(&b'+'),
        Transform::HtmlEntityDecode => !v.contains(&b'&'),
        Transform::JsDecode | Transform::CssDecode => !v.contains(&b'\\'),
        Transform::RemoveNulls => !v.contains(&0),
        Transform::Utf8ToUnicode => v.is_ascii(),
        Transform::CmdLine => {
            !v.iter().any(|&b| {
                matches!(b, b'\\' | b'"' | b'\'' | b'^' | b',' | b';')
                    || b.is_ascii_uppercase()
                    || is_space(b) && b != b' '
            }) && !v
                .windows(2)
                .any(|w| w[0] == b' ' && matches!(w[1], b' ' | b'/' | b'('))
        }
        Transform::NormalizePath => !needs_path_work(v),
        Transform::NormalizePathWin => !v.contains(&b'\\') && !needs_path_work(v),
        Transform::CompressWhitespace => {
            !v.iter().any(|&b| is_space(b) && b != b' ') && !v.windows(2).any(|w| w == b"  ")
        }
        Transform::ReplaceComments => !v.windows(2).any(|w| w == b"/*"),
        Transform::Base64Decode => false,
    };
    if unchanged {
        return Cow::Borrowed(v);
    }
    Cow::Owned(match t {
        Transform::Lowercase => v.to_ascii_lowercase(),
        Transform::UrlDecode => url_decode(v, false, true),
        Transform::UrlDecodeUni => url_decode(v, true, true),
        Transform::HtmlEntityDecode => html_entity_decode(v),
        Transform::JsDecode => js_decode(v),
        Transform::CssDecode => css_decode(v),
        Transform::RemoveNulls => v.iter().copied().filter(|&b| b != 0).collect(),
        Transform::Utf8ToUnicode => utf8_to_unicode(v),
        Transform::CmdLine => cmd_line(v),
        Transform::NormalizePath => normalize_path(v),
        Transform::NormalizePathWin => {
            let slashed: Vec<u8> = v
                .iter()
                .map(|&b| if b == b'\\' { b'/' } else { b })
                .collect();
            normalize_path(&slashed)
        }
        Transform::CompressWhitespace => compress_whitespace(v),
        Transform::ReplaceComments => replace_comments(v),
        Transform::Base64Decode => base64_decode(v),
    })
}

/// ModSecurity's whitespace: space, tab, new line, carriage return, form feed,
/// vertical tab and the non-breaking space.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c | 0xa0)
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

fn hex2(v: &[u8]) -> Option<u8> {
    Some(hex(*v.first()?)? << 4 | hex(*v.get(1)?)?)
}

/// The byte ModSecurity makes of a 16-bit code unit written `hi lo` (four hex digits):
/// its low byte, moved down to ASCII for the full-width forms (`%uFF1C` is `<`).
fn unicode_byte(digits: &[u8]) -> Option<u8> {
    let low = hex2(&digits[2..4])?;
    hex2(&digits[..2])?;
    let full_width = digits[0].eq_ignore_ascii_case(&b'f') && digits[1].eq_ignore_ascii_case(&b'f');
    Some(if full_width && low > 0 && low < 0x5f {
        low + 0x20
    } else {
        low
    })
}

/// `%XX` (and `%uXXXX` when `uni`) decoded, `+` as space when `plus`; invalid escapes
/// kept.
pub(crate) fn url_decode(v: &[u8], uni: bool, plus: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len());
    let mut i = 0;
    while i < v.len() {
        match v[i] {
            b'%' => {
                if uni
                    && v.get(i + 1).is_some_and(|b| b.eq_ignore_ascii_case(&b'u'))
                    && let Some(b) = v.get(i + 2..i + 6).and_then(unicode_byte)
                {
                    out.push(b);
                    i += 6;
                    continue;
                }
                if let Some(b) = v.get(i + 1..i + 3).and_then(hex2) {
                    out.push(b);
                    i += 3;
                    continue;
                }
                out.push(b'%');
            }
            b'+' if plus => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    out
}

/// `&#DDD;`, `&#xHH;` and `&quot;`, `&amp;`, `&lt;`, `&gt;`, `&nbsp;` decoded (the
/// semicolon optional), each to one byte.
fn html_entity_decode(v: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len());
    let mut i = 0;
    while i < v.len() {
        if v[i] == b'&'
            && let Some((byte, len)) = entity(&v[i + 1..])
        {
            out.push(byte);
            i += 1 + len;
            continue;
        }
        out.push(v[i]);
        i += 1;
    }
    out
}

/// The byte of the entity at the start of `v` (after `&`) and its length.
fn entity(v: &[u8]) -> Option<(u8, usize)> {
    let semicolon = |end: usize| usize::from(v.get(end) == Some(&b';'));
    if v.first() == Some(&b'#') {
        let (radix, start) = if v.get(1).is_some_and(|b| b.eq_ignore_ascii_case(&b'x')) {
            (16, 2)
        } else {
            (10, 1)
        };
        let digits = v[start..]
            .iter()
            .take_while(|b| (**b as char).is_digit(radix))
            .count();
        if digits == 0 {
            return None;
        }
        let mut value: u32 = 0;
        for &b in &v[start..start + digits] {
            value = value
                .wrapping_mul(radix)
                .wrapping_add((b as char).to_digit(radix)?);
        }
        let end = start + digits;
        return Some((value as u8, end + semicolon(end)));
    }
    let letters = v.iter().take_while(|b| b.is_ascii_alphabetic()).count();
    let name = v[..letters].to_ascii_lowercase();
    let byte = match name.as_slice() {
        b"quot" => b'"',
        b"amp" => b'&',
        b"lt" => b'<',
        b"gt" => b'>',
        b"nbsp" => 0xa0,
        _ => return None,
    };
    Some((byte, letters + semicolon(letters)))
}

/// JavaScript escapes: `\uHHHH`, `\xHH`, octal `\OOO`, `\n` and the other letters, and
/// `\c` for any other `c`.
fn js_decode(v: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len());
    let mut i = 0;
    while i < v.len() {
        if v[i] != b'\\' || i + 1 >= v.len() {
            out.push(v[i]);
            i += 1;
            continue;
        }
        let next = v[i + 1];
        if next.eq_ignore_ascii_case(&b'u')
            && let Some(b) = v.get(i + 2..i + 6).and_then(unicode_byte)
        {
            out.push(b);
            i += 6;
            continue;
        }
        if next.eq_ignore_ascii_case(&b'x')
            && let Some(b) = v.get(i + 2..i + 4).and_then(hex2)
        {
            out.push(b);
            i += 4;
            continue;
        }
        if (b'0'..=b'7').contains(&next) {
            let max = if next <= b'3' { 3 } else { 2 };
            let digits = v[i + 1..]
                .iter()
                .take(max)
                .take_while(|b| (b'0'..=b'7').contains(b))
                .count();
            let value = v[i + 1..i + 1 + digits]
                .iter()
                .fold(0u32, |acc, b| acc * 8 + u32::from(b - b'0'));
            out.push(value as u8);
            i += 1 + digits;
            continue;
        }
        out.push(match next {
            b'a' => 0x07,
            b'b' => 0x08,
            b'f' => 0x0c,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'v' => 0x0b,
            other => other,
        });
        i += 2;
    }
    out
}

/// CSS escapes: `\` and one to six hex digits (their last byte, full-width forms moved
/// to ASCII; one whitespace after them is part of the escape), `\` and a new line
/// removed, `\c` for any other `c`.
fn css_decode(v: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len());
    let mut i = 0;
    while i < v.len() {
        if v[i] != b'\\' || i + 1 >= v.len() {
            out.push(v[i]);
            i += 1;
            continue;
        }
        let digits = v[i + 1..]
            .iter()
            .take(6)
            .take_while(|b| b.is_ascii_hexdigit())
            .count();
        if digits > 0 {
            let text = &v[i + 1..i + 1 + digits];
            let value = text.iter().fold(0u32, |acc, b| {
                acc * 16 + (*b as char).to_digit(16).unwrap_or(0)
            });
            let byte = if (0xff01..=0xff5e).contains(&value) {
                (value - 0xfee0) as u8
            } else {
                value as u8
            };
            out.push(byte);
            i += 1 + digits;
            if v.get(i).is_some_and(|&b| is_space(b)) {
                i += 1;
            }
            continue;
        }
        if v[i + 1] == b'\n' {
            i += 2;
            continue;
        }
        out.push(v[i + 1]);
        i += 2;
    }
    out
}

/// Each multi-byte UTF-8 character written `%uHHHH` (its code point, low 16 bits).
fn utf8_to_unicode(v: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len());
    for chunk in v.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c.is_ascii() {
                out.push(c as u8);
            } else {
                out.extend_from_slice(format!("%u{:04x}", u32::from(c) & 0xffff).as_bytes());
            }
        }
        out.extend_from_slice(chunk.invalid());
    }
    out
}

/// The command-line form: `\ " ' ^` deleted, `,` and `;` as spaces, whitespace runs as
/// one space, no space before `/` or `(`, lower case.
fn cmd_line(v: &[u8]) -> Vec<u8> {
    let mut out: Vec<u8> = Vec::with_capacity(v.len());
    let mut space = false;
    for &b in v {
        match b {
            b'\\' | b'"' | b'\'' | b'^' => {}
            b if b == b',' || b == b';' || is_space(b) => {
                if !space {
                    out.push(b' ');
                    space = true;
                }
            }
            b'/' | b'(' => {
                if space {
                    out.pop();
                }
                out.push(b);
                space = false;
            }
            b => {
                out.push(b.to_ascii_lowercase());
                space = false;
            }
        }
    }
    out
}

fn needs_path_work(v: &[u8]) -> bool {
    v.windows(2).any(|w| w == b"//" || w == b"/." || w == b"./") || v == b"." || v == b".."
}

/// Repeated `/` collapsed and `.` and `..` segments resolved (a `..` at the start of a
/// relative path stays).
fn normalize_path(v: &[u8]) -> Vec<u8> {
    let rooted = v.first() == Some(&b'/');
    let trailing = v.last() == Some(&b'/')
        || v.ends_with(b"/.")
        || v.ends_with(b"/..")
        || v == b"."
        || v == b"..";
    let mut segments: Vec<&[u8]> = Vec::new();
    for segment in v.split(|&b| b == b'/') {
        match segment {
            b"" | b"." => {}
            b".." => {
                if segments.last().is_some_and(|s| *s != b"..") {
                    segments.pop();
                } else if !rooted {
                    segments.push(segment);
                }
            }
            s => segments.push(s),
        }
    }
    let mut out = Vec::with_capacity(v.len());
    if rooted {
        out.push(b'/');
    }
    out.extend_from_slice(&segments.join(&b'/'));
    if trailing && !segments.is_empty() {
        out.push(b'/');
    }
    out
}

fn compress_whitespace(v: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len());
    let mut space = false;
    for &b in v {
        if is_space(b) {
            if !space {
                out.push(b' ');
            }
            space = true;
        } else {
            out.push(b);
            space = false;
        }
    }
    out
}

/// Each `/* … */` as one space (an unclosed one to the end).
fn replace_comments(v: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len());
    let mut i = 0;
    while i < v.len() {
        if v[i..].starts_with(b"/*") {
            out.push(b' ');
            match v[i + 2..].windows(2).position(|w| w == b"*/") {
                Some(end) => i += 2 + end + 2,
                None => break,
            }
            continue;
        }
        out.push(v[i]);
        i += 1;
    }
    out
}

/// Base64 decoded up to the first byte that is not base64.
fn base64_decode(v: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len() * 3 / 4);
    let mut bits: u32 = 0;
    let mut count = 0;
    for &b in v {
        let value = match b {
            b'A'..=b'Z' => b - b'A',
            b'a'..=b'z' => b - b'a' + 26,
            b'0'..=b'9' => b - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => break,
        };
        bits = bits << 6 | u32::from(value);
        count += 6;
        if count >= 8 {
            count -= 8;
            out.push((bits >> count) as u8);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(v: &str, t: Transform) -> String {
        String::from_utf8_lossy(&one(v.as_bytes(), t)).into_owned()
    }

    #[test]
    fn decodings_follow_modsecurity() {
        assert_eq!(t("a%20b+c%zz", Transform::UrlDecode), "a b c%zz");
        assert_eq!(t("%uff1cscript%u003e", Transform::UrlDecodeUni), "<script>");
        assert_eq!(
            t("&lt;a&#x3e;&#60&quot", Transform::HtmlEntityDecode),
            "<a><\""
        );
        assert_eq!(t("\\u003c\\x3e\\74\\n\\'", Transform::JsDecode), "<><\n'");
        assert_eq!(
            t("\\3c \\6a avascript\\\n", Transform::CssDecode),
            "<javascript"
        );
        assert_eq!(
            t("C:\\\"W\"i^n,dows;  /x (y", Transform::CmdLine),
            "c:win dows/x(y"
        );
        assert_eq!(t("/a//b/./c/../d", Transform::NormalizePath), "/a/b/d");
        assert_eq!(t("..\\..\\etc", Transform::NormalizePathWin), "../../etc");
        assert_eq!(t("a /* x */ b /* y", Transform::ReplaceComments), "a   b  ");
        assert_eq!(t("X19wcm90b19f", Transform::Base64Decode), "__proto__");
        assert_eq!(t("é", Transform::Utf8ToUnicode), "%u00e9");
    }

    /// Every transformation but `base64Decode`.
    const ALL: [Transform; 13] = [
        Transform::Lowercase,
        Transform::UrlDecode,
        Transform::UrlDecodeUni,
        Transform::HtmlEntityDecode,
        Transform::JsDecode,
        Transform::CssDecode,
        Transform::RemoveNulls,
        Transform::Utf8ToUnicode,
        Transform::CmdLine,
        Transform::NormalizePath,
        Transform::NormalizePathWin,
        Transform::CompressWhitespace,
        Transform::ReplaceComments,
    ];

    /// A transformation the bytes say cannot change a value leaves it as it is.
    #[test]
    fn may_change_is_never_wrong() {
        let corpus = [
            include_str!("../corpus/attacks.jsonl"),
            include_str!("../corpus/benign.jsonl"),
        ];
        let values = corpus
            .iter()
            .flat_map(|text| text.split(['"', ' ', '=', '&', ';', '?']));
        for value in values.chain(["a  b", "x\ty", "A", "/./", "./a", "..", "/*x", "é"]) {
            let bytes = ByteSet::of(value.as_bytes());
            for t in ALL {
                if !may_change(t, &bytes) {
                    assert!(
                        matches!(one(value.as_bytes(), t), Cow::Borrowed(_)),
                        "{t:?} changes {value:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn plain_values_are_borrowed() {
        assert!(matches!(
            apply(b"session 12ab-x.y_z", &ALL),
            Cow::Borrowed(_)
        ));
    }
}
