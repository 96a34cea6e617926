//! A partner's webhook receiver for tests: an HTTP/1.1 server on a loopback port that
//! records every request (headers and body) and answers each with a status the test
//! sets (204 by default). It can be started on a port chosen before it exists, so a
//! test can hand out a `callbackUrl` while the receiver is still down.

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One request the receiver got.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    pub path: String,
    /// Header names in lower case.
    pub headers: HashMap<String, String>,
    pub body: String,
}

/// The requests a recording server got, in order.
pub(crate) type Recorded = Arc<Mutex<Vec<Received>>>;

/// How a recording server answers a request.
pub(crate) type Respond = Arc<dyn Fn(&Received) -> Response<Full<Bytes>> + Send + Sync>;

/// An HTTP/1.1 server on `127.0.0.1:port` (0 for a free port) that records every
/// request and answers it with `respond`; it runs until the runtime is dropped.
pub(crate) fn serve_recording(
    port: u16,
    respond: Respond,
) -> anyhow::Result<(SocketAddr, Recorded, tokio::runtime::Runtime)> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let listener = runtime.block_on(tokio::net::TcpListener::bind(("127.0.0.1", port)))?;
    let address = listener.local_addr()?;
    let received = Arc::new(Mutex::new(Vec::new()));
    let log = received.clone();
    runtime.spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (log, respond) = (log.clone(), respond.clone());
            tokio::spawn(async move {
                let service = service_fn(move |request: Request<Incoming>| {
                    let (log, respond) = (log.clone(), respond.clone());
                    async move {
                        let (parts, body) = request.into_parts();
                        let body = body
                            .collect()
                            .await
                            .map(|b| b.to_bytes())
                            .unwrap_or_default();
                        let request = Received {
                            method: parts.method.to_string(),
                            path: parts.uri.to_string(),
                            headers: parts
                                .headers
                                .iter()
                                .map(|(k, v)| {
                                    (
                                        k.as_str().to_owned(),
                                        v.to_str().unwrap_or_default().to_owned(),
                                    )
                                })
                                .collect(),
                            body: String::from_utf8_lossy(&body).into_owned(),
                        };
                        let response = respond(&request);
                        log.lock().unwrap_or_else(|e| e.into_inner()).push(request);
                        Ok::<_, std::convert::Infallible>(response)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok((address, received, runtime))
}

/// A running receiver; stops when dropped.
pub struct Receiver {
    pub address: SocketAddr,
    received: Arc<Mutex<Vec<Received>>>,
    status: Arc<AtomicU16>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Receiver {
    /// A receiver on `127.0.0.1:port` (0 for a free port).
    pub fn start(port: u16) -> anyhow::Result<Receiver> {
        let status = Arc::new(AtomicU16::new(204));
        let answer = status.clone();
        let respond = move |_: &Received| {
            let status = StatusCode::from_u16(answer.load(Ordering::Relaxed))
                .unwrap_or(StatusCode::NO_CONTENT);
            let mut response = Response::new(Full::new(Bytes::new()));
            *response.status_mut() = status;
            if status.is_redirection() {
                response.headers_mut().insert(
                    http::header::LOCATION,
                    http::HeaderValue::from_static("http://127.0.0.1:1/elsewhere"),
                );
            }
            response
        };
        let (address, received, runtime) = serve_recording(port, Arc::new(respond))?;
        Ok(Receiver {
            address,
            received,
            status,
            runtime: Some(runtime),
        })
    }

    /// The URL of `path` on this receiver.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.address)
    }

    /// Answers every later request with `status`.
    pub fn answer(&self, status: u16) {
        self.status.store(status, Ordering::Relaxed);
    }

    /// Every request so far.
    pub fn received(&self) -> Vec<Received> {
        self.received
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Waits up to `limit` until `count` requests have arrived; all of them.
    pub fn wait_for(&self, count: usize, limit: Duration) -> anyhow::Result<Vec<Received>> {
        let deadline = Instant::now() + limit;
        loop {
            let received = self.received();
            if received.len() >= count {
                return Ok(received);
            }
            if Instant::now() > deadline {
                anyhow::bail!(
                    "{} of {count} webhooks arrived within {limit:?}",
                    received.len()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}
