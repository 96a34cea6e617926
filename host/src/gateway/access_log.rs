//! The access log: one line per request, written by hand into a reused per-thread
//! buffer and handed whole to a [`BatchedWriter`] (stderr, shared with the diagnostic
//! log, or a file of its own).
//!
//! The line keeps the shape of a `tracing` event, so one reader parses both logs:
//!
//! ```text
//! 2026-11-22T01:47:52.028122Z  INFO botgate::access: website="shop.example" client=203.0.113.7 method=GET target=/ category="humans" action="grant" decider="classifier" decider_version="1.0.0" reason=classifier.browser status=200 origin=192.0.2.10:80 cache="-" latency_us=204 ja4="-"
//! ```
//!
//! Quoted values are escaped as Rust's `Debug` escapes strings; the others are written
//! bare (a key ends at its first `=`, so a query's `=` is read back whole) and quoted
//! only when they are empty or hold a space, a quote, a backslash or a control
//! character.
//! The gateway used to emit the line through `tracing`'s formatter; that cost about a
//! fifth of the proxy's user-space CPU under load (see benches/README.md, "The data plane under
//! load").

use super::outcome::{CacheStatus, Outcome};
use crate::log_writer::BatchedWriter;
use botgate_model::Category;
use std::cell::RefCell;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::{SystemTime, UNIX_EPOCH};

/// Where access lines go; clones write to the same place, which
/// [`AccessLog::replace`] changes for all of them.
#[derive(Debug, Clone, Default)]
pub struct AccessLog {
    sink: std::sync::Arc<arc_swap::ArcSwapOption<BatchedWriter>>,
}

/// What the access log says of one request.
pub struct AccessEntry<'a> {
    pub website: Option<&'a str>,
    pub client: &'a str,
    pub method: &'a str,
    pub target: &'a str,
    /// The decided category, when a decision was made (`none` otherwise).
    pub category: Option<Category>,
    pub action: Outcome,
    /// The deciding component and its version.
    pub decider: Option<(&'a str, &'a str)>,
    /// The deciding opinion's reason id, or why a challenge answer was refused; empty
    /// when there is none.
    pub reason: &'a str,
    pub status: u16,
    pub origin: Option<SocketAddr>,
    pub cache: CacheStatus,
    pub latency_us: u64,
    pub ja4: Option<&'a str>,
}

/// A thread's line buffer, and the formatted second its timestamps start with.
struct LineBuffer {
    line: String,
    second: u64,
    second_text: String,
}

thread_local! {
    static BUFFER: RefCell<LineBuffer> = const {
        RefCell::new(LineBuffer { line: String::new(), second: u64::MAX, second_text: String::new() })
    };
}

impl AccessLog {
    /// No access log.
    pub fn off() -> AccessLog {
        AccessLog::default()
    }

    /// Access lines into `sink`.
    pub fn to(sink: BatchedWriter) -> AccessLog {
        let log = AccessLog::default();
        log.sink.store(Some(std::sync::Arc::new(sink)));
        log
    }

    /// Sends the next lines where `with` sends its own (this and every clone).
    pub fn replace(&self, with: &AccessLog) {
        self.sink.store(with.sink.load_full());
    }

    /// Writes `entry`'s line, stamped now.
    pub fn record(&self, entry: &AccessEntry<'_>) {
        let sink = self.sink.load();
        let Some(sink) = sink.as_deref() else {
            return;
        };
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        BUFFER.with(|buffer| {
            let mut buffer = buffer.borrow_mut();
            let buffer = &mut *buffer;
            buffer.line.clear();
            format_line(
                &mut buffer.line,
                &mut buffer.second,
                &mut buffer.second_text,
                now,
                entry,
            );
            sink.write_line(buffer.line.as_bytes());
        });
    }
}

/// Formats one line (with its `\n`) into `out`; `second` and `second_text` cache the
/// timestamp's text up to the second.
fn format_line(
    out: &mut String,
    second: &mut u64,
    second_text: &mut String,
    now: std::time::Duration,
    entry: &AccessEntry<'_>,
) {
    let seconds = now.as_secs();
    if *second != seconds {
        *second = seconds;
        second_text.clear();
        write_utc_second(second_text, seconds);
    }
    out.push_str(second_text);
    push_padded_micros(out, now.subsec_micros());
    out.push_str("Z  INFO botgate::access:");
    quoted(out, " website=", entry.website.unwrap_or("-"));
    out.push_str(" client=");
    out.push_str(entry.client);
    bare(out, " method=", entry.method);
    bare(
        out,
        " target=",
        &botgate_model::dashboard::redact_api_key(entry.target),
    );
    quoted(
        out,
        " category=",
        entry.category.map_or("none", Category::as_str),
    );
    quoted(out, " action=", entry.action.as_str());
    let (decider, version) = entry.decider.unwrap_or(("-", "-"));
    quoted(out, " decider=", decider);
    quoted(out, " decider_version=", version);
    bare(
        out,
        " reason=",
        if entry.reason.is_empty() {
            "-"
        } else {
            entry.reason
        },
    );
    out.push_str(" status=");
    out.push_str(itoa::Buffer::new().format(entry.status));
    out.push_str(" origin=");
    match entry.origin {
        Some(SocketAddr::V4(origin)) => {
            let mut number = itoa::Buffer::new();
            for (i, octet) in origin.ip().octets().into_iter().enumerate() {
                if i > 0 {
                    out.push('.');
                }
                out.push_str(number.format(octet));
            }
            out.push(':');
            out.push_str(number.format(origin.port()));
        }
        Some(origin) => {
            let _ = write!(out, "{origin}");
        }
        None => out.push('-'),
    }
    quoted(out, " cache=", entry.cache.as_str());
    out.push_str(" latency_us=");
    out.push_str(itoa::Buffer::new().format(entry.latency_us));
    quoted(out, " ja4=", entry.ja4.unwrap_or("-"));
    out.push('\n');
}

/// `.` and the microseconds of the second in six digits.
fn push_padded_micros(out: &mut String, micros: u32) {
    let mut number = itoa::Buffer::new();
    let digits = number.format(micros % 1_000_000);
    out.push('.');
    out.extend(std::iter::repeat_n('0', 6 - digits.len()));
    out.push_str(digits);
}

/// `key` and `value` in quotes, escaped as `Debug` escapes a string.
fn quoted(out: &mut String, key: &str, value: &str) {
    out.push_str(key);
    if is_plain(value.as_bytes(), true) {
        out.push('"');
        out.push_str(value);
        out.push('"');
    } else {
        let _ = write!(out, "{value:?}");
    }
}

/// `key` and `value` bare, or quoted when the value would not read back as one word.
fn bare(out: &mut String, key: &str, value: &str) {
    if !value.is_empty() && is_plain(value.as_bytes(), false) {
        out.push_str(key);
        out.push_str(value);
    } else {
        quoted(out, key, value);
    }
}

/// Whether every byte of `text` is printable ASCII other than `"` and `\` (and a
/// space, where `space` allows it): what needs no escaping. Eight bytes a step.
fn is_plain(text: &[u8], space: bool) -> bool {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    // Whether some byte of `x` is zero, or below `n` (n <= 128): exact as a whole.
    let has_zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGHS != 0;
    let has_below = |x: u64, n: u8| x.wrapping_sub(ONES * u64::from(n)) & !x & HIGHS != 0;
    let lowest = if space { b' ' } else { b'!' };
    let mut chunks = text.chunks_exact(8);
    for chunk in &mut chunks {
        let x = u64::from_ne_bytes(chunk.try_into().expect("eight bytes"));
        // Above `~`: the high bit, or 0x7f (which adding 1 carries into the high bit).
        let above = (x | x.wrapping_add(ONES)) & HIGHS != 0;
        if above
            || has_below(x, lowest)
            || has_zero(x ^ (ONES * u64::from(b'"')))
            || has_zero(x ^ (ONES * u64::from(b'\\')))
        {
            return false;
        }
    }
    chunks
        .remainder()
        .iter()
        .all(|&b| (b.is_ascii_graphic() && b != b'"' && b != b'\\') || (space && b == b' '))
}

/// `YYYY-MM-DDTHH:MM:SS` in UTC of `seconds` since the Unix epoch.
fn write_utc_second(out: &mut String, seconds: u64) {
    let days = (seconds / 86_400) as i64;
    let in_day = seconds % 86_400;
    let (year, month, day) = civil_from_days(days);
    let _ = write!(
        out,
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}",
        in_day / 3600,
        in_day / 60 % 60,
        in_day % 60
    );
}

/// The proleptic Gregorian date of `days` since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn entry() -> AccessEntry<'static> {
        AccessEntry {
            website: Some("shop.example"),
            client: "203.0.113.7",
            method: "GET",
            target: "/wp-login.php?x=1",
            category: Some(Category::Humans),
            action: Outcome::Grant,
            decider: Some(("classifier", "1.0.0")),
            reason: "classifier.browser",
            status: 200,
            origin: Some("[2001:db8::1]:80".parse().unwrap()),
            cache: CacheStatus::NotAsked,
            latency_us: 204,
            ja4: None,
        }
    }

    fn line(now: Duration, entry: &AccessEntry<'_>) -> String {
        let (mut out, mut second, mut text) = (String::new(), u64::MAX, String::new());
        format_line(&mut out, &mut second, &mut text, now, entry);
        out
    }

    #[test]
    fn plain_text_is_told_apart_eight_bytes_at_a_time_as_byte_by_byte() {
        let byte_by_byte = |text: &[u8], space: bool| {
            text.iter()
                .all(|&b| (b.is_ascii_graphic() && b != b'"' && b != b'\\') || (space && b == b' '))
        };
        // Every byte value at every place of a block of two words and a tail, among
        // plain neighbours of either extreme (`!` and `~`), so carries and borrows
        // between bytes are exercised.
        for space in [false, true] {
            for filler in [b'!', b'~', b'a'] {
                for len in [1, 7, 8, 9, 16, 19] {
                    for at in 0..len {
                        for b in 0..=255u8 {
                            let mut text = vec![filler; len];
                            text[at] = b;
                            assert_eq!(
                                is_plain(&text, space),
                                byte_by_byte(&text, space),
                                "{text:?} space={space}"
                            );
                        }
                    }
                }
            }
        }
        // Pairs of awkward bytes side by side.
        let awkward = [0x00, 0x1f, b' ', b'!', b'"', b'\\', b'~', 0x7f, 0x80, 0xff];
        for &x in &awkward {
            for &y in &awkward {
                let text = [b'a', b'b', x, y, b'c', b'd', b'e', b'f', x, y];
                for space in [false, true] {
                    assert_eq!(is_plain(&text, space), byte_by_byte(&text, space));
                }
            }
        }
    }

    #[test]
    fn the_line_has_the_shape_of_a_tracing_event() {
        let now = Duration::from_micros(1_795_315_672_028_122);
        assert_eq!(
            line(now, &entry()),
            "2026-11-22T02:47:52.028122Z  INFO botgate::access: website=\"shop.example\" \
             client=203.0.113.7 method=GET target=/wp-login.php?x=1 category=\"humans\" \
             action=\"grant\" decider=\"classifier\" decider_version=\"1.0.0\" \
             reason=classifier.browser status=200 origin=[2001:db8::1]:80 cache=\"-\" \
             latency_us=204 ja4=\"-\"\n"
        );
    }

    #[test]
    fn a_key_in_the_query_is_written_redacted() {
        let mut e = entry();
        e.target = "/en/website/shop.example/edit?api-key=bgu_secret&x=1";
        let text = line(Duration::from_secs(1_795_315_672), &e);
        assert!(
            text.contains(" target=/en/website/shop.example/edit?api-key=redacted&x=1 "),
            "{text}"
        );
        assert!(!text.contains("bgu_secret"), "{text}");
    }

    #[test]
    fn numbers_and_ipv4_origins_are_written_in_full() {
        let mut e = entry();
        e.origin = Some("192.0.2.10:8080".parse().unwrap());
        e.status = 502;
        e.latency_us = 0;
        let text = line(Duration::from_micros(1_795_315_672_000_042), &e);
        assert!(text.starts_with("2026-11-22T02:47:52.000042Z "), "{text}");
        assert!(
            text.contains(" status=502 origin=192.0.2.10:8080 cache=\"-\" latency_us=0 "),
            "{text}"
        );
        e.origin = None;
        let text = line(Duration::from_secs(1), &e);
        assert!(text.contains(".000000Z "), "{text}");
        assert!(text.contains(" origin=- "), "{text}");
    }

    #[test]
    fn values_cannot_forge_fields_or_lines() {
        let mut e = entry();
        e.reason = "the answer is wrong";
        e.website = Some("a\"b\nc");
        e.method = "";
        let text = line(Duration::from_secs(1), &e);
        assert!(text.contains(" reason=\"the answer is wrong\" "), "{text}");
        assert!(text.contains(" website=\"a\\\"b\\nc\" "), "{text}");
        assert!(text.contains(" method=\"\" "), "{text}");
        assert_eq!(text.matches('\n').count(), 1);
    }

    #[test]
    fn dates_are_utc_calendar_dates() {
        for (seconds, text) in [
            (0, "1970-01-01T00:00:00"),
            (951_782_400, "2000-02-29T00:00:00"),
            (1_709_251_199, "2024-02-29T23:59:59"),
            (4_102_444_800, "2100-01-01T00:00:00"),
        ] {
            let mut out = String::new();
            write_utc_second(&mut out, seconds);
            assert_eq!(out, text);
        }
    }
}
