//! A visitor of protected websites: one request over a fresh connection to a gateway
//! listener, as plain HTTP/1.1, HTTP/1.1 or HTTP/2 over TLS (with the SNI name and
//! ALPN offer chosen by the test), optionally after bytes the test writes first (a
//! PROXY header). It answers the status, headers, body, the negotiated protocol and the
//! certificate the server showed.

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use http::{Request, Version};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

/// How to reach the listener.
#[derive(Debug, Clone, Default)]
pub struct Visit {
    /// TLS with this SNI name; plain HTTP when `None`.
    pub tls_name: Option<String>,
    /// Speak HTTP/2 (over TLS via ALPN `h2`; on plain HTTP with prior knowledge).
    pub http2: bool,
    /// Speak HTTP/3 over QUIC (UDP) to the listener's address; needs `tls_name`.
    pub http3: bool,
    /// Bytes written before anything else (a PROXY protocol header).
    pub preamble: Vec<u8>,
    /// The local address to connect from (another loopback address, say).
    pub source: Option<std::net::IpAddr>,
    /// Verify the server's certificate against these roots (DER) and the TLS name;
    /// any certificate is taken when `None`.
    pub trusted_roots: Option<Vec<Vec<u8>>>,
}

/// What came back.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: Bytes,
    pub version: Version,
    /// The ALPN protocol agreed, over TLS.
    pub alpn: Option<String>,
    /// The server's leaf certificate, over TLS.
    pub certificate: Option<Vec<u8>>,
}

impl Answer {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// A request: method, target, `Host`, other headers and a body.
pub struct Outgoing<'a> {
    pub method: &'a str,
    pub target: &'a str,
    pub host: &'a str,
    pub headers: Vec<(&'a str, String)>,
    pub body: Vec<u8>,
}

impl<'a> Outgoing<'a> {
    pub fn get(host: &'a str, target: &'a str) -> Outgoing<'a> {
        Outgoing {
            method: "GET",
            target,
            host,
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    pub fn header(mut self, name: &'a str, value: impl Into<String>) -> Outgoing<'a> {
        self.headers.push((name, value.into()));
        self
    }

    /// The headers of a current desktop Chrome navigating to a page.
    pub fn browser(self) -> Outgoing<'a> {
        self.header("user-agent", "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36")
            .header("accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8")
            .header("accept-language", "en-GB,en;q=0.9")
            .header("accept-encoding", "gzip, deflate, br")
            .header("sec-ch-ua", "\"Google Chrome\";v=\"131\", \"Chromium\";v=\"131\", \"Not_A Brand\";v=\"24\"")
            .header("sec-ch-ua-mobile", "?0")
            .header("sec-ch-ua-platform", "\"Windows\"")
            .header("sec-fetch-mode", "navigate")
            .header("sec-fetch-site", "none")
            .header("sec-fetch-dest", "document")
    }
}

/// Sends one request to `listener` and reads the whole answer (30 s at most).
pub fn send(listener: SocketAddr, visit: &Visit, request: Outgoing<'_>) -> Result<Answer> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        tokio::time::timeout(
            Duration::from_secs(30),
            send_async(listener, visit, request),
        )
        .await
        .context("the gateway did not answer within 30 s")?
    })
}

/// Opens an HTTP/2 connection to `listener` (cleartext, prior knowledge), gets `/` of
/// `host` over it, then leaves it quiet: whether the gateway closes it within `within`.
/// hyper's client answers the server's pings, as a browser does.
pub fn http2_closed_when_quiet(listener: SocketAddr, host: &str, within: Duration) -> Result<bool> {
    quiet_http2_closed(listener, host, None, within)
}

/// As [`http2_closed_when_quiet`], over TLS with `h2` agreed by ALPN (SNI `host`, any
/// certificate accepted).
pub fn https2_closed_when_quiet(
    listener: SocketAddr,
    host: &str,
    within: Duration,
) -> Result<bool> {
    quiet_http2_closed(listener, host, Some(host), within)
}

fn quiet_http2_closed(
    listener: SocketAddr,
    host: &str,
    tls_name: Option<&str>,
    within: Duration,
) -> Result<bool> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let tcp = tokio::net::TcpStream::connect(listener).await?;
        let (mut sender, connection) = match tls_name {
            None => {
                let (sender, connection) =
                    hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp))
                        .await?;
                (sender, tokio::spawn(connection))
            }
            Some(name) => {
                let connector = tokio_rustls::TlsConnector::from(Arc::new(client_tls(b"h2")?));
                let tls = connector
                    .connect(ServerName::try_from(name.to_string())?, tcp)
                    .await?;
                if tls.get_ref().1.alpn_protocol() != Some(b"h2") {
                    bail!("the gateway did not agree to h2");
                }
                let (sender, connection) =
                    hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
                        .await?;
                (sender, tokio::spawn(connection))
            }
        };
        let scheme = if tls_name.is_some() { "https" } else { "http" };
        let request = Request::builder()
            .uri(format!("{scheme}://{host}/"))
            .version(Version::HTTP_2)
            .body(Full::new(Bytes::new()))?;
        let response = sender.send_request(request).await?;
        response.into_body().collect().await?;
        Ok(tokio::time::timeout(within, connection).await.is_ok())
    })
}

async fn send_async(listener: SocketAddr, visit: &Visit, request: Outgoing<'_>) -> Result<Answer> {
    if visit.http3 {
        let name = visit
            .tls_name
            .as_deref()
            .context("HTTP/3 needs a TLS name")?;
        return send_http3(listener, name, request).await;
    }
    let socket = match listener {
        SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    if let Some(source) = visit.source {
        socket.bind(SocketAddr::new(source, 0))?;
    }
    let mut tcp = socket
        .connect(listener)
        .await
        .with_context(|| format!("connecting to {listener}"))?;
    if !visit.preamble.is_empty() {
        tcp.write_all(&visit.preamble).await?;
    }
    let Some(name) = &visit.tls_name else {
        return exchange(tcp, visit.http2, request, None, None).await;
    };
    let alpn: &[u8] = if visit.http2 { b"h2" } else { b"http/1.1" };
    let config = match &visit.trusted_roots {
        None => client_tls(alpn)?,
        Some(roots) => verifying_tls(alpn, roots)?,
    };
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let server_name = ServerName::try_from(name.clone())?;
    let tls = connector
        .connect(server_name, tcp)
        .await
        .context("TLS handshake with the gateway")?;
    let session = tls.get_ref().1;
    let alpn = session
        .alpn_protocol()
        .map(|p| String::from_utf8_lossy(p).into_owned());
    let certificate = session
        .peer_certificates()
        .and_then(|chain| chain.first())
        .map(|c| c.as_ref().to_vec());
    let http2 = alpn.as_deref() == Some("h2");
    if visit.http2 && !http2 {
        bail!("the gateway did not agree to h2 (ALPN {alpn:?})");
    }
    exchange(tls, http2, request, alpn, certificate).await
}

/// A client configuration that accepts any certificate, offering `alpn`.
pub fn client_tls(alpn: &[u8]) -> Result<rustls::ClientConfig> {
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .dangerous()
    .with_custom_certificate_verifier(Arc::new(AnyCertificate))
    .with_no_client_auth();
    config.alpn_protocols = vec![alpn.to_vec()];
    Ok(config)
}

/// A client configuration that verifies the server's certificate against `roots`.
fn verifying_tls(alpn: &[u8], roots: &[Vec<u8>]) -> Result<rustls::ClientConfig> {
    let mut store = rustls::RootCertStore::empty();
    for root in roots {
        store.add(CertificateDer::from(root.clone()))?;
    }
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(store)
    .with_no_client_auth();
    config.alpn_protocols = vec![alpn.to_vec()];
    Ok(config)
}

/// One request over HTTP/3 (quinn and h3).
async fn send_http3(listener: SocketAddr, name: &str, outgoing: Outgoing<'_>) -> Result<Answer> {
    let tls = client_tls(b"h3")?;
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls)?;
    let mut endpoint = quinn::Endpoint::client(SocketAddr::new(
        if listener.is_ipv4() {
            std::net::Ipv4Addr::LOCALHOST.into()
        } else {
            std::net::Ipv6Addr::LOCALHOST.into()
        },
        0,
    ))?;
    endpoint.set_default_client_config(quinn::ClientConfig::new(Arc::new(crypto)));
    let connection = endpoint
        .connect(listener, name)?
        .await
        .context("QUIC handshake with the gateway")?;
    let certificate = connection
        .peer_identity()
        .and_then(|identity| identity.downcast::<Vec<CertificateDer<'static>>>().ok())
        .and_then(|chain| chain.first().map(|c| c.as_ref().to_vec()));
    let (mut driver, mut sender) = h3::client::new(h3_quinn::Connection::new(connection)).await?;
    let drive = tokio::spawn(async move {
        let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
    });
    let mut builder = Request::builder()
        .method(outgoing.method)
        .uri(format!("https://{}{}", outgoing.host, outgoing.target));
    for (name, value) in &outgoing.headers {
        builder = builder.header(*name, value.as_str());
    }
    let mut stream = sender.send_request(builder.body(())?).await?;
    if !outgoing.body.is_empty() {
        stream.send_data(Bytes::from(outgoing.body)).await?;
    }
    stream.finish().await?;
    let response = stream.recv_response().await?;
    let mut body = Vec::new();
    while let Some(mut chunk) = stream.recv_data().await? {
        use bytes::Buf;
        body.extend_from_slice(&chunk.copy_to_bytes(chunk.remaining()));
    }
    drop(sender);
    drive.abort();
    endpoint.close(0u32.into(), b"done");
    Ok(Answer {
        status: response.status().as_u16(),
        headers: response.headers().clone(),
        body: body.into(),
        version: Version::HTTP_3,
        alpn: Some("h3".into()),
        certificate,
    })
}

async fn exchange<S>(
    io: S,
    http2: bool,
    outgoing: Outgoing<'_>,
    alpn: Option<String>,
    certificate: Option<Vec<u8>>,
) -> Result<Answer>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let request = http_request(outgoing, http2)?;
    let response = if http2 {
        let (mut sender, connection) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(io)).await?;
        tokio::spawn(connection);
        sender.send_request(request).await?
    } else {
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(io)).await?;
        tokio::spawn(connection);
        sender.send_request(request).await?
    };
    answer(response, alpn, certificate).await
}

/// The request `outgoing` describes, as HTTP/2 (absolute URI) or HTTP/1.1 (`Host`).
fn http_request(outgoing: Outgoing<'_>, http2: bool) -> Result<Request<Full<Bytes>>> {
    let mut builder = Request::builder().method(outgoing.method);
    builder = if http2 {
        builder
            .uri(format!("https://{}{}", outgoing.host, outgoing.target))
            .version(Version::HTTP_2)
    } else {
        builder.uri(outgoing.target).header("host", outgoing.host)
    };
    for (name, value) in &outgoing.headers {
        builder = builder.header(*name, value.as_str());
    }
    Ok(builder.body(Full::new(Bytes::from(outgoing.body)))?)
}

/// Reads a response whole.
async fn answer(
    response: http::Response<hyper::body::Incoming>,
    alpn: Option<String>,
    certificate: Option<Vec<u8>>,
) -> Result<Answer> {
    let status = response.status().as_u16();
    let version = response.version();
    let headers = response.headers().clone();
    let body = response.into_body().collect().await?.to_bytes();
    Ok(Answer {
        status,
        headers,
        body,
        version,
        alpn,
        certificate,
    })
}

/// Sends `requests` all at once as the streams of one HTTP/2 connection over TLS (ALPN
/// `h2`, SNI `name`, any certificate accepted) and reads every answer whole, in the
/// order of the requests (30 s at most).
pub fn send_all_on_one_https2(
    listener: SocketAddr,
    name: &str,
    requests: Vec<Outgoing<'_>>,
) -> Result<Vec<Answer>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let connected = async {
            let tcp = tokio::net::TcpStream::connect(listener).await?;
            let connector = tokio_rustls::TlsConnector::from(Arc::new(client_tls(b"h2")?));
            let tls = connector
                .connect(ServerName::try_from(name.to_string())?, tcp)
                .await
                .context("TLS handshake with the gateway")?;
            if tls.get_ref().1.alpn_protocol() != Some(b"h2") {
                bail!("the gateway did not agree to h2");
            }
            let (sender, connection) =
                hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
                    .await?;
            tokio::spawn(connection);
            let mut streams = Vec::new();
            for outgoing in requests {
                let request = http_request(outgoing, true)?;
                let mut sender = sender.clone();
                streams.push(tokio::spawn(async move {
                    let response = sender.send_request(request).await?;
                    answer(response, Some("h2".into()), None).await
                }));
            }
            let mut answers = Vec::new();
            for stream in streams {
                answers.push(stream.await??);
            }
            Ok(answers)
        };
        tokio::time::timeout(Duration::from_secs(30), connected)
            .await
            .context("the gateway did not answer within 30 s")?
    })
}

/// Tests look at the certificate they got rather than trusting a root.
#[derive(Debug)]
struct AnyCertificate;

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }
    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        rustls::crypto::ring::default_provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}
