//! The listeners: TLS with the website's stored certificate (swapped without restart),
//! the fallback certificate, HTTP/2 by ALPN, JA4 in the log, PROXY protocol v2 (by
//! hand and from a real HAProxy), header limits, the slowloris timeout and a graceful
//! drain.

use super::*;
use botgate_tests::http::self_signed;
use botgate_tests::servers::HaproxyForGateway;
use std::io::{Read, Write};
use std::net::{IpAddr, TcpStream};

fn pem_der(pem: &str) -> Vec<u8> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    CertificateDer::pem_slice_iter(pem.as_bytes())
        .next()
        .unwrap()
        .unwrap()
        .as_ref()
        .to_vec()
}

fn tls(name: &str, http2: bool) -> Visit {
    Visit {
        tls_name: Some(name.into()),
        http2,
        ..Visit::default()
    }
}

#[test]
fn tls_serves_the_stored_certificate_by_sni_and_swaps_it_live() {
    let origin = origin("secure");
    let gateway = gateway(origin.address.port(), &[]);
    let (cert, key) = self_signed(&["secure.example", "www.secure.example"]).unwrap();
    add_website(
        &gateway,
        json!({"domain": "secure.example", "subdomain": ["www"], "ip": ["127.0.0.1"],
               "certificate": {"public": cert, "private": key},
               "settings": loadbalancer(&["bot_protection"])}),
    )
    .unwrap();
    for name in ["secure.example", "www.secure.example"] {
        let answer = visitor::send(
            gateway.https,
            &tls(name, true),
            Outgoing::get(name, "/page").browser(),
        )
        .unwrap();
        assert_eq!(answer.status, 200, "{}", answer.text());
        assert_eq!(
            answer.certificate.as_deref(),
            Some(pem_der(&cert).as_slice())
        );
        assert_eq!(answer.json()["headers"]["x-forwarded-proto"], "https");
        assert_eq!(answer.alpn.as_deref(), Some("h2"));
        assert_eq!(answer.version, http::Version::HTTP_2);
    }
    // The TLS facts reach the components: a Chrome user agent whose ClientHello offers
    // no h2 is not Chrome (the JA4 says `h1`).
    let answer = visitor::send(
        gateway.https,
        &tls("secure.example", false),
        Outgoing::get("secure.example", "/tls-h1").browser(),
    )
    .unwrap();
    assert_eq!(answer.alpn.as_deref(), Some("http/1.1"));
    assert_eq!(answer.status, 403);
    let line = access_line(&gateway, "/tls-h1");
    assert!(
        line.contains("reason=classifier.browser-tls-without-h2"),
        "{line}"
    );
    assert!(
        line.contains("ja4=\"t13d") && line.contains("h1_"),
        "{line}"
    );
    // Unknown names get the fallback certificate, then the 404 page.
    let answer = visitor::send(
        gateway.https,
        &tls("nobody.example", false),
        Outgoing::get("nobody.example", "/"),
    )
    .unwrap();
    assert_eq!(answer.status, 404);
    assert_ne!(
        answer.certificate.as_deref(),
        Some(pem_der(&cert).as_slice())
    );
    // A new certificate is served from the next handshake on.
    let (renewed, renewed_key) = self_signed(&["secure.example", "www.secure.example"]).unwrap();
    let reply = partner(&gateway)
        .put_json(
            "/v1.0/website/secure.example",
            &json!({"certificate": {"public": renewed, "private": renewed_key}}),
        )
        .unwrap();
    assert_eq!(reply.status, 200, "{reply:?}");
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let answer = visitor::send(
            gateway.https,
            &tls("secure.example", true),
            Outgoing::get("secure.example", "/").browser(),
        )
        .unwrap();
        if answer.certificate.as_deref() == Some(pem_der(&renewed).as_slice()) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the renewed certificate was not served"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn plain_http2_with_prior_knowledge() {
    let origin = origin("h2c");
    let gateway = gateway(origin.address.port(), &[]);
    add_website(
        &gateway,
        json!({"domain": "h2c.example", "ip": ["127.0.0.1"], "settings": loadbalancer(&[])}),
    )
    .unwrap();
    let visit = Visit {
        http2: true,
        ..Visit::default()
    };
    let answer = visitor::send(gateway.http, &visit, Outgoing::get("h2c.example", "/")).unwrap();
    assert_eq!(answer.version, http::Version::HTTP_2);
    assert_eq!(answer.json()["headers"]["host"], "h2c.example");
}

/// Whether the gateway closes the connection after `bytes` without answering.
fn closed_without_answer(listener: SocketAddr, bytes: &[u8]) -> bool {
    let mut stream = TcpStream::connect(listener).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let _ = stream.write_all(bytes);
    let mut buffer = [0u8; 64];
    matches!(stream.read(&mut buffer), Ok(0) | Err(_))
}

#[test]
fn proxy_protocol_is_required_from_trusted_peers_and_gives_the_client() {
    let origin = origin("behind");
    let gateway = gateway(
        origin.address.port(),
        &[
            "--trusted-proxy",
            "127.0.0.1/32",
            "--header-read-timeout",
            "2",
        ],
    );
    // The readiness probe cannot send the header: wait through the API instead.
    let partner = partner(&gateway);
    let _ = partner.post_form("/v1.0/user", &[("id", "owner")]).unwrap();
    let reply = partner
        .post_json(
            "/v1.0/website",
            &json!({"user_id": "owner", "domain": "behind.example", "ip": ["127.0.0.1"],
                    "settings": loadbalancer(&[])}),
        )
        .unwrap();
    assert_eq!(reply.status, 201);
    std::thread::sleep(Duration::from_millis(500));
    let visit = Visit {
        preamble: proxy_header("203.0.113.7:40000", gateway.http),
        ..Visit::default()
    };
    let answer = visitor::send(gateway.http, &visit, Outgoing::get("behind.example", "/")).unwrap();
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(answer.json()["headers"]["x-forwarded-for"], "203.0.113.7");
    // Missing or malformed: closed before any HTTP.
    assert!(closed_without_answer(
        gateway.http,
        b"GET / HTTP/1.1\r\nHost: behind.example\r\n\r\n"
    ));
    let mut bad = proxy_header("203.0.113.7:40000", gateway.http);
    bad[13] = 0x99; // an unknown address family
    bad.extend_from_slice(b"GET / HTTP/1.1\r\nHost: behind.example\r\n\r\n");
    assert!(closed_without_answer(gateway.http, &bad));
    // Through a real HAProxy, on both ports: the visitor's own address arrives.
    let haproxy = HaproxyForGateway::start(gateway.http, gateway.https).unwrap();
    let from = IpAddr::from([127, 0, 0, 9]);
    let via = |port: u16, tls_name: Option<&str>| {
        let visit = Visit {
            source: Some(from),
            tls_name: tls_name.map(str::to_owned),
            ..Visit::default()
        };
        visitor::send(
            SocketAddr::from(([127, 0, 0, 1], port)),
            &visit,
            Outgoing::get("behind.example", "/"),
        )
    };
    let plain = via(haproxy.http_port, None).unwrap();
    assert_eq!(
        plain.json()["headers"]["x-forwarded-for"],
        "127.0.0.9",
        "{}",
        haproxy.log()
    );
    let secure = via(haproxy.https_port, Some("behind.example")).unwrap();
    assert_eq!(secure.json()["headers"]["x-forwarded-for"], "127.0.0.9");
    assert_eq!(secure.json()["headers"]["x-forwarded-proto"], "https");
}

#[test]
fn header_limits_and_slow_clients() {
    let origin = origin("limits");
    let gateway = gateway(
        origin.address.port(),
        &[
            "--max-headers",
            "20",
            "--max-header-bytes",
            "8192",
            "--header-read-timeout",
            "1",
        ],
    );
    add_website(
        &gateway,
        json!({"domain": "limits.example", "ip": ["127.0.0.1"], "settings": loadbalancer(&[])}),
    )
    .unwrap();
    let mut many = Outgoing::get("limits.example", "/");
    for i in 0..40 {
        many = many.header(["x-a-", "x-b-", "x-c-", "x-d-"][i % 4], format!("{i}"));
    }
    let too_many = send(gateway.http, many);
    assert!(
        too_many.as_ref().map(|a| a.status == 431).unwrap_or(true),
        "40 headers were accepted: {too_many:?}"
    );
    let big = Outgoing::get("limits.example", "/").header("x-big", "b".repeat(20_000));
    let too_big = send(gateway.http, big);
    assert!(
        too_big.as_ref().map(|a| a.status == 431).unwrap_or(true),
        "a 20 KB header was accepted: {too_big:?}"
    );
    // A client that sends half a request head and stops is disconnected.
    let started = Instant::now();
    assert!(closed_without_answer(
        gateway.http,
        b"GET / HTTP/1.1\r\nHost: limits.example\r\n"
    ));
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    // So is one that connects and sends nothing at all (end of stream, not the read
    // timeout; the idle timeout is a minute).
    let mut silent = connect(gateway.http);
    let read = silent.read_to_end(&mut Vec::new());
    assert!(ended(&read), "a silent connection stayed open: {read:?}");
    // A challenge answer whose body never comes is refused once the header-read
    // timeout has passed.
    let mut stream = connect(gateway.http);
    stream
        .write_all(
            b"POST /.botgate/challenge HTTP/1.1\r\nHost: limits.example\r\nContent-Length: 8000\r\n\r\ntoken=",
        )
        .unwrap();
    assert_eq!(read_response(&mut stream), 408);
    assert_eq!(
        get(gateway.http, "limits.example", "/").unwrap().status,
        200
    );
}

#[test]
fn shutdown_drains_requests_in_flight() {
    drains_a_request_in_flight(false);
}

#[test]
fn shutdown_drains_http2_streams_in_flight() {
    drains_a_request_in_flight(true);
}

/// A slow request is in flight (over HTTP/1.1, or as a stream of an HTTP/2
/// connection) when the gateway is told to stop: it is answered whole, then the
/// gateway exits and accepts nothing more.
fn drains_a_request_in_flight(http2: bool) {
    let origin = origin("drain");
    let mut gateway = gateway(origin.address.port(), &[]);
    let (cert, key) = self_signed(&["drain.example"]).unwrap();
    add_website(
        &gateway,
        json!({"domain": "drain.example", "ip": ["127.0.0.1"],
               "certificate": {"public": cert, "private": key},
               "settings": loadbalancer(&[])}),
    )
    .unwrap();
    let listener = if http2 { gateway.https } else { gateway.http };
    let in_flight = std::thread::spawn(move || {
        if http2 {
            let request = Outgoing::get("drain.example", "/slow?ms=1500");
            visitor::send_all_on_one_https2(listener, "drain.example", vec![request])
                .map(|mut answers| answers.remove(0))
        } else {
            get(listener, "drain.example", "/slow?ms=1500")
        }
    });
    std::thread::sleep(Duration::from_millis(300));
    let status = std::process::Command::new("kill")
        .args(["-TERM", &gateway.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let answer = in_flight.join().unwrap().unwrap();
    assert_eq!(
        answer.status,
        200,
        "the request in flight was cut: {}",
        answer.text()
    );
    if http2 {
        assert_eq!(answer.version, http::Version::HTTP_2);
    }
    assert_eq!(answer.json()["target"], "/slow?ms=1500");
    let exit = gateway.wait_exit(Duration::from_secs(10)).unwrap();
    assert!(exit.success(), "{exit:?}\n{}", gateway.log());
    assert!(
        TcpStream::connect(listener).is_err(),
        "still accepting after shutdown"
    );
}

/// Initial packets of QUIC connections from `socket` to `gateway`, each a new
/// connection (its own connection ID) that will never answer, of QUIC `version`.
fn quic_initials(gateway: SocketAddr, count: usize, version: u32) -> Vec<Vec<u8>> {
    let mut tls = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS13])
    .unwrap()
    .with_root_certificates(rustls::RootCertStore::empty())
    .with_no_client_auth();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
    let mut config = quinn::ClientConfig::new(std::sync::Arc::new(crypto));
    config.version(version);
    let mut endpoint = quinn_proto::Endpoint::new(
        std::sync::Arc::new(quinn::EndpointConfig::default()),
        None,
        true,
        None,
    );
    (0..count)
        .map(|_| {
            let now = std::time::Instant::now();
            let (_, mut connection) = endpoint
                .connect(now, config.clone(), gateway, "quic.example")
                .unwrap();
            let mut datagram = Vec::new();
            let sent = connection.poll_transmit(now, 1, &mut datagram).unwrap();
            datagram.truncate(sent.size);
            datagram
        })
        .collect()
}

/// The long-header packet types of the datagrams `socket` receives within `wait`
/// (0 Initial, 3 Retry, and 4 for a version negotiation), each with its destination
/// connection ID (the connection it answers).
fn quic_answers(socket: &std::net::UdpSocket, wait: Duration) -> Vec<(u8, Vec<u8>)> {
    socket
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let deadline = std::time::Instant::now() + wait;
    let mut kinds = Vec::new();
    let mut buffer = [0u8; 2048];
    while std::time::Instant::now() < deadline {
        let Ok(read) = socket.recv(&mut buffer) else {
            continue;
        };
        if read >= 6 && buffer[0] & 0x80 != 0 {
            let kind = if buffer[1..5] == [0, 0, 0, 0] {
                4
            } else {
                (buffer[0] >> 4) & 0x3
            };
            let id_end = (6 + usize::from(buffer[5])).min(read);
            kinds.push((kind, buffer[6..id_end].to_vec()));
        }
    }
    kinds
}

/// A gateway (with `extra` options) whose website `quic.example` enables HTTP/3, and
/// its origin.
fn http3_gateway(extra: &[&str]) -> (Origin, Gateway) {
    let origin = origin("site");
    let gateway = gateway(origin.address.port(), extra);
    add_website(
        &gateway,
        json!({"domain": "quic.example", "ip": ["127.0.0.1"],
               "settings": loadbalancer(&["enable_http3"])}),
    )
    .unwrap();
    (origin, gateway)
}

/// A flood of QUIC Initials from an address that never completes a handshake (as from
/// forged addresses) is answered with Retry packets once many handshakes are under
/// way, so it costs no TLS work, while a real client is served; a draft version of QUIC
/// (whose Initials give no JA4) gets a version negotiation, not a connection.
#[test]
fn a_flood_of_quic_initials_gets_retries_and_a_real_client_is_served() {
    let (_origin, gateway) = http3_gateway(&[]);
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.connect(gateway.https).unwrap();
    for initial in quic_initials(gateway.https, 200, 1) {
        socket.send(&initial).unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }
    let answers = quic_answers(&socket, Duration::from_secs(2));
    let answered = |wanted: u8| {
        let ids: std::collections::HashSet<&[u8]> = answers
            .iter()
            .filter(|(kind, _)| *kind == wanted)
            .map(|(_, id)| id.as_slice())
            .collect();
        ids.len()
    };
    let (handshakes, retries) = (answered(0), answered(3));
    assert!(
        handshakes <= 32 && retries >= 100,
        "{handshakes} connections got a handshake, {retries} a retry"
    );
    let visit = Visit {
        tls_name: Some("quic.example".into()),
        http3: true,
        ..Visit::default()
    };
    let page = visitor::send(gateway.https, &visit, Outgoing::get("quic.example", "/")).unwrap();
    assert_eq!(page.status, 200, "{}", page.text());
    assert_eq!(page.version, http::Version::HTTP_3);

    let draft = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    draft.connect(gateway.https).unwrap();
    for initial in quic_initials(gateway.https, 1, 0xff00_001d) {
        draft.send(&initial).unwrap();
    }
    let kinds: Vec<u8> = quic_answers(&draft, Duration::from_secs(1))
        .into_iter()
        .map(|(kind, _)| kind)
        .collect();
    assert_eq!(kinds, vec![4]);
}

/// A QUIC connection (ALPN `h3`, any certificate) to `https` for `name`, sending a
/// PING every `keep_alive` if given.
async fn quic_connection(
    https: SocketAddr,
    name: &str,
    keep_alive: Option<Duration>,
) -> quinn::Connection {
    let tls = visitor::client_tls(b"h3").unwrap();
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
    let mut client = quinn::ClientConfig::new(std::sync::Arc::new(crypto));
    let mut transport = quinn::TransportConfig::default();
    transport.keep_alive_interval(keep_alive);
    client.transport_config(std::sync::Arc::new(transport));
    let mut endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    endpoint.set_default_client_config(client);
    endpoint.connect(https, name).unwrap().await.unwrap()
}

/// A GET of `target` at `name` over a new HTTP/3 connection to `https` (see
/// [`quic_connection`]): the response's head, its stream, and the connection's handle.
async fn h3_get(
    https: SocketAddr,
    name: &str,
    target: &str,
    keep_alive: Option<Duration>,
) -> (
    http::Response<()>,
    h3::client::RequestStream<h3_quinn::BidiStream<bytes::Bytes>, bytes::Bytes>,
    h3::client::SendRequest<h3_quinn::OpenStreams, bytes::Bytes>,
) {
    let connection = quic_connection(https, name, keep_alive).await;
    let (mut driver, mut sender) = h3::client::new(h3_quinn::Connection::new(connection))
        .await
        .unwrap();
    tokio::spawn(async move { std::future::poll_fn(|cx| driver.poll_close(cx)).await });
    let request = http::Request::get(format!("https://{name}{target}"))
        .body(())
        .unwrap();
    let mut stream = sender.send_request(request).await.unwrap();
    stream.finish().await.unwrap();
    let response = stream.recv_response().await.unwrap();
    (response, stream, sender)
}

/// A UDP relay in front of `gateway` that passes a QUIC client's datagrams until the
/// gateway first answers, then holds the client's until released: its handshake waits
/// on the gateway's side with the hello in hand.
struct QuicHandshakeHold {
    address: SocketAddr,
    answered: std::sync::mpsc::Receiver<()>,
    release: std::sync::Arc<std::sync::atomic::AtomicBool>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl QuicHandshakeHold {
    fn start(gateway: SocketAddr) -> QuicHandshakeHold {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::{Arc, Mutex};
        let front = Arc::new(std::net::UdpSocket::bind("127.0.0.1:0").unwrap());
        let back = Arc::new(std::net::UdpSocket::bind("127.0.0.1:0").unwrap());
        back.connect(gateway).unwrap();
        for socket in [&front, &back] {
            socket
                .set_read_timeout(Some(Duration::from_millis(50)))
                .unwrap();
        }
        let client = Arc::new(Mutex::new(None::<SocketAddr>));
        let (answered_tx, answered) = std::sync::mpsc::channel();
        let release = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let gateway_answered = Arc::new(AtomicBool::new(false));
        let address = front.local_addr().unwrap();
        {
            let (front, back, client, stop) =
                (front.clone(), back.clone(), client.clone(), stop.clone());
            let (release, gateway_answered) = (release.clone(), gateway_answered.clone());
            std::thread::spawn(move || {
                let mut held: Vec<Vec<u8>> = Vec::new();
                let mut buffer = [0u8; 2048];
                while !stop.load(Ordering::Relaxed) {
                    if release.load(Ordering::Relaxed) {
                        for datagram in held.drain(..) {
                            let _ = back.send(&datagram);
                        }
                    }
                    let Ok((read, from)) = front.recv_from(&mut buffer) else {
                        continue;
                    };
                    *client.lock().unwrap() = Some(from);
                    if gateway_answered.load(Ordering::Relaxed) && !release.load(Ordering::Relaxed)
                    {
                        held.push(buffer[..read].to_vec());
                    } else {
                        let _ = back.send(&buffer[..read]);
                    }
                }
            });
        }
        let running = stop.clone();
        std::thread::spawn(move || {
            let mut buffer = [0u8; 2048];
            while !running.load(Ordering::Relaxed) {
                let Ok(read) = back.recv(&mut buffer) else {
                    continue;
                };
                if !gateway_answered.swap(true, Ordering::Relaxed) {
                    let _ = answered_tx.send(());
                }
                if let Some(client) = *client.lock().unwrap() {
                    let _ = front.send_to(&buffer[..read], client);
                }
            }
        });
        QuicHandshakeHold {
            address,
            answered,
            release,
            stop,
        }
    }
}

impl Drop for QuicHandshakeHold {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// One client's flood of QUIC Initials (two thousand handshakes, each with its hello)
/// does not push out another client's hello while that client's handshake is under way:
/// the client, whose handshake is held back until the flood is over, gets its JA4.
#[test]
fn a_flood_of_quic_initials_from_one_client_leaves_another_clients_ja4() {
    let (_origin, gateway) = http3_gateway(&[]);
    let flood = quic_initials(gateway.https, 2048, 1);
    let hold = QuicHandshakeHold::start(gateway.https);
    let https = hold.address;
    let client = std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async move {
            let (response, ..) = h3_get(https, "quic.example", "/after-the-flood", None).await;
            response.status()
        })
    });
    hold.answered
        .recv_timeout(Duration::from_secs(10))
        .expect("the gateway answered the client's Initial");
    let attacker = std::net::UdpSocket::bind("127.0.0.2:0").unwrap();
    attacker.connect(gateway.https).unwrap();
    for (n, initial) in flood.iter().enumerate() {
        attacker.send(initial).unwrap();
        if n % 16 == 15 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    hold.release
        .store(true, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(client.join().unwrap(), 200);
    let line = access_line(&gateway, "/after-the-flood");
    let ja4 = line.split("ja4=\"").nth(1).unwrap_or_default();
    assert!(ja4.starts_with("q13d"), "{line}");
}

/// An HTTP/3 client whose control stream sends a frame announcing half a gigabyte, then
/// keeps sending: the gateway ends the connection when the length arrives instead of
/// holding what follows (`h3` reads such a frame whole before decoding it).
#[test]
fn an_http3_frame_announcing_half_a_gigabyte_ends_the_connection() {
    let origin = origin("site");
    let gateway = gateway(origin.address.port(), &[]);
    let https = gateway.https;
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let sent = runtime.block_on(async move {
        let connection = quic_connection(https, "any.example", None).await;
        let mut control = connection.open_uni().await.unwrap();
        // The control stream's type, an empty SETTINGS, then a reserved frame type
        // announcing 2^29 bytes (a four-byte varint).
        control
            .write_all(&[0x00, 0x04, 0x00, 0x21, 0x80 | 0x20, 0, 0, 0])
            .await
            .unwrap();
        let chunk = vec![0u8; 64 << 10];
        let mut sent = 0usize;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while sent < 64 << 20 && tokio::time::Instant::now() < deadline {
            match tokio::time::timeout(Duration::from_secs(2), control.write_all(&chunk)).await {
                Ok(Ok(())) => sent += chunk.len(),
                _ => break,
            }
        }
        sent
    });
    assert!(
        sent < 16 << 20,
        "the gateway took {sent} bytes of one frame"
    );
}

/// An HTTP/3 client that keeps its connection alive but takes none of a response has
/// its stream reset after the idle timeout, so neither the gateway's task nor the
/// origin connection behind it is held for ever.
#[test]
fn an_http3_response_nobody_takes_is_reset_after_the_idle_timeout() {
    let (_origin, gateway) = http3_gateway(&["--idle-timeout", "2"]);
    let https = gateway.https;
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let received = runtime.block_on(async move {
        let keep_alive = Some(Duration::from_millis(300));
        let (response, mut stream, _connection) =
            h3_get(https, "quic.example", "/?pad=20000000", keep_alive).await;
        assert_eq!(response.status(), 200);
        // Nothing is read for three idle timeouts; the connection stays alive.
        tokio::time::sleep(Duration::from_secs(6)).await;
        let mut received = 0usize;
        while let Ok(Some(chunk)) = stream.recv_data().await {
            received += bytes::Buf::remaining(&chunk);
        }
        received
    });
    assert!(
        received < 20_000_000,
        "the whole response waited: {received} bytes"
    );
}

/// A client that splits its ClientHello over several TLS records (each of 64 bytes) is
/// fingerprinted all the same: a tool cannot go without a JA4, which the components'
/// TLS checks need, by fragmenting its handshake.
#[test]
fn a_client_hello_split_over_records_is_fingerprinted() {
    use std::io::{Read, Write};
    let origin = origin("site");
    let gateway = gateway(origin.address.port(), &[]);
    add_website(
        &gateway,
        json!({"domain": "split.example", "ip": ["127.0.0.1"], "settings": loadbalancer(&[])}),
    )
    .unwrap();
    for (target, fragment) in [("/whole-hello", None), ("/split-hello", Some(64))] {
        let mut config = visitor::client_tls(b"http/1.1").unwrap();
        config.max_fragment_size = fragment;
        let name = rustls::pki_types::ServerName::try_from("split.example").unwrap();
        let mut tls = rustls::ClientConnection::new(std::sync::Arc::new(config), name).unwrap();
        let mut tcp = TcpStream::connect(gateway.https).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut stream = rustls::Stream::new(&mut tls, &mut tcp);
        write!(
            stream,
            "GET {target} HTTP/1.1\r\nhost: split.example\r\nconnection: close\r\n\r\n"
        )
        .unwrap();
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer);
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    }
    let ja4 = |target: &str| {
        let line = access_line(&gateway, target);
        line.split("ja4=\"")
            .nth(1)
            .unwrap_or("-")
            .split('"')
            .next()
            .unwrap_or("-")
            .to_owned()
    };
    let (whole, split) = (ja4("/whole-hello"), ja4("/split-hello"));
    assert!(whole.starts_with("t13d"), "{whole}");
    assert_eq!(split, whole, "the same client, its hello split or not");
}

/// A ClientHello "continued" by records that carry nothing is not waited for: the
/// gateway stops reading at the first empty record and refuses the handshake, instead
/// of taking record after record until the handshake's deadline.
#[test]
fn empty_records_after_a_cut_client_hello_are_refused_at_once() {
    use std::io::Write;
    let origin = origin("site");
    let gateway = gateway(origin.address.port(), &[]);
    let mut tcp = TcpStream::connect(gateway.https).unwrap();
    // A handshake record holding only the header of a 100-byte ClientHello.
    tcp.write_all(&[0x16, 0x03, 0x01, 0x00, 0x04, 0x01, 0x00, 0x00, 0x64])
        .unwrap();
    let empty = [0x16, 0x03, 0x01, 0x00, 0x00].repeat(20_000);
    let mut sent = 0usize;
    let started = std::time::Instant::now();
    while sent < 64 << 20 && started.elapsed() < Duration::from_secs(8) {
        match tcp.write_all(&empty) {
            Ok(()) => sent += empty.len(),
            Err(_) => break,
        }
    }
    assert!(
        sent < 8 << 20,
        "the gateway took {sent} bytes of empty records"
    );
}

#[test]
fn http3_serves_websites_that_enable_it_and_is_advertised_by_alt_svc() {
    let origin = origin("site");
    let gateway = gateway(origin.address.port(), &[]);
    let mut protected = loadbalancer(&["enable_http3", "bot_protection"]);
    protected["rulesets"] = json!({});
    add_website(
        &gateway,
        json!({"domain": "quic.example", "ip": ["127.0.0.1"], "settings": protected}),
    )
    .unwrap();
    add_website(
        &gateway,
        json!({"domain": "tcp.example", "ip": ["127.0.0.1"], "settings": loadbalancer(&[])}),
    )
    .unwrap();
    // Over TCP a browser offers h2; over QUIC it speaks h3.
    let over = |name: &str, http3: bool| Visit {
        tls_name: Some(name.into()),
        http2: !http3,
        http3,
        ..Visit::default()
    };

    // Over TCP, the website that enables HTTP/3 says where to find it; the other does not.
    let tcp = visitor::send(
        gateway.https,
        &over("quic.example", false),
        Outgoing::get("quic.example", "/").browser(),
    )
    .unwrap();
    assert_eq!(tcp.status, 200, "{}", tcp.text());
    let advertised = format!("h3=\":{}\"; ma=86400", gateway.https.port());
    assert_eq!(tcp.header("alt-svc"), Some(advertised.as_str()));
    let other = visitor::send(
        gateway.https,
        &over("tcp.example", false),
        Outgoing::get("tcp.example", "/"),
    )
    .unwrap();
    assert_eq!((other.status, other.header("alt-svc")), (200, None));

    // Over HTTP/3: the page through the protection to the origin, a body streamed up.
    let page = visitor::send(
        gateway.https,
        &over("quic.example", true),
        Outgoing::get("quic.example", "/over-quic?x=1").browser(),
    )
    .unwrap();
    assert_eq!(page.status, 200, "{}\n{}", page.text(), gateway.log());
    assert_eq!(page.version, http::Version::HTTP_3);
    let echo = page.json();
    assert_eq!(echo["target"], "/over-quic?x=1");
    assert_eq!(echo["headers"]["host"], "quic.example");
    assert_eq!(echo["headers"]["x-forwarded-proto"], "https");
    // The stream ended with the head: the GET reaches the origin without a body.
    for framing in ["transfer-encoding", "content-length"] {
        assert!(echo["headers"].get(framing).is_none(), "{echo}");
    }
    assert!(
        page.header("alt-svc").is_none(),
        "no need to advertise over h3"
    );
    let line = access_line(&gateway, "/over-quic?x=1");
    assert!(line.contains("category=\"humans\""), "{line}");
    // JA4 from the QUIC Initial packets: QUIC, TLS 1.3, a domain in SNI, ALPN h3.
    let ja4 = line.split("ja4=\"").nth(1).unwrap_or_default();
    assert!(
        ja4.starts_with("q13d") && ja4[..10].ends_with("h3"),
        "{line}"
    );
    let mut upload = Outgoing::get("quic.example", "/upload").browser();
    upload.method = "POST";
    upload.body = vec![b'x'; 100_000];
    let posted = visitor::send(gateway.https, &over("quic.example", true), upload).unwrap();
    assert_eq!(posted.status, 200, "{}", posted.text());
    assert_eq!(posted.json()["body_len"], 100_000);

    // The components decide over HTTP/3 as over TCP.
    let bot = visitor::send(
        gateway.https,
        &over("quic.example", true),
        Outgoing::get("quic.example", "/").header("user-agent", "python-requests/2.32"),
    )
    .unwrap();
    assert_eq!(bot.status, 403);
    assert!(bot.text().contains("botgate-pow"), "the challenge page");

    // A website without HTTP/3 sends the client back to TCP.
    let misdirected = visitor::send(
        gateway.https,
        &over("tcp.example", true),
        Outgoing::get("tcp.example", "/"),
    )
    .unwrap();
    assert_eq!(misdirected.status, 421);
}

/// Reads one HTTP/1.1 response with a `Content-Length` from `stream`; its status.
fn read_response(stream: &mut TcpStream) -> u16 {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        stream.read_exact(&mut byte).unwrap();
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map(|v| v.trim().parse().unwrap())
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).unwrap();
    head[9..12].parse().unwrap()
}

#[test]
fn idle_connections_are_closed() {
    let origin = origin("idle");
    // The header-read timeout is long, so only the idle timeout can close the connection.
    let gateway = gateway(
        origin.address.port(),
        &["--idle-timeout", "1", "--header-read-timeout", "60"],
    );
    add_website(
        &gateway,
        json!({"domain": "idle.example", "ip": ["127.0.0.1"], "settings": loadbalancer(&[])}),
    )
    .unwrap();
    let mut stream = connect(gateway.http);
    let request = b"GET / HTTP/1.1\r\nHost: idle.example\r\n\r\n";
    stream.write_all(request).unwrap();
    assert_eq!(read_response(&mut stream), 200);
    // Kept alive while in use.
    std::thread::sleep(Duration::from_millis(200));
    stream.write_all(request).unwrap();
    assert_eq!(read_response(&mut stream), 200);
    // Then quiet: closed (end of stream, not the read timeout).
    let mut rest = [0u8; 16];
    let read = stream.read(&mut rest);
    assert!(matches!(read, Ok(0)), "{read:?}");

    // HTTP/2 too (prior knowledge here): a quiet connection is closed, not kept open by
    // keep-alive pings its client answers.
    assert!(
        visitor::http2_closed_when_quiet(gateway.http, "idle.example", Duration::from_secs(15))
            .unwrap(),
        "a quiet HTTP/2 connection stayed open"
    );
    assert!(
        visitor::https2_closed_when_quiet(gateway.https, "idle.example", Duration::from_secs(15))
            .unwrap(),
        "a quiet HTTP/2 connection over TLS stayed open"
    );

    // A request in flight that moves no byte (here a body that stops coming, on its
    // way to the origin) does not hold the connection either: once the connection has
    // been quiet past the idle timeout it is closed, not waited for.
    let mut stalled = connect(gateway.http);
    stalled
        .write_all(
            b"POST /upload HTTP/1.1\r\nHost: idle.example\r\nContent-Length: 100000\r\n\r\npartial",
        )
        .unwrap();
    let mut answer = Vec::new();
    let read = stalled.read_to_end(&mut answer);
    assert!(
        ended(&read),
        "the stalled request held its connection: {read:?}"
    );
}

/// `/health` says the store's backend and address, the snapshot's version and age and
/// each component's version; it turns 503 once Redis has been unreachable for longer
/// than allowed, while the gateway serves on from its last snapshot.
#[test]
fn health_reports_the_store_and_turns_unhealthy_when_it_is_lost() {
    use botgate_tests::servers::RedisServer;
    let redis = RedisServer::start().unwrap();
    let gateway = Gateway::start_protecting(
        binary(),
        GatewayStore::Redis(&redis),
        &["hoster"],
        &["--health-store-unreachable-seconds", "1"],
    )
    .unwrap();
    let admin = Client::new(&format!("http://{}", gateway.admin), None);
    let health = admin.get("/health").unwrap();
    assert_eq!(health.status, 200, "{health:?}");
    let body = health.json();
    assert_eq!(body["status"], "ok");
    assert_eq!(body["store"]["backend"], "redis");
    let port = redis.url().rsplit(':').next().unwrap().to_owned();
    assert!(
        body["store"]["address"]
            .as_str()
            .unwrap_or_default()
            .contains(&port),
        "{body}"
    );
    assert_eq!(body["store"]["reachable"], true);
    assert!(body["snapshot"]["version"].is_u64(), "{body}");
    assert!(
        body["snapshot"]["age_seconds"].as_u64().unwrap_or(99) < 10,
        "{body}"
    );
    assert_eq!(body["snapshot"]["unreadable_websites"], json!([]), "{body}");
    assert_eq!(body["components"]["classifier"], "2.0.0", "{body}");
    drop(redis);
    let deadline = Instant::now() + Duration::from_secs(30);
    let lost = loop {
        let health = admin.get("/health").unwrap();
        if health.status == 503 {
            break health.json();
        }
        assert!(Instant::now() < deadline, "{health:?}\n{}", gateway.log());
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(lost["status"], "store unreachable", "{lost}");
    assert_eq!(lost["store"]["reachable"], false);
    assert!(lost["store"]["unreachable_for_seconds"].as_u64() >= Some(1));
}

#[test]
fn many_streams_on_one_http2_connection_each_get_their_own_answer() {
    let origin = origin("streams");
    let gateway = gateway(origin.address.port(), &[]);
    let (cert, key) = self_signed(&["streams.example"]).unwrap();
    add_website(
        &gateway,
        json!({"domain": "streams.example", "ip": ["127.0.0.1"],
               "certificate": {"public": cert, "private": key},
               "settings": loadbalancer(&["bot_protection"])}),
    )
    .unwrap();
    // Small answers that become ready together (their frames leave in shared writes),
    // bodies larger than those writes gather, late and streamed answers, and uploads,
    // all at once on one connection.
    let targets: Vec<String> = (0..48)
        .map(|i| match i % 6 {
            0 => format!("/small?i={i}"),
            1 => format!("/mid?i={i}&pad=3000"),
            2 => format!("/large?i={i}&pad=200000"),
            3 => format!("/slow?i={i}&ms=50"),
            4 => format!("/stream?i={i}&chunks=4"),
            _ => format!("/upload?i={i}"),
        })
        .collect();
    let requests = targets
        .iter()
        .enumerate()
        .map(|(i, target)| {
            let request = Outgoing::get("streams.example", target).browser();
            if i % 6 == 5 {
                Outgoing {
                    method: "POST",
                    body: vec![b'x'; 100_000],
                    ..request
                }
            } else {
                request
            }
        })
        .collect();
    let answers =
        visitor::send_all_on_one_https2(gateway.https, "streams.example", requests).unwrap();
    assert_eq!(answers.len(), targets.len());
    let streamed: Vec<u8> = (0..4).flat_map(|i| vec![b'a' + i; 1024]).collect();
    for (i, (target, answer)) in targets.iter().zip(&answers).enumerate() {
        assert_eq!(answer.status, 200, "{target}: {}", answer.text());
        assert_eq!(answer.version, http::Version::HTTP_2);
        if i % 6 == 4 {
            assert_eq!(answer.body, streamed, "{target}");
            continue;
        }
        assert_eq!(answer.json()["target"], target.as_str());
        match i % 6 {
            1 => assert_eq!(answer.body.len(), 3000, "{target}"),
            2 => assert_eq!(answer.body.len(), 200_000, "{target}"),
            5 => assert_eq!(answer.json()["body_len"], 100_000, "{target}"),
            _ => {}
        }
    }
}
