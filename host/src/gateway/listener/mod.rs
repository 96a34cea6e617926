//! The HTTP and HTTPS listeners: accept, read the PROXY header from trusted peers, read
//! the ClientHello and terminate TLS, then serve HTTP/1.1 and HTTP/2 within the
//! connection limits until the client leaves, goes idle or the gateway drains.

use super::connection::{ConnectionInfo, ConnectionLimits, Live, Shutdown, canonical_address};
use super::host_name::canonical_host;
use super::io::{Activity, ActivityCount, CoalescedWrites};
use super::service::{BoxFuture, RequestHandler};
use super::{ja4, proxy_protocol};
use crate::client::{Alpn, TlsInfo, TlsVersion};
use crate::report::Report;
use botgate_http1::Rewind;
use botgate_http1::server as http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::task::TaskTracker;

/// What a listener needs besides its socket: the handler of its requests, the limits,
/// the peers that send PROXY headers, and the TLS-ALPN-01 answers.
pub struct Listening<H> {
    pub handler: H,
    /// Read when a connection starts; a reload changes them for later connections.
    pub limits: Live<ConnectionLimits>,
    /// Peers whose connections start with a PROXY v2 header (the cluster's HAProxy).
    pub trusted_proxies: Live<Vec<ipnet::IpNet>>,
    /// ACME's TLS-ALPN-01 challenges, when certificates come from ACME.
    pub alpn_challenges: Option<Arc<dyn AlpnChallenges>>,
}

/// Where the HTTPS listener finds the certificate that answers a CA's TLS-ALPN-01
/// challenge (RFC 8737).
pub trait AlpnChallenges: Send + Sync + 'static {
    /// Whether a challenge may wait for `name` (canonical): asked first, and cheaply,
    /// so that a stranger's handshake costs no look-up.
    fn may_wait(&self, name: &str) -> bool;
    /// The challenge certificate for `name`.
    fn certificate<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Option<Arc<rustls::sign::CertifiedKey>>>;
}

/// Accepts connections on `listener` until shutdown; `tls` makes it the HTTPS listener.
/// Each connection runs on `tracker`, so the caller can wait for them to drain.
pub async fn serve<H: RequestHandler>(
    listening: Arc<Listening<H>>,
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    mut shutdown: Shutdown,
    tracker: TaskTracker,
) {
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.wait() => break,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(err) => {
                // Out of file descriptors and the like: pause instead of spinning.
                tracing::warn!(%err, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let listening = listening.clone();
        let tls = tls.clone();
        let shutdown = shutdown.clone();
        tracker.spawn(async move {
            if let Err(err) = connection(listening, stream, peer, tls, shutdown).await {
                let reason = Report(&err);
                tracing::debug!(%peer, %reason, "connection closed early");
            }
        });
    }
}

/// Why a connection closed before it could serve a request.
#[derive(Debug, thiserror::Error)]
pub enum ConnectionError {
    #[error("no PROXY protocol header within the header-read timeout")]
    ProxyHeaderTimeout,
    #[error("the PROXY protocol header")]
    ProxyHeader(#[source] proxy_protocol::ProxyHeaderError),
    #[error("no TLS ClientHello within the header-read timeout")]
    ClientHelloTimeout,
    #[error("reading the TLS ClientHello")]
    ClientHelloRead(#[source] std::io::Error),
    #[error("the connection did not start with a TLS handshake")]
    NotTls,
    #[error("the TLS ClientHello")]
    ClientHello(#[source] std::io::Error),
    #[error("the TLS handshake timed out")]
    HandshakeTimeout,
    #[error("the TLS handshake")]
    Handshake(#[source] std::io::Error),
    #[error("a TLS-ALPN-01 challenge for `{name}`")]
    AcmeChallenge {
        name: String,
        #[source]
        source: AcmeChallengeError,
    },
}

/// Why a CA's TLS-ALPN-01 handshake was not answered.
#[derive(Debug, thiserror::Error)]
pub enum AcmeChallengeError {
    #[error("the store did not answer in time")]
    StoreTimeout,
    #[error("no challenge waits for the name")]
    NoChallenge,
    #[error("the challenge certificate's TLS configuration")]
    Config(#[source] rustls::Error),
    #[error("the handshake timed out")]
    HandshakeTimeout,
    #[error("the handshake")]
    Handshake(#[source] std::io::Error),
}

/// One connection, from the first byte to the last.
async fn connection<H: RequestHandler>(
    listening: Arc<Listening<H>>,
    mut stream: TcpStream,
    peer: SocketAddr,
    tls: Option<Arc<rustls::ServerConfig>>,
    shutdown: Shutdown,
) -> Result<(), ConnectionError> {
    let deadline = listening.limits.load().header_read_timeout;
    let peer = canonical_address(peer);
    let mut client = peer;
    let trusted = listening
        .trusted_proxies
        .load()
        .iter()
        .any(|net| net.contains(&peer.ip()));
    if trusted {
        match tokio::time::timeout(deadline, proxy_protocol::read_header(&mut stream)).await {
            Err(_) => return Err(ConnectionError::ProxyHeaderTimeout),
            Ok(Err(err)) => return Err(ConnectionError::ProxyHeader(err)),
            Ok(Ok(Some(real))) => client = canonical_address(real),
            Ok(Ok(None)) => {}
        }
    }
    let Some(tls) = tls else {
        let info = ConnectionInfo::new(client, false, false, None);
        serve_http(listening, stream, info, shutdown).await;
        return Ok(());
    };
    let (hello, ja4) = tokio::time::timeout(deadline, read_client_hello(&mut stream))
        .await
        .map_err(|_| ConnectionError::ClientHelloTimeout)??;
    let started = tokio_rustls::LazyConfigAcceptor::new(
        rustls::server::Acceptor::default(),
        Rewind::new(hello, stream),
    );
    let started = tokio::time::timeout(deadline, started)
        .await
        .map_err(|_| ConnectionError::HandshakeTimeout)?
        .map_err(ConnectionError::ClientHello)?;
    let hello = started.client_hello();
    // RFC 8737: a CA checking TLS-ALPN-01 offers only `acme-tls/1`, for a website's
    // name; it gets the challenge certificate, and nothing else happens on the
    // connection. Any other handshake (`acme-tls/1` among other protocols, or for a
    // name that is no website's) is an ordinary one and reads nothing from the store.
    let acme = listening.alpn_challenges.as_ref().and_then(|challenges| {
        let name = canonical_host(hello.server_name()?);
        let acme_only = hello.alpn().is_some_and(|mut protocols| {
            protocols.next() == Some(ACME_TLS_ALPN) && protocols.next().is_none()
        });
        (acme_only && challenges.may_wait(&name)).then(|| (challenges.clone(), name))
    });
    if let Some((challenges, name)) = acme {
        let answered = answer_tls_alpn01(challenges.as_ref(), started, &name, deadline).await;
        match &answered {
            Ok(()) => tracing::info!(%name, "answered a TLS-ALPN-01 challenge"),
            Err(err) => {
                let reason = Report(err);
                tracing::warn!(%name, %reason, "TLS-ALPN-01 challenge not answered");
            }
        }
        return answered.map_err(|source| ConnectionError::AcmeChallenge { name, source });
    }
    let tls = tokio::time::timeout(deadline, started.into_stream(tls))
        .await
        .map_err(|_| ConnectionError::HandshakeTimeout)?
        .map_err(ConnectionError::Handshake)?;
    let session = tls.get_ref().1;
    let version = match session.protocol_version() {
        Some(rustls::ProtocolVersion::TLSv1_3) => TlsVersion::Tls13,
        Some(rustls::ProtocolVersion::TLSv1_2) => TlsVersion::Tls12,
        _ => TlsVersion::Other,
    };
    let alpn = match session.alpn_protocol() {
        None => Alpn::None,
        Some(b"h2") => Alpn::H2,
        Some(b"http/1.1") => Alpn::Http11,
        Some(_) => Alpn::Other,
    };
    let tls_facts = TlsInfo {
        version,
        alpn,
        ja4: ja4.unwrap_or_default(),
    };
    let info = ConnectionInfo::new(client, true, false, Some(tls_facts));
    serve_http(listening, tls, info, shutdown).await;
    Ok(())
}

/// Completes an `acme-tls/1` handshake with the challenge certificate for `name`.
async fn answer_tls_alpn01(
    challenges: &dyn AlpnChallenges,
    started: tokio_rustls::StartHandshake<Rewind<TcpStream>>,
    name: &str,
    deadline: std::time::Duration,
) -> Result<(), AcmeChallengeError> {
    let key = tokio::time::timeout(deadline, challenges.certificate(name))
        .await
        .map_err(|_| AcmeChallengeError::StoreTimeout)?
        .ok_or(AcmeChallengeError::NoChallenge)?;
    let mut config = rustls::ServerConfig::builder_with_provider(super::tls::provider())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(AcmeChallengeError::Config)?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(rustls::sign::SingleCertAndKey::from(key)));
    config.alpn_protocols = vec![ACME_TLS_ALPN.to_vec()];
    tokio::time::timeout(deadline, started.into_stream(Arc::new(config)))
        .await
        .map_err(|_| AcmeChallengeError::HandshakeTimeout)?
        .map_err(AcmeChallengeError::Handshake)?;
    Ok(())
}

/// The ALPN protocol of ACME's TLS-ALPN-01 challenge (RFC 8737).
const ACME_TLS_ALPN: &[u8] = b"acme-tls/1";

/// Records a ClientHello may be split over, besides its first.
const MAX_HELLO_RECORDS: usize = 256;

/// Reads the TLS records that carry the ClientHello, and its JA4 fingerprint. A browser
/// sends it in one record; a client that splits it over several (which leaves the first
/// record without a whole ClientHello) is fingerprinted from them together, up to the
/// largest ClientHello rustls takes ([`ja4::MAX_HELLO_LEN`]). Reading stops (without a
/// fingerprint; rustls judges the rest) at a record that carries nothing or is no
/// handshake record.
async fn read_client_hello<S: AsyncRead + Unpin>(
    stream: &mut S,
) -> Result<(Vec<u8>, Option<String>), ConnectionError> {
    let mut records = vec![0u8; ja4::RECORD_HEADER_LEN];
    stream
        .read_exact(&mut records)
        .await
        .map_err(ConnectionError::ClientHelloRead)?;
    let Some(len) = ja4::handshake_record_len(&records) else {
        return Err(ConnectionError::NotTls);
    };
    records.resize(len, 0);
    stream
        .read_exact(&mut records[ja4::RECORD_HEADER_LEN..])
        .await
        .map_err(ConnectionError::ClientHelloRead)?;
    let first = &records[ja4::RECORD_HEADER_LEN..];
    match ja4::missing_hello_bytes(first) {
        Some(missing) if missing > 0 && !first.is_empty() => {}
        _ => {
            let fingerprint = ja4::from_record(&records);
            return Ok((records, fingerprint));
        }
    }
    // The rest of the ClientHello, record by record (at most so many).
    let mut handshake = first.to_vec();
    let mut more = 0;
    while let Some(missing) = ja4::missing_hello_bytes(&handshake).filter(|&m| m > 0) {
        more += 1;
        if handshake.len() + missing > ja4::MAX_HELLO_LEN || more > MAX_HELLO_RECORDS {
            return Ok((records, None));
        }
        let start = records.len();
        records.resize(start + ja4::RECORD_HEADER_LEN, 0);
        stream
            .read_exact(&mut records[start..])
            .await
            .map_err(ConnectionError::ClientHelloRead)?;
        let Some(len) = ja4::handshake_record_len(&records[start..])
            .filter(|&len| len > ja4::RECORD_HEADER_LEN)
        else {
            return Ok((records, None));
        };
        records.resize(start + len, 0);
        stream
            .read_exact(&mut records[start + ja4::RECORD_HEADER_LEN..])
            .await
            .map_err(ConnectionError::ClientHelloRead)?;
        handshake.extend_from_slice(&records[start + ja4::RECORD_HEADER_LEN..]);
    }
    let fingerprint = ja4::from_handshake(&handshake);
    Ok((records, fingerprint))
}

/// Serves HTTP on an established connection until it ends, idles out or drains:
/// HTTP/1.1 through the gateway's own loop ([`http1`]) until a request is hyper's,
/// HTTP/2 (and whatever the loop hands over) through hyper.
async fn serve_http<S, H: RequestHandler>(
    listening: Arc<Listening<H>>,
    stream: S,
    info: ConnectionInfo,
    mut shutdown: Shutdown,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let limits = ConnectionLimits::clone(&listening.limits.load());
    let activity = ActivityCount::new();
    let io = Activity::new(stream, activity.clone());
    let h2 = info.tls.as_ref().is_some_and(|tls| tls.alpn == Alpn::H2);
    // One reference count per connection, written by its own thread only: a request
    // clones this, not the handler every data-plane core shares.
    let served = Arc::new((listening, info));
    let mut idle = IdleCheck::new(&limits, activity);
    if h2 {
        let io = CoalescedWrites::new(io);
        return serve_hyper(served, io, &limits, shutdown, idle, true).await;
    }
    let flags = http1::Flags::default();
    let ended = {
        let (listening, info) = &*served;
        let handle = |request| listening.handler.handle(request, info);
        let own = http1::serve(handle, io, limits.head(), &flags);
        tokio::pin!(own);
        loop {
            tokio::select! {
                ended = own.as_mut() => break ended,
                _ = shutdown.wait(), if !idle.closing => {
                    idle.closing = true;
                    if !flags.in_request() {
                        return;
                    }
                    flags.stop();
                }
                verdict = idle.next() => match verdict {
                    IdleVerdict::Close if flags.in_request() => flags.stop(),
                    IdleVerdict::Close | IdleVerdict::Drop => return,
                },
            }
        }
    };
    if let http1::Ended::Handoff(io) = ended {
        serve_hyper(served, io, &limits, shutdown, idle, false).await;
    }
}

/// What the idle check found.
enum IdleVerdict {
    /// Quiet past the idle timeout: close gracefully (after the request in flight).
    Close,
    /// Close now: nothing was ever sent, or a request is stuck (still quiet a check
    /// after the graceful close was asked for).
    Drop,
}

/// A connection's idle check: its first look comes at the header-read timeout (or
/// sooner, at a quarter of the idle timeout), then every quarter of the idle timeout.
struct IdleCheck {
    interval: tokio::time::Interval,
    watch: super::io::IdleWatch,
    activity: ActivityCount,
    started: tokio::time::Instant,
    header_read_timeout: std::time::Duration,
    idle_timeout: std::time::Duration,
    /// A graceful close was asked for (by the drain or by this check).
    closing: bool,
}

impl IdleCheck {
    fn new(limits: &ConnectionLimits, activity: ActivityCount) -> IdleCheck {
        let started = tokio::time::Instant::now();
        let every = limits.idle_timeout / 4;
        let mut interval =
            tokio::time::interval_at(started + limits.header_read_timeout.min(every), every);
        // A late tick (a stalled thread) must not be followed at once by the next: the
        // drop of a stuck request comes a whole check after its graceful close.
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        IdleCheck {
            interval,
            watch: activity.watch(std::time::Instant::now()),
            activity,
            started,
            header_read_timeout: limits.header_read_timeout,
            idle_timeout: limits.idle_timeout,
            closing: false,
        }
    }

    /// Waits for the next check that finds something to do (cancel-safe).
    async fn next(&mut self) -> IdleVerdict {
        loop {
            self.interval.tick().await;
            // hyper's header-read timeout starts once hyper-util has read enough to
            // tell HTTP/1 from HTTP/2: a client that connects (and completes TLS) and
            // sends nothing is closed here instead.
            if !self.activity.any() && self.started.elapsed() >= self.header_read_timeout {
                tracing::debug!("no request within the header-read timeout; closed");
                return IdleVerdict::Drop;
            }
            if self.watch.quiet_for(std::time::Instant::now()) < self.idle_timeout {
                continue;
            }
            if self.closing {
                // Asked to close a check ago and still no byte moved either way: a
                // request is stuck (a body that never comes, a client that stops
                // reading, an origin that stalls mid-body), and a graceful close would
                // wait for it forever. Dropping the connection closes it.
                tracing::debug!(
                    "connection quiet past its idle timeout with a request in flight; closed"
                );
                return IdleVerdict::Drop;
            }
            self.closing = true;
            return IdleVerdict::Close;
        }
    }
}

/// Serves the connection with hyper until it ends, idles out or drains: HTTP/1.1 or
/// HTTP/2 by what the client sends, or, when ALPN chose `h2`, HTTP/2 straight away
/// (no look at the preface, no rewind layer under every read).
async fn serve_hyper<I, H: RequestHandler>(
    served: Arc<(Arc<Listening<H>>, ConnectionInfo)>,
    io: I,
    limits: &ConnectionLimits,
    shutdown: Shutdown,
    idle: IdleCheck,
    alpn_h2: bool,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |request| {
        let served = served.clone();
        // HTTP/2 runs each stream's future as a task of its own, moved whole at every
        // step (into the stream, into the task): the data plane's large future is
        // boxed where it is made, and this one stays small.
        async move {
            let (listening, info) = &*served;
            Ok::<_, Infallible>(listening.handler.handle_boxed(request, info).await)
        }
    });
    let io = TokioIo::new(io);
    if alpn_h2 {
        let mut builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
        builder
            .timer(TokioTimer::new())
            .max_header_list_size(limits.max_header_bytes as u32)
            .max_concurrent_streams(MAX_CONCURRENT_STREAMS);
        let connection = builder.serve_connection(io, service);
        return drive(connection, |c| c.graceful_shutdown(), shutdown, idle).await;
    }
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(limits.max_header_bytes.max(8192))
        .max_headers(limits.max_headers);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_header_list_size(limits.max_header_bytes as u32)
        .max_concurrent_streams(MAX_CONCURRENT_STREAMS);
    let connection = builder.serve_connection_with_upgrades(io, service);
    drive(connection, |c| c.graceful_shutdown(), shutdown, idle).await
}

/// The streams an HTTP/2 client may have open at once on one connection. There are
/// no keep-alive pings: a client answering them would never be quiet, so the idle
/// check would keep every HTTP/2 connection (and any stream stuck on it) open for good.
/// A quiet connection is closed after the idle timeout instead, as HTTP/1.1's are.
const MAX_CONCURRENT_STREAMS: u32 = 256;

/// Runs a hyper connection to its end, closing it gracefully (with `close`) when the
/// gateway drains or the idle check asks, and dropping it when the check says so.
async fn drive<C, E>(
    connection: C,
    close: impl Fn(std::pin::Pin<&mut C>),
    mut shutdown: Shutdown,
    mut idle: IdleCheck,
) where
    C: std::future::Future<Output = Result<(), E>>,
    E: std::fmt::Display,
{
    tokio::pin!(connection);
    if idle.closing {
        close(connection.as_mut());
    }
    loop {
        tokio::select! {
            result = connection.as_mut() => {
                if let Err(err) = result {
                    tracing::debug!(%err, "connection ended with an error");
                }
                return;
            }
            _ = shutdown.wait(), if !idle.closing => {
                idle.closing = true;
                close(connection.as_mut());
            }
            verdict = idle.next() => match verdict {
                IdleVerdict::Close => close(connection.as_mut()),
                IdleVerdict::Drop => return,
            },
        }
    }
}
