//! One delivery attempt: resolve the callback's host, keep only the addresses the
//! policy permits, connect to one of them (the address checked is the address
//! connected to), TLS for https (the web's roots, SNI and name check against the URL's
//! host), one HTTP/1.1 POST, and the status of the answer. Redirects are not followed.

use crate::address::AddressPolicy;
use bytes::Bytes;
use http_body_util::Full;
use hyper::Request;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use url::{Host, Url};

/// Why an attempt did not count as delivered.
#[derive(Debug, thiserror::Error)]
pub enum AttemptError {
    #[error(
        "{host} resolves only to addresses webhooks may not go to ({addresses}); the operator \
         allows private networks with --webhook-allow-network"
    )]
    NotPermitted { host: String, addresses: String },
    #[error("cannot resolve {host}: {reason}")]
    Resolve { host: String, reason: String },
    #[error("cannot connect to {host}: {reason}")]
    Connect { host: String, reason: String },
    #[error("TLS with {host} failed: {reason}")]
    Tls { host: String, reason: String },
    #[error("HTTP exchange failed: {0}")]
    Http(String),
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("answered {status}, a redirect (to {location}); redirects are not followed")]
    Redirect { status: u16, location: String },
    #[error("answered {0}, not 2xx")]
    Status(u16),
}

/// Sends webhooks.
pub struct Sender {
    policy: AddressPolicy,
    timeout: Duration,
    tls: tokio_rustls::TlsConnector,
}

impl Sender {
    pub fn new(policy: AddressPolicy, timeout: Duration) -> Sender {
        let roots =
            rustls::RootCertStore::from_iter(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("ring supports the default protocol versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        Sender {
            policy,
            timeout,
            tls: tokio_rustls::TlsConnector::from(Arc::new(tls)),
        }
    }

    /// POSTs `body` to `url` with `headers`; `Ok` only for a 2xx within the timeout.
    pub async fn post(
        &self,
        url: &Url,
        headers: &[(&str, String)],
        body: Bytes,
    ) -> Result<u16, AttemptError> {
        tokio::time::timeout(self.timeout, self.exchange(url, headers, body))
            .await
            .map_err(|_| AttemptError::Timeout(self.timeout))?
    }

    async fn exchange(
        &self,
        url: &Url,
        headers: &[(&str, String)],
        body: Bytes,
    ) -> Result<u16, AttemptError> {
        let host_text = url.host_str().unwrap_or_default().to_owned();
        let port = url.port_or_known_default().unwrap_or(80);
        let candidates: Vec<SocketAddr> = match url.host() {
            Some(Host::Ipv4(v4)) => vec![SocketAddr::new(IpAddr::V4(v4), port)],
            Some(Host::Ipv6(v6)) => vec![SocketAddr::new(IpAddr::V6(v6), port)],
            Some(Host::Domain(name)) => tokio::net::lookup_host((name, port))
                .await
                .map_err(|err| AttemptError::Resolve {
                    host: host_text.clone(),
                    reason: err.to_string(),
                })?
                .collect(),
            None => Vec::new(),
        };
        let permitted: Vec<SocketAddr> = candidates
            .iter()
            .copied()
            .filter(|address| self.policy.permits(address.ip()))
            .collect();
        if permitted.is_empty() {
            return Err(AttemptError::NotPermitted {
                host: host_text,
                addresses: candidates
                    .iter()
                    .map(|a| a.ip().to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        let mut last = String::new();
        let mut stream = None;
        for address in permitted {
            match TcpStream::connect(address).await {
                Ok(connected) => {
                    stream = Some(connected);
                    break;
                }
                Err(err) => last = format!("{address}: {err}"),
            }
        }
        let stream = stream.ok_or_else(|| AttemptError::Connect {
            host: host_text.clone(),
            reason: last,
        })?;
        let _ = stream.set_nodelay(true);
        let authority = match url.port() {
            Some(port) => format!("{host_text}:{port}"),
            None => host_text.clone(),
        };
        let path = match url.query() {
            Some(query) => format!("{}?{query}", url.path()),
            None => url.path().to_owned(),
        };
        let mut request = Request::post(path)
            .header(hyper::header::HOST, authority)
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .header(hyper::header::USER_AGENT, "botgate-webhooks")
            .header(hyper::header::CONNECTION, "close");
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        let request = request
            .body(Full::new(body))
            .map_err(|err| AttemptError::Http(err.to_string()))?;
        if url.scheme() == "https" {
            let name = ServerName::try_from(
                url.host_str()
                    .unwrap_or_default()
                    .trim_matches(['[', ']'])
                    .to_owned(),
            )
            .map_err(|err| AttemptError::Tls {
                host: host_text.clone(),
                reason: err.to_string(),
            })?;
            let tls = self
                .tls
                .connect(name, stream)
                .await
                .map_err(|err| AttemptError::Tls {
                    host: host_text,
                    reason: err.to_string(),
                })?;
            send(tls, request).await
        } else {
            send(stream, request).await
        }
    }
}

/// The most of a receiver's answer head that is read.
const MAX_ANSWER_HEAD_BYTES: usize = 16 << 10;

async fn send<I>(io: I, request: Request<Full<Bytes>>) -> Result<u16, AttemptError>
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    // A receiver's answer head past 16 KiB is an error, not memory held.
    let (mut sender, connection) = hyper::client::conn::http1::Builder::new()
        .max_buf_size(MAX_ANSWER_HEAD_BYTES)
        .handshake(TokioIo::new(io))
        .await
        .map_err(|err| AttemptError::Http(err.to_string()))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    let response = sender
        .send_request(request)
        .await
        .map_err(|err| AttemptError::Http(err.to_string()))?;
    let status = response.status();
    if status.is_success() {
        Ok(status.as_u16())
    } else if status.is_redirection() {
        Err(AttemptError::Redirect {
            status: status.as_u16(),
            location: response
                .headers()
                .get(hyper::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .map_or_else(|| "nowhere".to_owned(), botgate_model::names::shorten),
        })
    } else {
        Err(AttemptError::Status(status.as_u16()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_receiver_that_does_not_answer_in_time_is_a_failed_attempt() {
        // Accepts, reads, never answers.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let silent = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((stream, _)) = listener.accept().await {
                held.push(stream);
            }
        });
        let sender = Sender::new(
            AddressPolicy {
                allowed: vec!["127.0.0.0/8".parse().unwrap()],
            },
            Duration::from_millis(300),
        );
        let url = Url::parse(&format!("http://{address}/hook")).unwrap();
        let started = std::time::Instant::now();
        let outcome = sender.post(&url, &[], Bytes::from_static(b"{}")).await;
        assert!(
            matches!(outcome, Err(AttemptError::Timeout(_))),
            "{outcome:?}"
        );
        assert!(started.elapsed() < Duration::from_secs(5));
        silent.abort();
    }

    /// Answers every request on `listener` with `answer`, once per connection.
    fn answering(listener: tokio::net::TcpListener, answer: Vec<u8>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let mut request = [0u8; 4096];
                let _ = stream.read(&mut request).await;
                let _ = stream.write_all(&answer).await;
            }
        });
    }

    #[tokio::test]
    async fn a_receivers_redirect_or_answer_head_is_kept_short() {
        let sender = Sender::new(
            AddressPolicy {
                allowed: vec!["127.0.0.0/8".parse().unwrap()],
            },
            Duration::from_secs(5),
        );
        for (head_bytes, expect_redirect) in [(8_000, true), (300_000, false)] {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let url =
                Url::parse(&format!("http://{}/hook", listener.local_addr().unwrap())).unwrap();
            let location = format!("http://elsewhere.example/{}", "x".repeat(head_bytes));
            answering(
                listener,
                format!("HTTP/1.1 302 Found\r\nlocation: {location}\r\ncontent-length: 0\r\n\r\n")
                    .into_bytes(),
            );
            let outcome = sender.post(&url, &[], Bytes::from_static(b"{}")).await;
            let reason = outcome.unwrap_err();
            assert_eq!(
                matches!(reason, AttemptError::Redirect { .. }),
                expect_redirect,
                "{reason:?}"
            );
            assert!(
                reason.to_string().len() < 300,
                "{}",
                reason.to_string().len()
            );
        }
    }
}
