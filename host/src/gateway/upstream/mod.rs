//! Origins: the website's `ip` list, tried round robin, with passive health (an origin
//! that refused a connection is skipped for a while), a retry on the next origin when a
//! connection cannot be made, and a pool of kept-alive HTTP/1.1 connections per origin.
//!
//! The pool is the gateway's own rather than `hyper-util`'s legacy client because the
//! gateway chooses the origin per request and must still hold the request when a
//! connection fails (so it can send it again), and it dials an address while naming
//! the website in SNI; [`botgate_http1::client`] speaks the HTTP.

mod stream;

use super::pages::Body;
use crate::report::Report;
use botgate_http1::Rewind;
use botgate_http1::client::Http1Error;
use botgate_model::addresses::{OriginPolicy, OriginRefusal};
use bytes::Bytes;
use foldhash::fast::RandomState;
use http::{Request, Response};
use hyper::body::{Body as _, Frame, SizeHint};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use std::cell::RefCell;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock, Weak};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
pub use stream::Stream;
use tokio::net::TcpStream;

/// A connection to an origin.
type Connection = botgate_http1::client::Connection<Stream>;
/// A response body read from an origin connection.
type ResponseBody = botgate_http1::client::ResponseBody<Stream>;

/// How origins are reached.
#[derive(Debug, Clone)]
pub struct OriginConfig {
    /// The origin port for plain HTTP.
    pub http_port: u16,
    /// The origin port when the website sets `upstreams_use_https`.
    pub https_port: u16,
    /// The longest a TCP connect and TLS handshake may take.
    pub connect_timeout: Duration,
    /// The longest an origin may take to answer with its response head.
    pub response_timeout: Duration,
    /// Idle kept-alive connections each data-plane thread keeps per origin. Fewer than
    /// a thread's requests in flight to one origin, and the ones beyond are closed as
    /// they finish and opened again for the next requests.
    pub idle_per_origin: usize,
    /// How long an origin that refused a connection is skipped.
    pub down_for: Duration,
    /// Which origin addresses may be connected to; checked before every new
    /// connection, so a policy narrowed since a website was written still holds.
    pub policy: OriginPolicy,
}

impl Default for OriginConfig {
    fn default() -> Self {
        OriginConfig {
            http_port: 80,
            https_port: 443,
            connect_timeout: Duration::from_secs(5),
            response_timeout: Duration::from_secs(60),
            idle_per_origin: 256,
            down_for: Duration::from_secs(10),
            policy: OriginPolicy::default(),
        }
    }
}

/// Why a connection to an origin could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("connecting to {origin} timed out")]
    ConnectTimeout { origin: SocketAddr },
    #[error("connecting to {origin}")]
    Connect {
        origin: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("`{name}` is no TLS server name")]
    TlsName {
        name: String,
        #[source]
        source: rustls::pki_types::InvalidDnsNameError,
    },
    #[error("the TLS handshake with {origin} timed out")]
    HandshakeTimeout { origin: SocketAddr },
    #[error("the TLS handshake with {origin}")]
    Handshake {
        origin: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// Why no response came from an origin.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    #[error("the website lists no origin")]
    NoOrigin,
    /// No origin of the website could be connected to; the last attempt's error.
    #[error("no origin could be reached")]
    Unreachable {
        #[source]
        last: ConnectError,
    },
    /// Every origin of the website is one the origin policy refuses; none was
    /// connected to.
    #[error("the origin {origin} is refused by the origin policy: {refusal}")]
    Refused {
        origin: SocketAddr,
        refusal: OriginRefusal,
    },
    #[error("the origin {origin} did not answer within {after:?}")]
    Timeout { origin: SocketAddr, after: Duration },
    #[error("the origin {origin} failed")]
    Failed {
        origin: SocketAddr,
        #[source]
        source: Http1Error,
    },
    /// The client's side: its request body broke off (or ran past its length) on the
    /// way to the origin, which is no fault of the origin's.
    #[error("the request could not be sent whole")]
    Request {
        #[source]
        source: Http1Error,
    },
}

/// How long a connection may sit idle in the pool before it is checked for a close by
/// the origin (one read that does not wait) when taken out. Busier connections are
/// used as they are: a request that finds one closed goes again on a new one.
const CHECK_IDLE_AFTER: Duration = Duration::from_secs(1);

/// The longest a connection sits in the pool: longer than origins keep idle
/// connections (nginx 75 s, Apache 5 s), so by then it is closed at the other end.
const MAX_IDLE: Duration = Duration::from_secs(90);

/// How often a thread's idle connections are all looked over for expiry.
const SWEEP_EVERY: Duration = Duration::from_secs(10);

/// A kept-alive connection waiting in the pool, and since when.
struct IdleConnection {
    connection: Connection,
    since: Instant,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct PoolKey {
    address: SocketAddr,
    /// The name sent in SNI when the origin is reached over TLS.
    tls_name: Option<Arc<str>>,
    /// The origin policy the address was checked against: a connection made before a
    /// reload replaced it is never taken again.
    policy: u64,
}

/// One thread's idle connections by origin.
/// (foldhash: the keys are the websites' origins, not a client's, and SipHash was one
/// of the larger costs of a request.)
type IdleConnections = RefCell<HashMap<PoolKey, Vec<IdleConnection>, RandomState>>;

/// The origins of every website, their health and their idle connections.
pub struct Origins {
    config: OriginConfig,
    /// The origin policy in force: `config.policy` at start, replaced by a reload.
    policy: arc_swap::ArcSwap<OriginPolicy>,
    /// How many times a reload replaced the policy (part of every [`PoolKey`]).
    policy_changes: AtomicU64,
    /// Each data-plane thread keeps its own idle connections (driven by its own event
    /// loop), so a request and its origin connection never wake another core, and
    /// taking one takes no lock.
    idle: thread_local::ThreadLocal<IdleConnections>,
    down_until: RwLock<HashMap<SocketAddr, Instant>>,
    /// How many origins `down_until` lists: while none is, the hot path reads this
    /// instead of taking the lock (a line both cores only read stays in both caches).
    down_listed: AtomicUsize,
    /// Where each thread's round robin starts next: per thread, so choosing an origin
    /// writes no line another core reads.
    next: thread_local::ThreadLocal<std::cell::Cell<usize>>,
    /// When each thread last swept its idle connections.
    swept: thread_local::ThreadLocal<std::cell::Cell<Instant>>,
    tls: tokio_rustls::TlsConnector,
}

/// The origin's response, and which origin gave it.
pub struct OriginResponse {
    pub response: Response<PooledBody>,
    pub origin: SocketAddr,
    /// After a 101 to an upgrade: the connection, now the origin's end of the tunnel.
    pub upgraded: Option<Rewind<Stream>>,
}

impl Origins {
    /// The origin policy in force.
    pub fn policy(&self) -> Arc<OriginPolicy> {
        self.policy.load_full()
    }

    /// Replaces the origin policy for every later origin request: pooled connections
    /// made under the former one are not taken again (they expire idle). The same
    /// policy again (a reload that changed something else) changes nothing.
    pub fn set_policy(&self, policy: OriginPolicy) {
        if *self.policy.load_full() == policy {
            return;
        }
        self.policy.store(Arc::new(policy));
        self.policy_changes.fetch_add(1, Ordering::Release);
    }

    pub fn new(
        config: OriginConfig,
        provider: Arc<CryptoProvider>,
    ) -> Result<Arc<Origins>, rustls::Error> {
        let mut tls = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyOriginCertificate(provider)))
            .with_no_client_auth();
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(Origins {
            policy: arc_swap::ArcSwap::from_pointee(config.policy.clone()),
            policy_changes: AtomicU64::new(0),
            config,
            idle: thread_local::ThreadLocal::new(),
            down_until: RwLock::new(HashMap::new()),
            down_listed: AtomicUsize::new(0),
            next: thread_local::ThreadLocal::new(),
            swept: thread_local::ThreadLocal::new(),
            tls: tokio_rustls::TlsConnector::from(Arc::new(tls)),
        }))
    }

    pub fn config(&self) -> &OriginConfig {
        &self.config
    }

    fn is_down(&self, address: &SocketAddr) -> bool {
        if self.down_listed.load(Ordering::Relaxed) == 0 {
            return false;
        }
        let down = self.down_until.read().unwrap_or_else(|e| e.into_inner());
        down.get(address)
            .is_some_and(|until| *until > Instant::now())
    }

    fn mark_down(&self, address: SocketAddr) {
        let mut down = self.down_until.write().unwrap_or_else(|e| e.into_inner());
        down.insert(address, Instant::now() + self.config.down_for);
        self.down_listed.store(down.len(), Ordering::Relaxed);
    }

    fn mark_up(&self, address: &SocketAddr) {
        if self.down_listed.load(Ordering::Relaxed) == 0 {
            return;
        }
        let listed = {
            let down = self.down_until.read().unwrap_or_else(|e| e.into_inner());
            down.contains_key(address)
        };
        if listed {
            let mut down = self.down_until.write().unwrap_or_else(|e| e.into_inner());
            down.remove(address);
            self.down_listed.store(down.len(), Ordering::Relaxed);
        }
    }

    /// This thread's idle connections.
    fn idle_here(&self) -> &IdleConnections {
        self.idle.get_or_default()
    }

    /// The origins to try, in order: round robin from the next one, the healthy first
    /// (on the stack for the usual handful of origins).
    fn order(&self, ips: &[IpAddr], port: u16) -> smallvec::SmallVec<[SocketAddr; 8]> {
        let next = self.next.get_or_default();
        let start = next.get();
        next.set(start.wrapping_add(1));
        let mut order: smallvec::SmallVec<[SocketAddr; 8]> = (0..ips.len())
            .map(|i| SocketAddr::new(ips[(start + i) % ips.len()], port))
            .collect();
        // Stable: the rotation is kept within the healthy and within the down.
        order.sort_by_key(|address| self.is_down(address));
        order
    }

    fn checkin(&self, key: PoolKey, mut connection: Connection) {
        let now = Instant::now();
        connection.trim();
        let mut idle = self.idle_here().borrow_mut();
        self.sweep(&mut idle, now);
        let list = idle.entry(key).or_default();
        // Oldest first: those idle past any origin's keep-alive are closed.
        let expired = list.partition_point(|old| now.duration_since(old.since) > MAX_IDLE);
        list.drain(..expired);
        if list.len() < self.config.idle_per_origin {
            list.push(IdleConnection {
                connection,
                since: now,
            });
        }
    }

    /// Every so often (at a check-in, at most every [`SWEEP_EVERY`]), closes this
    /// thread's connections idle past [`MAX_IDLE`] for every origin, so origins no
    /// request goes to any more (a website removed, its addresses changed) hold none.
    fn sweep(&self, idle: &mut HashMap<PoolKey, Vec<IdleConnection>, RandomState>, now: Instant) {
        let last = self.swept.get_or(|| std::cell::Cell::new(now));
        if now.duration_since(last.get()) < SWEEP_EVERY {
            return;
        }
        last.set(now);
        idle.retain(|_, list| {
            list.retain(|old| now.duration_since(old.since) <= MAX_IDLE);
            !list.is_empty()
        });
    }

    /// The connection used last (its buffers warm in the cache). One the event loop saw
    /// become readable while idle (stray bytes, or the origin's close), or idle a while,
    /// is read once to be sure; one with anything waiting on it is closed.
    fn checkout(&self, key: &PoolKey) -> Option<Connection> {
        let mut idle = self.idle_here().borrow_mut();
        let list = idle.get_mut(key)?;
        while let Some(mut waiting) = list.pop() {
            let suspect =
                waiting.connection.has_news() || waiting.since.elapsed() >= CHECK_IDLE_AFTER;
            if !suspect || waiting.connection.is_open() {
                return Some(waiting.connection);
            }
        }
        None
    }

    async fn connect(&self, key: &PoolKey) -> Result<Connection, ConnectError> {
        let limit = self.config.connect_timeout;
        let origin = key.address;
        let tcp = tokio::time::timeout(limit, TcpStream::connect(origin))
            .await
            .map_err(|_| ConnectError::ConnectTimeout { origin })?
            .map_err(|source| ConnectError::Connect { origin, source })?;
        let _ = tcp.set_nodelay(true);
        match &key.tls_name {
            None => Ok(Connection::new(Stream::Plain(tcp))),
            Some(name) => {
                let server_name = ServerName::try_from(name.to_string()).map_err(|source| {
                    ConnectError::TlsName {
                        name: name.to_string(),
                        source,
                    }
                })?;
                let tls = tokio::time::timeout(limit, self.tls.connect(server_name, tcp))
                    .await
                    .map_err(|_| ConnectError::HandshakeTimeout { origin })?
                    .map_err(|source| ConnectError::Handshake { origin, source })?;
                Ok(Connection::new(Stream::Tls(Box::new(tls))))
            }
        }
    }

    /// Sends `request` to one of `ips`: over TLS naming `tls_name` when given. A
    /// WebSocket handshake (`upgrade`) gets a connection of its own, never pooled.
    pub async fn send(
        self: &Arc<Self>,
        ips: &[IpAddr],
        tls_name: Option<&str>,
        request: Request<Body>,
        upgrade: bool,
    ) -> Result<OriginResponse, UpstreamError> {
        if ips.is_empty() {
            return Err(UpstreamError::NoOrigin);
        }
        let port = if tls_name.is_some() {
            self.config.https_port
        } else {
            self.config.http_port
        };
        let tls_name: Option<Arc<str>> = tls_name.map(Arc::from);
        let (parts, mut body) = request.into_parts();
        let mut last = None;
        let mut refused = None;
        let policy = self.policy_changes.load(Ordering::Acquire);
        for address in self.order(ips, port) {
            let key = PoolKey {
                address,
                tls_name: tls_name.clone(),
                policy,
            };
            // A pooled connection the origin closed meanwhile fails before the request
            // was taken (`Stale`): then the request goes once more, on a new connection.
            let mut pooled = if upgrade { None } else { self.checkout(&key) };
            // One wait for the answer per origin, the retry on a new connection within.
            let deadline = tokio::time::Instant::now() + self.config.response_timeout;
            loop {
                let reused = pooled.is_some();
                let mut connection = match pooled.take() {
                    Some(connection) => connection,
                    None => {
                        if let Err(refusal) = self.policy.load().check_connect(address) {
                            refused.get_or_insert((address, refusal));
                            break;
                        }
                        match self.connect(&key).await {
                            Ok(connection) => connection,
                            Err(err) => {
                                let error = Report(&err);
                                tracing::warn!(origin = %address, %error, "origin unreachable; trying the next");
                                self.mark_down(address);
                                last = Some(err);
                                break;
                            }
                        }
                    }
                };
                self.mark_up(&address);
                let exchanged = tokio::time::timeout_at(
                    deadline,
                    connection.exchange(&parts, &mut body, upgrade),
                )
                .await;
                let head = match exchanged {
                    Err(_) => {
                        return Err(UpstreamError::Timeout {
                            origin: address,
                            after: self.config.response_timeout,
                        });
                    }
                    Ok(Ok(head)) => head,
                    // The origin may have taken the request before it closed: only
                    // an idempotent one goes again (RFC 9110 §9.2.2).
                    Ok(Err(Http1Error::Stale(_))) if reused && parts.method.is_idempotent() => {
                        continue;
                    }
                    Ok(Err(source)) if source.is_request() => {
                        return Err(UpstreamError::Request { source });
                    }
                    Ok(Err(source)) => {
                        return Err(UpstreamError::Failed {
                            origin: address,
                            source,
                        });
                    }
                };
                if head.is_upgrade() {
                    let response = Response::from_parts(head.parts, PooledBody::empty());
                    return Ok(OriginResponse {
                        response,
                        origin: address,
                        upgraded: Some(connection.into_upgraded()),
                    });
                }
                let inner = ResponseBody::new(&head, connection);
                let checkin = (!upgrade).then(|| Checkin {
                    key,
                    origins: Arc::downgrade(self),
                });
                let mut body = PooledBody {
                    inner: Some(inner),
                    checkin,
                };
                // A body already whole (none, or all of it in the head's read) frees
                // its connection now.
                if body.is_end_stream() {
                    body.finish();
                }
                return Ok(OriginResponse {
                    response: Response::from_parts(head.parts, body),
                    origin: address,
                    upgraded: None,
                });
            }
        }
        match (last, refused) {
            (Some(last), _) => Err(UpstreamError::Unreachable { last }),
            (None, Some((origin, refusal))) => Err(UpstreamError::Refused { origin, refusal }),
            (None, None) => Err(UpstreamError::NoOrigin),
        }
    }
}

/// What puts a connection back in the pool once its response is read to the end.
struct Checkin {
    key: PoolKey,
    origins: Weak<Origins>,
}

/// An origin's response body; its connection goes back to the pool when the body ends.
pub struct PooledBody {
    /// `None` for the empty body of a 101.
    inner: Option<ResponseBody>,
    checkin: Option<Checkin>,
}

impl PooledBody {
    fn empty() -> PooledBody {
        PooledBody {
            inner: None,
            checkin: None,
        }
    }

    fn finish(&mut self) {
        if let Some(checkin) = self.checkin.take()
            && let Some(inner) = self.inner.as_mut()
            && let Some(connection) = inner.take_reusable()
            && let Some(origins) = checkin.origins.upgrade()
        {
            origins.checkin(checkin.key, connection);
        }
    }
}

impl hyper::body::Body for PooledBody {
    type Data = Bytes;
    type Error = Http1Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Http1Error>>> {
        let this = self.get_mut();
        let Some(inner) = this.inner.as_mut() else {
            return Poll::Ready(None);
        };
        let polled = Pin::new(&mut *inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Err(_))) => this.checkin = None,
            Poll::Ready(_) if inner.is_end_stream() => this.finish(),
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner
            .as_ref()
            .is_none_or(|inner| inner.is_end_stream())
    }

    fn size_hint(&self) -> SizeHint {
        self.inner
            .as_ref()
            .map_or(SizeHint::with_exact(0), |inner| inner.size_hint())
    }
}

impl Drop for PooledBody {
    fn drop(&mut self) {
        // A body read to its end whose last poll was not seen still frees its
        // connection; one dropped half-read closes it.
        self.finish();
    }
}

/// Origins are reached by address and commonly hold self-signed or mismatched
/// certificates, so the connection is encrypted but the certificate is not checked
/// (the "full, not strict" mode of hosted proxies); signatures still are.
#[derive(Debug)]
struct AnyOriginCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyOriginCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origins() -> Arc<Origins> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        Origins::new(OriginConfig::default(), provider).unwrap()
    }

    #[test]
    fn a_down_origin_goes_last_until_it_answers_again() {
        let origins = origins();
        let (a, b): (IpAddr, IpAddr) = ([127, 0, 0, 1].into(), [127, 0, 0, 2].into());
        let (at_a, at_b) = (SocketAddr::new(a, 80), SocketAddr::new(b, 80));
        assert!(!origins.is_down(&at_a) && !origins.is_down(&at_b));
        origins.mark_down(at_a);
        assert!(origins.is_down(&at_a) && !origins.is_down(&at_b));
        assert_eq!(origins.down_listed.load(Ordering::Relaxed), 1);
        for _ in 0..4 {
            assert_eq!(origins.order(&[a, b], 80).as_slice(), [at_b, at_a]);
        }
        origins.mark_up(&at_a);
        assert!(!origins.is_down(&at_a));
        assert_eq!(origins.down_listed.load(Ordering::Relaxed), 0);
        let firsts: Vec<_> = (0..4).map(|_| origins.order(&[a, b], 80)[0]).collect();
        assert!(
            firsts.contains(&at_a) && firsts.contains(&at_b),
            "{firsts:?}"
        );
    }

    #[test]
    fn only_a_changed_policy_retires_the_pooled_connections() {
        let origins = origins();
        let changes = || origins.policy_changes.load(Ordering::Acquire);
        origins.set_policy(OriginPolicy::clone(&origins.policy()));
        assert_eq!(changes(), 0, "a reload that left the policy as it was");
        let mut narrower = OriginPolicy::clone(&origins.policy());
        narrower.deny.push("127.0.0.1/32".parse().unwrap());
        origins.set_policy(narrower);
        assert_eq!(changes(), 1);
    }

    #[tokio::test]
    async fn idle_connections_belong_to_the_thread_that_drives_them() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let origins = origins();
        let key = PoolKey {
            address: listener.local_addr().unwrap(),
            tls_name: None,
            policy: 0,
        };
        let connection = origins.connect(&key).await.unwrap();
        let _accepted = listener.accept().await.unwrap();
        origins.checkin(key.clone(), connection);
        let elsewhere = {
            let (origins, key) = (origins.clone(), key.clone());
            std::thread::spawn(move || origins.checkout(&key).is_some())
                .join()
                .unwrap()
        };
        assert!(!elsewhere, "another thread took this thread's connection");
        assert!(origins.checkout(&key).is_some());
        assert!(origins.checkout(&key).is_none(), "taken once");
    }

    #[tokio::test]
    async fn a_thread_keeps_as_many_idle_connections_as_configured_and_closes_the_rest() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = OriginConfig {
            idle_per_origin: 3,
            ..OriginConfig::default()
        };
        let origins = Origins::new(config, provider).unwrap();
        let key = PoolKey {
            address: listener.local_addr().unwrap(),
            tls_name: None,
            policy: 0,
        };
        let mut accepted = Vec::new();
        let mut connections = Vec::new();
        for _ in 0..5 {
            connections.push(origins.connect(&key).await.unwrap());
            accepted.push(listener.accept().await.unwrap().0);
        }
        for connection in connections {
            origins.checkin(key.clone(), connection);
        }
        // Held open while the origin side is read below.
        let kept: Vec<_> = std::iter::from_fn(|| origins.checkout(&key)).collect();
        assert_eq!(kept.len(), 3, "idle connections kept");
        // The two beyond the cap were closed: their origin side reads the end.
        let mut closed = 0;
        for mut socket in accepted {
            let mut byte = [0u8; 1];
            let read = tokio::time::timeout(
                Duration::from_millis(200),
                tokio::io::AsyncReadExt::read(&mut socket, &mut byte),
            )
            .await;
            if matches!(read, Ok(Ok(0))) {
                closed += 1;
            }
        }
        assert_eq!(closed, 2, "connections closed beyond the cap");
        drop(kept);
    }
}
