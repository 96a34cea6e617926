//! The gateway's own HTTP/1.1 loop seen from a raw client: pipelined requests, a head
//! that arrives in pieces, `Connection: close`, HEAD, `Date`, and the hand-over to
//! hyper in the middle of a connection (a request body, HTTP/1.0, a malformed head).

use super::*;
use std::io::{Read, Write};

const DOMAIN: &str = "loop.example";

fn served() -> (Origin, Gateway) {
    let origin = origin("loop");
    let gateway = gateway(origin.address.port(), &[]);
    add_website(
        &gateway,
        json!({"domain": DOMAIN, "ip": ["127.0.0.1"], "settings": loadbalancer(&[])}),
    )
    .unwrap();
    (origin, gateway)
}

/// Writes `pieces` with a pause between them and reads until the gateway closes the
/// connection.
fn exchange(gateway: &Gateway, pieces: &[&str]) -> String {
    let mut stream = connect(gateway.http);
    for (i, piece) in pieces.iter().enumerate() {
        if i > 0 {
            std::thread::sleep(Duration::from_millis(150));
        }
        stream.write_all(piece.as_bytes()).unwrap();
    }
    let mut answer = Vec::new();
    let read = stream.read_to_end(&mut answer);
    assert!(
        read.is_ok(),
        "{read:?} after: {}",
        String::from_utf8_lossy(&answer)
    );
    String::from_utf8_lossy(&answer).into_owned()
}

/// The places of `needles` in `text`, which must all be there, in this order.
fn places(text: &str, needles: &[&str]) -> Vec<usize> {
    let at: Vec<usize> = needles
        .iter()
        .map(|needle| {
            text.find(needle)
                .unwrap_or_else(|| panic!("no {needle:?} in:\n{text}"))
        })
        .collect();
    assert!(at.is_sorted(), "not in the order {needles:?}:\n{text}");
    at
}

fn get_line(target: &str, extra: &str) -> String {
    format!("GET {target} HTTP/1.1\r\nHost: {DOMAIN}\r\n{extra}\r\n")
}

#[test]
fn pipelined_requests_are_answered_in_order_until_close() {
    let (_origin, gateway) = served();
    let text = exchange(
        &gateway,
        &[&format!(
            "{}{}{}",
            get_line("/first", ""),
            get_line("/second", ""),
            get_line("/third", "Connection: close\r\n")
        )],
    );
    assert_eq!(text.matches("HTTP/1.1 200 OK\r\n").count(), 3, "{text}");
    let at = places(
        &text,
        &[
            r#""target":"/first""#,
            r#""target":"/second""#,
            r#""target":"/third""#,
        ],
    );
    // Only the last answer says the connection closes; each has a date.
    let lower = text.to_ascii_lowercase();
    assert_eq!(
        lower.matches("\r\nconnection: close\r\n").count(),
        1,
        "{text}"
    );
    assert!(
        lower.rfind("\r\nconnection: close\r\n").unwrap() > at[1],
        "{text}"
    );
    assert_eq!(lower.matches("\r\ndate: ").count(), 3, "{text}");

    // A body larger than what the loop gathers goes out beside its head, and the
    // request pipelined behind it is still answered after it, whole.
    let text = exchange(
        &gateway,
        &[&format!(
            "{}{}",
            get_line("/large?pad=300000", ""),
            get_line("/behind", "Connection: close\r\n")
        )],
    );
    let second = text.find("HTTP/1.1 200 OK\r\n").map(|first| {
        text[first + 1..]
            .find("HTTP/1.1 200 OK\r\n")
            .map(|at| first + 1 + at)
    });
    let Some(Some(second)) = second else {
        panic!("not two answers: {}", &text[..text.len().min(2000)]);
    };
    let first_body = text[..second].split_once("\r\n\r\n").unwrap().1;
    assert_eq!(first_body.len(), 300_000);
    places(&text[second..], &[r#""target":"/behind""#]);

    // A head that arrives in pieces is read whole.
    let text = exchange(
        &gateway,
        &[
            "GET /pie",
            "ces HTTP/1.1\r\nHost: loop.",
            "example\r\nConnection: close\r\n\r\n",
        ],
    );
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    places(&text, &[r#""target":"/pieces""#]);
}

#[test]
fn requests_the_loop_does_not_serve_are_handed_over_mid_connection() {
    let (_origin, gateway) = served();
    // A GET, then a POST with a body and a chunked one (hyper's from there on), then
    // a GET, on one connection.
    let text = exchange(
        &gateway,
        &[&format!(
            "{}POST /with-body HTTP/1.1\r\nHost: {DOMAIN}\r\nContent-Length: 5\r\n\r\nhello\
             POST /chunked HTTP/1.1\r\nHost: {DOMAIN}\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n\
             {}",
            get_line("/before", ""),
            get_line("/after", "Connection: close\r\n")
        )],
    );
    assert_eq!(text.matches("HTTP/1.1 200 OK\r\n").count(), 4, "{text}");
    places(
        &text,
        &[
            r#""target":"/before""#,
            r#""body_len":5"#,
            r#""body_len":3"#,
            r#""target":"/after""#,
        ],
    );

    // HTTP/1.0: answered, then closed.
    let text = exchange(
        &gateway,
        &[&format!("GET /old HTTP/1.0\r\nHost: {DOMAIN}\r\n\r\n")],
    );
    assert!(text.contains(" 200 OK\r\n"), "{text}");
    places(&text, &[r#""target":"/old""#]);

    // A malformed head after a good request on the same connection gets hyper's 400.
    let text = exchange(
        &gateway,
        &[&format!(
            "{}GET /bad HTTP/1.1\r\nHost: {DOMAIN}\r\nBad Header: y\r\n\r\n",
            get_line("/good", "")
        )],
    );
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    assert!(text.contains("HTTP/1.1 400 Bad Request\r\n"), "{text}");
}

#[test]
fn head_answers_say_the_length_and_send_no_body() {
    let (_origin, gateway) = served();
    let length = |text: &str| -> usize {
        let lower = text.to_ascii_lowercase();
        let at = lower.find("\r\ncontent-length: ").expect(text) + 18;
        lower[at..].split("\r\n").next().unwrap().parse().unwrap()
    };
    for host in [DOMAIN, "nobody.example"] {
        let get = exchange(
            &gateway,
            &[&format!(
                "GET /same HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
            )],
        );
        let head = exchange(
            &gateway,
            &[&format!(
                "HEAD /same HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
            )],
        );
        assert_eq!(get[..12], head[..12], "{host}: {get}\n{head}");
        assert!(length(&get) > 0, "{host}: {get}");
        // The origin's own length for its HEAD is the same as for its GET, except the
        // echo's method field; the gateway's page has one length.
        assert!(
            length(&head).abs_diff(length(&get)) <= 1,
            "{host}: {get}\n{head}"
        );
        assert!(
            head.ends_with("\r\n\r\n"),
            "a body followed a HEAD answer: {head}"
        );
    }
}
