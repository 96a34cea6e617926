//! JA4 fingerprints of TLS ClientHellos (FoxIO's JA4 specification), computed from the
//! raw bytes the client sent before rustls sees them. The record and message parsing is
//! the `tls-parser` crate's.
//!
//! `t13d1516h2_8daaf6152771_02713d6af862`: transport (`t` TCP, `q` QUIC), the highest
//! offered TLS version, `d` when SNI names a domain (`i` otherwise), the cipher and
//! extension counts, the first and last character of the first ALPN value; then the
//! first 12 hex digits of the SHA-256 of the sorted cipher list, and of the sorted
//! extension list (without SNI and ALPN) followed by the signature algorithms in order.
//! GREASE values are ignored everywhere.

use sha2::{Digest, Sha256};
use tls_parser::{
    TlsExtension, TlsExtensionType, TlsMessage, TlsMessageHandshake,
    parse_tls_client_hello_extensions, parse_tls_plaintext,
};

/// The transport a ClientHello came over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Tcp,
    Quic,
}

/// The TLS record header's length, and the longest record a ClientHello may be read
/// from (a TLS record's payload is at most 16 KiB, plus slack for padding).
pub const RECORD_HEADER_LEN: usize = 5;
pub const MAX_RECORD_LEN: usize = 16 * 1024 + 256;
/// The longest ClientHello read over several records: the longest rustls takes.
pub const MAX_HELLO_LEN: usize = 64 * 1024;

/// The length of the whole first record when `header` (5 bytes) starts a TLS
/// handshake record, else `None`.
pub fn handshake_record_len(header: &[u8]) -> Option<usize> {
    if header.len() < RECORD_HEADER_LEN || header[0] != 0x16 || header[1] != 0x03 {
        return None;
    }
    let len = usize::from(u16::from_be_bytes([header[3], header[4]]));
    (len <= MAX_RECORD_LEN).then_some(RECORD_HEADER_LEN + len)
}

/// How many bytes of the handshake message that starts `handshake` (a record's
/// payload, or several put together) are still to come; `None` when it is no
/// ClientHello.
pub fn missing_hello_bytes(handshake: &[u8]) -> Option<usize> {
    const CLIENT_HELLO: u8 = 1;
    if handshake.first().is_some_and(|&kind| kind != CLIENT_HELLO) {
        return None;
    }
    // Its header (type and length) first, if even that was cut.
    let Some(header) = handshake.get(..4) else {
        return Some(4 - handshake.len());
    };
    let len = 4 + usize::from_be_bytes([0, 0, 0, 0, 0, header[1], header[2], header[3]]);
    Some(len.saturating_sub(handshake.len()))
}

/// The JA4 fingerprint of the ClientHello that starts `handshake`: handshake messages
/// without their records' headers (the payloads of several records put together).
pub fn from_handshake(handshake: &[u8]) -> Option<String> {
    let (_, message) = tls_parser::parse_tls_message_handshake(handshake).ok()?;
    from_message(&message, Transport::Tcp)
}

/// The JA4 fingerprint of the ClientHello in the TLS record `record`, or `None` when
/// the record holds no complete ClientHello.
pub fn from_record(record: &[u8]) -> Option<String> {
    let (_, plaintext) = parse_tls_plaintext(record).ok()?;
    plaintext
        .msg
        .iter()
        .find_map(|message| from_message(message, Transport::Tcp))
}

/// The JA4 fingerprint of a parsed handshake message, when it is a ClientHello.
pub fn from_message(message: &TlsMessage, transport: Transport) -> Option<String> {
    let TlsMessage::Handshake(TlsMessageHandshake::ClientHello(hello)) = message else {
        return None;
    };
    let extensions = match hello.ext {
        Some(bytes) => parse_tls_client_hello_extensions(bytes).ok()?.1,
        None => Vec::new(),
    };
    let ciphers: Vec<u16> = hello
        .ciphers
        .iter()
        .map(|c| c.0)
        .filter(|c| !is_grease(*c))
        .collect();
    let mut extension_ids = Vec::with_capacity(extensions.len());
    let mut has_sni = false;
    let mut alpn: Option<&[u8]> = None;
    let mut version = hello.version.0;
    let mut signatures: Vec<u16> = Vec::new();
    for extension in &extensions {
        let id = TlsExtensionType::from(extension).0;
        if is_grease(id) {
            continue;
        }
        extension_ids.push(id);
        match extension {
            TlsExtension::SNI(names) => has_sni |= !names.is_empty(),
            TlsExtension::ALPN(protocols) => alpn = protocols.first().copied(),
            TlsExtension::SupportedVersions(versions) => {
                if let Some(highest) = versions
                    .iter()
                    .map(|v| v.0)
                    .filter(|v| !is_grease(*v))
                    .max()
                {
                    version = highest;
                }
            }
            TlsExtension::SignatureAlgorithms(algorithms) => {
                signatures = algorithms
                    .iter()
                    .copied()
                    .filter(|a| !is_grease(*a))
                    .collect();
            }
            _ => {}
        }
    }
    let version = match version {
        0x0304 => "13",
        0x0303 => "12",
        0x0302 => "11",
        0x0301 => "10",
        0x0300 => "s3",
        _ => "00",
    };
    let transport = match transport {
        Transport::Tcp => 't',
        Transport::Quic => 'q',
    };
    let a = format!(
        "{transport}{version}{}{:02}{:02}{}",
        if has_sni { 'd' } else { 'i' },
        ciphers.len().min(99),
        extension_ids.len().min(99),
        alpn_chars(alpn),
    );
    let mut sorted_ciphers = ciphers;
    sorted_ciphers.sort_unstable();
    let b = truncated_hash(&hex_list(&sorted_ciphers), sorted_ciphers.is_empty());
    let mut sorted_extensions: Vec<u16> = extension_ids
        .into_iter()
        .filter(|id| *id != 0x0000 && *id != 0x0010)
        .collect();
    sorted_extensions.sort_unstable();
    let mut c_input = hex_list(&sorted_extensions);
    if !signatures.is_empty() {
        c_input.push('_');
        c_input.push_str(&hex_list(&signatures));
    }
    let c = truncated_hash(&c_input, sorted_extensions.is_empty());
    Some(format!("{a}_{b}_{c}"))
}

/// GREASE values (RFC 8701): `0x?a?a` with both bytes equal.
fn is_grease(value: u16) -> bool {
    value & 0x0f0f == 0x0a0a && value >> 8 == value & 0xff
}

/// The first and last characters of the first ALPN value; `00` without one; the first
/// and last hex digits of the value when either character is not alphanumeric.
fn alpn_chars(alpn: Option<&[u8]>) -> String {
    match alpn {
        None | Some([]) => "00".into(),
        Some(value) => {
            let (first, last) = (value[0], value[value.len() - 1]);
            if first.is_ascii_alphanumeric() && last.is_ascii_alphanumeric() {
                format!("{}{}", first as char, last as char)
            } else {
                let hex = format!("{first:02x}{last:02x}");
                format!("{}{}", &hex[..1], &hex[3..])
            }
        }
    }
}

fn hex_list(values: &[u16]) -> String {
    let mut out = String::with_capacity(values.len() * 5);
    for (i, value) in values.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&format!("{value:04x}"));
    }
    out
}

fn truncated_hash(input: &str, empty: bool) -> String {
    if empty {
        return "000000000000".into();
    }
    let digest = Sha256::digest(input.as_bytes());
    digest[..6].iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ClientHello record with the given ciphers and extensions `(id, data)`.
    fn record(ciphers: &[u16], extensions: &[(u16, Vec<u8>)]) -> Vec<u8> {
        let mut body = vec![0x03, 0x03];
        body.extend([0u8; 32]);
        body.push(0); // no session id
        body.extend(((ciphers.len() * 2) as u16).to_be_bytes());
        for c in ciphers {
            body.extend(c.to_be_bytes());
        }
        body.extend([1, 0]); // null compression
        let mut ext = Vec::new();
        for (id, data) in extensions {
            ext.extend(id.to_be_bytes());
            ext.extend((data.len() as u16).to_be_bytes());
            ext.extend(data);
        }
        body.extend((ext.len() as u16).to_be_bytes());
        body.extend(ext);
        let mut handshake = vec![1];
        handshake.extend(&(body.len() as u32).to_be_bytes()[1..]);
        handshake.extend(body);
        let mut record = vec![0x16, 0x03, 0x01];
        record.extend((handshake.len() as u16).to_be_bytes());
        record.extend(handshake);
        record
    }

    fn sni(name: &str) -> Vec<u8> {
        let mut entry = vec![0];
        entry.extend((name.len() as u16).to_be_bytes());
        entry.extend(name.as_bytes());
        let mut out = (entry.len() as u16).to_be_bytes().to_vec();
        out.extend(entry);
        out
    }

    fn alpn(protocols: &[&str]) -> Vec<u8> {
        let mut list = Vec::new();
        for p in protocols {
            list.push(p.len() as u8);
            list.extend(p.as_bytes());
        }
        let mut out = (list.len() as u16).to_be_bytes().to_vec();
        out.extend(list);
        out
    }

    fn u16_list(prefix_len_bytes: usize, values: &[u16]) -> Vec<u8> {
        let body: Vec<u8> = values.iter().flat_map(|v| v.to_be_bytes()).collect();
        let mut out = if prefix_len_bytes == 1 {
            vec![body.len() as u8]
        } else {
            (body.len() as u16).to_be_bytes().to_vec()
        };
        out.extend(body);
        out
    }

    #[test]
    fn a_tls13_hello_with_grease_sni_and_alpn() {
        let ciphers = [0x0a0a, 0x1301, 0x1302, 0xc02b];
        let extensions = vec![
            (0x1a1a, vec![]),
            (0x0000, sni("www.example.com")),
            (0x0010, alpn(&["h2", "http/1.1"])),
            (0x002b, u16_list(1, &[0x2a2a, 0x0304, 0x0303])),
            (0x000d, u16_list(2, &[0x0403, 0x0804])),
            (0x000a, u16_list(2, &[0x001d])),
        ];
        let ja4 = from_record(&record(&ciphers, &extensions)).unwrap();
        let b = truncated_hash("1301,1302,c02b", false);
        let c = truncated_hash("000a,000d,002b_0403,0804", false);
        assert_eq!(ja4, format!("t13d0305h2_{b}_{c}"));
    }

    #[test]
    fn no_sni_no_alpn_and_tls12() {
        let ja4 = from_record(&record(&[0xc02f], &[])).unwrap();
        assert_eq!(
            ja4,
            format!("t12i010000_{}_000000000000", truncated_hash("c02f", false))
        );
    }

    #[test]
    fn odd_alpn_values_use_hex() {
        assert_eq!(alpn_chars(Some(b"\xab\xcd")), "ad");
        assert_eq!(alpn_chars(Some(b"http/1.1")), "h1");
    }

    #[test]
    fn a_hello_longer_than_a_record_is_fingerprinted_from_its_handshake_bytes() {
        let padded = record(&[0x1301], &[(0x0015, vec![0; 40_000])]);
        let handshake = &padded[RECORD_HEADER_LEN..];
        assert_eq!(missing_hello_bytes(&handshake[..3]), Some(1));
        assert_eq!(
            missing_hello_bytes(&handshake[..1000]),
            Some(handshake.len() - 1000)
        );
        assert_eq!(missing_hello_bytes(handshake), Some(0));
        assert_eq!(missing_hello_bytes(&[2, 0, 0, 4]), None);
        let ja4 = from_handshake(handshake).unwrap();
        assert!(ja4.starts_with("t12i0101"), "{ja4}");
    }

    #[test]
    fn not_a_client_hello() {
        assert_eq!(from_record(b"GET / HTTP/1.1\r\n\r\n"), None);
        assert_eq!(handshake_record_len(b"GET /"), None);
        assert_eq!(handshake_record_len(&[0x16, 3, 1, 0, 10]), Some(15));
    }
}
