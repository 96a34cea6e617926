//! HTTP/1.1 wire pieces that both of the gateway's own HTTP/1.1 sides write: the
//! listener's loop (to clients) and the origin client (to origins).

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
}
