//! The HTTP/1.1 client side of one origin connection, on `httparse`: a request written,
//! its response head read (interim 1xx answers skipped), the response body framed as
//! RFC 9112 §6.3 says, and the connection handed back for the next request when the
//! body ended cleanly.
//!
//! The gateway's own rather than hyper's `client::conn` because hyper's client runs
//! each connection as a task of its own that the request reaches through channels: on
//! the load benchmark that cost about 1 µs of CPU per request (benches/README.md, "The data plane
//! under load"), the largest part of the proxy core a library spent. Here the request's
//! own task writes and reads the connection, and a response that arrived whole in one
//! read is handed on without another system call. What this side does not do, it
//! refuses rather than guesses: a malformed head, an over-long head, a conflicting
//! `Content-Length`, a body cut short are errors, and a response framed by anything
//! but its length is never followed by another on the same connection unless it was
//! chunked and ended cleanly.

use crate::Rewind;
use crate::body::{Body, BoxError};
use crate::wire::{
    content_length, header_map, push_chunk_size, push_content_length, tokens, value_range,
};
use bytes::{Buf, Bytes, BytesMut};
use http::{HeaderName, Method, Response, StatusCode, Version, header};
use http_body_util::BodyExt;
use hyper::body::{Body as _, Frame, SizeHint};
use std::io;
use std::mem::MaybeUninit;
use std::ops::Range;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// The longest response head (status line and header lines) an origin may send.
pub const MAX_HEAD_BYTES: usize = 64 * 1024;
/// The most header lines in a response head.
pub const MAX_HEADERS: usize = 128;
/// The most interim (1xx) answers before a request's final one: 103 Early Hints may
/// come more than once, an endless stream of them is an origin keeping a thread busy.
pub const MAX_INTERIM_ANSWERS: usize = 32;
/// How much is read from the origin at a time.
const READ_SIZE: usize = 16 * 1024;
/// The longest chunk-size line (with its extensions) of a chunked body.
const MAX_CHUNK_LINE: usize = 4 * 1024;
/// The longest trailer section of a chunked body (trailers are read and dropped).
const MAX_TRAILERS: usize = 16 * 1024;

/// The byte stream to an origin (TCP, TLS over it, or memory in tests).
pub trait Transport: AsyncRead + AsyncWrite + Unpin {
    /// Whether the event loop has seen the stream become readable since the last read
    /// that emptied it, without a system call; `false` when the transport cannot tell
    /// (then [`Connection::is_open`] is the check).
    fn read_ready(&self) -> bool;
}

impl Transport for TcpStream {
    fn read_ready(&self) -> bool {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        self.poll_read_ready(&mut cx).is_ready()
    }
}

/// Why an exchange with an origin failed.
#[derive(Debug, thiserror::Error)]
pub enum Http1Error {
    /// The connection failed or closed before the origin took any of the request's body
    /// or sent any byte of an answer: on a kept-alive connection, the origin closed it
    /// while it was idle, and the request can go again on a new one.
    #[error("the connection closed before an answer: {0}")]
    Stale(io::Error),
    #[error("writing the request: {0}")]
    Write(io::Error),
    #[error("reading the response: {0}")]
    Read(io::Error),
    #[error("the origin closed the connection within the response head")]
    ClosedInHead,
    #[error("malformed response head: {0}")]
    MalformedHead(String),
    #[error("the response head is over {MAX_HEAD_BYTES} bytes or {MAX_HEADERS} lines")]
    HeadTooLarge,
    #[error("101 Switching Protocols to a request that asked for no upgrade")]
    UnaskedUpgrade,
    #[error("more than {MAX_INTERIM_ANSWERS} interim (1xx) answers before the final one")]
    TooManyInterimAnswers,
    #[error("the origin closed the connection {0} bytes short of the response's length")]
    BodyCut(u64),
    #[error("the origin closed the connection within a chunked response")]
    ChunkedCut,
    #[error("malformed chunked response body: {0}")]
    MalformedChunk(&'static str),
    /// The client's request body failed on its way (its stream broke off).
    #[error("the request body: {0}")]
    RequestBody(BoxError),
    /// The client's request body was not as long as its `Content-Length` said.
    #[error("the request body ran {0} its declared length")]
    RequestLength(&'static str),
}

impl Http1Error {
    /// Whether the request's body is at fault rather than the origin.
    pub fn is_request(&self) -> bool {
        matches!(
            self,
            Http1Error::RequestBody(_) | Http1Error::RequestLength(_)
        )
    }
}

/// How far a request body went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sent {
    Whole,
    /// The origin answered before it took all of it.
    AnsweredEarly,
}

/// How a request's body is framed on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RequestFraming {
    /// No body and no framing header (a GET).
    Empty,
    Length(u64),
    Chunked,
}

/// How the rest of a response's body is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    /// So many bytes left.
    Length(u64),
    Chunked(Chunk),
    /// Everything until the origin closes the connection.
    UntilClose,
    Done,
}

/// Where a chunked body's reader is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    /// Before a chunk-size line.
    Size,
    /// Within a chunk, so many bytes left.
    Data(u64),
    /// After a chunk's data, before its CRLF.
    DataEnd,
    /// After the last chunk: trailer lines until an empty one.
    Trailers,
}

/// A response head as read, and how its body follows.
pub struct ResponseHead {
    pub parts: http::response::Parts,
    framing: Framing,
    /// Whether the connection may carry another request once the body is read.
    keep_alive: bool,
}

impl ResponseHead {
    /// Whether the origin switched protocols (the connection is now the tunnel's).
    pub fn is_upgrade(&self) -> bool {
        self.parts.status == StatusCode::SWITCHING_PROTOCOLS
    }
}

/// One connection to an origin, with what was read of it but not yet used.
pub struct Connection<S> {
    stream: S,
    read: BytesMut,
    /// The request head being written (its allocation reused).
    write: Vec<u8>,
    /// Interim answers read past in this exchange.
    interim: usize,
}

impl<S: Transport> Connection<S> {
    pub fn new(stream: S) -> Connection<S> {
        Connection {
            stream,
            read: BytesMut::with_capacity(READ_SIZE),
            write: Vec::with_capacity(1024),
            interim: 0,
        }
    }

    /// Whether an idle connection is still open: no end of stream and no stray bytes
    /// are waiting on it. Reads once without waiting (one system call).
    pub fn is_open(&mut self) -> bool {
        if !self.read.is_empty() {
            return false;
        }
        let mut cx = Context::from_waker(std::task::Waker::noop());
        matches!(self.poll_fill(&mut cx), Poll::Pending)
    }

    /// Whether the event loop has seen the origin's socket become readable since the
    /// last read that emptied it: on an idle connection, stray bytes or its close. No
    /// system call (the readiness tokio keeps from epoll; nginx checks the same before it
    /// reuses a kept-alive connection). An event the loop has not yet taken in is not
    /// seen; [`Connection::is_open`] reads to be sure.
    pub fn has_news(&self) -> bool {
        !self.read.is_empty() || self.stream.read_ready()
    }

    /// Lets a read buffer that a large response grew go, so an idle connection holds
    /// little.
    pub fn trim(&mut self) {
        if self.read.is_empty() && self.read.capacity() > 4 * READ_SIZE {
            self.read = BytesMut::new();
        }
        if self.write.capacity() > 4 * READ_SIZE {
            self.write = Vec::new();
        }
    }

    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        if self.read.capacity() - self.read.len() < READ_SIZE / 4 {
            self.read.reserve(READ_SIZE);
        }
        tokio_util::io::poll_read_buf(Pin::new(&mut self.stream), cx, &mut self.read)
    }

    async fn fill(&mut self) -> io::Result<usize> {
        std::future::poll_fn(|cx| self.poll_fill(cx)).await
    }

    /// Sends one request and reads its response head. `parts` stay the caller's, so a
    /// request whose connection turned out [`Http1Error::Stale`] can be sent again;
    /// `body` is taken from only once the head is written.
    pub async fn exchange(
        &mut self,
        parts: &http::request::Parts,
        body: &mut Body,
        upgrade: bool,
    ) -> Result<ResponseHead, Http1Error> {
        let framing = request_framing(parts, body);
        // A body on a method whose body means nothing may be left unread by the
        // origin, and its bytes read there as a request the rules never saw: the
        // origin is asked to close after its answer (RFC 9112 §9.6), so it reads no
        // further, and the connection is not reused.
        let unexpected_body = framing != RequestFraming::Empty
            && !body.is_end_stream()
            && matches!(parts.method, Method::GET | Method::HEAD | Method::DELETE);
        self.interim = 0;
        self.write_head(parts, framing, unexpected_body);
        let written = self.stream.write_all(&self.write).await;
        written.map_err(Http1Error::Stale)?;
        // A body the origin stopped taking may have been refused with an answer (a 413
        // before the upload ends): that answer is read before the write error counts.
        let mut body_failed = None;
        let mut body_sent = false;
        let mut answered_early = false;
        if framing != RequestFraming::Empty {
            // A body known to be empty (`content-length: 0`) gives nothing away: the
            // request can still go again.
            body_sent = !body.is_end_stream();
            match self.write_body(body, framing).await {
                Ok(Sent::Whole) => {}
                Ok(Sent::AnsweredEarly) => answered_early = true,
                Err(err @ (Http1Error::RequestBody(_) | Http1Error::RequestLength(_))) => {
                    return Err(err);
                }
                Err(err) => body_failed = Some(err),
            }
        }
        if body_failed.is_none() && !answered_early {
            let flushed = self.stream.flush().await;
            flushed.map_err(if body_sent {
                Http1Error::Write
            } else {
                Http1Error::Stale
            })?;
        }
        match self.read_head(parts.method == Method::HEAD, upgrade).await {
            Err(Http1Error::Stale(err)) if body_sent => {
                Err(body_failed.unwrap_or(Http1Error::Read(err)))
            }
            Err(err) => Err(body_failed.unwrap_or(err)),
            Ok(mut head) => {
                // A body not sent whole leaves the connection mid-request.
                if body_failed.is_some() || answered_early || unexpected_body {
                    head.keep_alive = false;
                }
                Ok(head)
            }
        }
    }

    /// The request line and headers into `self.write`; the framing header is the
    /// gateway's (a client's `Content-Length` is written only as the framing it chose),
    /// and `close` adds `connection: close`.
    fn write_head(&mut self, parts: &http::request::Parts, framing: RequestFraming, close: bool) {
        let out = &mut self.write;
        out.clear();
        out.extend_from_slice(parts.method.as_str().as_bytes());
        out.push(b' ');
        let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
        out.extend_from_slice(target.as_bytes());
        out.extend_from_slice(b" HTTP/1.1\r\n");
        for (name, value) in &parts.headers {
            if name == header::CONTENT_LENGTH || name == header::TRANSFER_ENCODING {
                continue;
            }
            out.extend_from_slice(name.as_str().as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        match framing {
            RequestFraming::Empty => {}
            RequestFraming::Length(length) => push_content_length(out, length),
            RequestFraming::Chunked => out.extend_from_slice(b"transfer-encoding: chunked\r\n"),
        }
        if close {
            out.extend_from_slice(b"connection: close\r\n");
        }
        out.extend_from_slice(b"\r\n");
    }

    /// Streams the request body in `framing`.
    async fn write_body(
        &mut self,
        body: &mut Body,
        framing: RequestFraming,
    ) -> Result<Sent, Http1Error> {
        let mut sent: u64 = 0;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(Http1Error::RequestBody)?;
            // Request trailers are not forwarded (no origin of a website reads them).
            let Ok(data) = frame.into_data() else {
                continue;
            };
            if data.is_empty() {
                continue;
            }
            sent += data.len() as u64;
            let written = match framing {
                RequestFraming::Length(length) if sent > length => {
                    return Err(Http1Error::RequestLength("past"));
                }
                RequestFraming::Chunked => {
                    let mut size = Vec::with_capacity(18);
                    push_chunk_size(&mut size, data.len());
                    let mut chunk = size.as_slice().chain(data).chain(&b"\r\n"[..]);
                    self.send_unless_answered(&mut chunk).await?
                }
                _ => self.send_unless_answered(&mut data.clone()).await?,
            };
            if written == Sent::AnsweredEarly {
                return Ok(written);
            }
            // What TLS holds back goes out before the wait for the next frame.
            self.stream.flush().await.map_err(Http1Error::Write)?;
        }
        match framing {
            RequestFraming::Length(length) if sent < length => {
                Err(Http1Error::RequestLength("short of"))
            }
            RequestFraming::Chunked => self.send_unless_answered(&mut &b"0\r\n\r\n"[..]).await,
            _ => Ok(Sent::Whole),
        }
    }

    /// Writes `buf` whole, unless the origin stops taking it and answers meanwhile: an
    /// origin that refuses an upload early (a 413, a 401) and reads no more would
    /// otherwise leave both sides waiting (interim answers, a 100 Continue, are read
    /// past and the write goes on).
    async fn send_unless_answered(&mut self, buf: &mut impl Buf) -> Result<Sent, Http1Error> {
        std::future::poll_fn(|cx| {
            while buf.has_remaining() {
                match tokio_util::io::poll_write_buf(Pin::new(&mut self.stream), cx, buf) {
                    Poll::Ready(Ok(0)) => {
                        return Poll::Ready(Err(Http1Error::Write(
                            io::ErrorKind::WriteZero.into(),
                        )));
                    }
                    Poll::Ready(Ok(_)) => {}
                    Poll::Ready(Err(err)) => return Poll::Ready(Err(Http1Error::Write(err))),
                    Poll::Pending => loop {
                        if self.final_head_waiting() {
                            return Poll::Ready(Ok(Sent::AnsweredEarly));
                        }
                        match self.poll_fill(cx) {
                            Poll::Pending => return Poll::Pending,
                            // Closed or failed: the head's reader says what came.
                            Poll::Ready(Ok(0) | Err(_)) => {
                                return Poll::Ready(Ok(Sent::AnsweredEarly));
                            }
                            Poll::Ready(Ok(_)) => {}
                        }
                    },
                }
            }
            Poll::Ready(Ok(Sent::Whole))
        })
        .await
    }

    /// Whether what the origin sent so far starts with a final answer (or something the
    /// head's reader will refuse); interim answers at the front are read past.
    fn final_head_waiting(&mut self) -> bool {
        loop {
            if self.read.is_empty() {
                return false;
            }
            let mut headers =
                [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
            let mut response = httparse::Response::new(&mut []);
            let parsed = httparse::ParserConfig::default().parse_response_with_uninit_headers(
                &mut response,
                &self.read,
                &mut headers,
            );
            match parsed {
                Ok(httparse::Status::Complete(length))
                    if response
                        .code
                        .is_some_and(|code| (100..200).contains(&code) && code != 101) =>
                {
                    if self.interim == MAX_INTERIM_ANSWERS {
                        // The head's reader refuses the next one.
                        return true;
                    }
                    self.interim += 1;
                    self.read.advance(length);
                }
                Ok(httparse::Status::Partial) => return self.read.len() >= MAX_HEAD_BYTES,
                _ => return true,
            }
        }
    }

    /// Reads the response head, skipping interim (1xx) answers other than a 101.
    async fn read_head(
        &mut self,
        head_request: bool,
        upgrade: bool,
    ) -> Result<ResponseHead, Http1Error> {
        let mut answered = false;
        loop {
            if !self.read.is_empty() {
                answered = true;
                if let Some(head) = self.parse_head(head_request, upgrade)? {
                    if head.parts.status.is_informational() && !head.is_upgrade() {
                        if self.interim == MAX_INTERIM_ANSWERS {
                            return Err(Http1Error::TooManyInterimAnswers);
                        }
                        self.interim += 1;
                        continue;
                    }
                    return Ok(head);
                }
            }
            match self.fill().await {
                Ok(0) if answered => return Err(Http1Error::ClosedInHead),
                Ok(0) => {
                    return Err(Http1Error::Stale(io::Error::from(
                        io::ErrorKind::UnexpectedEof,
                    )));
                }
                Ok(_) => {}
                Err(err) if answered => return Err(Http1Error::Read(err)),
                Err(err) => return Err(Http1Error::Stale(err)),
            }
        }
    }

    /// One response head from the buffer, consumed; `None` while it is incomplete.
    fn parse_head(
        &mut self,
        head_request: bool,
        upgrade: bool,
    ) -> Result<Option<ResponseHead>, Http1Error> {
        let mut headers = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
        let mut response = httparse::Response::new(&mut []);
        let parsed = httparse::ParserConfig::default().parse_response_with_uninit_headers(
            &mut response,
            &self.read,
            &mut headers,
        );
        let length = match parsed {
            Ok(httparse::Status::Complete(length)) => length,
            Ok(httparse::Status::Partial) if self.read.len() >= MAX_HEAD_BYTES => {
                return Err(Http1Error::HeadTooLarge);
            }
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(httparse::Error::TooManyHeaders) => return Err(Http1Error::HeadTooLarge),
            Err(err) => return Err(Http1Error::MalformedHead(err.to_string())),
        };
        if length > MAX_HEAD_BYTES {
            return Err(Http1Error::HeadTooLarge);
        }
        let status = response
            .code
            .and_then(|code| StatusCode::from_u16(code).ok())
            .ok_or_else(|| Http1Error::MalformedHead("status code".into()))?;
        let version = if response.version == Some(0) {
            Version::HTTP_10
        } else {
            Version::HTTP_11
        };
        let mut lines: smallvec::SmallVec<[(HeaderName, Range<usize>); 24]> =
            smallvec::SmallVec::with_capacity(response.headers.len());
        let mut length_field: Option<u64> = None;
        let mut transfer_encoding = false;
        let mut chunked_last = false;
        // `close` anywhere wins over `keep-alive` (as hyper's server reads it); an
        // HTTP/1.0 answer stays open only when it asks to.
        let mut says_close = false;
        let mut says_keep_alive = false;
        for line in response.headers.iter() {
            let name = HeaderName::from_bytes(line.name.as_bytes())
                .map_err(|_| Http1Error::MalformedHead(format!("header name {:?}", line.name)))?;
            if name == header::CONTENT_LENGTH {
                let length = content_length(line.value)
                    .ok_or_else(|| Http1Error::MalformedHead("Content-Length".into()))?;
                if length_field.is_some_and(|seen| seen != length) {
                    return Err(Http1Error::MalformedHead(
                        "two different Content-Length values".into(),
                    ));
                }
                length_field = Some(length);
            } else if name == header::TRANSFER_ENCODING {
                transfer_encoding = true;
                chunked_last = tokens(line.value)
                    .last()
                    .is_some_and(|coding| coding.eq_ignore_ascii_case(b"chunked"));
            } else if name == header::CONNECTION {
                for token in tokens(line.value) {
                    says_close |= token.eq_ignore_ascii_case(b"close");
                    says_keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
                }
            }
            let range = value_range(&self.read, length, line.value)
                .ok_or_else(|| Http1Error::MalformedHead(format!("value of {name}")))?;
            lines.push((name, range));
        }
        let head = self.read.split_to(length).freeze();
        let mut map = header_map(&head, lines.into_iter())
            .ok_or_else(|| Http1Error::MalformedHead("a header value".into()))?;
        if status == StatusCode::SWITCHING_PROTOCOLS && !upgrade {
            return Err(Http1Error::UnaskedUpgrade);
        }
        // RFC 9112 §6.3, in its order.
        let mut keep_alive = !says_close && (version == Version::HTTP_11 || says_keep_alive);
        let framing = if head_request
            || status.is_informational()
            || status == StatusCode::NO_CONTENT
            || status == StatusCode::NOT_MODIFIED
        {
            Framing::Done
        } else if transfer_encoding {
            // A length beside a transfer coding is a smuggling attempt or a mistake:
            // the coding wins, the length is not passed on, the connection not reused.
            // Nor is it after a transfer coding in HTTP/1.0, which has none (RFC 9112
            // §6.1).
            if version == Version::HTTP_10 {
                keep_alive = false;
            }
            if length_field.is_some() {
                map.remove(header::CONTENT_LENGTH);
                keep_alive = false;
            }
            if chunked_last {
                Framing::Chunked(Chunk::Size)
            } else {
                keep_alive = false;
                Framing::UntilClose
            }
        } else if let Some(length) = length_field {
            if length == 0 {
                Framing::Done
            } else {
                Framing::Length(length)
            }
        } else {
            keep_alive = false;
            Framing::UntilClose
        };
        let mut response = Response::new(());
        *response.status_mut() = status;
        *response.version_mut() = version;
        *response.headers_mut() = map;
        let (parts, ()) = response.into_parts();
        Ok(Some(ResponseHead {
            parts,
            framing,
            keep_alive,
        }))
    }

    /// The stream after a 101, with what the origin sent past its head.
    pub fn into_upgraded(self) -> Rewind<S> {
        Rewind::new(self.read.to_vec(), self.stream)
    }
}

/// How a request's body goes: by the body's exact length when it knows it (hyper's
/// knows a client's `Content-Length`), else by a `Content-Length` the client sent
/// (HTTP/3), else chunked. A body-less request gets no framing header, except the
/// methods that carry a body, which say `content-length: 0` (as hyper's client did).
fn request_framing(parts: &http::request::Parts, body: &Body) -> RequestFraming {
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|value| content_length(value.as_bytes()));
    match body.size_hint().exact() {
        Some(0)
            if declared.is_none()
                && !matches!(parts.method, Method::POST | Method::PUT | Method::PATCH) =>
        {
            RequestFraming::Empty
        }
        Some(length) => RequestFraming::Length(length),
        None => declared.map_or(RequestFraming::Chunked, RequestFraming::Length),
    }
}

/// A response's body as it comes from the origin connection, which it owns until the
/// body ends; then [`ResponseBody::into_reusable`] gives the connection back.
pub struct ResponseBody<S> {
    connection: Option<Connection<S>>,
    framing: Framing,
    keep_alive: bool,
}

impl<S: Transport> ResponseBody<S> {
    pub fn new(head: &ResponseHead, connection: Connection<S>) -> ResponseBody<S> {
        ResponseBody {
            connection: Some(connection),
            framing: head.framing,
            keep_alive: head.keep_alive,
        }
    }

    /// The connection, when the body was read to its end, the origin keeps the
    /// connection alive, and it sent nothing past the body.
    pub fn take_reusable(&mut self) -> Option<Connection<S>> {
        if self.framing != Framing::Done || !self.keep_alive {
            return None;
        }
        self.connection.take().filter(|c| c.read.is_empty())
    }

    fn fail(&mut self, err: Http1Error) -> Poll<Option<Result<Frame<Bytes>, Http1Error>>> {
        self.connection = None;
        self.framing = Framing::Done;
        Poll::Ready(Some(Err(err)))
    }
}

impl<S: Transport> hyper::body::Body for ResponseBody<S> {
    type Data = Bytes;
    type Error = Http1Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Http1Error>>> {
        let this = self.get_mut();
        loop {
            let Some(connection) = this.connection.as_mut() else {
                return Poll::Ready(None);
            };
            let buffered = connection.read.len() as u64;
            match &mut this.framing {
                Framing::Done => return Poll::Ready(None),
                Framing::Length(left) | Framing::Chunked(Chunk::Data(left)) if buffered > 0 => {
                    let take = (*left).min(buffered);
                    *left -= take;
                    if *left == 0 {
                        this.framing = match this.framing {
                            Framing::Length(_) => Framing::Done,
                            _ => Framing::Chunked(Chunk::DataEnd),
                        };
                    }
                    let data = connection.read.split_to(take as usize).freeze();
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                Framing::UntilClose if buffered > 0 => {
                    let data = connection.read.split().freeze();
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                Framing::Chunked(Chunk::Size) if buffered > 0 => {
                    // httparse reads a line without a digit as the last chunk, and
                    // takes a bare LF within an extension: hyper refuses both.
                    if !connection.read[0].is_ascii_hexdigit() {
                        return this.fail(Http1Error::MalformedChunk("chunk size"));
                    }
                    match httparse::parse_chunk_size(&connection.read) {
                        Ok(httparse::Status::Complete((length, _)))
                            if memchr::memchr(b'\n', &connection.read[..length - 1]).is_some() =>
                        {
                            return this
                                .fail(Http1Error::MalformedChunk("LF within a chunk-size line"));
                        }
                        // The bound holds however the line arrived (whole in one read,
                        // or in pieces).
                        Ok(httparse::Status::Complete((length, _))) if length > MAX_CHUNK_LINE => {
                            return this
                                .fail(Http1Error::MalformedChunk("chunk-size line too long"));
                        }
                        Ok(httparse::Status::Complete((length, size))) => {
                            connection.read.advance(length);
                            this.framing = Framing::Chunked(if size == 0 {
                                Chunk::Trailers
                            } else {
                                Chunk::Data(size)
                            });
                            continue;
                        }
                        Ok(httparse::Status::Partial)
                            if connection.read.len() <= MAX_CHUNK_LINE => {}
                        Ok(httparse::Status::Partial) => {
                            return this
                                .fail(Http1Error::MalformedChunk("chunk-size line too long"));
                        }
                        Err(_) => return this.fail(Http1Error::MalformedChunk("chunk size")),
                    }
                }
                Framing::Chunked(Chunk::DataEnd) if buffered >= 2 => {
                    if &connection.read[..2] != b"\r\n" {
                        return this.fail(Http1Error::MalformedChunk("no CRLF after a chunk"));
                    }
                    connection.read.advance(2);
                    this.framing = Framing::Chunked(Chunk::Size);
                    continue;
                }
                Framing::Chunked(Chunk::Trailers) if buffered > 0 => {
                    let end = if connection.read.starts_with(b"\r\n") {
                        Some(2)
                    } else {
                        memchr::memmem::find(&connection.read, b"\r\n\r\n").map(|at| at + 4)
                    };
                    match end {
                        Some(end) => {
                            connection.read.advance(end);
                            this.framing = Framing::Done;
                            return Poll::Ready(None);
                        }
                        None if connection.read.len() > MAX_TRAILERS => {
                            return this.fail(Http1Error::MalformedChunk("trailers too long"));
                        }
                        None => {}
                    }
                }
                _ => {}
            }
            // Nothing usable is buffered: read more.
            let read = ready!(connection.poll_fill(cx));
            match (read, this.framing) {
                (Ok(0), Framing::UntilClose) => {
                    this.framing = Framing::Done;
                    this.keep_alive = false;
                    return Poll::Ready(None);
                }
                (Ok(0), Framing::Length(left)) => return this.fail(Http1Error::BodyCut(left)),
                (Ok(0), _) => return this.fail(Http1Error::ChunkedCut),
                (Ok(_), _) => {}
                (Err(err), _) => return this.fail(Http1Error::Read(err)),
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.framing == Framing::Done
    }

    fn size_hint(&self) -> SizeHint {
        match self.framing {
            Framing::Done => SizeHint::with_exact(0),
            Framing::Length(left) => SizeHint::with_exact(left),
            _ => SizeHint::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::io::DuplexStream;

    /// Memory streams tell nothing without a read: [`Connection::is_open`] reads.
    impl Transport for DuplexStream {
        fn read_ready(&self) -> bool {
            false
        }
    }

    /// The origin's side of one connection in memory, scripted by the test: the
    /// client side is the gateway's [`Connection`] exactly as it talks to origins.
    fn pair() -> (Connection<DuplexStream>, DuplexStream) {
        let (client, origin) = tokio::io::duplex(64 * 1024);
        (Connection::new(client), origin)
    }

    /// A request body of pieces whose length is not known beforehand (as a client's
    /// chunked upload).
    struct Pieces(std::collections::VecDeque<Bytes>);

    impl hyper::body::Body for Pieces {
        type Data = Bytes;
        type Error = BoxError;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
            Poll::Ready(self.0.pop_front().map(|piece| Ok(Frame::data(piece))))
        }
    }

    fn pieces(pieces: &[&'static [u8]]) -> Body {
        Pieces(pieces.iter().map(|p| Bytes::from_static(p)).collect()).boxed_unsync()
    }

    fn request(method: Method, headers: &[(&str, &str)]) -> http::request::Parts {
        let mut request = http::Request::builder().method(method).uri("/p?q=1");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.body(()).unwrap().into_parts().0
    }

    /// Reads one request from the origin's side: the head, then `body` more bytes.
    async fn read_request(origin: &mut DuplexStream, body: usize) -> Vec<u8> {
        use tokio::io::AsyncReadExt;
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            if let Some(end) = memchr::memmem::find(&got, b"\r\n\r\n")
                && got.len() >= end + 4 + body
            {
                return got;
            }
            match origin.read(&mut buf).await.unwrap() {
                0 => return got,
                n => got.extend_from_slice(&buf[..n]),
            }
        }
    }

    /// What came of one exchange, as the table states it.
    #[derive(Debug, PartialEq)]
    enum Came {
        /// The status, the body, and whether the connection could carry another request.
        Answer(u16, Vec<u8>, bool),
        /// The exchange or the body failed, with this error.
        Failed(&'static str),
    }

    fn kind(err: &Http1Error) -> &'static str {
        match err {
            Http1Error::Stale(_) => "Stale",
            Http1Error::Write(_) => "Write",
            Http1Error::Read(_) => "Read",
            Http1Error::ClosedInHead => "ClosedInHead",
            Http1Error::MalformedHead(_) => "MalformedHead",
            Http1Error::HeadTooLarge => "HeadTooLarge",
            Http1Error::UnaskedUpgrade => "UnaskedUpgrade",
            Http1Error::TooManyInterimAnswers => "TooManyInterimAnswers",
            Http1Error::BodyCut(_) => "BodyCut",
            Http1Error::ChunkedCut => "ChunkedCut",
            Http1Error::MalformedChunk(_) => "MalformedChunk",
            Http1Error::RequestBody(_) => "RequestBody",
            Http1Error::RequestLength(_) => "RequestLength",
        }
    }

    /// Sends a `method` request with no body, has the origin answer `answer` and close
    /// its side, and reads the response to its end.
    async fn answered(method: Method, answer: Vec<u8>) -> (Came, Option<http::HeaderMap>) {
        let (mut connection, mut origin) = pair();
        let origin_side = async move {
            read_request(&mut origin, 0).await;
            // A client that refuses the head early stops reading: the rest is unsent.
            let _ = origin.write_all(&answer).await;
            let _ = origin.shutdown().await;
            // Kept open for reading until the client is done.
            origin
        };
        let client_side = async {
            let parts = request(method, &[("host", "origin.example")]);
            let head = match connection
                .exchange(&parts, &mut crate::empty(), false)
                .await
            {
                Ok(head) => head,
                Err(err) => return (Came::Failed(kind(&err)), None),
            };
            let status = head.parts.status.as_u16();
            let headers = head.parts.headers.clone();
            let mut body = ResponseBody::new(&head, connection);
            let mut bytes = Vec::new();
            while let Some(frame) = body.frame().await {
                match frame {
                    Ok(frame) => bytes.extend_from_slice(&frame.into_data().unwrap()),
                    Err(err) => return (Came::Failed(kind(&err)), Some(headers)),
                }
            }
            let reusable = body.take_reusable().is_some();
            (Came::Answer(status, bytes, reusable), Some(headers))
        };
        let run = async { tokio::join!(origin_side, client_side).1 };
        tokio::time::timeout(Duration::from_secs(10), run)
            .await
            .expect("the exchange ended")
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    fn ok(status: u16, body: &str, reusable: bool) -> Came {
        Came::Answer(status, body.as_bytes().to_vec(), reusable)
    }

    /// Response heads and bodies as origins send them, well formed or not, and what the
    /// origin client makes of each: the framing of RFC 9112 §6.3, and a refusal (never
    /// a guess) for what is malformed, over a limit or cut short.
    #[test]
    fn responses_are_framed_or_refused_as_the_table_says() {
        let status = "HTTP/1.1 200 OK\r\n";
        let long_ext = format!("5;{}\r\nhello\r\n0\r\n\r\n", "e".repeat(5000));
        let long_trailer = format!("0\r\nx-t: {}", "t".repeat(20_000));
        let long_head = format!(
            "{status}x-big: {}\r\ncontent-length: 0\r\n\r\n",
            "b".repeat(70_000)
        );
        let many_lines = format!(
            "{status}{}content-length: 0\r\n\r\n",
            "x-a: 1\r\n".repeat(200)
        );
        let chunked = "transfer-encoding: chunked\r\n";
        let table: Vec<(&str, Method, String, Came)> = vec![
            // Content-Length forms.
            (
                "length",
                Method::GET,
                format!("{status}content-length: 5\r\n\r\nhello"),
                ok(200, "hello", true),
            ),
            (
                "zero length",
                Method::GET,
                format!("{status}content-length: 0\r\n\r\n"),
                ok(200, "", true),
            ),
            (
                "a list of one value",
                Method::GET,
                format!("{status}content-length: 5, 5\r\n\r\nhello"),
                ok(200, "hello", true),
            ),
            (
                "the same length twice",
                Method::GET,
                format!("{status}content-length: 5\r\ncontent-length: 5\r\n\r\nhello"),
                ok(200, "hello", true),
            ),
            (
                "spaces around the value",
                Method::GET,
                format!("{status}content-length:   5  \r\n\r\nhello"),
                ok(200, "hello", true),
            ),
            (
                "two lengths",
                Method::GET,
                format!("{status}content-length: 5\r\ncontent-length: 6\r\n\r\nhello!"),
                Came::Failed("MalformedHead"),
            ),
            (
                "a list of two lengths",
                Method::GET,
                format!("{status}content-length: 5, 6\r\n\r\nhello!"),
                Came::Failed("MalformedHead"),
            ),
            (
                "a signed length",
                Method::GET,
                format!("{status}content-length: +5\r\n\r\nhello"),
                Came::Failed("MalformedHead"),
            ),
            (
                "a negative length",
                Method::GET,
                format!("{status}content-length: -1\r\n\r\n"),
                Came::Failed("MalformedHead"),
            ),
            (
                "a space within the length",
                Method::GET,
                format!("{status}content-length: 1 2\r\n\r\n"),
                Came::Failed("MalformedHead"),
            ),
            (
                "a hexadecimal length",
                Method::GET,
                format!("{status}content-length: 0x5\r\n\r\nhello"),
                Came::Failed("MalformedHead"),
            ),
            (
                "a length past u64",
                Method::GET,
                format!("{status}content-length: 99999999999999999999\r\n\r\n"),
                Came::Failed("MalformedHead"),
            ),
            (
                "an empty length",
                Method::GET,
                format!("{status}content-length: \r\n\r\n"),
                Came::Failed("MalformedHead"),
            ),
            (
                "a body cut short",
                Method::GET,
                format!("{status}content-length: 10\r\n\r\nhello"),
                Came::Failed("BodyCut"),
            ),
            (
                "bytes past the body",
                Method::GET,
                format!("{status}content-length: 2\r\n\r\nokEXTRA"),
                ok(200, "ok", false),
            ),
            (
                "no length: until close",
                Method::GET,
                format!("{status}\r\nall of it"),
                ok(200, "all of it", false),
            ),
            // Transfer-Encoding chains and chunks.
            (
                "chunked, an extension and a trailer",
                Method::GET,
                format!(
                    "{status}{chunked}\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nx-trailer: 1\r\n\r\n"
                ),
                ok(200, "hello world", true),
            ),
            (
                "an upper-case chunk size",
                Method::GET,
                format!("{status}{chunked}\r\nA\r\n0123456789\r\n0\r\n\r\n"),
                ok(200, "0123456789", true),
            ),
            (
                "chunked last in a chain",
                Method::GET,
                format!("{status}transfer-encoding: gzip, chunked\r\n\r\n2\r\ngz\r\n0\r\n\r\n"),
                ok(200, "gz", true),
            ),
            (
                "chunked in two lines",
                Method::GET,
                format!(
                    "{status}transfer-encoding: gzip\r\ntransfer-encoding: chunked\r\n\r\n2\r\ngz\r\n0\r\n\r\n"
                ),
                ok(200, "gz", true),
            ),
            (
                "chunked not last: until close",
                Method::GET,
                format!("{status}transfer-encoding: chunked, gzip\r\n\r\nraw"),
                ok(200, "raw", false),
            ),
            (
                "chunked beside a length",
                Method::GET,
                format!("{status}{chunked}content-length: 3\r\n\r\n5\r\nhello\r\n0\r\n\r\n"),
                ok(200, "hello", false),
            ),
            (
                "chunked in HTTP/1.0",
                Method::GET,
                format!(
                    "HTTP/1.0 200 OK\r\n{chunked}connection: keep-alive\r\n\r\n2\r\nok\r\n0\r\n\r\n"
                ),
                ok(200, "ok", false),
            ),
            (
                "a chunk size that is no number",
                Method::GET,
                format!("{status}{chunked}\r\nzz\r\nhello\r\n0\r\n\r\n"),
                Came::Failed("MalformedChunk"),
            ),
            (
                "an empty chunk-size line",
                Method::GET,
                format!("{status}{chunked}\r\n\r\nhello\r\n0\r\n\r\n"),
                Came::Failed("MalformedChunk"),
            ),
            (
                "a signed chunk size",
                Method::GET,
                format!("{status}{chunked}\r\n+5\r\nhello\r\n0\r\n\r\n"),
                Came::Failed("MalformedChunk"),
            ),
            (
                "a chunk size past u64",
                Method::GET,
                format!("{status}{chunked}\r\n10000000000000000\r\nx\r\n"),
                Came::Failed("MalformedChunk"),
            ),
            (
                "a bare LF in an extension",
                Method::GET,
                format!("{status}{chunked}\r\n5;a\nb\r\nhello\r\n0\r\n\r\n"),
                Came::Failed("MalformedChunk"),
            ),
            (
                "no CRLF after a chunk",
                Method::GET,
                format!("{status}{chunked}\r\n5\r\nhelloXX0\r\n\r\n"),
                Came::Failed("MalformedChunk"),
            ),
            (
                "an over-long chunk-size line",
                Method::GET,
                format!("{status}{chunked}\r\n{long_ext}"),
                Came::Failed("MalformedChunk"),
            ),
            (
                "over-long trailers",
                Method::GET,
                format!("{status}{chunked}\r\n{long_trailer}"),
                Came::Failed("MalformedChunk"),
            ),
            (
                "a chunked body cut short",
                Method::GET,
                format!("{status}{chunked}\r\n5\r\nhel"),
                Came::Failed("ChunkedCut"),
            ),
            (
                "no last chunk",
                Method::GET,
                format!("{status}{chunked}\r\n5\r\nhello\r\n"),
                Came::Failed("ChunkedCut"),
            ),
            // Line endings, folding, bytes.
            (
                "bare LF line ends",
                Method::GET,
                "HTTP/1.1 200 OK\ncontent-length: 2\n\nok".into(),
                ok(200, "ok", true),
            ),
            (
                "a bare CR",
                Method::GET,
                "HTTP/1.1 200 OK\rcontent-length: 2\r\r\nok".into(),
                Came::Failed("MalformedHead"),
            ),
            (
                "an obs-fold",
                Method::GET,
                format!("{status}x-a: 1\r\n 2\r\ncontent-length: 0\r\n\r\n"),
                Came::Failed("MalformedHead"),
            ),
            (
                "a NUL in a value",
                Method::GET,
                format!("{status}x-a: a\0b\r\ncontent-length: 0\r\n\r\n"),
                Came::Failed("MalformedHead"),
            ),
            (
                "a control byte in a value",
                Method::GET,
                format!("{status}x-a: a\x01b\r\ncontent-length: 0\r\n\r\n"),
                Came::Failed("MalformedHead"),
            ),
            (
                "a space before the colon",
                Method::GET,
                format!("{status}content-length : 0\r\n\r\n"),
                Came::Failed("MalformedHead"),
            ),
            (
                "a status that is no number",
                Method::GET,
                "HTTP/1.1 2x0 OK\r\ncontent-length: 0\r\n\r\n".into(),
                Came::Failed("MalformedHead"),
            ),
            (
                "not HTTP",
                Method::GET,
                "SSH-2.0-OpenSSH_9.2\r\n".into(),
                Came::Failed("MalformedHead"),
            ),
            (
                "an over-long head",
                Method::GET,
                long_head,
                Came::Failed("HeadTooLarge"),
            ),
            (
                "too many header lines",
                Method::GET,
                many_lines,
                Came::Failed("HeadTooLarge"),
            ),
            // Interim answers and answers without a body.
            (
                "interim answers before the final one",
                Method::GET,
                format!(
                    "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </a.css>\r\n\r\n{status}content-length: 2\r\n\r\nok"
                ),
                ok(200, "ok", true),
            ),
            (
                "as many interim answers as allowed, then the final one",
                Method::GET,
                format!(
                    "{}{status}content-length: 2\r\n\r\nok",
                    "HTTP/1.1 103 Early Hints\r\n\r\n".repeat(MAX_INTERIM_ANSWERS)
                ),
                ok(200, "ok", true),
            ),
            (
                "an endless stream of interim answers",
                Method::GET,
                "HTTP/1.1 100 Continue\r\n\r\n".repeat(MAX_INTERIM_ANSWERS + 1),
                Came::Failed("TooManyInterimAnswers"),
            ),
            (
                "a 101 nobody asked for",
                Method::GET,
                "HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\n\r\n".into(),
                Came::Failed("UnaskedUpgrade"),
            ),
            (
                "HEAD: the length is not a body",
                Method::HEAD,
                format!("{status}content-length: 5\r\n\r\n"),
                ok(200, "", true),
            ),
            (
                "204 has no body",
                Method::GET,
                "HTTP/1.1 204 No Content\r\ncontent-length: 5\r\n\r\n".into(),
                ok(204, "", true),
            ),
            (
                "304 has no body",
                Method::GET,
                "HTTP/1.1 304 Not Modified\r\ncontent-length: 5\r\n\r\n".into(),
                ok(304, "", true),
            ),
            // Persistence.
            (
                "HTTP/1.0 closes",
                Method::GET,
                "HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\nok".into(),
                ok(200, "ok", false),
            ),
            (
                "HTTP/1.0 kept alive",
                Method::GET,
                "HTTP/1.0 200 OK\r\nconnection: keep-alive\r\ncontent-length: 2\r\n\r\nok".into(),
                ok(200, "ok", true),
            ),
            (
                "connection: close",
                Method::GET,
                format!("{status}connection: x, close\r\ncontent-length: 2\r\n\r\nok"),
                ok(200, "ok", false),
            ),
            (
                "HTTP/1.0 close before keep-alive",
                Method::GET,
                "HTTP/1.0 200 OK\r\nconnection: close, keep-alive\r\ncontent-length: 2\r\n\r\nok"
                    .into(),
                ok(200, "ok", false),
            ),
            (
                "close in a second Connection field",
                Method::GET,
                "HTTP/1.0 200 OK\r\nconnection: close\r\nconnection: keep-alive\r\ncontent-length: 2\r\n\r\nok"
                    .into(),
                ok(200, "ok", false),
            ),
            // Closes.
            (
                "closed before a byte",
                Method::GET,
                String::new(),
                Came::Failed("Stale"),
            ),
            (
                "closed within the head",
                Method::GET,
                format!("{status}content-le"),
                Came::Failed("ClosedInHead"),
            ),
        ];
        let runtime = runtime();
        let mut wrong = Vec::new();
        for (name, method, answer, expected) in table {
            let (came, _) = runtime.block_on(answered(method, answer.into_bytes()));
            if came != expected {
                wrong.push(format!("{name}: expected {expected:?}, came {came:?}"));
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    #[test]
    fn a_length_beside_a_transfer_coding_is_not_passed_on() {
        let answer =
            "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-length: 3\r\n\r\n0\r\n\r\n";
        let (came, headers) = runtime().block_on(answered(Method::GET, answer.into()));
        assert_eq!(came, ok(200, "", false));
        let headers = headers.unwrap();
        assert!(headers.get(header::CONTENT_LENGTH).is_none());
        assert_eq!(headers[header::TRANSFER_ENCODING], "chunked");
    }

    /// Sends `parts` with `body` and answers the origin side `answer`; the bytes the
    /// origin received (the head and `body_len` more) and the outcome.
    async fn sent(
        parts: http::request::Parts,
        mut body: Body,
        body_len: usize,
    ) -> (Vec<u8>, Result<u16, &'static str>) {
        let (mut connection, mut origin) = pair();
        let origin_side = async move {
            let got = read_request(&mut origin, body_len).await;
            origin
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
                .await
                .unwrap();
            got
        };
        let client_side = async {
            connection
                .exchange(&parts, &mut body, false)
                .await
                .map(|head| head.parts.status.as_u16())
                .map_err(|err| kind(&err))
        };
        let run = async { tokio::join!(origin_side, client_side) };
        tokio::time::timeout(Duration::from_secs(10), run)
            .await
            .expect("the exchange ended")
    }

    /// What the origin receives: the client's framing headers never, the gateway's own
    /// framing always (none for a body-less GET, a length, or chunks of a body of
    /// unknown length).
    #[test]
    fn requests_carry_the_gateways_own_framing() {
        let runtime = runtime();
        let text = |bytes: Vec<u8>| String::from_utf8(bytes).unwrap();
        let host = ("host", "origin.example");
        let (got, status) = runtime.block_on(sent(
            request(Method::GET, &[host, ("transfer-encoding", "chunked")]),
            crate::empty(),
            0,
        ));
        assert_eq!(status, Ok(200));
        assert_eq!(
            text(got),
            "GET /p?q=1 HTTP/1.1\r\nhost: origin.example\r\n\r\n"
        );
        let (got, _) = runtime.block_on(sent(request(Method::POST, &[host]), crate::empty(), 0));
        assert_eq!(
            text(got),
            "POST /p?q=1 HTTP/1.1\r\nhost: origin.example\r\ncontent-length: 0\r\n\r\n"
        );
        let (got, _) = runtime.block_on(sent(
            request(Method::POST, &[host, ("content-length", "99")]),
            crate::full("hello"),
            5,
        ));
        assert_eq!(
            text(got),
            "POST /p?q=1 HTTP/1.1\r\nhost: origin.example\r\ncontent-length: 5\r\n\r\nhello"
        );
        let chunks = "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
        let (got, status) = runtime.block_on(sent(
            request(Method::PUT, &[host]),
            pieces(&[b"hello", b"", b" world"]),
            chunks.len(),
        ));
        assert_eq!(status, Ok(200));
        assert_eq!(
            text(got),
            format!(
                "PUT /p?q=1 HTTP/1.1\r\nhost: origin.example\r\ntransfer-encoding: chunked\r\n\r\n{chunks}"
            )
        );
        // A body longer or shorter than the length its client declared is the
        // request's fault, not the origin's.
        let (_, status) = runtime.block_on(sent(
            request(Method::POST, &[host, ("content-length", "3")]),
            pieces(&[b"hello"]),
            0,
        ));
        assert_eq!(status, Err("RequestLength"));
        let (_, status) = runtime.block_on(sent(
            request(Method::POST, &[host, ("content-length", "9")]),
            pieces(&[b"hello"]),
            5,
        ));
        assert_eq!(status, Err("RequestLength"));
    }

    /// A body on a GET, HEAD or DELETE means nothing to many origins, which may leave
    /// it unread and take it for the connection's next request: the origin is asked to
    /// close after its answer, and the connection is not reused. A POST's is.
    #[test]
    fn a_body_on_a_method_without_one_leaves_the_connection_unused() {
        let runtime = runtime();
        for (method, reused) in [
            (Method::GET, false),
            (Method::HEAD, false),
            (Method::DELETE, false),
            (Method::POST, true),
        ] {
            let keep_alive = runtime.block_on(async {
                let (mut connection, mut origin) = pair();
                let origin_side = async move {
                    let head = read_request(&mut origin, 5).await;
                    origin
                        .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
                        .await
                        .unwrap();
                    String::from_utf8(head).unwrap()
                };
                let parts = request(method.clone(), &[("host", "origin.example")]);
                let client_side = async {
                    let mut body = crate::full("hello");
                    connection
                        .exchange(&parts, &mut body, false)
                        .await
                        .unwrap()
                        .keep_alive
                };
                tokio::join!(origin_side, client_side)
            });
            let (arrived, keep_alive) = keep_alive;
            assert_eq!(keep_alive, reused, "{method}");
            assert_eq!(
                arrived.contains("\r\nconnection: close\r\n"),
                !reused,
                "{arrived}"
            );
        }
    }

    /// An origin that refuses an upload before taking it (a 413) is heard: the
    /// exchange ends with its answer instead of both sides waiting, and the connection,
    /// left mid-request, is not reused.
    #[test]
    fn an_early_answer_ends_an_upload() {
        let runtime = runtime();
        let came = runtime.block_on(async {
            let (mut connection, mut origin) = pair();
            let origin_side = async move {
                read_request(&mut origin, 0).await;
                origin
                    .write_all(b"HTTP/1.1 413 Content Too Large\r\ncontent-length: 0\r\n\r\n")
                    .await
                    .unwrap();
                // Reads nothing more, and stays open until the client is done.
                origin
            };
            let client_side = async {
                let piece: &'static [u8] = Box::leak(vec![b'x'; 1 << 20].into_boxed_slice());
                let body: Vec<&'static [u8]> = vec![piece; 64];
                let parts = request(Method::POST, &[("host", "origin.example")]);
                let head = connection
                    .exchange(&parts, &mut pieces(&body), false)
                    .await
                    .unwrap();
                let status = head.parts.status.as_u16();
                let mut body = ResponseBody::new(&head, connection);
                while body.frame().await.is_some() {}
                (status, body.take_reusable().is_some())
            };
            let run = async { tokio::join!(origin_side, client_side).1 };
            tokio::time::timeout(Duration::from_secs(20), run).await
        });
        assert_eq!(came.expect("no deadlock"), (413, false));
    }
}
