//! What the gateway makes of what origins send: every framing of a response body,
//! interim answers, kept-alive connections (reused, and replaced when the origin has
//! closed one), the framing of request bodies, and malformed or cut-short answers.

use super::*;
use botgate_tests::scripted_origin::{Script, ScriptedOrigin, Then};
use std::io::{Read, Write};

const DOMAIN: &str = "scripted.example";

fn ok(body: &str) -> Script {
    Script::new(
        format!(
            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        ),
        Then::KeepOpen,
    )
}

/// What the scripted origin answers, by target.
fn script(target: &str) -> Script {
    let keep = |bytes: &[u8]| Script::new(bytes, Then::KeepOpen);
    let close = |bytes: &[u8]| Script::new(bytes, Then::Close);
    match target {
        "/chunked" => keep(
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n\
              5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nx-trailer: t\r\n\r\n",
        ),
        "/until-close" => close(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\nuntil the end"),
        "/length-and-chunked" => keep(
            b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\ntransfer-encoding: chunked\r\n\r\n\
              5\r\nhello\r\n0\r\n\r\n",
        ),
        "/interim" => keep(
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </a.css>; rel=preload\r\n\r\n\
              HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok",
        ),
        "/head" => keep(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n"),
        "/no-content" => keep(b"HTTP/1.1 204 No Content\r\n\r\n"),
        "/no-content-length" => keep(b"HTTP/1.1 204 No Content\r\ncontent-length: 5\r\n\r\n"),
        "/garbage" => close(b"this is not http\r\n\r\n"),
        "/huge-head" => {
            let mut bytes = b"HTTP/1.1 200 OK\r\nx-big: ".to_vec();
            bytes.extend(std::iter::repeat_n(b'a', 1 << 20));
            bytes.extend_from_slice(b"\r\ncontent-length: 2\r\n\r\nok");
            close(&bytes)
        }
        "/many-headers" => {
            let mut bytes = b"HTTP/1.1 200 OK\r\n".to_vec();
            for i in 0..500 {
                bytes.extend_from_slice(format!("x-{i}: 1\r\n").as_bytes());
            }
            bytes.extend_from_slice(b"content-length: 2\r\n\r\nok");
            close(&bytes)
        }
        "/nul" => close(b"HTTP/1.1 200 OK\r\nx-a: a\0b\r\ncontent-length: 2\r\n\r\nok"),
        "/two-lengths" => close(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\nok!"),
        "/unasked-upgrade" => Script::new(
            &b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: upgrade\r\n\r\n"[..],
            Then::Hold(Duration::from_secs(2)),
        ),
        "/short" => close(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nonly a bit"),
        "/bad-chunk" => close(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n"),
        "/closes-after" => Script::new(ok("closing").bytes, Then::Close),
        "/says-close" => Script::new(
            &b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok"[..],
            Then::Hold(Duration::from_secs(10)),
        ),
        // Stray bytes a moment after a whole answer, shaped as an answer of their own.
        "/stray" => Script::new(
            ok("ok").bytes,
            Then::Later(
                Duration::from_millis(50),
                b"HTTP/1.1 200 OK\r\ncontent-length: 6\r\n\r\nforged".to_vec(),
            ),
        ),
        "/old-chunked" => keep(
            b"HTTP/1.0 200 OK\r\nconnection: keep-alive\r\ntransfer-encoding: chunked\r\n\r\n\
              2\r\nok\r\n0\r\n\r\n",
        ),
        "/extra-crlf" => close(
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n\r\n0\r\n\r\n",
        ),
        // Read, never answered, the connection closed.
        "/unanswered" => Script::new(&b""[..], Then::Close),
        // Read, never answered, the connection kept open.
        "/hang" => Script::new(&b""[..], Then::KeepOpen),
        "/ignores-body" => Script::ignoring_body(
            &b"HTTP/1.1 401 Unauthorized\r\ncontent-length: 6\r\n\r\nno you"[..],
        ),
        "/early" => Script::early(
            &b"HTTP/1.1 413 Content Too Large\r\ncontent-length: 8\r\n\r\ntoo big!"[..],
        ),
        _ => ok("fine"),
    }
}

/// The scripted origin behind a gateway with one data-plane thread (so one pool of
/// origin connections), and the website.
fn scripted() -> (ScriptedOrigin, Gateway) {
    let origin = ScriptedOrigin::start(script).unwrap();
    let gateway = gateway(origin.address.port(), &["--threads", "1"]);
    add_website(
        &gateway,
        json!({"domain": DOMAIN, "ip": ["127.0.0.1"], "settings": loadbalancer(&[])}),
    )
    .unwrap();
    (origin, gateway)
}

#[test]
fn every_response_framing_reaches_the_client_whole() {
    let (_origin, gateway) = scripted();
    let body = |target: &str| {
        let answer = get(gateway.http, DOMAIN, target).unwrap();
        assert_eq!(answer.status, 200, "{target}: {}", answer.text());
        answer
    };
    assert_eq!(body("/chunked").text(), "hello world");
    assert_eq!(body("/until-close").text(), "until the end");
    // A length beside a transfer coding: the coding frames the body, and the length
    // does not reach the client.
    let answer = body("/length-and-chunked");
    assert_eq!(answer.text(), "hello");
    assert_ne!(
        answer.headers.get("content-length").map(|v| v.as_bytes()),
        Some(&b"100"[..])
    );
    // Interim answers are skipped; the final one is passed on.
    assert_eq!(body("/interim").text(), "ok");
    // A HEAD's length describes a body that never comes; the next request on the same
    // origin connection is still read right.
    let mut head = Outgoing::get(DOMAIN, "/head");
    head.method = "HEAD";
    let answer = send(gateway.http, head).unwrap();
    assert_eq!(answer.status, 200);
    assert!(answer.body.is_empty());
    assert_eq!(body("/after-head").text(), "fine");
    assert_eq!(
        get(gateway.http, DOMAIN, "/no-content").unwrap().status,
        204
    );
    // A 204 has no length, whatever the origin said (RFC 9110 §8.6).
    let answer = get(gateway.http, DOMAIN, "/no-content-length").unwrap();
    assert_eq!(answer.status, 204);
    assert!(
        !answer.headers.contains_key("content-length"),
        "{:?}",
        answer.headers
    );
    assert_eq!(body("/after-no-content").text(), "fine");
}

#[test]
fn kept_alive_origin_connections_are_reused_and_replaced_when_closed() {
    let (origin, gateway) = scripted();
    let before = origin.connections();
    for i in 0..5 {
        assert_eq!(body_of(&gateway, &format!("/keep/{i}")), "fine");
    }
    assert_eq!(
        origin.connections(),
        before,
        "the idle connection was not reused"
    );

    // The origin closes a connection after its answer without saying so: the next
    // request finds it closed (at once, and after it sat idle) and goes on a new one.
    for pause in [Duration::ZERO, Duration::from_millis(1200)] {
        let before = origin.connections();
        assert_eq!(body_of(&gateway, "/closes-after"), "closing");
        std::thread::sleep(pause);
        assert_eq!(body_of(&gateway, "/next"), "fine", "after {pause:?}");
        assert_eq!(origin.connections(), before + 1, "after {pause:?}");
    }

    // Stray bytes after an answer: the connection is not used again (they would be
    // read as the next request's answer).
    let before = origin.connections();
    assert_eq!(body_of(&gateway, "/stray"), "ok");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(body_of(&gateway, "/next"), "fine");
    assert_eq!(origin.connections(), before + 1);

    // A transfer coding in HTTP/1.0 (which has none): decoded, the connection not
    // used again.
    let before = origin.connections();
    assert_eq!(body_of(&gateway, "/old-chunked"), "ok");
    assert_eq!(body_of(&gateway, "/next"), "fine");
    assert_eq!(origin.connections(), before + 1);

    // A kept-alive connection the origin closes on the next request without an answer:
    // an idempotent request goes once more, on a new connection; another does not (the
    // origin may have acted on it).
    assert_eq!(body_of(&gateway, "/warm"), "fine");
    let before = origin.connections();
    let answer = get(gateway.http, DOMAIN, "/unanswered").unwrap();
    assert_eq!(answer.status, 502, "{}", answer.text());
    assert_eq!(origin.connections(), before + 1, "a GET is sent again once");
    assert_eq!(body_of(&gateway, "/warm"), "fine");
    let before = origin.connections();
    let mut post = Outgoing::get(DOMAIN, "/unanswered");
    post.method = "POST";
    let answer = send(gateway.http, post).unwrap();
    assert_eq!(answer.status, 502, "{}", answer.text());
    assert_eq!(origin.connections(), before, "a POST was sent again");

    // An answer that says `Connection: close` is not followed by another request on
    // its connection, even while the origin keeps it open.
    assert_eq!(body_of(&gateway, "/warm"), "fine");
    let before = origin.connections();
    assert_eq!(body_of(&gateway, "/says-close"), "ok");
    let started = Instant::now();
    assert_eq!(body_of(&gateway, "/next"), "fine");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the request waited on the closing connection"
    );
    assert_eq!(origin.connections(), before + 1);
}

fn body_of(gateway: &Gateway, target: &str) -> String {
    let answer = get(gateway.http, DOMAIN, target).unwrap();
    assert_eq!(answer.status, 200, "{target}: {}", answer.text());
    answer.text()
}

#[test]
fn request_bodies_go_framed_by_their_length_or_chunked() {
    let (origin, gateway) = scripted();
    let raw = |request: &str| {
        let mut stream = connect(gateway.http);
        stream.write_all(request.as_bytes()).unwrap();
        let mut answer = Vec::new();
        let mut chunk = [0u8; 4096];
        while !String::from_utf8_lossy(&answer).ends_with("fine") {
            let n = stream.read(&mut chunk).unwrap();
            assert!(n > 0, "closed: {}", String::from_utf8_lossy(&answer));
            answer.extend_from_slice(&chunk[..n]);
        }
        let arrived = origin.requests().pop().unwrap();
        String::from_utf8(arrived).unwrap()
    };
    let arrived = raw(&format!(
        "POST /chunked-up HTTP/1.1\r\nhost: {DOMAIN}\r\ntransfer-encoding: chunked\r\n\r\n\
         5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
    ));
    assert!(
        arrived.starts_with("POST /chunked-up HTTP/1.1\r\n"),
        "{arrived}"
    );
    assert!(
        arrived.contains("\r\ntransfer-encoding: chunked\r\n"),
        "{arrived}"
    );
    assert!(!arrived.contains("content-length"), "{arrived}");
    assert!(
        arrived.ends_with("\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"),
        "{arrived}"
    );

    let arrived = raw(&format!(
        "PUT /length-up HTTP/1.1\r\nhost: {DOMAIN}\r\ncontent-length: 11\r\n\r\nhello world"
    ));
    assert!(arrived.contains("\r\ncontent-length: 11\r\n"), "{arrived}");
    assert!(!arrived.contains("transfer-encoding"), "{arrived}");
    assert!(arrived.ends_with("\r\n\r\nhello world"), "{arrived}");

    // An origin that refuses an upload before it is whole, and reads no more of it: its
    // answer reaches the client (not a timeout once both sides' buffers are full).
    let mut stream = connect(gateway.http);
    let head = format!(
        "POST /early HTTP/1.1\r\nHost: {DOMAIN}\r\nContent-Length: {}\r\n\r\n",
        32 << 20
    );
    stream.write_all(head.as_bytes()).unwrap();
    let mut uploading = stream.try_clone().unwrap();
    // The client goes on sending (as a browser does) until the gateway stops reading.
    std::thread::spawn(move || {
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..32 {
            if uploading.write_all(&chunk).is_err() {
                return;
            }
        }
    });
    let mut answer = Vec::new();
    let mut chunk = [0u8; 4096];
    while !answer.ends_with(b"too big!") {
        match stream.read(&mut chunk) {
            Ok(n) if n > 0 => answer.extend_from_slice(&chunk[..n]),
            read => panic!("{read:?} after {}", String::from_utf8_lossy(&answer)),
        }
    }
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 413 "), "{answer}");

    let arrived = raw(&format!(
        "POST /empty-up HTTP/1.1\r\nhost: {DOMAIN}\r\n\r\n"
    ));
    assert!(arrived.contains("\r\ncontent-length: 0\r\n"), "{arrived}");

    let arrived = raw(&format!(
        "GET /nothing-up HTTP/1.1\r\nhost: {DOMAIN}\r\n\r\n"
    ));
    assert!(
        !arrived.contains("content-length") && !arrived.contains("transfer-encoding"),
        "{arrived}"
    );
    assert!(arrived.ends_with("\r\n\r\n"), "{arrived}");
}

#[test]
fn malformed_or_cut_short_answers_never_pass_as_whole() {
    let (_origin, gateway) = scripted();
    for target in [
        "/garbage",
        "/huge-head",
        "/many-headers",
        "/nul",
        "/two-lengths",
        "/unasked-upgrade",
    ] {
        let answer = get(gateway.http, DOMAIN, target).unwrap();
        assert_eq!(answer.status, 502, "{target}: {}", answer.text());
        assert!(
            answer.text().contains("Website unreachable"),
            "{target}: {}",
            answer.text()
        );
    }
    // A body that breaks off after its head was passed on: the client's response is cut
    // too (its connection closed mid-body), never ended as if whole.
    for target in ["/short", "/bad-chunk", "/extra-crlf"] {
        let answer = get(gateway.http, DOMAIN, target);
        assert!(answer.is_err(), "{target}: {:?}", answer.map(|a| a.text()));
    }
    assert_eq!(body_of(&gateway, "/still-fine"), "fine");
}

#[test]
fn a_client_that_leaves_cancels_its_origin_request() {
    let (origin, gateway) = scripted();
    let closed = origin.closed();
    let mut stream = connect(gateway.http);
    stream
        .write_all(format!("GET /hang HTTP/1.1\r\nHost: {DOMAIN}\r\n\r\n").as_bytes())
        .unwrap();
    // The request reaches the origin, which never answers; then the client goes.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !origin
        .requests()
        .iter()
        .any(|r| r.starts_with(b"GET /hang "))
    {
        assert!(
            Instant::now() < deadline,
            "the request never reached the origin"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(stream);
    while origin.closed() == closed {
        assert!(
            Instant::now() < deadline,
            "the origin request outlived its client"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Sends `request` on a connection of its own and reads one final answer with a
/// `content-length`: its head and body (a `100 Continue` before it left out).
fn one_answer(gateway: &Gateway, request: &[u8]) -> String {
    const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";
    let mut stream = connect(gateway.http);
    stream.write_all(request).unwrap();
    let mut answer = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if answer.starts_with(CONTINUE) {
            answer.drain(..CONTINUE.len());
        }
        let text = String::from_utf8_lossy(&answer).to_ascii_lowercase();
        if let Some(end) = text.find("\r\n\r\n")
            && let Some(length) = text
                .lines()
                .find_map(|line| line.strip_prefix("content-length:"))
                .and_then(|value| value.trim().parse::<usize>().ok())
            && answer.len() >= end + 4 + length
        {
            return String::from_utf8_lossy(&answer).into_owned();
        }
        let n = stream.read(&mut chunk).unwrap();
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(&answer));
        answer.extend_from_slice(&chunk[..n]);
    }
}

/// An origin that reads no body where it expects none (a GET's) or has refused one
/// (answering an `Expect: 100-continue` at once) reads that body as the connection's
/// next request, one the rules never saw. The gateway answers `Expect` itself and does
/// not forward it, and asks the origin to close after answering a GET that carries a
/// body: a request hidden in a body never reaches the origin.
#[test]
fn a_request_hidden_in_a_body_never_reaches_the_origin() {
    let (origin, gateway) = scripted();
    let hidden = format!("GET /hidden HTTP/1.1\r\nhost: {DOMAIN}\r\n\r\n");
    for (method, expect) in [("POST", "expect: 100-continue\r\n"), ("GET", "")] {
        let request = format!(
            "{method} /ignores-body HTTP/1.1\r\nhost: {DOMAIN}\r\n{expect}content-length: {}\r\n\r\n{hidden}",
            hidden.len()
        );
        let answer = one_answer(&gateway, request.as_bytes());
        assert!(answer.starts_with("HTTP/1.1 401 "), "{method}: {answer}");
        assert!(answer.ends_with("no you"), "{method}: {answer}");
        let next = one_answer(
            &gateway,
            format!("GET /next HTTP/1.1\r\nhost: {DOMAIN}\r\n\r\n").as_bytes(),
        );
        assert!(next.ends_with("fine"), "{method}: {next}");
    }
    let requests = origin.requests();
    let heads: Vec<String> = requests
        .iter()
        .map(|r| String::from_utf8_lossy(r).into_owned())
        .collect();
    assert!(
        heads.iter().all(|r| !r.starts_with("GET /hidden ")),
        "a hidden request reached the origin: {heads:#?}"
    );
    assert!(
        heads
            .iter()
            .all(|r| !r.to_ascii_lowercase().contains("\r\nexpect:")),
        "{heads:#?}"
    );
    assert_eq!(
        heads.iter().filter(|r| r.starts_with("GET /next ")).count(),
        2
    );
}

/// `CONNECT` is refused (405): an origin that accepted it would turn its connection
/// into a tunnel; the origin never sees one.
#[test]
fn connect_is_refused() {
    let (origin, gateway) = scripted();
    let answer = one_answer(
        &gateway,
        format!("CONNECT {DOMAIN}:80 HTTP/1.1\r\nhost: {DOMAIN}\r\n\r\n").as_bytes(),
    );
    assert!(answer.starts_with("HTTP/1.1 405 "), "{answer}");
    assert!(
        answer.contains("CONNECT requests are not served"),
        "{answer}"
    );
    assert!(
        origin.requests().iter().all(|r| !r.starts_with(b"CONNECT")),
        "{:?}",
        origin.requests()
    );
}
