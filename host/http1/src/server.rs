//! The gateway's own HTTP/1.1 server loop for the request nearly every visitor sends:
//! HTTP/1.1, no body, no upgrade. It reads heads with `httparse`, hands each request to
//! its handler and writes the response (its head and a body already at hand in
//! one write). Everything else — a request with a body, `Expect`, an upgrade, HTTP/1.0,
//! HTTP/2's preface, anything malformed or over a limit — is handed to hyper, with the
//! bytes read so far, at that request's start; hyper serves the rest of the connection
//! and gives its own answers (400, 431, …) to what is wrong.
//!
//! Why not hyper for all of it: on the load benchmark hyper's server cost about 1.7 µs
//! of CPU per request more than this loop's work (benches/README.md, "The data plane under load"),
//! the largest piece of the proxy core left to a library. hyper stays for the rare and
//! the hard cases, where its generality is the point.

use crate::Rewind;
use crate::body::Body;
use crate::wire::{self, push_chunk_size, push_content_length};
use bytes::{Bytes, BytesMut};
use http::{HeaderName, Method, Request, Response, StatusCode, Uri, Version, header};
use http_body_util::{BodyExt, Empty};
use hyper::body::Body as _;
use std::cell::RefCell;
use std::mem::MaybeUninit;
use std::ops::Range;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Poll;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The most header lines this loop reads; a request with more goes to hyper, which
/// applies the configured limit.
const MAX_HEADERS: usize = 128;
/// Response bytes gathered before they are written: a small body at hand is copied in
/// behind its head; a larger piece goes out beside what is gathered, in one vectored
/// write.
const WRITE_GATHER: usize = 16 * 1024;
/// The write buffer a connection keeps between requests; one grown past this by a large
/// head is let go, so idle connections hold little.
const WRITE_KEEP: usize = 32 * 1024;

/// What the loop allows a request head.
#[derive(Debug, Clone, Copy)]
pub struct HeadLimits {
    /// The most header lines (at most 128 here; a request with more goes to hyper).
    pub max_headers: usize,
    /// The largest head, in bytes.
    pub max_bytes: usize,
    /// The longest a head may take to arrive, from its first byte (slowloris).
    pub read_timeout: Duration,
}

/// What the connection's watcher and this loop tell each other.
#[derive(Default)]
pub struct Flags {
    /// A request is being served (its response not yet written whole).
    in_request: AtomicBool,
    /// Finish the request in flight, then close.
    stop: AtomicBool,
}

impl Flags {
    pub fn in_request(&self) -> bool {
        self.in_request.load(Ordering::Relaxed)
    }

    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// How the loop ended.
pub enum Ended<S> {
    /// The connection is done (closed by either side, timed out, or drained).
    Closed,
    /// hyper takes over: the stream, replaying what was read of the request at hand.
    Handoff(Rewind<S>),
}

/// A request head as this loop reads it (returned once per request, on the stack: its
/// size is no cost worth a box).
#[allow(clippy::large_enum_variant)]
enum Parsed {
    /// More bytes are needed.
    Partial,
    /// A request this loop serves, and whether the client asked to close afterwards.
    Simple(Request<Empty<Bytes>>, bool),
    /// Anything else: hyper's.
    NotMine,
}

/// Serves requests on `stream` with `handle` until it closes, or until a request is
/// hyper's.
pub async fn serve<S, F, R>(handle: F, mut stream: S, limits: HeadLimits, flags: &Flags) -> Ended<S>
where
    S: AsyncRead + AsyncWrite + Unpin,
    F: Fn(Request<Empty<Bytes>>) -> R,
    R: Future<Output = Response<Body>>,
{
    let mut read = BytesMut::with_capacity(8 * 1024);
    let mut write = Vec::with_capacity(8 * 1024);
    let max_headers = limits.max_headers.min(MAX_HEADERS);
    let max_bytes = limits.max_bytes;
    loop {
        if flags.stop.load(Ordering::Relaxed) {
            return Ended::Closed;
        }
        // The head: the header-read timeout runs from its first byte (an idle
        // connection between requests is the idle check's).
        let mut head_deadline = None;
        let (request, close) = loop {
            if !read.is_empty() {
                match parse(&mut read, max_headers, max_bytes) {
                    Parsed::Simple(request, close) => break (request, close),
                    Parsed::NotMine => return Ended::Handoff(Rewind::new(read.to_vec(), stream)),
                    Parsed::Partial => {
                        head_deadline.get_or_insert_with(|| {
                            tokio::time::Instant::now() + limits.read_timeout
                        });
                    }
                }
            }
            if read.capacity() - read.len() < 1024 {
                read.reserve(8 * 1024);
            }
            let got = match head_deadline {
                None => stream.read_buf(&mut read).await,
                Some(deadline) => {
                    match tokio::time::timeout_at(deadline, stream.read_buf(&mut read)).await {
                        Ok(got) => got,
                        Err(_) => {
                            tracing::debug!(
                                "request head not whole within the header-read timeout; closed"
                            );
                            return Ended::Closed;
                        }
                    }
                }
            };
            match got {
                Ok(0) | Err(_) => return Ended::Closed,
                Ok(_) => {}
            }
        };
        flags.in_request.store(true, Ordering::Relaxed);
        let head_request = request.method() == Method::HEAD;
        // A client that goes away while its request is handled cancels it (the origin
        // request with it), as hyper does; what it pipelines meanwhile is kept.
        let handled = handle(request);
        tokio::pin!(handled);
        let response = loop {
            tokio::select! {
                biased;
                response = &mut handled => break response,
                read_more = read_beside(&mut stream, &mut read, max_bytes) => {
                    if !read_more {
                        tracing::debug!("the client closed the connection before its answer");
                        return Ended::Closed;
                    }
                }
            }
        };
        let close = close || flags.stop.load(Ordering::Relaxed);
        if write_response(&mut stream, &mut write, response, head_request, close)
            .await
            .is_err()
            || close
        {
            let _ = stream.shutdown().await;
            return Ended::Closed;
        }
        flags.in_request.store(false, Ordering::Relaxed);
    }
}

/// Reads what the client sends while its request is handled (the next pipelined
/// requests) into `read`, up to `limit` bytes, then waits; `false` when the client closed
/// the connection (or it failed).
async fn read_beside<S: AsyncRead + Unpin>(
    stream: &mut S,
    read: &mut BytesMut,
    limit: usize,
) -> bool {
    if read.len() >= limit {
        return std::future::pending().await;
    }
    if read.capacity() - read.len() < 1024 {
        read.reserve(8 * 1024);
    }
    matches!(stream.read_buf(read).await, Ok(n) if n > 0)
}

/// Reads one request head from the front of `read`; consumes it only when this loop
/// serves it (a request for hyper stays in `read`, to be replayed).
fn parse(read: &mut BytesMut, max_headers: usize, max_bytes: usize) -> Parsed {
    let mut headers = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut []);
    let length = match httparse::ParserConfig::default().parse_request_with_uninit_headers(
        &mut request,
        read,
        &mut headers[..max_headers],
    ) {
        Ok(httparse::Status::Complete(length)) if length <= max_bytes => length,
        Ok(httparse::Status::Partial) if read.len() < max_bytes => return Parsed::Partial,
        // Over a limit, malformed, or HTTP/2's preface: hyper answers.
        _ => return Parsed::NotMine,
    };
    if request.version != Some(1) {
        return Parsed::NotMine;
    }
    let (Some(method), Some(target)) = (request.method, request.path) else {
        return Parsed::NotMine;
    };
    let Ok(method) = Method::from_bytes(method.as_bytes()) else {
        return Parsed::NotMine;
    };
    if method == Method::CONNECT {
        return Parsed::NotMine;
    }
    let Some(target) = wire::value_range(read, length, target.as_bytes()) else {
        return Parsed::NotMine;
    };
    let mut lines: smallvec::SmallVec<[(HeaderName, Range<usize>); 32]> =
        smallvec::SmallVec::with_capacity(request.headers.len());
    let mut close = false;
    let mut content_length = false;
    for line in request.headers.iter() {
        let Ok(name) = HeaderName::from_bytes(line.name.as_bytes()) else {
            return Parsed::NotMine;
        };
        // A body (by either framing), an expectation or an upgrade: hyper's. So is a
        // second `content-length`, even an equal one: hyper folds the two into one
        // (the differential test below found it), and an origin must see one.
        if name == header::TRANSFER_ENCODING
            || name == header::EXPECT
            || name == header::UPGRADE
            || (name == header::CONTENT_LENGTH
                && (line.value != b"0" || std::mem::replace(&mut content_length, true)))
        {
            return Parsed::NotMine;
        }
        if name == header::CONNECTION {
            for token in wire::tokens(line.value) {
                if token.eq_ignore_ascii_case(b"close") {
                    close = true;
                } else if token.eq_ignore_ascii_case(b"upgrade") {
                    return Parsed::NotMine;
                }
            }
        }
        let Some(value) = wire::value_range(read, length, line.value) else {
            return Parsed::NotMine;
        };
        lines.push((name, value));
    }
    let head = read.split_to(length).freeze();
    let uri = Uri::from_maybe_shared(head.slice(target)).ok();
    let (Some(uri), Some(map)) = (uri, wire::header_map(&head, lines.into_iter())) else {
        // Give hyper the bytes back: it answers the bad target or header value.
        let mut back = BytesMut::from(&head[..]);
        back.extend_from_slice(read);
        *read = back;
        return Parsed::NotMine;
    };
    let mut request = Request::new(Empty::new());
    *request.method_mut() = method;
    *request.uri_mut() = uri;
    *request.version_mut() = Version::HTTP_11;
    *request.headers_mut() = map;
    Parsed::Simple(request, close)
}

/// How a response's body goes on the wire.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Framing {
    /// No body follows the head (HEAD, 1xx, 204, 304).
    None,
    Length(u64),
    Chunked,
}

/// Writes `response` whole; an error means the connection must close (the client went
/// away, or the body broke off and the response cannot be ended as if whole).
async fn write_response<S>(
    stream: &mut S,
    out: &mut Vec<u8>,
    response: Response<Body>,
    head_request: bool,
    close: bool,
) -> std::io::Result<()>
where
    S: AsyncWrite + Unpin,
{
    let (parts, mut body) = response.into_parts();
    let status = parts.status;
    let framing = if head_request
        || status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
    {
        Framing::None
    } else {
        match body.size_hint().exact() {
            Some(length) => Framing::Length(length),
            None => Framing::Chunked,
        }
    };
    out.clear();
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(status.canonical_reason().unwrap_or("").as_bytes());
    out.extend_from_slice(b"\r\n");
    for (name, value) in &parts.headers {
        // The framing is this loop's; so is the connection's fate.
        if (framing != Framing::None && name == header::CONTENT_LENGTH)
            || name == header::TRANSFER_ENCODING
            || name == header::CONNECTION
        {
            continue;
        }
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    // A HEAD answered by the gateway itself says how long its body would be.
    if head_request
        && !parts.headers.contains_key(header::CONTENT_LENGTH)
        && let Some(length) = body.size_hint().exact().filter(|&length| length > 0)
    {
        push_content_length(out, length);
    }
    match framing {
        Framing::None => {}
        Framing::Length(length) => push_content_length(out, length),
        Framing::Chunked => out.extend_from_slice(b"transfer-encoding: chunked\r\n"),
    }
    if !parts.headers.contains_key(header::DATE) {
        out.extend_from_slice(b"date: ");
        push_date(out);
        out.extend_from_slice(b"\r\n");
    }
    if close {
        out.extend_from_slice(b"connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");

    if framing != Framing::None {
        let mut left = match framing {
            Framing::Length(length) => length,
            _ => u64::MAX,
        };
        while !body.is_end_stream() {
            // A frame at hand joins what is gathered; before waiting for one, what is
            // gathered goes out.
            let frame =
                match std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut body).poll_frame(cx)))
                    .await
                {
                    Poll::Ready(frame) => frame,
                    Poll::Pending => {
                        if !out.is_empty() {
                            stream.write_all(out).await?;
                            out.clear();
                        }
                        // What TLS holds back goes out before the wait (a no-op on TCP).
                        stream.flush().await?;
                        body.frame().await
                    }
                };
            let Some(frame) = frame else { break };
            let Ok(data) = frame
                .map_err(|err| std::io::Error::other(err.to_string()))?
                .into_data()
            else {
                continue;
            };
            if data.is_empty() {
                continue;
            }
            if framing == Framing::Chunked {
                push_chunk_size(out, data.len());
            } else {
                left = left
                    .checked_sub(data.len() as u64)
                    .ok_or_else(|| std::io::Error::other("the body ran past its length"))?;
            }
            if out.len() + data.len() <= WRITE_GATHER {
                out.extend_from_slice(&data);
            } else {
                let mut both = bytes::Buf::chain(&out[..], data);
                stream.write_all_buf(&mut both).await?;
                out.clear();
            }
            if framing == Framing::Chunked {
                out.extend_from_slice(b"\r\n");
            }
        }
        match framing {
            Framing::Chunked => out.extend_from_slice(b"0\r\n\r\n"),
            Framing::Length(_) if left != 0 => {
                return Err(std::io::Error::other("the body ended short of its length"));
            }
            _ => {}
        }
    }
    if !out.is_empty() {
        stream.write_all(out).await?;
    }
    if out.capacity() > WRITE_KEEP {
        *out = Vec::with_capacity(8 * 1024);
    }
    stream.flush().await
}

thread_local! {
    /// The `Date` of this second, formatted once per second per thread.
    static DATE: RefCell<(u64, [u8; 29])> = const { RefCell::new((u64::MAX, [0; 29])) };
}

/// Appends the HTTP date of now (IMF-fixdate, RFC 9110 §5.6.7).
fn push_date(out: &mut Vec<u8>) {
    let now = std::time::SystemTime::now();
    let second = now
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    DATE.with_borrow_mut(|(cached, text)| {
        if *cached != second {
            let formatted = httpdate::fmt_http_date(now);
            if formatted.len() == text.len() {
                text.copy_from_slice(formatted.as_bytes());
                *cached = second;
            }
        }
        out.extend_from_slice(text);
    });
}

#[cfg(test)]
mod tests {
    //! The loop's request parser against hyper's server, on generated byte streams:
    //! whatever the loop takes as its own, hyper reads alike (method, target, header
    //! lines, no body); anything else goes to hyper. Never a panic.

    use super::*;
    use proptest::prelude::*;
    use std::sync::Arc;

    /// What hyper's server read of the first request on a connection.
    #[derive(Debug, PartialEq, Eq)]
    struct Read {
        method: String,
        target: String,
        headers: Vec<(String, Vec<u8>)>,
        body: Vec<u8>,
    }

    /// hyper's reading of `bytes` sent on a connection that then closes; `None` when
    /// hyper refused them or read no whole request.
    fn hyper_reads(bytes: &[u8]) -> Option<Read> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .ok()?;
        runtime.block_on(async {
            let (client, server) = tokio::io::duplex(1 << 20);
            let seen = Arc::new(std::sync::Mutex::new(None));
            let service = {
                let seen = seen.clone();
                hyper::service::service_fn(move |request: Request<hyper::body::Incoming>| {
                    let seen = seen.clone();
                    async move {
                        let (parts, body) = request.into_parts();
                        let body = body.collect().await.map(|b| b.to_bytes().to_vec());
                        if let Ok(body) = body {
                            let mut seen = seen.lock().unwrap();
                            seen.get_or_insert(Read {
                                method: parts.method.to_string(),
                                target: parts.uri.to_string(),
                                headers: parts
                                    .headers
                                    .iter()
                                    .map(|(n, v)| (n.to_string(), v.as_bytes().to_vec()))
                                    .collect(),
                                body,
                            });
                        }
                        Ok::<_, std::convert::Infallible>(Response::new(Empty::<Bytes>::new()))
                    }
                })
            };
            // The client sends its bytes and half-closes: hyper still answers them.
            let connection = hyper::server::conn::http1::Builder::new()
                .half_close(true)
                .max_headers(MAX_HEADERS)
                .serve_connection(hyper_util::rt::TokioIo::new(server), service);
            let (mut reader, mut writer) = tokio::io::split(client);
            let send = async {
                let _ = writer.write_all(bytes).await;
                let _ = writer.shutdown().await;
                let mut sink = Vec::new();
                let _ = reader.read_to_end(&mut sink).await;
            };
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), async {
                tokio::join!(connection, send)
            })
            .await;
            seen.lock().unwrap().take()
        })
    }

    /// The loop's reading of `bytes`: its request when it takes the head as its own.
    fn loop_reads(bytes: &[u8]) -> Option<Read> {
        let mut read = BytesMut::from(bytes);
        match parse(&mut read, MAX_HEADERS, 64 * 1024) {
            Parsed::Simple(request, _) => Some(Read {
                method: request.method().to_string(),
                target: request.uri().to_string(),
                headers: request
                    .headers()
                    .iter()
                    .map(|(n, v)| (n.to_string(), v.as_bytes().to_vec()))
                    .collect(),
                body: Vec::new(),
            }),
            Parsed::Partial | Parsed::NotMine => None,
        }
    }

    /// Checks one stream: the loop's own requests are hyper's requests.
    fn agree(bytes: &[u8]) -> Result<(), TestCaseError> {
        if let Some(ours) = loop_reads(bytes) {
            let theirs = hyper_reads(bytes);
            prop_assert_eq!(
                Some(&ours),
                theirs.as_ref(),
                "{:?}",
                String::from_utf8_lossy(bytes)
            );
        }
        Ok(())
    }

    fn line_end() -> impl Strategy<Value = &'static str> {
        prop_oneof![8 => Just("\r\n"), 1 => Just("\n"), 1 => Just("\r"), 1 => Just("\r\r\n")]
    }

    fn method() -> impl Strategy<Value = String> {
        prop_oneof![
            8 => prop::sample::select(vec!["GET", "HEAD", "OPTIONS", "DELETE", "POST", "PUT"])
                .prop_map(str::to_owned),
            1 => prop::sample::select(vec!["get", "G ET", "", "GET\0", "CONNECT", "GÉT", "G\tT"])
                .prop_map(str::to_owned),
            1 => "[!-~]{1,8}",
        ]
    }

    fn target() -> impl Strategy<Value = String> {
        prop_oneof![
            6 => prop::sample::select(vec![
                "/", "/index.html", "/a/b?c=d&e", "/%2e%2e/x", "*", "http://example.com/x",
                "example.com:443", "/a b", "/a\tb", "/\u{0}", "//x", "/?", "/#frag", "",
                "/é", "/a\\b",
            ])
            .prop_map(str::to_owned),
            2 => "/[ -~]{0,20}",
            1 => "[\\x00-\\xff]{0,8}",
        ]
    }

    fn version() -> impl Strategy<Value = &'static str> {
        prop_oneof![
            8 => Just("HTTP/1.1"),
            1 => prop::sample::select(vec![
                "HTTP/1.0", "HTTP/1.2", "HTTP/2.0", "http/1.1", "HTTP/1.1 ", "HTTP/11", "HTTP/1.10",
            ]),
        ]
    }

    fn header() -> impl Strategy<Value = String> {
        let name = prop_oneof![
            6 => prop::sample::select(vec![
                "host", "Host", "user-agent", "accept", "content-length", "Content-Length",
                "transfer-encoding", "connection", "expect", "upgrade", "cookie", "x-a",
            ])
            .prop_map(str::to_owned),
            1 => prop::sample::select(vec!["x a", "x:a", "", "x\u{0}", " host", "host ", "é"])
                .prop_map(str::to_owned),
            1 => "[!-~]{1,6}",
        ];
        let value = prop_oneof![
            6 => prop::sample::select(vec![
                "example.com", "0", "5", "+5", " 0", "0 ", "0,0", "00", "-1", "1 2",
                "chunked", "gzip, chunked", "chunked, gzip", "close", "keep-alive", "Upgrade",
                "100-continue", "websocket", "a=b; c=d", "",
            ])
            .prop_map(str::to_owned),
            1 => prop::sample::select(vec![
                "a\r\n b", "a\n b", "a\u{0}b", "a\rb", "\u{7f}", "é", "a\tb", "  spaced  ",
            ])
            .prop_map(str::to_owned),
            1 => "[ -~]{0,12}",
        ];
        (
            name,
            value,
            prop::sample::select(vec![": ", ":", " : ", ":\t"]),
        )
            .prop_map(|(name, value, colon)| format!("{name}{colon}{value}"))
    }

    fn request() -> impl Strategy<Value = Vec<u8>> {
        (
            method(),
            target(),
            version(),
            prop::collection::vec((header(), line_end()), 0..8),
            line_end(),
            line_end(),
            prop::collection::vec(any::<u8>(), 0..12),
        )
            .prop_map(|(method, target, version, headers, first, last, tail)| {
                let mut bytes = format!("{method} {target} {version}{first}").into_bytes();
                for (header, end) in headers {
                    bytes.extend_from_slice(header.as_bytes());
                    bytes.extend_from_slice(end.as_bytes());
                }
                bytes.extend_from_slice(last.as_bytes());
                bytes.extend_from_slice(&tail);
                bytes
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 4000, ..ProptestConfig::default() })]

        #[test]
        fn the_loop_reads_what_hyper_reads(bytes in request()) {
            agree(&bytes)?;
        }

        #[test]
        fn arbitrary_bytes_never_panic_and_never_disagree(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
            agree(&bytes)?;
        }
    }

    /// The generated streams are no idle check: a good share of them are requests the
    /// loop takes as its own, and so compares with hyper.
    #[test]
    fn the_generated_streams_exercise_the_loop() {
        use proptest::strategy::ValueTree;
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let taken = (0..1000)
            .filter(|_| {
                let bytes = request().new_tree(&mut runner).unwrap().current();
                loop_reads(&bytes).is_some()
            })
            .count();
        assert!(
            taken >= 20,
            "only {taken} of 1000 generated streams were the loop's"
        );
        let plain = b"GET / HTTP/1.1\r\nhost: example.com\r\n\r\n";
        assert!(loop_reads(plain).is_some());
        assert_eq!(loop_reads(plain), hyper_reads(plain));
    }

    /// Hand-picked streams: the forms of a body's framing, line endings, folding and
    /// bytes that must never pass as the loop's own; each either goes to hyper or is
    /// read exactly as hyper reads it.
    #[test]
    fn hand_picked_streams() {
        let host = "host: example.com\r\n";
        for head in [
            format!("GET / HTTP/1.1\r\n{host}\r\n"),
            format!("GET / HTTP/1.1\r\n{host}content-length: 0\r\n\r\n"),
            format!("GET / HTTP/1.1\r\n{host}content-length: +0\r\n\r\n"),
            format!("GET / HTTP/1.1\r\n{host}content-length: 0\r\ncontent-length: 0\r\n\r\n"),
            format!("GET / HTTP/1.1\r\n{host}content-length: 0, 0\r\n\r\n"),
            format!("GET / HTTP/1.1\r\n{host}content-length: 0\r\ncontent-length: 5\r\n\r\nhello"),
            format!("GET / HTTP/1.1\r\n{host}content-length: 5\r\n\r\nhello"),
            format!("GET / HTTP/1.1\r\n{host}transfer-encoding: chunked\r\n\r\n0\r\n\r\n"),
            format!("GET / HTTP/1.1\r\n{host}transfer-encoding: gzip, chunked\r\n\r\n0\r\n\r\n"),
            format!(
                "GET / HTTP/1.1\r\n{host}transfer-encoding: chunked\r\ncontent-length: 0\r\n\r\n0\r\n\r\n"
            ),
            format!(
                "POST / HTTP/1.1\r\n{host}transfer-encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n0\r\nx-t: 1\r\n\r\n"
            ),
            format!("GET / HTTP/1.1\r\n{host}x-folded: a\r\n b\r\n\r\n"),
            format!("GET / HTTP/1.1\n{host}\n"),
            format!("GET / HTTP/1.1\r{host}\r\r\n"),
            format!("GET / HTTP/1.1\r\n{host}x-nul: a\0b\r\n\r\n"),
            format!("GET / HTTP/1.1\r\n{host}x-ctl: a\x01b\r\n\r\n"),
            format!("GET / HTTP/1.1\r\n{host}expect: 100-continue\r\n\r\n"),
            format!("GET / HTTP/1.1\r\n{host}connection: upgrade\r\nupgrade: websocket\r\n\r\n"),
            format!("GET /{} HTTP/1.1\r\n{host}\r\n", "a".repeat(70_000)),
            format!("GET / HTTP/1.0\r\n{host}\r\n"),
            format!("GET / HTTP/1.1\r\n{host}\r\nGET /second HTTP/1.1\r\n{host}\r\n"),
            "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_owned(),
            format!("GET / HTTP/1.1\r\n{}\r\n", "x-many: 1\r\n".repeat(200)),
        ] {
            agree(head.as_bytes()).unwrap();
        }
    }

    /// A response body of pieces, with the exact length it claims (if any).
    struct Pieces {
        pieces: std::collections::VecDeque<Result<Bytes, &'static str>>,
        claims: Option<u64>,
    }

    impl hyper::body::Body for Pieces {
        type Data = Bytes;
        type Error = crate::BoxError;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
            Poll::Ready(self.pieces.pop_front().map(|piece| {
                piece
                    .map(hyper::body::Frame::data)
                    .map_err(|err| err.into())
            }))
        }

        fn size_hint(&self) -> hyper::body::SizeHint {
            self.claims.map_or_else(
                hyper::body::SizeHint::default,
                hyper::body::SizeHint::with_exact,
            )
        }
    }

    fn pieces(pieces: &[Result<&'static [u8], &'static str>], claims: Option<u64>) -> Body {
        let pieces = pieces
            .iter()
            .map(|piece| piece.map(Bytes::from_static))
            .collect();
        Pieces { pieces, claims }.boxed_unsync()
    }

    /// What `write_response` puts on the wire for `response` (the `date` line cut out),
    /// or the error that closes the connection.
    fn wire(response: Response<Body>, head_request: bool, close: bool) -> Result<String, String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let mut sent = Vec::new();
        let mut out = Vec::new();
        runtime
            .block_on(write_response(
                &mut sent,
                &mut out,
                response,
                head_request,
                close,
            ))
            .map_err(|err| err.to_string())?;
        let text = String::from_utf8(sent).unwrap();
        let date = text.find("\r\ndate: ").expect("a date line") + 2;
        let end = date + text[date..].find("\r\n").unwrap() + 2;
        Ok(format!("{}{}", &text[..date], &text[end..]))
    }

    fn response(status: u16, headers: &[(&str, &str)], body: Body) -> Response<Body> {
        let mut response = Response::builder().status(status);
        for (name, value) in headers {
            response = response.header(*name, *value);
        }
        response.body(body).unwrap()
    }

    /// Responses as handlers and origins give them, and the bytes the loop writes: its
    /// own framing (a length when the body's is known, else chunks), none for HEAD, 1xx,
    /// 204 and 304, no hop-by-hop header of the origin's, and an error (the connection
    /// closes) when a body breaks off or ends short of its length.
    #[test]
    fn responses_go_out_framed_as_the_table_says() {
        use crate::{empty, full};
        let big: &'static [u8] = Box::leak(vec![b'b'; 40 * 1024].into_boxed_slice());
        let big_wire = format!(
            "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nhi\r\na000\r\n{}\r\n0\r\n\r\n",
            "b".repeat(40 * 1024)
        );
        // (what, the response, a HEAD request, closing, the bytes or the error)
        type Row = (
            &'static str,
            Response<Body>,
            bool,
            bool,
            Result<String, String>,
        );
        let table: Vec<Row> = vec![
            ("a known length", response(200, &[("x-a", "1")], full("hello")), false, false,
             Ok("HTTP/1.1 200 OK\r\nx-a: 1\r\ncontent-length: 5\r\n\r\nhello".into())),
            ("an empty body", response(200, &[], empty()), false, false,
             Ok("HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n".into())),
            ("the origin's framing and connection headers", response(200,
                &[("content-length", "99"), ("transfer-encoding", "chunked"), ("connection", "keep-alive")],
                full("hello")), false, false,
             Ok("HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello".into())),
            ("an unknown length goes in chunks", response(200, &[],
                pieces(&[Ok(b"hello"), Ok(b""), Ok(b" world")], None)), false, false,
             Ok("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n".into())),
            ("a large piece beside what is gathered", response(200, &[],
                pieces(&[Ok(b"hi"), Ok(big)], None)), false, false, Ok(big_wire)),
            ("HEAD of the gateway's own page says its length", response(404, &[], full("gone")), true, false,
             Ok("HTTP/1.1 404 Not Found\r\ncontent-length: 4\r\n\r\n".into())),
            ("HEAD keeps the origin's length", response(200, &[("content-length", "1234")], empty()), true, false,
             Ok("HTTP/1.1 200 OK\r\ncontent-length: 1234\r\n\r\n".into())),
            ("204 has no body", response(204, &[], full("ignored")), false, false,
             Ok("HTTP/1.1 204 No Content\r\n\r\n".into())),
            ("304 keeps the validators' length", response(304, &[("content-length", "5"), ("etag", "\"e\"")], empty()), false, false,
             Ok("HTTP/1.1 304 Not Modified\r\ncontent-length: 5\r\netag: \"e\"\r\n\r\n".into())),
            ("closing says so", response(200, &[], full("ok")), false, true,
             Ok("HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok".into())),
            ("a body that breaks off", response(200, &[],
                pieces(&[Ok(b"hel"), Err("origin went away")], None)), false, false,
             Err("origin went away".into())),
            ("a body short of its length", response(200, &[],
                pieces(&[Ok(b"hel")], Some(5))), false, false,
             Err("the body ended short of its length".into())),
            ("a body past its length", response(200, &[],
                pieces(&[Ok(b"hello!")], Some(5))), false, false,
             Err("the body ran past its length".into())),
        ];
        let mut wrong = Vec::new();
        for (name, response, head_request, close, expected) in table {
            let came = wire(response, head_request, close);
            if came != expected {
                wrong.push(format!(
                    "{name}:\n  expected {expected:?}\n  came     {came:?}"
                ));
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    /// The loop over a memory stream: the requests it served (method and target) and
    /// how it ended, with the client's side left for the test.
    mod over_a_stream {
        use super::*;
        use std::sync::Mutex;
        use tokio::io::DuplexStream;

        const LIMITS: HeadLimits = HeadLimits {
            max_headers: 100,
            max_bytes: 64 * 1024,
            read_timeout: Duration::from_secs(10),
        };

        /// Answers every request with its target as the body.
        fn echo(
            served: &Mutex<Vec<String>>,
        ) -> impl Fn(Request<Empty<Bytes>>) -> std::future::Ready<Response<Body>> + '_ {
            move |request| {
                let target = request.uri().to_string();
                served
                    .lock()
                    .unwrap()
                    .push(format!("{} {target}", request.method()));
                std::future::ready(Response::new(crate::full(target)))
            }
        }

        /// Everything the client side reads until the loop closes the stream.
        async fn read_all(client: &mut DuplexStream) -> String {
            let mut got = Vec::new();
            let _ = client.read_to_end(&mut got).await;
            String::from_utf8(got).unwrap()
        }

        /// The status lines and bodies of `wire`, in order (dates aside).
        fn answers(wire: &str) -> Vec<(String, String)> {
            let mut out = Vec::new();
            let mut rest = wire;
            while let Some(end) = rest.find("\r\n\r\n") {
                let head = &rest[..end];
                let status = head.lines().next().unwrap().to_owned();
                let length: usize = head
                    .lines()
                    .find_map(|line| line.strip_prefix("content-length: "))
                    .map_or(0, |value| value.parse().unwrap());
                let body = &rest[end + 4..end + 4 + length];
                out.push((status, body.to_owned()));
                rest = &rest[end + 4 + length..];
            }
            out
        }

        #[tokio::test]
        async fn pipelined_requests_are_answered_in_order_on_one_connection() {
            let (mut client, server) = tokio::io::duplex(64 * 1024);
            let served = Mutex::new(Vec::new());
            let flags = Flags::default();
            client
                .write_all(b"GET /a HTTP/1.1\r\nhost: x\r\n\r\nHEAD /b?q=1 HTTP/1.1\r\nhost: x\r\n\r\nGET /c HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n")
                .await
                .unwrap();
            client.shutdown().await.unwrap();
            let (ended, wire) = tokio::join!(
                serve(echo(&served), server, LIMITS, &flags),
                read_all(&mut client)
            );
            assert!(matches!(ended, Ended::Closed));
            assert_eq!(*served.lock().unwrap(), ["GET /a", "HEAD /b?q=1", "GET /c"]);
            // HEAD says the length of the body it does not get.
            let wire = wire.replace("content-length: 6\r\n", "");
            assert_eq!(
                answers(&wire),
                [
                    ("HTTP/1.1 200 OK".to_owned(), "/a".to_owned()),
                    ("HTTP/1.1 200 OK".to_owned(), String::new()),
                    ("HTTP/1.1 200 OK".to_owned(), "/c".to_owned()),
                ]
            );
            assert!(!flags.in_request());
        }

        #[tokio::test]
        async fn a_request_with_a_body_goes_to_hyper_with_every_byte_read() {
            let (mut client, server) = tokio::io::duplex(64 * 1024);
            let served = Mutex::new(Vec::new());
            let upload = "POST /up HTTP/1.1\r\nhost: x\r\ncontent-length: 5\r\n\r\nhello";
            client
                .write_all(format!("GET /first HTTP/1.1\r\nhost: x\r\n\r\n{upload}").as_bytes())
                .await
                .unwrap();
            let ended = serve(echo(&served), server, LIMITS, &Flags::default()).await;
            let Ended::Handoff(mut rest) = ended else {
                panic!("the upload is hyper's");
            };
            assert_eq!(*served.lock().unwrap(), ["GET /first"]);
            let mut replayed = vec![0; upload.len()];
            rest.read_exact(&mut replayed).await.unwrap();
            assert_eq!(String::from_utf8(replayed).unwrap(), upload);
            let mut first = vec![0; 256];
            let n = client.read(&mut first).await.unwrap();
            assert!(String::from_utf8_lossy(&first[..n]).ends_with("\r\n\r\n/first"));
        }

        #[tokio::test]
        async fn connection_close_is_answered_then_the_stream_closes() {
            let (mut client, server) = tokio::io::duplex(64 * 1024);
            let served = Mutex::new(Vec::new());
            client
                .write_all(b"GET /bye HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\nGET /never HTTP/1.1\r\nhost: x\r\n\r\n")
                .await
                .unwrap();
            let flags = Flags::default();
            let (ended, wire) = tokio::join!(
                serve(echo(&served), server, LIMITS, &flags),
                read_all(&mut client)
            );
            assert!(matches!(ended, Ended::Closed));
            assert_eq!(*served.lock().unwrap(), ["GET /bye"]);
            assert!(wire.contains("\r\nconnection: close\r\n"), "{wire}");
            assert!(wire.ends_with("/bye"), "{wire}");
        }

        #[tokio::test(start_paused = true)]
        async fn a_head_not_whole_within_the_read_timeout_closes_the_connection() {
            let (mut client, server) = tokio::io::duplex(64 * 1024);
            let served = Mutex::new(Vec::new());
            client
                .write_all(b"GET /slow HTTP/1.1\r\nhost")
                .await
                .unwrap();
            let started = tokio::time::Instant::now();
            let ended = serve(echo(&served), server, LIMITS, &Flags::default()).await;
            assert!(matches!(ended, Ended::Closed));
            assert_eq!(started.elapsed(), LIMITS.read_timeout);
            assert!(served.lock().unwrap().is_empty());
        }

        #[tokio::test(start_paused = true)]
        async fn an_idle_connection_between_requests_is_not_timed_out_by_the_loop() {
            let (mut client, server) = tokio::io::duplex(64 * 1024);
            let served = Mutex::new(Vec::new());
            let flags = Flags::default();
            let client_side = async {
                tokio::time::sleep(LIMITS.read_timeout * 3).await;
                client
                    .write_all(b"GET /late HTTP/1.1\r\nhost: x\r\n\r\n")
                    .await
                    .unwrap();
                client.shutdown().await.unwrap();
                read_all(&mut client).await
            };
            let (ended, wire) =
                tokio::join!(serve(echo(&served), server, LIMITS, &flags), client_side);
            assert!(matches!(ended, Ended::Closed));
            assert!(wire.ends_with("/late"), "{wire}");
        }

        #[tokio::test]
        async fn a_client_that_goes_away_cancels_its_request() {
            let (mut client, server) = tokio::io::duplex(64 * 1024);
            let dropped = std::sync::Arc::new(AtomicBool::new(false));
            /// Notes that the handler's future was dropped unfinished.
            struct Pending(std::sync::Arc<AtomicBool>);
            impl Drop for Pending {
                fn drop(&mut self) {
                    self.0.store(true, Ordering::Relaxed);
                }
            }
            let handle = |_request| {
                let guard = Pending(dropped.clone());
                async move {
                    let _guard = guard;
                    std::future::pending::<Response<Body>>().await
                }
            };
            client
                .write_all(b"GET /wait HTTP/1.1\r\nhost: x\r\n\r\n")
                .await
                .unwrap();
            let flags = Flags::default();
            let (ended, ()) = tokio::join!(serve(handle, server, LIMITS, &flags), async {
                tokio::task::yield_now().await;
                drop(client);
            });
            assert!(matches!(ended, Ended::Closed));
            assert!(dropped.load(Ordering::Relaxed));
        }

        #[tokio::test]
        async fn a_stop_finishes_the_request_in_flight_then_closes() {
            let (mut client, server) = tokio::io::duplex(64 * 1024);
            let flags = Flags::default();
            let (release, released) = tokio::sync::oneshot::channel::<()>();
            let released = Mutex::new(Some(released));
            let handle = |_request| {
                let released = released.lock().unwrap().take();
                async move {
                    if let Some(released) = released {
                        let _ = released.await;
                    }
                    Response::new(crate::full("done"))
                }
            };
            client
                .write_all(b"GET /a HTTP/1.1\r\nhost: x\r\n\r\nGET /b HTTP/1.1\r\nhost: x\r\n\r\n")
                .await
                .unwrap();
            let stopper = async {
                while !flags.in_request() {
                    tokio::task::yield_now().await;
                }
                flags.stop();
                release.send(()).unwrap();
            };
            let (ended, (), wire) = tokio::join!(
                serve(handle, server, LIMITS, &flags),
                stopper,
                read_all(&mut client)
            );
            assert!(matches!(ended, Ended::Closed));
            assert_eq!(answers(&wire).len(), 1, "{wire}");
            assert!(wire.contains("\r\nconnection: close\r\n"), "{wire}");
        }

        #[tokio::test]
        async fn a_head_over_the_limit_goes_to_hyper_unread() {
            let (mut client, server) = tokio::io::duplex(256 * 1024);
            let served = Mutex::new(Vec::new());
            let big = format!("GET / HTTP/1.1\r\nx-big: {}\r\n\r\n", "a".repeat(70 * 1024));
            client.write_all(big.as_bytes()).await.unwrap();
            let ended = serve(echo(&served), server, LIMITS, &Flags::default()).await;
            let Ended::Handoff(mut rest) = ended else {
                panic!("hyper answers 431");
            };
            let mut replayed = vec![0; big.len()];
            rest.read_exact(&mut replayed).await.unwrap();
            assert_eq!(replayed, big.as_bytes());
            assert!(served.lock().unwrap().is_empty());
        }
    }
}
