//! A real origin for data-plane tests: an HTTP/1.1 server on a loopback address that
//! answers each request with a JSON echo of what it received (method, target, headers,
//! body size and its own name), and a few special paths: `/slow?ms=N` answers late,
//! `/stream?chunks=N` streams its body, `/status/N` answers that status, and a
//! WebSocket-style `Upgrade` gets `101` and then echoes raw bytes. On any path the
//! query `h=Name:value` adds a response header (repeatable) and `pad=N` lengthens the
//! body to N bytes.

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::json;
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

type Body = BoxBody<Bytes, Infallible>;

/// A running origin; stops when dropped.
pub struct Origin {
    pub address: SocketAddr,
    pub name: String,
    requests: Arc<AtomicUsize>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Origin {
    /// An origin named `name` on `ip` and `port` (0 for a free one).
    pub fn start(name: &str, ip: IpAddr, port: u16) -> anyhow::Result<Origin> {
        Origin::launch(name, ip, port, false)
    }

    /// An origin that speaks HTTPS (a self-signed certificate) and reports the SNI
    /// name it was reached with.
    pub fn start_tls(name: &str, ip: IpAddr, port: u16) -> anyhow::Result<Origin> {
        Origin::launch(name, ip, port, true)
    }

    fn launch(name: &str, ip: IpAddr, port: u16, tls: bool) -> anyhow::Result<Origin> {
        let acceptor = if tls {
            let (cert, key) = crate::http::self_signed(&["origin.invalid"])?;
            use rustls::pki_types::pem::PemObject;
            let chain = rustls::pki_types::CertificateDer::pem_slice_iter(cert.as_bytes())
                .collect::<Result<Vec<_>, _>>()?;
            let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(key.as_bytes())?;
            let config = rustls::ServerConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(chain, key)?;
            Some(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
        } else {
            None
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()?;
        let listener = runtime.block_on(tokio::net::TcpListener::bind((ip, port)))?;
        let address = listener.local_addr()?;
        let requests = Arc::new(AtomicUsize::new(0));
        let (name_owned, counter) = (name.to_owned(), requests.clone());
        runtime.spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let (name, counter) = (name_owned.clone(), counter.clone());
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let builder =
                        hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                            .http1_only();
                    match acceptor {
                        None => {
                            let service = service_fn(move |request| {
                                counter.fetch_add(1, Ordering::SeqCst);
                                answer(request, name.clone(), None)
                            });
                            let _ = builder
                                .serve_connection_with_upgrades(TokioIo::new(stream), service)
                                .await;
                        }
                        Some(acceptor) => {
                            let Ok(tls) = acceptor.accept(stream).await else {
                                return;
                            };
                            let sni = tls.get_ref().1.server_name().map(str::to_owned);
                            let service = service_fn(move |request| {
                                counter.fetch_add(1, Ordering::SeqCst);
                                answer(request, name.clone(), Some(sni.clone().unwrap_or_default()))
                            });
                            let _ = builder
                                .serve_connection_with_upgrades(TokioIo::new(tls), service)
                                .await;
                        }
                    }
                });
            }
        });
        Ok(Origin {
            address,
            name: name.to_owned(),
            requests,
            runtime: Some(runtime),
        })
    }

    /// Requests served so far.
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

impl Drop for Origin {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).boxed()
}

fn query_number(request: &Request<Incoming>, key: &str) -> Option<u64> {
    request.uri().query()?.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        (k == key).then(|| v.parse().ok())?
    })
}

/// `tls_sni` is the SNI name when the connection was TLS.
async fn answer(
    mut request: Request<Incoming>,
    name: String,
    tls_sni: Option<String>,
) -> Result<Response<Body>, Infallible> {
    let path = request.uri().path().to_owned();
    let query = request.uri().query().unwrap_or("").to_owned();
    if request.headers().contains_key(http::header::UPGRADE) {
        let upgrade = hyper::upgrade::on(&mut request);
        tokio::spawn(async move {
            if let Ok(upgraded) = upgrade.await {
                let mut io = TokioIo::new(upgraded);
                let (mut read, mut write) = tokio::io::split(&mut io);
                let _ = tokio::io::copy(&mut read, &mut write).await;
            }
        });
        let mut response = Response::new(full(""));
        *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
        response
            .headers_mut()
            .insert(http::header::UPGRADE, "websocket".parse().unwrap());
        response
            .headers_mut()
            .insert(http::header::CONNECTION, "upgrade".parse().unwrap());
        return Ok(response);
    }
    if path == "/slow" {
        let ms = query_number(&request, "ms").unwrap_or(1000);
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
    if path == "/stream" {
        let chunks = query_number(&request, "chunks").unwrap_or(3);
        let stream = futures_stream(chunks);
        return Ok(Response::new(BodyExt::boxed(StreamBody::new(stream))));
    }
    let status = path
        .strip_prefix("/status/")
        .and_then(|code| code.parse::<u16>().ok())
        .and_then(|code| StatusCode::from_u16(code).ok())
        .unwrap_or(StatusCode::OK);
    let method = request.method().to_string();
    let target = request
        .uri()
        .path_and_query()
        .map(|p| p.to_string())
        .unwrap_or_default();
    let headers: serde_json::Map<String, serde_json::Value> = request
        .headers()
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_owned(),
                json!(String::from_utf8_lossy(v.as_bytes())),
            )
        })
        .collect();
    let body = request
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let echo = json!({
        "origin": name,
        "method": method,
        "target": target,
        "headers": headers,
        "body_len": body.len(),
        "tls": tls_sni.is_some(),
        "sni": tls_sni,
    });
    let mut body = echo.to_string();
    let mut extra_headers = Vec::new();
    for (key, value) in form_urlencoded::parse(query.as_bytes()) {
        match key.as_ref() {
            // `h=Name:value` adds a response header.
            "h" => {
                if let Some((name, value)) = value.split_once(':') {
                    extra_headers.push((name.trim().to_owned(), value.trim().to_owned()));
                }
            }
            // `pad=N` makes the body N bytes long (at least the echo).
            "pad" => {
                let len: usize = value.parse().unwrap_or(0);
                if len > body.len() {
                    body.push_str(&" ".repeat(len - body.len()));
                }
            }
            _ => {}
        }
    }
    let mut response = Response::new(full(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        "application/json".parse().unwrap(),
    );
    // The first `h=` of a name replaces the origin's own field, later ones add to it.
    let mut named = std::collections::HashSet::new();
    for (name, value) in extra_headers {
        if let (Ok(name), Ok(value)) = (
            http::HeaderName::from_bytes(name.as_bytes()),
            http::HeaderValue::from_str(&value),
        ) {
            if named.insert(name.clone()) {
                response.headers_mut().insert(name, value);
            } else {
                response.headers_mut().append(name, value);
            }
        }
    }
    Ok(response)
}

/// `chunks` body chunks of 1 KiB, 20 ms apart.
fn futures_stream(
    chunks: u64,
) -> impl futures_core::Stream<Item = Result<Frame<Bytes>, Infallible>> + Send + Sync + 'static {
    let (sender, receiver) = tokio::sync::mpsc::channel(1);
    tokio::spawn(async move {
        for i in 0..chunks {
            let chunk = Bytes::from(vec![b'a' + (i % 26) as u8; 1024]);
            if sender.send(Ok(Frame::data(chunk))).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    ReceiverStream(receiver)
}

struct ReceiverStream(tokio::sync::mpsc::Receiver<Result<Frame<Bytes>, Infallible>>);

impl futures_core::Stream for ReceiverStream {
    type Item = Result<Frame<Bytes>, Infallible>;
    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        self.0.poll_recv(cx)
    }
}
