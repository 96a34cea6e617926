//! HTTP/3: QUIC (quinn) on the HTTPS listener's address over UDP, HTTP by `h3`. Each
//! request goes through the same phases as over TCP; a website answers over HTTP/3
//! only when it sets `enable_http3` (others get `421 Misdirected Request`, which
//! sends the browser back to TCP), and such websites advertise it with `Alt-Svc` on
//! their HTTPS answers.
//!
//! The components get TLS 1.3, ALPN `h3` and the JA4 (`q…`) that [`super::quic_hello`]
//! took from the client's Initial packets.
//!
//! Admission: only QUIC version 1 (whose Initial packets the JA4 is read from); while
//! many handshakes from unproven addresses are under way, a new client is sent a Retry
//! (proving its address costs it a round trip and the gateway no TLS work); and the
//! connections open at once are bounded, in all and per client address.

use super::connection::{ConnectionInfo, ConnectionLimits, Live, Shutdown, canonical_address};
use super::http3_frames::{Guarded, Limited};
use super::pages::BoxError;
use super::quic_hello::ClientHellos;
use super::service::RequestHandler;
use crate::client::{Alpn, TlsInfo, TlsVersion};
use crate::report::Report;
use bytes::{Buf, Bytes};
use http::Response;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, SizeHint};
use std::collections::HashMap;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use tokio_util::task::TaskTracker;

/// Why the QUIC endpoint could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum QuicError {
    #[error("QUIC: the TLS configuration")]
    Tls(#[source] quinn::crypto::rustls::NoInitialCipherSuite),
    #[error("QUIC: the idle timeout is too long for QUIC")]
    IdleTimeout,
}

/// Why a QUIC connection closed before it could serve a request.
#[derive(Debug, thiserror::Error)]
pub enum QuicConnectionError {
    #[error("the QUIC handshake timed out")]
    HandshakeTimeout,
    #[error("the QUIC handshake")]
    Handshake(#[source] quinn::ConnectionError),
    #[error("the HTTP/3 setup timed out")]
    SetupTimeout,
    #[error("the HTTP/3 setup")]
    Setup(#[source] h3::error::ConnectionError),
}

/// The QUIC server configuration over the HTTPS listener's TLS configuration (TLS 1.3
/// only, ALPN `h3`), with the connection limits.
pub fn server_config(
    tls: &rustls::ServerConfig,
    limits: &ConnectionLimits,
) -> Result<quinn::ServerConfig, QuicError> {
    let mut tls = tls.clone();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    tls.max_early_data_size = 0;
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls).map_err(QuicError::Tls)?;
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    let mut transport = quinn::TransportConfig::default();
    // What a connection's client may have sent that the gateway has not read yet: per
    // stream, and in all (quinn's own default lets each stream hold 1.25 MB).
    transport
        .max_concurrent_bidi_streams(256u32.into())
        .stream_receive_window(STREAM_RECEIVE_WINDOW.into())
        .receive_window(CONNECTION_RECEIVE_WINDOW.into())
        .max_idle_timeout(Some(
            limits
                .idle_timeout
                .try_into()
                .map_err(|_| QuicError::IdleTimeout)?,
        ));
    config.transport_config(Arc::new(transport));
    Ok(config)
}

/// Handshakes from addresses not yet proven under way at once, past which a new client
/// is sent a Retry.
const RETRY_ABOVE_HANDSHAKES: usize = 32;
/// QUIC connections open at once, in all and from one client address.
const MAX_CONNECTIONS: usize = 16_384;
const MAX_CONNECTIONS_PER_CLIENT: usize = 64;
/// Bytes a client may send ahead on one stream, and on a connection in all.
const STREAM_RECEIVE_WINDOW: u32 = 256 << 10;
const CONNECTION_RECEIVE_WINDOW: u32 = 4 << 20;
/// The most of a response body handed to `h3` at once: the idle deadline of a send is
/// for this much (a cached answer is one piece of up to 8 MiB).
const SEND_PIECE: usize = 64 << 10;

/// The QUIC versions served: version 1 only (RFC 9000), whose Initials give the JA4.
const QUIC_VERSIONS: [u32; 1] = [1];

/// The QUIC connections under way: handshakes from unproven addresses, and open
/// connections in all and by client address.
#[derive(Default)]
struct Admission {
    unproven_handshakes: AtomicUsize,
    open: AtomicUsize,
    by_client: Mutex<HashMap<IpAddr, usize>>,
}

/// A connection admitted: its place is given back when it is dropped.
struct Admitted {
    admission: Arc<Admission>,
    client: IpAddr,
    unproven: bool,
}

/// What became of a connection attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    /// Sent a Retry: the client proves its address first.
    Retry,
    /// Refused: too many connections, in all or from the client's address.
    Full,
}

impl Admission {
    /// Admits a connection from `client` whose address is `proven` or not.
    fn admit(self: &Arc<Self>, client: IpAddr, proven: bool) -> Result<Admitted, Refusal> {
        if !proven && self.unproven_handshakes.load(Ordering::Relaxed) >= RETRY_ABOVE_HANDSHAKES {
            return Err(Refusal::Retry);
        }
        if self.open.load(Ordering::Relaxed) >= MAX_CONNECTIONS {
            return Err(Refusal::Full);
        }
        {
            let mut by_client = self.by_client.lock().unwrap_or_else(|e| e.into_inner());
            let open = by_client.entry(client).or_default();
            if *open >= MAX_CONNECTIONS_PER_CLIENT {
                return Err(Refusal::Full);
            }
            *open += 1;
        }
        self.open.fetch_add(1, Ordering::Relaxed);
        if !proven {
            self.unproven_handshakes.fetch_add(1, Ordering::Relaxed);
        }
        Ok(Admitted {
            admission: self.clone(),
            client,
            unproven: !proven,
        })
    }
}

impl Admitted {
    /// The handshake is over (the address answered).
    fn handshake_done(&mut self) {
        if std::mem::take(&mut self.unproven) {
            self.admission
                .unproven_handshakes
                .fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.handshake_done();
        self.admission.open.fetch_sub(1, Ordering::Relaxed);
        let mut by_client = self
            .admission
            .by_client
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(open) = by_client.get_mut(&self.client) {
            *open -= 1;
            if *open == 0 {
                by_client.remove(&self.client);
            }
        }
    }
}

/// What HTTP/3 connections need: the handler of their requests, the limits, and the
/// JA4 fingerprints of the clients' Initial packets.
pub struct Http3<H> {
    pub handler: H,
    /// Read when a connection starts (see [`Live`]).
    pub limits: Live<ConnectionLimits>,
    pub hellos: Arc<ClientHellos>,
}

/// The QUIC endpoint on `address`: quinn over a UDP socket whose Initial packets are
/// shown to `hellos` for JA4.
pub fn endpoint(
    hellos: Arc<ClientHellos>,
    config: quinn::ServerConfig,
    address: std::net::SocketAddr,
) -> std::io::Result<quinn::Endpoint> {
    let runtime: Arc<dyn quinn::Runtime> = Arc::new(quinn::TokioRuntime);
    let socket = runtime.wrap_udp_socket(std::net::UdpSocket::bind(address)?)?;
    let socket = super::quic_hello::FingerprintingSocket::new(socket, hellos);
    let mut endpoint_config = quinn::EndpointConfig::default();
    endpoint_config.supported_versions(QUIC_VERSIONS.to_vec());
    quinn::Endpoint::new_with_abstract_socket(
        endpoint_config,
        Some(config),
        Arc::new(socket),
        runtime,
    )
}

/// Accepts QUIC connections on `endpoint` until shutdown, each on `tracker`.
pub async fn serve<H: RequestHandler>(
    http3: Arc<Http3<H>>,
    endpoint: quinn::Endpoint,
    mut shutdown: Shutdown,
    tracker: TaskTracker,
) {
    let admission = Arc::new(Admission::default());
    loop {
        let incoming = tokio::select! {
            incoming = endpoint.accept() => incoming,
            _ = shutdown.wait() => break,
        };
        let Some(incoming) = incoming else { break };
        let peer = incoming.remote_address();
        let client = super::limits::client_network(canonical_address(peer).ip());
        let admitted = match admission.admit(client, incoming.remote_address_validated()) {
            Ok(admitted) => admitted,
            Err(refusal) => {
                tracing::debug!(%peer, ?refusal, "QUIC connection not admitted");
                match refusal {
                    Refusal::Retry => {
                        if let Err(refused) = incoming.retry() {
                            refused.into_incoming().refuse();
                        }
                    }
                    Refusal::Full => incoming.refuse(),
                }
                continue;
            }
        };
        let http3 = http3.clone();
        let shutdown = shutdown.clone();
        tracker.spawn(async move {
            if let Err(err) = connection(http3, incoming, admitted, shutdown).await {
                let reason = Report(&err);
                tracing::debug!(%peer, %reason, "QUIC connection closed early");
            }
        });
    }
    // Connections still open were told to finish; refuse new ones meanwhile.
    endpoint.set_server_config(None);
}

async fn connection<H: RequestHandler>(
    http3: Arc<Http3<H>>,
    incoming: quinn::Incoming,
    mut admitted: Admitted,
    mut shutdown: Shutdown,
) -> Result<(), QuicConnectionError> {
    let limits = &*http3.limits.load_full();
    let peer = incoming.remote_address();
    let client = canonical_address(peer);
    let original_cid = incoming.orig_dst_cid();
    http3.hellos.keep_for(limits.header_read_timeout);
    let handshake = tokio::time::timeout(limits.header_read_timeout, incoming).await;
    // Taken after the handshake, when the whole ClientHello has arrived, whatever
    // happened to it.
    let ja4 = http3.hellos.take(peer, &original_cid).unwrap_or_default();
    let quic = handshake
        .map_err(|_| QuicConnectionError::HandshakeTimeout)?
        .map_err(QuicConnectionError::Handshake)?;
    admitted.handshake_done();
    let tls = TlsInfo {
        version: TlsVersion::Tls13,
        alpn: Alpn::H3,
        ja4,
    };
    let info = Arc::new(ConnectionInfo::new(client, true, true, Some(tls)));
    let mut builder = h3::server::builder();
    builder.max_field_section_size(limits.max_header_bytes as u64);
    // A frame other than DATA may be as long as a request head, and a little more.
    let frame_bound = limits.max_header_bytes as u64 + 1024;
    let setup =
        builder.build::<_, Bytes>(Guarded::new(h3_quinn::Connection::new(quic), frame_bound));
    let mut h3 = tokio::select! {
        built = tokio::time::timeout(limits.header_read_timeout, setup) => built
            .map_err(|_| QuicConnectionError::SetupTimeout)?
            .map_err(QuicConnectionError::Setup)?,
        _ = shutdown.wait() => return Ok(()),
    };
    let requests = TaskTracker::new();
    loop {
        let accepted = tokio::select! {
            accepted = h3.accept() => accepted,
            _ = shutdown.wait() => {
                // GOAWAY: requests under way finish, no new ones start.
                let _ = h3.shutdown(0).await;
                break;
            }
        };
        match accepted {
            Ok(Some(resolver)) => {
                let http3 = http3.clone();
                let info = info.clone();
                let header_timeout = limits.header_read_timeout;
                let idle_timeout = limits.idle_timeout;
                requests.spawn(async move {
                    let resolved =
                        tokio::time::timeout(header_timeout, resolver.resolve_request()).await;
                    match resolved {
                        Ok(Ok((request, stream))) => {
                            let exchanged = exchange(
                                &http3.handler,
                                request,
                                stream,
                                info,
                                header_timeout,
                                idle_timeout,
                            );
                            if let Err(err) = exchanged.await {
                                tracing::debug!(%err, "HTTP/3 request ended early");
                            }
                        }
                        Ok(Err(err)) => tracing::debug!(%err, "unreadable HTTP/3 request"),
                        Err(_) => tracing::debug!("HTTP/3 request head timed out"),
                    }
                });
            }
            Ok(None) => break,
            Err(err) => {
                tracing::debug!(%err, "HTTP/3 connection ended");
                break;
            }
        }
    }
    requests.close();
    requests.wait().await;
    Ok(())
}

type Stream<S> = h3::server::RequestStream<S, Bytes>;
/// A request stream as `h3` gives it, its frames bounded.
type BidiStream = Limited<h3_quinn::BidiStream<Bytes>>;
type RecvStream = Limited<h3_quinn::RecvStream>;

/// Why a response was not sent whole.
#[derive(Debug, thiserror::Error)]
#[error("the client took no byte of the response for {0:?}")]
struct SendStalled(std::time::Duration);

/// `sending`, unless the client takes none of it for `idle`.
async fn within<E: Into<BoxError>>(
    idle: std::time::Duration,
    sending: impl Future<Output = Result<(), E>>,
) -> Result<(), BoxError> {
    tokio::time::timeout(idle, sending)
        .await
        .map_err(|_| BoxError::from(SendStalled(idle)))?
        .map_err(Into::into)
}

/// One request and its response on a bidirectional stream. A client that takes no byte
/// of the response for `idle` has its stream reset (QUIC's idle timer alone does not
/// end a connection whose client keeps it alive without reading).
async fn exchange<H: RequestHandler>(
    handler: &H,
    request: http::Request<()>,
    stream: Stream<BidiStream>,
    info: Arc<ConnectionInfo>,
    body_wait: std::time::Duration,
    idle: std::time::Duration,
) -> Result<(), BoxError> {
    let (mut send, receive) = stream.split();
    let (head, ()) = request.into_parts();
    let body = RequestBody::start(&head, receive, body_wait).await;
    let request = http::Request::from_parts(head, body);
    let response = handler.handle(request, &info).await;
    let (head, mut body) = response.into_parts();
    let sent = async {
        within(idle, send.send_response(Response::from_parts(head, ()))).await?;
        while let Some(frame) = body.frame().await {
            match frame?.into_data() {
                Ok(mut data) => {
                    while data.len() > SEND_PIECE {
                        within(idle, send.send_data(data.split_to(SEND_PIECE))).await?;
                    }
                    within(idle, send.send_data(data)).await?;
                }
                Err(frame) => {
                    if let Ok(trailers) = frame.into_trailers() {
                        within(idle, send.send_trailers(trailers)).await?;
                        return Ok(());
                    }
                }
            }
        }
        within(idle, send.finish()).await
    };
    let sent = sent.await;
    if sent.is_err() {
        send.stop_stream(h3::error::Code::H3_REQUEST_CANCELLED);
    }
    sent
}

/// The request body as it arrives on the QUIC stream.
pub struct RequestBody {
    // The stream is used only through `&mut` (polling), so it can be shared between
    // threads as the request phases need.
    stream: sync_wrapper::SyncWrapper<Stream<RecvStream>>,
    ended: bool,
    /// A frame read before the request went on ([`RequestBody::start`]).
    first: Option<Result<Frame<Bytes>, BoxError>>,
}

impl RequestBody {
    /// The body of a request with `head`. One declared empty (`content-length: 0`) has
    /// ended; a GET or HEAD without `content-length` has its first frame awaited (up to
    /// `wait`): a browser ends the stream with the head, so its body is known to be
    /// empty, as hyper knows an HTTP/2 request's, and it reaches the origin without
    /// framing (and may use the cache).
    async fn start(
        head: &http::request::Parts,
        stream: Stream<RecvStream>,
        wait: std::time::Duration,
    ) -> RequestBody {
        let mut body = RequestBody {
            stream: sync_wrapper::SyncWrapper::new(stream),
            ended: false,
            first: None,
        };
        let length = head.headers.get(http::header::CONTENT_LENGTH);
        if length.is_some_and(|length| length.as_bytes() == b"0") {
            // Declared empty (a DATA frame would be a length error).
            body.ended = true;
        } else if length.is_none() && matches!(head.method, http::Method::GET | http::Method::HEAD)
        {
            let first = std::future::poll_fn(|cx| body.poll_data(cx));
            if let Ok(Some(frame)) = tokio::time::timeout(wait, first).await {
                body.first = Some(frame);
            }
        }
        body
    }

    fn poll_data(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if self.ended {
            return Poll::Ready(None);
        }
        match self.stream.get_mut().poll_recv_data(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Ok(Some(mut data))) => {
                Poll::Ready(Some(Ok(Frame::data(data.copy_to_bytes(data.remaining())))))
            }
            Poll::Ready(Ok(None)) => {
                self.ended = true;
                Poll::Ready(None)
            }
            Poll::Ready(Err(err)) => {
                self.ended = true;
                Poll::Ready(Some(Err(err.into())))
            }
        }
    }
}

impl Body for RequestBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        match this.first.take() {
            Some(first) => Poll::Ready(Some(first)),
            None => this.poll_data(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended && self.first.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        if self.is_end_stream() {
            SizeHint::with_exact(0)
        } else {
            SizeHint::default()
        }
    }
}
