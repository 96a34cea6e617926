//! HTTP/1.1 wire pieces that both sides use: the server loop (clients) and the origin
//! client (origins), and the gateway's forwarding and cache. Heads are parsed by
//! httparse into views of the read buffer; [`value_range`] notes where each value lies
//! while those views borrow it, and [`header_map`] makes the values slices of the
//! frozen head (no copy each).

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue};
use std::ops::Range;

/// Where `part`, a view httparse gave of `buffer`, lies within its first `length`
/// bytes; an empty part is read as `0..0`. `None` if it lies elsewhere.
pub fn value_range(buffer: &[u8], length: usize, part: &[u8]) -> Option<Range<usize>> {
    if part.is_empty() {
        return Some(0..0);
    }
    let at = (part.as_ptr() as usize).checked_sub(buffer.as_ptr() as usize)?;
    (at + part.len() <= length).then_some(at..at + part.len())
}

/// Fields the gateway adds to a head it passes on (`X-Forwarded-For`,
/// `X-Forwarded-Proto`, `Forwarded` and `Via` to a request; `Alt-Svc` or the cache's
/// status to a response), for which a map has room from the start: growing it would
/// move every field once more (a few hundred instructions a request, by callgrind).
const ADDED_FIELDS: usize = 4;

/// The header fields `lines` names, their values slices of `head`; `None` when a value
/// is not a valid header value.
pub fn header_map(
    head: &Bytes,
    lines: impl ExactSizeIterator<Item = (HeaderName, Range<usize>)>,
) -> Option<HeaderMap> {
    let mut map = HeaderMap::with_capacity(lines.len() + ADDED_FIELDS);
    for (name, range) in lines {
        map.append(
            name,
            HeaderValue::from_maybe_shared(head.slice(range)).ok()?,
        );
    }
    Some(map)
}

/// The comma-separated tokens of a header value (`Connection`, `Transfer-Encoding`),
/// trimmed.
pub fn tokens(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value.split(|&b| b == b',').map(<[u8]>::trim_ascii)
}

/// The comma-separated tokens of every `name` field of `headers`, trimmed.
pub fn header_tokens(
    headers: &http::HeaderMap,
    name: http::header::HeaderName,
) -> impl Iterator<Item = &[u8]> {
    headers
        .get_all(name)
        .into_iter()
        .flat_map(|value| tokens(value.as_bytes()))
}

/// A `Content-Length` value: digits, or a list of one repeated value (RFC 9110 §8.6).
pub fn content_length(value: &[u8]) -> Option<u64> {
    let mut found = None;
    for part in value.split(|&b| b == b',') {
        let part = part.trim_ascii();
        if part.is_empty() || part.len() > 19 || !part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let length: u64 = std::str::from_utf8(part).ok()?.parse().ok()?;
        if found.is_some_and(|seen| seen != length) {
            return None;
        }
        found = Some(length);
    }
    found
}

/// Appends `content-length: {length}\r\n`.
pub fn push_content_length(out: &mut Vec<u8>, length: u64) {
    out.extend_from_slice(b"content-length: ");
    out.extend_from_slice(itoa::Buffer::new().format(length).as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// Appends a chunk-size line: `length` in hexadecimal and CRLF (RFC 9112 §7.1).
pub fn push_chunk_size(out: &mut Vec<u8>, length: usize) {
    let mut digits = [0u8; 16];
    let mut at = digits.len();
    let mut rest = length;
    loop {
        at -= 1;
        digits[at] = b"0123456789abcdef"[rest & 0xf];
        rest >>= 4;
        if rest == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_length_is_digits_or_one_repeated_value() {
        assert_eq!(content_length(b"42"), Some(42));
        assert_eq!(content_length(b"42, 42"), Some(42));
        assert_eq!(content_length(b"0"), Some(0));
        for bad in [
            &b""[..],
            b"+42",
            b"-1",
            b"4 2",
            b"42, 43",
            b"0x10",
            b"99999999999999999999",
            b"42,",
        ] {
            assert_eq!(
                content_length(bad),
                None,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn chunk_sizes_are_lower_case_hexadecimal() {
        for (length, line) in [
            (0, "0\r\n"),
            (5, "5\r\n"),
            (255, "ff\r\n"),
            (4096, "1000\r\n"),
            (usize::MAX, "ffffffffffffffff\r\n"),
        ] {
            let mut out = Vec::new();
            push_chunk_size(&mut out, length);
            assert_eq!(String::from_utf8(out).unwrap(), line);
        }
        let mut out = Vec::new();
        push_content_length(&mut out, 1234);
        assert_eq!(out, b"content-length: 1234\r\n");
    }

    #[test]
    fn the_last_transfer_coding_decides() {
        let last = |value: &'static [u8]| tokens(value).last().unwrap_or_default();
        assert_eq!(last(b"gzip, chunked"), b"chunked");
        assert_eq!(last(b"chunked, gzip"), b"gzip");
        assert_eq!(last(b" Chunked "), b"Chunked");
    }

    #[test]
    fn values_are_placed_within_the_head_and_sliced_from_it() {
        let buffer = b"x-a: 1\r\nx-b: \r\n\r\nbody";
        let head = Bytes::from_static(&buffer[..17]);
        assert_eq!(value_range(buffer, 17, &buffer[5..6]), Some(5..6));
        assert_eq!(value_range(buffer, 17, &buffer[13..13]), Some(0..0));
        assert_eq!(
            value_range(buffer, 17, &buffer[17..21]),
            None,
            "past the head"
        );
        assert_eq!(value_range(buffer, 17, b"elsewhere"), None);
        let lines = [
            (HeaderName::from_static("x-a"), 5..6),
            (HeaderName::from_static("x-b"), 0..0),
        ];
        let map = header_map(&head, lines.into_iter()).unwrap();
        assert_eq!(map["x-a"], "1");
        assert_eq!(map["x-b"], "");
        let bad = Bytes::from_static(b"a\0b");
        assert!(header_map(&bad, [(HeaderName::from_static("x-a"), 0..3)].into_iter()).is_none());
    }
}
