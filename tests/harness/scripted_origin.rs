//! An origin that answers each request with the raw bytes a test's script gives for its
//! target: for origins that misbehave (malformed heads, bodies cut short, interim
//! answers, unasked upgrades) and to see how the gateway uses its connections (every
//! accepted connection counted, every request kept as it arrived).

use anyhow::Result;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the origin does after writing an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Then {
    /// Waits for the next request on the connection.
    KeepOpen,
    /// Closes the connection (without having said so in the answer).
    Close,
    /// Keeps the connection open and silent for this long, then closes it.
    Hold(Duration),
    /// After this long, writes these bytes too (stray bytes after a whole answer), then
    /// waits for the next request.
    Later(Duration, Vec<u8>),
}

/// One scripted answer.
pub struct Script {
    pub bytes: Vec<u8>,
    pub then: Then,
    /// Answers as soon as the request's head is in, without reading its body (an
    /// origin that refuses an upload early), then holds the connection for a minute.
    pub early: bool,
    /// Reads no body where it expects none (a GET's, a HEAD's or a DELETE's) or has
    /// refused one (a request asking `Expect: 100-continue`, which it answers at once):
    /// what follows the head is read as the connection's next request.
    pub ignores_body: bool,
}

impl Script {
    pub fn new(bytes: impl Into<Vec<u8>>, then: Then) -> Script {
        Script {
            bytes: bytes.into(),
            then,
            early: false,
            ignores_body: false,
        }
    }

    /// An answer given before the request's body is read.
    pub fn early(bytes: impl Into<Vec<u8>>) -> Script {
        Script {
            bytes: bytes.into(),
            then: Then::Hold(Duration::from_secs(60)),
            early: true,
            ignores_body: false,
        }
    }

    /// An answer from an origin that ignores the bodies it expects none of (see
    /// [`Script::ignores_body`]); the connection stays open.
    pub fn ignoring_body(bytes: impl Into<Vec<u8>>) -> Script {
        Script {
            bytes: bytes.into(),
            then: Then::KeepOpen,
            early: false,
            ignores_body: true,
        }
    }
}

/// What the origin has seen.
#[derive(Default)]
struct Seen {
    connections: AtomicUsize,
    /// Connections the gateway closed (the origin read their end).
    closed: AtomicUsize,
    requests: Mutex<Vec<Vec<u8>>>,
}

/// The origin, listening on 127.0.0.1 until dropped.
pub struct ScriptedOrigin {
    pub address: SocketAddr,
    seen: Arc<Seen>,
    stop: Arc<AtomicBool>,
}

type ScriptFn = dyn Fn(&str) -> Script + Send + Sync;

impl ScriptedOrigin {
    /// Starts the origin on a free port; `script` answers each request by its target.
    pub fn start(script: impl Fn(&str) -> Script + Send + Sync + 'static) -> Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let address = listener.local_addr()?;
        let seen = Arc::new(Seen::default());
        let stop = Arc::new(AtomicBool::new(false));
        let script: Arc<ScriptFn> = Arc::new(script);
        {
            let (seen, stop) = (seen.clone(), stop.clone());
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        return;
                    }
                    let Ok(stream) = stream else { continue };
                    seen.connections.fetch_add(1, Ordering::SeqCst);
                    let (seen, script) = (seen.clone(), script.clone());
                    std::thread::spawn(move || serve(stream, &seen, script.as_ref()));
                }
            });
        }
        Ok(ScriptedOrigin {
            address,
            seen,
            stop,
        })
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.seen.connections.load(Ordering::SeqCst)
    }

    /// Connections the gateway has closed so far.
    pub fn closed(&self) -> usize {
        self.seen.closed.load(Ordering::SeqCst)
    }

    /// Every request so far, head and body as they arrived.
    pub fn requests(&self) -> Vec<Vec<u8>> {
        self.seen.requests.lock().unwrap().clone()
    }
}

impl Drop for ScriptedOrigin {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop so that it sees the flag.
        let _ = TcpStream::connect(self.address);
    }
}

/// Answers requests on one connection until the script or the gateway closes it.
fn serve(mut stream: TcpStream, seen: &Seen, script: &ScriptFn) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut buffer = Vec::new();
    loop {
        let Some(head_end) = read_head(&mut stream, &mut buffer) else {
            seen.closed.fetch_add(1, Ordering::SeqCst);
            return;
        };
        let target = buffer[..head_end]
            .split(|&b| b == b' ')
            .nth(1)
            .map(|t| String::from_utf8_lossy(t).into_owned())
            .unwrap_or_default();
        let answer = script(&target);
        // Asked to close, it reads no further requests (RFC 9112 §9.6).
        let asked_to_close = String::from_utf8_lossy(&buffer[..head_end])
            .to_ascii_lowercase()
            .contains("\r\nconnection: close\r\n");
        if answer.ignores_body && expects_no_body(&buffer[..head_end]) {
            seen.requests
                .lock()
                .unwrap()
                .push(buffer.drain(..head_end).collect());
        } else if !answer.early {
            let Some(request) = read_body(&mut stream, &mut buffer, head_end) else {
                seen.closed.fetch_add(1, Ordering::SeqCst);
                return;
            };
            seen.requests.lock().unwrap().push(request);
        }
        if stream.write_all(&answer.bytes).is_err() || asked_to_close {
            return;
        }
        match answer.then {
            Then::KeepOpen => {}
            Then::Close => return,
            Then::Hold(time) => {
                std::thread::sleep(time);
                return;
            }
            Then::Later(time, bytes) => {
                std::thread::sleep(time);
                if stream.write_all(&bytes).is_err() {
                    return;
                }
            }
        }
    }
}

/// Reads until `buffer` holds a whole request head; its length, or `None` at the end
/// of the stream.
fn read_head(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> Option<usize> {
    loop {
        if let Some(at) = find(buffer, b"\r\n\r\n") {
            return Some(at + 4);
        }
        fill(stream, buffer)?;
    }
}

/// One request (its head, `head_end` bytes, and a body framed by `Content-Length` or
/// chunked), taken from the front of `buffer` after reading as much as it needs; `None`
/// at the end of the stream.
fn read_body(stream: &mut TcpStream, buffer: &mut Vec<u8>, head_end: usize) -> Option<Vec<u8>> {
    let head = String::from_utf8_lossy(&buffer[..head_end]).to_ascii_lowercase();
    let length = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .and_then(|value| value.trim().parse::<usize>().ok());
    let end = if head.contains("transfer-encoding: chunked") {
        loop {
            if let Some(at) = find(&buffer[head_end..], b"0\r\n\r\n") {
                break head_end + at + 5;
            }
            fill(stream, buffer)?;
        }
    } else {
        let end = head_end + length.unwrap_or(0);
        while buffer.len() < end {
            fill(stream, buffer)?;
        }
        end
    };
    Some(buffer.drain(..end).collect())
}

/// Whether a request head is a GET's, a HEAD's or a DELETE's, or asks `Expect:
/// 100-continue`.
fn expects_no_body(head: &[u8]) -> bool {
    let head = String::from_utf8_lossy(head).to_ascii_lowercase();
    ["get ", "head ", "delete "]
        .iter()
        .any(|method| head.starts_with(method))
        || head.contains("\r\nexpect: 100-continue\r\n")
}

fn fill(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> Option<()> {
    let mut chunk = [0u8; 16 * 1024];
    match stream.read(&mut chunk) {
        Ok(0) | Err(_) => None,
        Ok(n) => {
            buffer.extend_from_slice(&chunk[..n]);
            Some(())
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}
