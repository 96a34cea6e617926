//! The body type of every response the gateway sends and of the requests it forwards.

use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::UnsyncBoxBody};

/// The error type of a streamed body.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A response body: the gateway's own pages, or an origin's body streamed through.
pub type Body = UnsyncBoxBody<Bytes, BoxError>;

/// A body of the given bytes.
pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// An empty body.
pub fn empty() -> Body {
    full(Bytes::new())
}
