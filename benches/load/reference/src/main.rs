//! Reference HTTP/1.1 reverse proxies for the load benchmark (benches/load/run.sh): how
//! cheap a tokio proxy can be on this machine, and what hyper and its halves cost, so botgate's
//! CPU per request can be read against a floor as well as against nginx.
//!
//! All three run like botgate's data plane: one current-thread tokio runtime per thread, each
//! accepting on its own `SO_REUSEPORT` listener, mimalloc, and `X-Forwarded-For` added.
//! Each client connection gets one kept-alive origin connection of its own.
//!
//! - `raw`: tokio and httparse only, the origin connection driven inline. It frames
//!   bodies by `Content-Length` only (the benchmark's page views): a measuring
//!   instrument, not a proxy to deploy.
//! - `hyper`: hyper's HTTP/1.1 server and client connection, with the timeouts botgate
//!   sets (hyper's header read timeout, a timeout on the origin's answer, a per-connection
//!   idle check) and nothing else: no website lookup, no protection, no log, no metrics.
//! - `hyper-inline`: hyper's server as in `hyper`, with the origin connection driven
//!   inline in the service (httparse, `Content-Length` framing only, the response's
//!   headers into an `http::HeaderMap` as the gateway's phases need them) instead of
//!   hyper's client: what hyper's client side costs, measured against `hyper`.
//!
//! `botgate-load-reference raw|hyper|hyper-inline LISTEN ORIGIN [THREADS]`

use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// botgate's defaults: `--header-read-timeout`, `--origin-response-timeout`, and a
/// quarter of `--idle-timeout` (how often a connection checks it).
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(60);
const IDLE_CHECK_EVERY: Duration = Duration::from_secs(15);

#[derive(Clone, Copy)]
enum Mode {
    Raw,
    Hyper,
    HyperInline,
}

fn main() {
    if let Err(err) = run() {
        eprintln!("botgate-load-reference: {err}");
        std::process::exit(2);
    }
}

fn run() -> Result<(), String> {
    let usage = "usage: botgate-load-reference raw|hyper|hyper-inline LISTEN ORIGIN [THREADS]";
    let mut args = std::env::args().skip(1);
    let mode = match args.next().as_deref() {
        Some("raw") => Mode::Raw,
        Some("hyper") => Mode::Hyper,
        Some("hyper-inline") => Mode::HyperInline,
        _ => return Err(usage.into()),
    };
    let mut address = |what: &str| -> Result<SocketAddr, String> {
        let text = args.next().ok_or(usage)?;
        text.parse()
            .map_err(|err| format!("{what} address {text:?}: {err}"))
    };
    let listen = address("listen")?;
    let origin = address("origin")?;
    let threads = match args.next() {
        Some(text) => text
            .parse::<usize>()
            .map_err(|err| format!("threads {text:?}: {err}"))?,
        None => 2,
    };
    let mut running = Vec::new();
    for _ in 0..threads.max(1) {
        let listener = bind(listen).map_err(|err| format!("binding {listen}: {err}"))?;
        running.push(std::thread::spawn(move || {
            serve_thread(mode, listener, origin)
        }));
    }
    for thread in running {
        thread
            .join()
            .map_err(|_| "a serving thread panicked".to_string())??;
    }
    Ok(())
}

fn bind(address: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(address),
        socket2::Type::STREAM,
        None,
    )?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&address.into())?;
    socket.listen(1024)?;
    Ok(socket.into())
}

fn serve_thread(
    mode: Mode,
    listener: std::net::TcpListener,
    origin: SocketAddr,
) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|err| format!("starting a runtime: {err}"))?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, async move {
        let listener = TcpListener::from_std(listener).map_err(|err| err.to_string())?;
        loop {
            let (client, peer) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(err) => {
                    eprintln!("accept: {err}");
                    continue;
                }
            };
            tokio::task::spawn_local(async move {
                let served = match mode {
                    Mode::Raw => proxy_raw(client, peer, origin).await,
                    Mode::Hyper => proxy_hyper(client, peer, origin).await,
                    Mode::HyperInline => proxy_hyper_inline(client, peer, origin).await,
                };
                if let Err(err) = served {
                    eprintln!("connection from {peer}: {err}");
                }
            });
        }
    })
}

fn content_length(headers: &[httparse::Header<'_>]) -> std::io::Result<usize> {
    match headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("content-length"))
    {
        None => Ok(0),
        Some(h) => std::str::from_utf8(h.value)
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .ok_or_else(|| std::io::Error::other("bad Content-Length")),
    }
}

/// Sets `TCP_NODELAY` on the client connection and opens its origin connection, also
/// without Nagle's delay.
async fn dial(client: &TcpStream, origin: SocketAddr) -> std::io::Result<TcpStream> {
    client.set_nodelay(true)?;
    let upstream = TcpStream::connect(origin).await?;
    upstream.set_nodelay(true)?;
    Ok(upstream)
}

/// Reads from `stream` into `buffer` until `parse` finds a whole head in it.
async fn read_head<T>(
    stream: &mut TcpStream,
    buffer: &mut Vec<u8>,
    mut parse: impl FnMut(&[u8]) -> std::io::Result<Option<T>>,
) -> std::io::Result<Option<T>> {
    loop {
        if let Some(found) = parse(buffer)? {
            return Ok(Some(found));
        }
        if buffer.len() >= 64 * 1024 {
            return Err(std::io::Error::other("head larger than 64 KiB"));
        }
        buffer.reserve(16 * 1024);
        if stream.read_buf(buffer).await? == 0 {
            return Ok(None);
        }
    }
}

/// Reads until `buffer` holds `len` bytes; false when the stream ends first.
async fn read_to(
    stream: &mut TcpStream,
    buffer: &mut Vec<u8>,
    len: usize,
) -> std::io::Result<bool> {
    while buffer.len() < len {
        if stream.read_buf(buffer).await? == 0 {
            return Ok(false);
        }
    }
    Ok(true)
}

async fn proxy_raw(
    mut client: TcpStream,
    peer: SocketAddr,
    origin: SocketAddr,
) -> std::io::Result<()> {
    let mut upstream = dial(&client, origin).await?;
    let forwarded_for = peer.ip().to_string();
    let (mut request, mut outgoing, mut response) = (Vec::new(), Vec::new(), Vec::new());
    loop {
        let head = read_head(&mut client, &mut request, |bytes| {
            let mut headers = [httparse::EMPTY_HEADER; 64];
            let mut parsed = httparse::Request::new(&mut headers);
            let httparse::Status::Complete(head_len) =
                parsed.parse(bytes).map_err(std::io::Error::other)?
            else {
                return Ok(None);
            };
            outgoing.clear();
            outgoing.extend_from_slice(parsed.method.unwrap_or("GET").as_bytes());
            outgoing.push(b' ');
            outgoing.extend_from_slice(parsed.path.unwrap_or("/").as_bytes());
            outgoing.extend_from_slice(b" HTTP/1.1\r\n");
            for header in parsed.headers.iter() {
                if !header.name.eq_ignore_ascii_case("connection") {
                    outgoing.extend_from_slice(header.name.as_bytes());
                    outgoing.extend_from_slice(b": ");
                    outgoing.extend_from_slice(header.value);
                    outgoing.extend_from_slice(b"\r\n");
                }
            }
            outgoing.extend_from_slice(b"X-Forwarded-For: ");
            outgoing.extend_from_slice(forwarded_for.as_bytes());
            outgoing.extend_from_slice(b"\r\n\r\n");
            Ok(Some((head_len, content_length(parsed.headers)?)))
        })
        .await?;
        let Some((head_len, body_len)) = head else {
            return Ok(());
        };
        let request_len = head_len + body_len;
        if !read_to(&mut client, &mut request, request_len).await? {
            return Ok(());
        }
        outgoing.extend_from_slice(&request[head_len..request_len]);
        request.drain(..request_len);
        upstream.write_all(&outgoing).await?;

        response.clear();
        let Some(response_len) = read_head(&mut upstream, &mut response, |bytes| {
            let mut headers = [httparse::EMPTY_HEADER; 64];
            let mut parsed = httparse::Response::new(&mut headers);
            match parsed.parse(bytes).map_err(std::io::Error::other)? {
                httparse::Status::Complete(head_len) => {
                    Ok(Some(head_len + content_length(parsed.headers)?))
                }
                httparse::Status::Partial => Ok(None),
            }
        })
        .await?
        else {
            return Ok(());
        };
        if !read_to(&mut upstream, &mut response, response_len).await? {
            return Ok(());
        }
        client.write_all(&response[..response_len]).await?;
    }
}

type OriginBody = http_body_util::combinators::UnsyncBoxBody<bytes::Bytes, hyper::Error>;
type OriginSender = hyper::client::conn::http1::SendRequest<OriginBody>;

async fn proxy_hyper(
    client: TcpStream,
    peer: SocketAddr,
    origin: SocketAddr,
) -> std::io::Result<()> {
    let upstream = dial(&client, origin).await?;
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(upstream))
        .await
        .map_err(std::io::Error::other)?;
    tokio::task::spawn_local(connection);
    let sender: Rc<RefCell<Option<OriginSender>>> = Rc::new(RefCell::new(Some(sender)));
    let forwarded_for =
        http::HeaderValue::try_from(peer.ip().to_string()).map_err(std::io::Error::other)?;
    let service = hyper::service::service_fn(move |request: http::Request<Incoming>| {
        let (sender, forwarded_for) = (sender.clone(), forwarded_for.clone());
        async move {
            // HTTP/1.1 serves one request at a time, so the connection's sender is free.
            let mut origin = sender
                .borrow_mut()
                .take()
                .ok_or_else(|| std::io::Error::other("origin connection busy"))?;
            let (mut parts, body) = request.into_parts();
            parts.headers.remove(http::header::CONNECTION);
            parts.headers.append("x-forwarded-for", forwarded_for);
            let request = http::Request::from_parts(parts, body.boxed_unsync());
            let answered =
                tokio::time::timeout(RESPONSE_TIMEOUT, origin.send_request(request)).await;
            *sender.borrow_mut() = Some(origin);
            match answered {
                Ok(Ok(response)) => Ok(response.map(|body| body.boxed_unsync())),
                Ok(Err(err)) => Err(std::io::Error::other(err)),
                Err(_) => Err(std::io::Error::other("the origin did not answer in time")),
            }
        }
    });
    serve_hyper(client, service).await
}

/// The origin connection of `hyper-inline`, and what it has read past the last response.
type InlineOrigin = (TcpStream, Vec<u8>);

/// hyper's server; the origin connection read and written inline by the service, one
/// request at a time (HTTP/1.1 serves one at a time, so the connection is always free).
async fn proxy_hyper_inline(
    client: TcpStream,
    peer: SocketAddr,
    origin: SocketAddr,
) -> std::io::Result<()> {
    let upstream = dial(&client, origin).await?;
    let upstream: Rc<RefCell<Option<InlineOrigin>>> =
        Rc::new(RefCell::new(Some((upstream, Vec::new()))));
    let forwarded_for = peer.ip().to_string();
    let service = hyper::service::service_fn(move |request: http::Request<Incoming>| {
        let (upstream, forwarded_for) = (upstream.clone(), forwarded_for.clone());
        async move {
            let (mut stream, mut response) = upstream
                .borrow_mut()
                .take()
                .ok_or_else(|| std::io::Error::other("origin connection busy"))?;
            let (parts, body) = request.into_parts();
            let body = body
                .collect()
                .await
                .map_err(std::io::Error::other)?
                .to_bytes();
            let mut out = Vec::with_capacity(1024);
            out.extend_from_slice(parts.method.as_str().as_bytes());
            out.push(b' ');
            out.extend_from_slice(
                parts
                    .uri
                    .path_and_query()
                    .map(|p| p.as_str())
                    .unwrap_or("/")
                    .as_bytes(),
            );
            out.extend_from_slice(b" HTTP/1.1\r\n");
            for (name, value) in parts.headers.iter() {
                if name != http::header::CONNECTION {
                    out.extend_from_slice(name.as_str().as_bytes());
                    out.extend_from_slice(b": ");
                    out.extend_from_slice(value.as_bytes());
                    out.extend_from_slice(b"\r\n");
                }
            }
            out.extend_from_slice(b"x-forwarded-for: ");
            out.extend_from_slice(forwarded_for.as_bytes());
            out.extend_from_slice(b"\r\n\r\n");
            out.extend_from_slice(&body);
            stream.write_all(&out).await?;
            let head = tokio::time::timeout(
                RESPONSE_TIMEOUT,
                read_head(&mut stream, &mut response, |bytes| {
                    let mut headers = [httparse::EMPTY_HEADER; 64];
                    let mut parsed = httparse::Response::new(&mut headers);
                    match parsed.parse(bytes).map_err(std::io::Error::other)? {
                        httparse::Status::Complete(head_len) => {
                            let mut builder =
                                http::Response::builder().status(parsed.code.unwrap_or(502));
                            for header in parsed.headers.iter() {
                                builder = builder.header(header.name, header.value);
                            }
                            Ok(Some((head_len, content_length(parsed.headers)?, builder)))
                        }
                        httparse::Status::Partial => Ok(None),
                    }
                }),
            )
            .await
            .map_err(|_| std::io::Error::other("the origin did not answer in time"))??;
            let Some((head_len, body_len, builder)) = head else {
                return Err(std::io::Error::other("origin closed"));
            };
            if !read_to(&mut stream, &mut response, head_len + body_len).await? {
                return Err(std::io::Error::other("origin closed"));
            }
            let body = bytes::Bytes::copy_from_slice(&response[head_len..head_len + body_len]);
            response.drain(..head_len + body_len);
            *upstream.borrow_mut() = Some((stream, response));
            builder
                .body(http_body_util::Full::new(body))
                .map_err(std::io::Error::other)
        }
    });
    serve_hyper(client, service).await
}

/// Serves one client connection with hyper's HTTP/1.1 server, as botgate's listener
/// does: its header read timeout, and an idle check every quarter of the idle timeout.
async fn serve_hyper<S, B>(client: TcpStream, service: S) -> std::io::Result<()>
where
    S: hyper::service::Service<
            http::Request<Incoming>,
            Response = http::Response<B>,
            Error = std::io::Error,
        >,
    B: hyper::body::Body + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    let connection = builder.serve_connection(TokioIo::new(client), service);
    tokio::pin!(connection);
    let mut idle_check = tokio::time::interval(IDLE_CHECK_EVERY);
    idle_check.tick().await;
    loop {
        tokio::select! {
            served = connection.as_mut() => return served.map_err(std::io::Error::other),
            _ = idle_check.tick() => {}
        }
    }
}
