//! botgate's own HTTP/1.1 wire code, apart from the gateway so it can be tested over
//! in-memory streams:
//!
//! - [`server`]: the loop that serves the request nearly every visitor sends (HTTP/1.1,
//!   no body, no upgrade) and hands anything else, with the bytes read so far, to hyper;
//! - [`client`]: the origin client (one connection, one exchange at a time, bodies
//!   streamed both ways, connections reused);
//! - [`wire`]: what both share: header values sliced from the head, the one
//!   `Content-Length` reader, the comma-token splitter, framing lines;
//! - [`Rewind`], a stream that replays bytes read ahead, and [`Body`], the body type
//!   of everything the gateway sends.
//!
//! Why not hyper for all of it: hyper's server and client cost more CPU per request
//! than these loops (benches/README.md, "The data plane under load"). Both are held to
//! hyper by tests: the server's parser by a differential test against hyper's server,
//! the client by tables of origin answers.

mod body;
pub mod client;
mod rewind;
pub mod server;
pub mod wire;

pub use body::{Body, BoxError, empty, full};
pub use rewind::Rewind;
