//! The gateway's own HTTP/1.1 server loop for the request nearly every visitor sends:
//! HTTP/1.1, no body, no upgrade. It reads heads with `httparse`, hands each request to
//! [`Gateway::handle`] and writes the response (its head and a body already at hand in
//! one write). Everything else — a request with a body, `Expect`, an upgrade, HTTP/1.0,
//! HTTP/2's preface, anything malformed or over a limit — is handed to hyper, with the
//! bytes read so far, at that request's start; hyper serves the rest of the connection
//! and gives its own answers (400, 431, …) to what is wrong.
//!
//! Why not hyper for all of it: on the load benchmark hyper's server cost about 1.7 µs
//! of CPU per request more than this loop's work (README, "The data plane under load"),
//! the largest piece of the proxy core left to a library. hyper stays for the rare and
//! the hard cases, where its generality is the point.

use super::ConnectionInfo;
use crate::gateway::io::Rewind;
use crate::gateway::pages::Body;
use crate::gateway::wire::{self, push_chunk_size, push_content_length};
use crate::gateway::{ConnectionLimits, Gateway};
use bytes::{Bytes, BytesMut};
use http::{HeaderName, Method, Request, Response, StatusCode, Uri, Version, header};
use http_body_util::{BodyExt, Empty};
use hyper::body::Body as _;
use std::cell::RefCell;
use std::mem::MaybeUninit;
use std::ops::Range;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Poll;
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

/// Serves requests on `stream` until it closes, or until a request is hyper's.
pub async fn serve<S>(
    served: &(Arc<Gateway>, ConnectionInfo),
    mut stream: S,
    limits: &ConnectionLimits,
    flags: &Flags,
) -> Ended<S>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let (gateway, info) = served;
    let mut read = BytesMut::with_capacity(8 * 1024);
    let mut write = Vec::with_capacity(8 * 1024);
    let max_headers = limits.max_headers.min(MAX_HEADERS);
    loop {
        if flags.stop.load(Ordering::Relaxed) {
            return Ended::Closed;
        }
        // The head: the header-read timeout runs from its first byte (an idle
        // connection between requests is the idle check's).
        let mut head_deadline = None;
        let (request, close) = loop {
            if !read.is_empty() {
                match parse(&mut read, max_headers, limits.max_header_bytes) {
                    Parsed::Simple(request, close) => break (request, close),
                    Parsed::NotMine => return Ended::Handoff(Rewind::new(read.to_vec(), stream)),
                    Parsed::Partial => {
                        head_deadline.get_or_insert_with(|| {
                            tokio::time::Instant::now() + limits.header_read_timeout
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
        let handled = gateway.handle(request, info);
        tokio::pin!(handled);
        let response = loop {
            tokio::select! {
                biased;
                handled = &mut handled => {
                    let Ok(response) = handled;
                    break response;
                }
                read_more = read_beside(&mut stream, &mut read, limits.max_header_bytes) => {
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
    for line in request.headers.iter() {
        let Ok(name) = HeaderName::from_bytes(line.name.as_bytes()) else {
            return Parsed::NotMine;
        };
        // A body (by either framing), an expectation or an upgrade: hyper's.
        if name == header::TRANSFER_ENCODING
            || name == header::EXPECT
            || name == header::UPGRADE
            || (name == header::CONTENT_LENGTH && line.value != b"0")
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
