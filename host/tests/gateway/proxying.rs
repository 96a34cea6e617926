//! Forwarding: headers, round robin, passive health, retries, timeouts, streaming,
//! WebSocket, and the gateway's own pages.

use super::*;
use std::io::{Read, Write};
use std::net::IpAddr;

#[test]
fn requests_reach_the_origin_with_host_and_forwarding_headers() {
    let origin = origin("one");
    let gateway = gateway(origin.address.port(), &[]);
    add_website(
        &gateway,
        json!({"domain": "forward.example", "subdomain": ["www"], "ip": ["127.0.0.1"],
               "settings": loadbalancer(&[])}),
    )
    .unwrap();
    let answer = send(
        gateway.http,
        Outgoing::get("www.forward.example", "/a/b?c=d")
            .browser()
            .header("x-forwarded-for", "10.9.9.9")
            .header("x-forwarded-host", "evil.example")
            .header("x-real-ip", "10.9.9.9")
            .header("x_forwarded_host", "evil.example")
            .header("x_forwarded_for", "10.9.9.9")
            .header("x_custom", "kept")
            .header("connection", "keep-alive, x-hop")
            .header("x-hop", "secret"),
    )
    .unwrap();
    assert_eq!(answer.status, 200, "{}", answer.text());
    let echo = answer.json();
    assert_eq!(echo["origin"], "one");
    assert_eq!(echo["target"], "/a/b?c=d");
    assert_eq!(echo["headers"]["host"], "www.forward.example");
    assert_eq!(echo["headers"]["x-forwarded-for"], "10.9.9.9, 127.0.0.1");
    assert_eq!(echo["headers"]["x-forwarded-proto"], "http");
    assert_eq!(
        echo["headers"]["forwarded"],
        "for=127.0.0.1;proto=http;host=\"www.forward.example\""
    );
    for dropped in [
        "x-hop",
        "x-forwarded-host",
        "x-real-ip",
        "x_forwarded_host",
        "x_forwarded_for",
    ] {
        assert!(echo["headers"].get(dropped).is_none(), "{dropped}: {echo}");
    }
    assert_eq!(echo["headers"]["x_custom"], "kept");

    // A body goes up, and a streamed body comes down whole.
    let mut post = Outgoing::get("forward.example", "/upload").browser();
    post.method = "POST";
    post.body = vec![b'x'; 300_000];
    let answer = send(gateway.http, post).unwrap();
    assert_eq!(answer.json()["body_len"], 300_000);
    let answer = get(gateway.http, "forward.example", "/stream?chunks=20").unwrap();
    assert_eq!(answer.body.len(), 20 * 1024);

    // The origin's own statuses pass through.
    assert_eq!(
        get(gateway.http, "forward.example", "/status/418")
            .unwrap()
            .status,
        418
    );
}

#[test]
fn unknown_and_ambiguous_hosts_get_a_clear_page() {
    let origin = origin("one");
    let gateway = gateway(origin.address.port(), &[]);
    add_website(
        &gateway,
        json!({"domain": "known.example", "ip": ["127.0.0.1"], "settings": loadbalancer(&[])}),
    )
    .unwrap();
    // `add_website` waits for the website by sending one request through.
    let before = origin.requests();
    let answer = get(gateway.http, "nobody.example", "/").unwrap();
    assert_eq!(answer.status, 404);
    assert!(
        answer.text().contains("No website named nobody.example"),
        "{}",
        answer.text()
    );
    // Two Host headers (the gateway would judge one website, the origin might serve
    // the other) and a Host with user information are bad requests, even when a name
    // is a website's.
    for outgoing in [
        Outgoing::get("known.example", "/").header("host", "other.example"),
        Outgoing::get("known.example", "/").header("host", "known.example"),
        Outgoing::get("user@known.example", "/"),
    ] {
        let sent = format!("{:?}", outgoing.headers);
        let answer = send(gateway.http, outgoing).unwrap();
        assert_eq!(answer.status, 400, "{sent}: {}", answer.text());
        assert!(answer.text().contains("Host header"), "{}", answer.text());
    }
    // TRACE is refused by the gateway (cross-site tracing), never echoed by an origin.
    let mut trace = Outgoing::get("known.example", "/");
    trace.method = "TRACE";
    let answer = send(gateway.http, trace).unwrap();
    assert_eq!(answer.status, 405, "{}", answer.text());
    assert!(answer.headers.contains_key("allow"), "{:?}", answer.headers);
    assert_eq!(
        origin.requests(),
        before,
        "a refused request reached the origin"
    );
    assert_eq!(get(gateway.http, "known.example", "/").unwrap().status, 200);
}

#[test]
fn origins_take_turns_and_a_dead_one_is_skipped() {
    let first = origin("first");
    let port = first.address.port();
    let second = Origin::start("second", [127, 0, 0, 2].into(), port).unwrap();
    let gateway = gateway(port, &[]);
    // 127.0.0.3 has nobody listening on the port: connections are refused.
    add_website(
        &gateway,
        json!({"domain": "rr.example", "ip": ["127.0.0.1", "127.0.0.2", "127.0.0.3"],
               "settings": loadbalancer(&[])}),
    )
    .unwrap();
    let mut seen = Vec::new();
    for _ in 0..9 {
        let answer = get(gateway.http, "rr.example", "/").unwrap();
        assert_eq!(answer.status, 200, "{}", answer.text());
        seen.push(answer.json()["origin"].as_str().unwrap().to_owned());
    }
    let firsts = seen.iter().filter(|o| *o == "first").count();
    let seconds = seen.iter().filter(|o| *o == "second").count();
    assert_eq!(firsts + seconds, 9);
    assert!(firsts >= 3 && seconds >= 3, "not round robin: {seen:?}");
    drop((first, second));
}

#[test]
fn all_origins_down_is_a_502_page_and_slow_ones_a_504() {
    let origin = origin("slow");
    let gateway = gateway(origin.address.port(), &["--origin-response-timeout", "1"]);
    add_website(
        &gateway,
        json!({"domain": "slow.example", "ip": ["127.0.0.1"], "settings": loadbalancer(&[])}),
    )
    .unwrap();
    let answer = get(gateway.http, "slow.example", "/slow?ms=3000").unwrap();
    assert_eq!(answer.status, 504, "{}", answer.text());
    add_website(
        &gateway,
        json!({"domain": "down.example", "ip": ["127.0.0.4", "127.0.0.5"],
               "settings": loadbalancer(&[])}),
    )
    .unwrap();
    let answer = get(gateway.http, "down.example", "/").unwrap();
    assert_eq!(answer.status, 502);
    assert!(
        answer.text().contains("could not be reached"),
        "{}",
        answer.text()
    );
    let metrics = botgate_tests::http::Client::new(&format!("http://{}", gateway.admin), None)
        .get("/metrics")
        .unwrap()
        .text;
    assert!(
        metrics.contains("botgate_origin_failures_total{kind=\"timeout\"} 1"),
        "{metrics}"
    );

    // A client whose upload breaks off gets a 400, and the origin is not blamed.
    let mut upload = connect(gateway.http);
    upload
        .write_all(b"POST /upload HTTP/1.1\r\nHost: slow.example\r\nContent-Length: 100000\r\n\r\nonly this")
        .unwrap();
    upload.shutdown(std::net::Shutdown::Write).unwrap();
    let mut answer = String::new();
    upload.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("did not arrive whole"), "{answer}");
    let metrics = botgate_tests::http::Client::new(&format!("http://{}", gateway.admin), None)
        .get("/metrics")
        .unwrap()
        .text;
    assert!(
        !metrics.contains("botgate_origin_failures_total{kind=\"failed\"}"),
        "{metrics}"
    );
}

#[test]
fn ipv6_origins() {
    let origin = Origin::start("six", IpAddr::from([0u16, 0, 0, 0, 0, 0, 0, 1]), 0).unwrap();
    let gateway = gateway(origin.address.port(), &[]);
    add_website(
        &gateway,
        json!({"domain": "six.example", "ip": ["::1"], "settings": loadbalancer(&[])}),
    )
    .unwrap();
    let answer = get(gateway.http, "six.example", "/").unwrap();
    assert_eq!(answer.json()["origin"], "six");
}

#[test]
fn websocket_upgrades_are_tunnelled() {
    let origin = origin("ws");
    let gateway = gateway(origin.address.port(), &["--idle-timeout", "2"]);
    add_website(
        &gateway,
        json!({"domain": "ws.example", "ip": ["127.0.0.1"], "settings": loadbalancer(&[])}),
    )
    .unwrap();
    let mut stream = connect(gateway.http);
    stream
        .write_all(
            b"GET /socket HTTP/1.1\r\nHost: ws.example\r\nConnection: Upgrade\r\n\
              Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\
              Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
        )
        .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        stream.read_exact(&mut byte).unwrap();
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).to_lowercase();
    assert!(head.starts_with("http/1.1 101"), "{head}");
    assert!(head.contains("upgrade: websocket"), "{head}");
    // A tunnel in use stays open past the idle timeout...
    for _ in 0..3 {
        stream.write_all(b"ping through the tunnel").unwrap();
        let mut echoed = [0u8; 23];
        stream.read_exact(&mut echoed).unwrap();
        assert_eq!(&echoed, b"ping through the tunnel");
        std::thread::sleep(Duration::from_millis(1000));
    }
    // ...and a quiet one is closed (end of stream, not the read timeout).
    let mut rest = Vec::new();
    let read = stream.read_to_end(&mut rest);
    assert!(ended(&read), "the quiet tunnel stayed open: {read:?}");
}

#[test]
fn the_access_log_goes_to_stderr_to_a_file_or_nowhere() {
    let origin = origin("logged");
    let port = origin.address.port().to_string();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("access.log");
    let file_arg = file.to_str().unwrap();
    let start = |access_log: &[&str]| {
        let mut args = vec!["--origin-http-port", port.as_str()];
        args.extend_from_slice(access_log);
        let gateway = Gateway::start(binary(), GatewayStore::Embedded, &["hoster"], &args)
            .expect("starting botgate");
        add_website(
            &gateway,
            json!({"domain": "logged.example", "ip": ["127.0.0.1"], "settings": loadbalancer(&[])}),
        )
        .unwrap();
        gateway
    };

    // The default: stderr, with the diagnostic log.
    let to_stderr = start(&[]);
    assert_eq!(
        get(to_stderr.http, "logged.example", "/a?b=c")
            .unwrap()
            .status,
        200
    );
    let line = access_line(&to_stderr, "/a?b=c");
    assert!(
        line.contains(" INFO botgate::access: website=\"logged.example\" "),
        "{line}"
    );
    assert!(line.contains(" status=200 origin=127.0.0.1:"), "{line}");
    drop(to_stderr);

    // A file: the lines go there, not to stderr.
    let to_file = start(&["--access-log", file_arg]);
    assert_eq!(
        get(to_file.http, "logged.example", "/filed")
            .unwrap()
            .status,
        200
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    let text = loop {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        if text.contains("target=/filed ") || Instant::now() > deadline {
            break text;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(
        text.lines()
            .any(|l| l.contains("botgate::access") && l.contains("target=/filed ")),
        "access log file:\n{text}"
    );
    // stderr is flushed every 50 ms as well.
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !to_file.log().contains("botgate::access"),
        "{}",
        to_file.log()
    );
    drop(to_file);

    // Off: no line anywhere, while the diagnostic log goes on.
    let off = start(&["--access-log", "off"]);
    assert_eq!(
        get(off.http, "logged.example", "/unlogged").unwrap().status,
        200
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(!off.log().contains("botgate::access"), "{}", off.log());
    assert!(
        !std::fs::read_to_string(&file)
            .unwrap()
            .contains("/unlogged")
    );

    // A file that cannot be opened stops the start with the reason.
    let refused = Gateway::start(
        binary(),
        GatewayStore::Embedded,
        &["hoster"],
        &["--access-log", "/nonexistent-dir/access.log"],
    );
    let err = format!(
        "{:#}",
        refused.err().expect("a start that cannot open the log")
    );
    assert!(
        err.contains("opening the access log /nonexistent-dir/access.log"),
        "{err}"
    );
}
