//! Bounds what `h3` holds of one HTTP/3 frame. `h3` reads a frame other than DATA
//! (HEADERS, SETTINGS, one of an unknown type) whole before it decodes it, however long
//! the frame says it is, and reading it gives the client more flow-control credit: a
//! client could make the gateway hold gigabytes for one frame. [`Guarded`] wraps the
//! QUIC connection given to `h3` and reads the frame headers of the request streams and
//! the control stream as they pass: a frame other than DATA longer than the bound ends
//! the connection before `h3` buffers it.

use bytes::{Buf, Bytes};
use h3::quic::{self, ConnectionErrorIncoming, StreamErrorIncoming, StreamId, WriteBuf};
use std::task::{Context, Poll};

/// HTTP/3 frame type DATA (RFC 9114 §7.2.1), the one frame `h3` streams.
const DATA: u64 = 0x0;
/// Unidirectional stream type of the control stream (RFC 9114 §6.2.1).
const CONTROL_STREAM: u64 = 0x0;

/// Why a stream was cut.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("an HTTP/3 frame of type {kind:#x} says it is {length} bytes long, more than {bound}")]
pub struct FrameTooLong {
    pub kind: u64,
    pub length: u64,
    pub bound: u64,
}

/// A QUIC variable-length integer read a byte at a time (RFC 9000 §16).
#[derive(Debug, Default, Clone, Copy)]
struct VarInt {
    value: u64,
    /// Bytes still to come; 0 before the first.
    missing: u8,
    started: bool,
}

impl VarInt {
    /// Takes one byte; the value once complete.
    fn push(&mut self, byte: u8) -> Option<u64> {
        if !self.started {
            self.started = true;
            self.missing = (1u8 << (byte >> 6)) - 1;
            self.value = u64::from(byte & 0x3f);
        } else {
            self.value = (self.value << 8) | u64::from(byte);
            self.missing -= 1;
        }
        (self.missing == 0).then_some(self.value)
    }
}

/// Where a stream's reader is.
#[derive(Debug, Clone, Copy)]
enum State {
    /// A unidirectional stream's type.
    StreamType(VarInt),
    /// Not a stream of frames (QPACK instructions, a type `h3` ignores): passed as is.
    Passing,
    FrameType(VarInt),
    FrameLength {
        kind: u64,
        length: VarInt,
    },
    /// Bytes of the current frame still to come.
    Payload(u64),
    /// A frame was too long: the stream reads no further.
    TooLong(FrameTooLong),
}

/// Reads the frame headers of one stream as its bytes pass.
#[derive(Debug, Clone, Copy)]
pub struct FrameHeaders {
    state: State,
    bound: u64,
}

impl FrameHeaders {
    /// A request stream (frames from its first byte), frames other than DATA at most
    /// `bound` bytes long.
    pub fn request(bound: u64) -> FrameHeaders {
        FrameHeaders {
            state: State::FrameType(VarInt::default()),
            bound,
        }
    }

    /// A unidirectional stream (its type first; frames if it is the control stream).
    pub fn unidirectional(bound: u64) -> FrameHeaders {
        FrameHeaders {
            state: State::StreamType(VarInt::default()),
            bound,
        }
    }

    /// Reads `bytes`, the stream's next ones.
    pub fn read(&mut self, mut bytes: &[u8]) -> Result<(), FrameTooLong> {
        while let Some((&first, rest)) = bytes.split_first() {
            match &mut self.state {
                State::Passing => return Ok(()),
                State::TooLong(too_long) => return Err(*too_long),
                State::Payload(missing) => {
                    let skipped = (*missing).min(bytes.len() as u64);
                    *missing -= skipped;
                    bytes = &bytes[skipped as usize..];
                    if *missing == 0 {
                        self.state = State::FrameType(VarInt::default());
                    }
                    continue;
                }
                State::StreamType(kind) => {
                    if let Some(kind) = kind.push(first) {
                        self.state = if kind == CONTROL_STREAM {
                            State::FrameType(VarInt::default())
                        } else {
                            State::Passing
                        };
                    }
                }
                State::FrameType(kind) => {
                    if let Some(kind) = kind.push(first) {
                        self.state = State::FrameLength {
                            kind,
                            length: VarInt::default(),
                        };
                    }
                }
                State::FrameLength { kind, length } => {
                    if let Some(length) = length.push(first) {
                        if *kind != DATA && length > self.bound {
                            let too_long = FrameTooLong {
                                kind: *kind,
                                length,
                                bound: self.bound,
                            };
                            self.state = State::TooLong(too_long);
                            return Err(too_long);
                        }
                        self.state = if length == 0 {
                            State::FrameType(VarInt::default())
                        } else {
                            State::Payload(length)
                        };
                    }
                }
            }
            bytes = rest;
        }
        Ok(())
    }
}

/// A stream (receiving, or both ways) whose received frame headers are read as they
/// pass; what it sends passes untouched.
pub struct Limited<S> {
    inner: S,
    frames: FrameHeaders,
}

impl<R: quic::RecvStream<Buf = Bytes>> quic::RecvStream for Limited<R> {
    type Buf = Bytes;

    /// The stream's next bytes; an error that ends the connection once a frame is too
    /// long.
    fn poll_data(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Bytes>, StreamErrorIncoming>> {
        let polled = self.inner.poll_data(cx);
        if let Poll::Ready(Ok(Some(bytes))) = &polled
            && let Err(too_long) = self.frames.read(bytes)
        {
            tracing::debug!(reason = %too_long, "HTTP/3 connection closed");
            return Poll::Ready(Err(StreamErrorIncoming::ConnectionErrorIncoming {
                connection_error: ConnectionErrorIncoming::InternalError(too_long.to_string()),
            }));
        }
        polled
    }

    fn stop_sending(&mut self, error_code: u64) {
        self.inner.stop_sending(error_code);
    }

    fn recv_id(&self) -> StreamId {
        self.inner.recv_id()
    }
}

impl<B: Buf, S: quic::SendStream<B>> quic::SendStream<B> for Limited<S> {
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        self.inner.poll_ready(cx)
    }

    fn send_data<T: Into<WriteBuf<B>>>(&mut self, data: T) -> Result<(), StreamErrorIncoming> {
        self.inner.send_data(data)
    }

    fn poll_finish(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        self.inner.poll_finish(cx)
    }

    fn reset(&mut self, reset_code: u64) {
        self.inner.reset(reset_code)
    }

    fn send_id(&self) -> StreamId {
        self.inner.send_id()
    }
}

impl<B, S> quic::BidiStream<B> for Limited<S>
where
    B: Buf,
    S: quic::BidiStream<B> + quic::RecvStream<Buf = Bytes>,
    S::RecvStream: quic::RecvStream<Buf = Bytes>,
{
    type SendStream = S::SendStream;
    type RecvStream = Limited<S::RecvStream>;

    fn split(self) -> (Self::SendStream, Self::RecvStream) {
        let (send, recv) = self.inner.split();
        (
            send,
            Limited {
                inner: recv,
                frames: self.frames,
            },
        )
    }
}

/// The QUIC connection `h3` serves, its streams' frames bounded to `bound` bytes.
pub struct Guarded<C> {
    inner: C,
    bound: u64,
}

impl<C> Guarded<C> {
    pub fn new(inner: C, bound: u64) -> Guarded<C> {
        Guarded { inner, bound }
    }

    /// A request stream (frames from its first byte).
    fn request<S>(&self, inner: S) -> Limited<S> {
        Limited {
            inner,
            frames: FrameHeaders::request(self.bound),
        }
    }
}

impl<B, C> quic::OpenStreams<B> for Guarded<C>
where
    B: Buf,
    C: quic::OpenStreams<B>,
    C::BidiStream: quic::BidiStream<B> + quic::RecvStream<Buf = Bytes>,
{
    type SendStream = C::SendStream;
    type BidiStream = Limited<C::BidiStream>;

    fn poll_open_bidi(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Self::BidiStream, StreamErrorIncoming>> {
        self.inner
            .poll_open_bidi(cx)
            .map_ok(|inner| self.request(inner))
    }

    fn poll_open_send(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Self::SendStream, StreamErrorIncoming>> {
        self.inner.poll_open_send(cx)
    }

    fn close(&mut self, code: h3::error::Code, reason: &[u8]) {
        self.inner.close(code, reason)
    }
}

impl<B, C> quic::Connection<B> for Guarded<C>
where
    B: Buf,
    C: quic::Connection<B>,
    C::RecvStream: quic::RecvStream<Buf = Bytes>,
    C::BidiStream: quic::BidiStream<B> + quic::RecvStream<Buf = Bytes>,
    C::OpenStreams: quic::OpenStreams<B, SendStream = C::SendStream, BidiStream = C::BidiStream>,
{
    type RecvStream = Limited<C::RecvStream>;
    type OpenStreams = Guarded<C::OpenStreams>;

    fn poll_accept_recv(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Self::RecvStream, ConnectionErrorIncoming>> {
        let bound = self.bound;
        self.inner.poll_accept_recv(cx).map_ok(|inner| Limited {
            inner,
            frames: FrameHeaders::unidirectional(bound),
        })
    }

    fn poll_accept_bidi(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Self::BidiStream, ConnectionErrorIncoming>> {
        self.inner
            .poll_accept_bidi(cx)
            .map_ok(|inner| self.request(inner))
    }

    fn opener(&self) -> Self::OpenStreams {
        Guarded {
            inner: self.inner.opener(),
            bound: self.bound,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame header: type, then length, each as a QUIC varint of 1, 2, 4 or 8 bytes.
    fn header(kind: u64, length: u64) -> Vec<u8> {
        let mut out = Vec::new();
        for value in [kind, length] {
            match value {
                0..=0x3f => out.push(value as u8),
                0x40..=0x3fff => out.extend_from_slice(&(0x4000 | value as u16).to_be_bytes()),
                0x4000..=0x3fff_ffff => {
                    out.extend_from_slice(&(0x8000_0000 | value as u32).to_be_bytes())
                }
                _ => out.extend_from_slice(&(0xc000_0000_0000_0000 | value).to_be_bytes()),
            }
        }
        out
    }

    #[test]
    fn frames_within_the_bound_and_data_of_any_length_pass_a_byte_at_a_time() {
        let mut stream = header(0x1, 1000);
        stream.extend(vec![7; 1000]);
        stream.extend(header(DATA, 1 << 40));
        stream.extend(vec![0; 5000]);
        for chunk in [stream.len(), 1, 3] {
            let mut frames = FrameHeaders::request(1024);
            for piece in stream.chunks(chunk) {
                frames.read(piece).unwrap();
            }
            assert!(matches!(frames.state, State::Payload(left) if left == (1 << 40) - 5000));
        }
    }

    #[test]
    fn a_frame_other_than_data_past_the_bound_is_refused_when_its_length_arrives() {
        for kind in [0x1, 0x4, 0x21, 0x1f * 7 + 0x21] {
            let mut frames = FrameHeaders::request(1024);
            frames.read(&header(0x1, 10)).unwrap();
            frames.read(&[0; 10]).unwrap();
            let refused = frames.read(&header(kind, 1 << 30)).unwrap_err();
            assert_eq!((refused.kind, refused.length), (kind, 1 << 30));
            assert!(frames.read(&[0; 8]).is_err(), "the stream reads no further");
        }
    }

    #[test]
    fn the_control_stream_is_read_and_other_unidirectional_streams_pass() {
        let mut control = vec![CONTROL_STREAM as u8];
        control.extend(header(0x4, 0));
        control.extend(header(0x21, 1 << 20));
        assert!(FrameHeaders::unidirectional(1024).read(&control).is_err());
        let mut qpack = vec![0x02];
        qpack.extend(header(0x21, 1 << 20));
        assert!(FrameHeaders::unidirectional(1024).read(&qpack).is_ok());
    }
}
